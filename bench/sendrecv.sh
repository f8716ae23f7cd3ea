#!/usr/bin/env bash
# bench/sendrecv.sh: OpenNRT's point-to-point send/recv (nrt_async_sendrecv.h) next to libfabric's
# own fi_pingpong and Open MPI's MPI_Send / MPI_Recv, on this machine.
#
# What it measures, for sizes 1 KiB to 1 GiB, between two processes:
#   * one-way latency: a ping-pong of SIZE bytes, round trip / 2, median over the iterations;
#   * bandwidth: one direction, windows of back-to-back messages (16 in flight, fewer above
#     16 MiB so a window stays within 256 MiB), each window acknowledged; MB/s from the
#     sender's time (MB = 1e6 bytes).
# The peers, run alternately (fi_pingpong, Open MPI, OpenNRT, then again), each figure the
# median of --runs runs:
#   * OpenNRT: bench/nrt_sendrecv.c (include/nrt/*.h only, linked with a copy of target/release/libnrt.so):
#     side a on host logical core 0, side b on core 1; each opens a send comm (connect) and a
#     receive comm (accept) to the other; every wait polls nrt_async_sendrecv_test_request in
#     a tight loop (--wait yield: sched_yield() between polls instead). Provider: tcp;ofi_rxm
#     (FI_PROVIDER if set), as libnrt picks it.
#   * Open MPI: bench/mpi_pingpong.c under mpirun -np 2 --bind-to none --mca pml ob1 --mca btl
#     tcp,self (TCP, as ours): MPI_Send / MPI_Recv ping-pong, MPI_Isend / MPI_Irecv windows.
#   * fi_pingpong -p <provider> -e rdm -S SIZE -I N (libfabric-bin): the same provider and
#     link with nothing on top; it reports one-way latency (usec/xfer) and MB/sec, which is
#     2 x SIZE x N / time = SIZE / one-way time (a ping-pong: one message in flight).
# Two placements (--where): "procs", two processes on this host over 127.0.0.1 (Open MPI:
# btl_tcp_if_include lo); "netns", two hosts made of network namespaces
# (capi-tests/hosts/netns.sh; peers at host_addr 0 and host_addr 1 over a veth bridge; needs
# root, skipped with a message otherwise). OpenNRT and Open MPI check the bytes of the last
# transfer of each kind against a pattern and fail the run on a wrong one.
#
# How: installs openmpi-bin / libopenmpi-dev / libfabric-bin with apt-get when mpicc, mpirun or
# fi_pingpong is missing, builds OpenNRT if target/release/libnrt.so is missing (an existing
# build is used as it is), copies libnrt.so and libncfw.so to target/bench/lib/ (every run
# measures that copy, whatever happens to target/release meanwhile), always rebuilds the two C
# programs into target/bench/ (nrt_sendrecv linked against the copy), then prints
# a Markdown table per placement (also written to target/bench/sendrecv.md; per-run logs in
# target/bench/logs/sendrecv-*.log). Every process runs under `timeout`; any failure stops the
# script with a message and a non-zero status. Targets are reported, not asserted.
#
#   bash bench/sendrecv.sh [--quick] [--runs N] [--sizes 1K,4K,...] [--where procs|netns|both]
#                          [--wait spin|yield|both] [--tensors device|host]
#
#   --quick    1 run per figure, sizes 4K,1M,64M (unless --sizes), few iterations (~1 min)
#   --runs N   runs per figure (default 3; the median is reported)
#   --sizes    comma-separated sizes in bytes with K/M/G suffixes
#              (default 1K,4K,64K,1M,16M,64M,256M,1G)
#   --where    placements (default both; netns needs root)
#   --wait     OpenNRT's poll loop: spin (default: a tight loop on test_request), yield
#              (sched_yield() between polls), or both (two OpenNRT columns)
#   --tensors  where nrt_sendrecv's tensors live: device (default) or host
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
start_s=$SECONDS

orig_args=("$@")
runs=3 quick=0 sizes="" where=both wait_arg=spin tensors=device
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; runs=1 ;;
    --runs) runs="${2:?--runs needs a number}"; shift ;;
    --sizes) sizes="${2:?--sizes needs a list}"; shift ;;
    --where) where="${2:?--where needs procs, netns or both}"; shift ;;
    --wait) wait_arg="${2:?--wait needs spin, yield or both}"; shift ;;
    --tensors) tensors="${2:?--tensors needs device or host}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "sendrecv.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "sendrecv.sh: FAILED: $*" >&2; exit 1; }
say() { echo "$*" >&2; }

[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer, not '$runs'"
case "$where" in procs) places=(procs) ;; netns) places=(netns) ;; both) places=(procs netns) ;;
  *) die "--where must be procs, netns or both, not '$where'" ;; esac
case "$wait_arg" in spin) waits=(spin) ;; yield) waits=(yield) ;; both) waits=(spin yield) ;;
  *) die "--wait must be spin, yield or both, not '$wait_arg'" ;; esac
case "$tensors" in device|host) ;; *) die "--tensors must be device or host, not '$tensors'" ;; esac
[ -n "$sizes" ] || { if ((quick)); then sizes="4K,1M,64M"; else sizes="1K,4K,64K,1M,16M,64M,256M,1G"; fi; }

# ---------------------------------------------------------------- helpers

field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; } # RESULT line, key -> value
to_bytes() { # 4K -> 4096
  local s="$1" n unit
  [[ "$s" =~ ^([0-9]+)([KkMmGg]?)$ ]] || return 1
  n="${BASH_REMATCH[1]}" unit="${BASH_REMATCH[2]}"
  case "$unit" in K|k) n=$((n << 10)) ;; M|m) n=$((n << 20)) ;; G|g) n=$((n << 30)) ;; esac
  echo "$n"
}
size_label() { # 4096 -> "4 KiB"
  local b=$1
  if ((b >= 1 << 30 && b % (1 << 30) == 0)); then echo "$((b >> 30)) GiB"
  elif ((b >= 1 << 20 && b % (1 << 20) == 0)); then echo "$((b >> 20)) MiB"
  elif ((b >= 1 << 10 && b % (1 << 10) == 0)); then echo "$((b >> 10)) KiB"
  else echo "$b B"; fi
}
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR] = $1} END {
  if (NR == 0) exit 1; if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
fmt_us() { awk -v t="$1" 'BEGIN { if (t < 10) printf "%.2f", t; else if (t < 1000) printf "%.1f", t; else printf "%.0f", t }'; }
fmt_mbs() { awk -v t="$1" 'BEGIN { if (t < 10) printf "%.2f", t; else if (t < 100) printf "%.1f", t; else printf "%.0f", t }'; }
fmt_ratio() { awk -v x="$1" 'BEGIN { if (x >= 10) printf "%.0f×", x; else if (x >= 1) printf "%.1f×", x; else printf "%.2f×", x }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print 0; else printf "%.6g", a / b }'; }
idle_pct() { # idle CPU share over 3 s
  local a b
  read -r -a a </proc/stat
  sleep 3
  read -r -a b </proc/stat
  awk -v i1=$((a[4] + a[5])) -v i2=$((b[4] + b[5])) \
    -v t1=$((a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7] + a[8])) \
    -v t2=$((b[1] + b[2] + b[3] + b[4] + b[5] + b[6] + b[7] + b[8])) \
    'BEGIN { v = 100; if (t2 > t1) v = 100 * (i2 - i1) / (t2 - t1); printf "%.0f", v }'
}
lib_id() { # DIR -> content hash and build time of DIR/libnrt.so
  echo "$(sha256sum "$1/libnrt.so" | cut -c1-12), built $(date -u -r "$1/libnrt.so" '+%F %H:%M UTC')"
}
port_free() { ! ss -Htan 2>/dev/null | awk '{print $4}' | grep -q ":$1\$"; }
next_port() { # a TCP port nothing on this host uses (the namespaces have their own, all free)
  port=$((port + 1))
  while ! port_free "$port"; do port=$((port + 1)); done
}

size_bytes=()
IFS=, read -r -a size_args <<<"$sizes"
for s in "${size_args[@]}"; do
  b=$(to_bytes "$s") || die "bad size '$s' (a number with an optional K, M or G suffix)"
  ((b >= 8 && b <= 1 << 30)) || die "size '$s' must be 8 bytes to 1 GiB"
  size_bytes+=("$b")
done

# Per size: latency iterations, their warm-up, bandwidth batches, the window (messages per
# batch) and fi_pingpong's iterations. A window stays within 256 MiB (memory: each side holds
# a send and a receive buffer of window x size).
plan_for() {
  local b=$1 w=16
  while ((w > 1 && w * b > 256 << 20)); do w=$((w / 2)); done
  if ((quick)); then
    if ((b <= 64 << 10)); then echo "100 10 10 $w 110"
    elif ((b <= 1 << 20)); then echo "20 2 4 $w 22"
    elif ((b <= 64 << 20)); then echo "3 1 2 $w 4"
    else echo "1 1 1 $w 2"; fi
  else
    if ((b <= 4 << 10)); then echo "300 30 20 $w 330"
    elif ((b <= 64 << 10)); then echo "100 10 10 $w 110"
    elif ((b <= 1 << 20)); then echo "30 3 6 $w 33"
    elif ((b <= 16 << 20)); then echo "6 1 2 $w 7"
    elif ((b <= 64 << 20)); then echo "4 1 2 $w 5"
    elif ((b <= 256 << 20)); then echo "2 1 1 $w 3"
    else echo "1 0 1 $w 2"; fi
  fi
}
timeout_for() { # seconds a run may take: generous, the machine is shared
  local b=$1
  if ((b >= 256 << 20)); then echo 600; else echo 300; fi
}

# ---------------------------------------------------------------- prerequisites

apt_install() { # packages...
  command -v apt-get >/dev/null 2>&1 || die "no apt-get to install $* with"
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${apt_updated:-}" ]; then apt-get update -q >&2 || die "apt-get update failed"; apt_updated=1; fi
  apt-get install -y -q "$@" >&2 || die "apt-get install $* failed"
}
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
  say "== mpicc / mpirun missing: installing openmpi-bin and libopenmpi-dev with apt-get"
  apt_install openmpi-bin libopenmpi-dev
  command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 ||
    die "mpicc / mpirun still missing after installing openmpi-bin and libopenmpi-dev"
fi
if ! command -v fi_pingpong >/dev/null 2>&1; then
  say "== fi_pingpong missing: installing libfabric-bin with apt-get"
  apt_install libfabric-bin
  command -v fi_pingpong >/dev/null 2>&1 || die "fi_pingpong still missing after installing libfabric-bin"
fi
command -v gcc >/dev/null 2>&1 || die "gcc not found"
command -v ss >/dev/null 2>&1 || die "ss (iproute2) not found"

lib="$root/target/release"
if [ ! -f "$lib/libnrt.so" ] || [ ! -f "$lib/libncfw.so" ]; then
  say "== target/release/libnrt.so missing: cargo build --release --workspace"
  cargo build --release --workspace >&2 || die "cargo build --release --workspace failed"
fi
shim/links.sh "$lib" >/dev/null || die "shim/links.sh target/release failed"

provider="${FI_PROVIDER:-tcp;ofi_rxm}"
fi_info -p "$provider" -t FI_EP_RDM >/dev/null 2>&1 ||
  die "libfabric has no provider '$provider' with RDM endpoints (fi_info -p '$provider' -t FI_EP_RDM)"

out="$root/target/bench"
logs="$out/logs"
mkdir -p "$out" "$logs"
rm -f "$logs"/sendrecv-*.log

# Every run measures one build: a copy of target/release's libnrt.so and libncfw.so taken now
# (libnrt finds libncfw next to itself), so a rebuild of the tree during the runs changes nothing.
tree_lib="$lib"
lib="$out/lib"
rm -rf "$lib"
mkdir -p "$lib"
for tries in 1 2 3 4 5; do
  cp -p "$tree_lib/libnrt.so" "$tree_lib/libncfw.so" "$lib/" || die "copying target/release's libraries failed"
  if cmp -s "$tree_lib/libnrt.so" "$lib/libnrt.so" && cmp -s "$tree_lib/libncfw.so" "$lib/libncfw.so"; then break; fi
  ((tries < 5)) || die "target/release/libnrt.so keeps changing (a build is running?); try again later"
  sleep 5
done
ln -sfn libnrt.so "$lib/libnrt.so.1"
say "== building target/bench/nrt_sendrecv and target/bench/mpi_pingpong"
gcc -O2 -Wall -Wextra -Werror -std=c11 -I"$root/include" -o "$out/nrt_sendrecv" \
  "$root/bench/nrt_sendrecv.c" -L"$lib" -lnrt -Wl,-rpath,"$lib" || die "gcc bench/nrt_sendrecv.c failed"
mpicc -O2 -Wall -Wextra -Werror -o "$out/mpi_pingpong" "$root/bench/mpi_pingpong.c" ||
  die "mpicc bench/mpi_pingpong.c failed"

# Memory: nrt_sendrecv keeps 2 x window x size of tensors per side (device tensors: in
# /dev/shm, both sides' in the root one for "procs"), mpi_pingpong as much in malloc'd memory.
max_ws=0
for b in "${size_bytes[@]}"; do
  read -r _ _ _ w _ < <(plan_for "$b")
  ((w * b > max_ws)) && max_ws=$((w * b))
done
need_mib=$(( (4 * max_ws >> 20) + 256 ))
have_mem_mib=$(( $(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) >> 10 ))
((have_mem_mib >= need_mib)) || die "about $need_mib MiB of memory needed for $(size_label "$max_ws") windows, $have_mem_mib MiB available (smaller --sizes)"
if [ "$tensors" = device ]; then
  have_shm_mib=$(( $(df -Pk /dev/shm | awk 'NR == 2 { print $4 }') >> 10 ))
  ((have_shm_mib >= need_mib)) || die "device tensors need about $need_mib MiB free in /dev/shm, it has $have_shm_mib MiB (--tensors host, or smaller --sizes)"
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ompi_version="$(ompi_info --version 2>/dev/null | head -n 1 | sed 's/^ *//' || true)"
fi_version="$(fi_info --version 2>/dev/null | sed -n 's/^libfabric: *//p' | head -n 1 || true)"

# ---------------------------------------------------------------- the runs

declare -A results # "place peer bytes" -> "lat_us:mbs " per run
port=$((20000 + $$ % 20000))
n=0
total_runs=$(( ${#places[@]} * ${#size_bytes[@]} * runs * (2 + ${#waits[@]}) ))

fail_run() { # log what
  tail -n 30 "$1" >&2
  die "$2 (log: ${1#"$root"/})"
}
check_rc() { # rc log what
  local rc=$1
  ((rc == 0)) && return 0
  if ((rc == 124 || rc == 137)); then fail_run "$2" "$3: timed out"; fi
  fail_run "$2" "$3: exit status $rc"
}

# on_host P K cmd...: run cmd in placement P's host K (procs: this host).
on_host() {
  local p=$1 k=$2
  shift 2
  if [ "$p" = netns ]; then host_exec "$k" "$@"; else "$@"; fi
}
addr_of() { if [ "$1" = netns ]; then host_addr "$2"; else echo 127.0.0.1; fi; }

run_pp() { # place bytes run#
  local p=$1 b=$2 k=$3 log rc=0 tries it line t server usec mbs t0=$SECONDS
  read -r _ _ _ _ it < <(plan_for "$b")
  t=$(timeout_for "$b")
  n=$((n + 1))
  log="$logs/sendrecv-$p-pp-b$b-run$k.log"
  next_port
  on_host "$p" 1 timeout -k 5 "$t" fi_pingpong -p "$provider" -e rdm -B "$port" -S "$b" -I "$it" \
    </dev/null >"$log.server" 2>&1 &
  server=$!
  for ((tries = 0; tries < 100; tries++)); do
    rc=0
    on_host "$p" 0 timeout -k 5 "$t" fi_pingpong -p "$provider" -e rdm -P "$port" -S "$b" -I "$it" \
      "$(addr_of "$p" 1)" </dev/null >"$log" 2>&1 || rc=$?
    # The client fails at once while the server is not listening yet: try again.
    if ((rc == 0)) || ! kill -0 "$server" 2>/dev/null; then break; fi
    sleep 0.1
  done
  local src=0
  wait "$server" || src=$?
  cat "$log.server" >>"$log" && rm -f "$log.server"
  check_rc "$rc" "$log" "fi_pingpong ($p), $(size_label "$b"), run $k (client)"
  check_rc "$src" "$log" "fi_pingpong ($p), $(size_label "$b"), run $k (server)"
  # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec (client's line first)
  line="$(awk '$1 ~ /^[0-9]+[kmg]?$/ && NF >= 8 { print; exit }' "$log")"
  [ -n "$line" ] || fail_run "$log" "fi_pingpong ($p), $(size_label "$b"), run $k: no result line"
  read -r _ _ _ _ _ mbs usec _ <<<"$line"
  results["$p pp $b"]+="$usec:$mbs "
  say "[$n/$total_runs] $p fi_pingpong $(size_label "$b"), run $k: $usec us one-way, $mbs MB/s (ping-pong) [$((SECONDS - t0)) s]"
}

run_mpi() { # place bytes run#
  local p=$1 b=$2 k=$3 log rc=0 li lw bb w t line opts t0=$SECONDS
  read -r li lw bb w _ < <(plan_for "$b")
  t=$(timeout_for "$b")
  n=$((n + 1))
  log="$logs/sendrecv-$p-mpi-b$b-run$k.log"
  if [ "$p" = netns ]; then
    opts=(--mca plm_rsh_agent "$HOSTS_RSH_AGENT" -H "$(host_addr 0):1,$(host_addr 1):1"
      --mca btl_tcp_if_include "$HOSTS_NET4.0/24" --mca oob_tcp_if_include "$HOSTS_NET4.0/24")
  else
    opts=(--mca btl_tcp_if_include lo)
  fi
  on_host "$p" 0 timeout -k 10 "$t" mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
    --mca pml ob1 --mca btl tcp,self "${opts[@]}" \
    "$out/mpi_pingpong" "$b" "$li" "$lw" "$bb" "$w" </dev/null >"$log" 2>&1 || rc=$?
  check_rc "$rc" "$log" "Open MPI ($p), $(size_label "$b"), run $k"
  line="$(grep '^RESULT' "$log" | tail -n 1 || true)"
  [ -n "$line" ] || fail_run "$log" "Open MPI ($p), $(size_label "$b"), run $k: no RESULT line"
  results["$p mpi $b"]+="$(field "$line" lat_us):$(field "$line" bw_mbs) "
  say "[$n/$total_runs] $p Open MPI $(size_label "$b"), run $k: $(field "$line" lat_us) us one-way, $(field "$line" bw_mbs) MB/s [$((SECONDS - t0)) s]"
}

run_nrt() { # place bytes run# wait
  local p=$1 b=$2 k=$3 wt=$4 loga logb ra=0 rb=0 li lw bb w t line pb t0=$SECONDS
  read -r li lw bb w _ < <(plan_for "$b")
  t=$(timeout_for "$b")
  n=$((n + 1))
  loga="$logs/sendrecv-$p-nrt-$wt-b$b-run$k.log"
  logb="$logs/sendrecv-$p-nrt-$wt-b$b-run$k.b.log"
  next_port
  NEURON_RT_VISIBLE_CORES=1 NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1 \
    NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT="$port" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    on_host "$p" 1 timeout -k 10 "$t" "$out/nrt_sendrecv" b "$(addr_of "$p" 0)" "$b" "$li" "$lw" "$bb" "$w" \
    "$tensors" "$wt" </dev/null >"$logb" 2>&1 &
  pb=$!
  NEURON_RT_VISIBLE_CORES=0 NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1 \
    NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT="$port" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    on_host "$p" 0 timeout -k 10 "$t" "$out/nrt_sendrecv" a "$(addr_of "$p" 1)" "$b" "$li" "$lw" "$bb" "$w" \
    "$tensors" "$wt" </dev/null >"$loga" 2>&1 || ra=$?
  wait "$pb" || rb=$?
  check_rc "$ra" "$loga" "OpenNRT ($p, $wt), $(size_label "$b"), run $k, side a"
  check_rc "$rb" "$logb" "OpenNRT ($p, $wt), $(size_label "$b"), run $k, side b"
  line="$(grep '^RESULT' "$loga" | tail -n 1 || true)"
  [ -n "$line" ] || fail_run "$loga" "OpenNRT ($p, $wt), $(size_label "$b"), run $k: no RESULT line"
  results["$p nrt-$wt $b"]+="$(field "$line" lat_us):$(field "$line" bw_mbs) "
  say "[$n/$total_runs] $p OpenNRT ($wt) $(size_label "$b"), run $k: $(field "$line" lat_us) us one-way, $(field "$line" bw_mbs) MB/s [$((SECONDS - t0)) s]"
}

netns_note=""
declare -A idle_before idle_after
lib_before="$(lib_id "$lib")"
for p in "${places[@]}"; do
  if [ "$p" = netns ]; then
    # shellcheck source=capi-tests/hosts/netns.sh
    source "$root/capi-tests/hosts/netns.sh"
    why="$(hosts_unsupported)"
    if [ -n "$why" ]; then
      netns_note="The netns placement was skipped: $why."
      say "== skipping the netns placement: $why"
      continue
    fi
    say "== hosts_up 2 (namespaces ${HOSTS_PREFIX}h0, ${HOSTS_PREFIX}h1 on bridge namespace $HOSTS_BR)"
    hosts_up 2 || die "hosts_up 2 failed"
    trap 'hosts_down || true' EXIT
  fi
  idle_before[$p]="$(idle_pct)"
  ((idle_before[$p] >= 90)) ||
    say "warning: the machine is busy before the $p runs (${idle_before[$p]}% idle CPU over 3 s); the figures will be noisy"
  for b in "${size_bytes[@]}"; do
    read -r li lw bb w pit < <(plan_for "$b")
    say "== $p, $(size_label "$b"): $li ping-pongs (+$lw), $bb batches of $w (+1), fi_pingpong -I $pit; $runs run(s) each"
    for ((k = 1; k <= runs; k++)); do
      run_pp "$p" "$b" "$k"
      run_mpi "$p" "$b" "$k"
      for wt in "${waits[@]}"; do run_nrt "$p" "$b" "$k" "$wt"; done
    done
  done
  idle_after[$p]="$(idle_pct)"
  if [ "$p" = netns ]; then
    hosts_down || die "hosts_down: network namespaces left behind"
    trap - EXIT
  fi
done
lib_after="$(lib_id "$tree_lib")"
lib_note=""
if [ "$lib_after" != "$lib_before" ]; then
  lib_note=" (target/release/libnrt.so was rebuilt during the runs, now $lib_after; the runs used the copy taken at the start)"
  say "note: target/release/libnrt.so changed during the runs ($lib_before -> $lib_after); the runs used the copy in ${lib#"$root"/}"
fi

# ---------------------------------------------------------------- the tables

lat_of() { tr ' ' '\n' <<<"${results[$1]:-}" | sed -n 's/^\([^:]*\):.*/\1/p' | tr '\n' ' '; }
bw_of() { tr ' ' '\n' <<<"${results[$1]:-}" | sed -n 's/^[^:]*:\(.*\)$/\1/p' | tr '\n' ' '; }
verdict() { # ratio op limit -> "met" / "missed"
  awk -v x="$1" -v l="$3" -v op="$2" 'BEGIN { ok = (op == ">=") ? (x >= l) : (x <= l); print (ok ? "met" : "**missed**") }'
}

cpu_model="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
[ -n "$cpu_model" ] || cpu_model="$(uname -m)"
mem_gib="$(awk '/^MemTotal:/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ "$commit" != unknown ] && [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit (with uncommitted changes)"
fi
elapsed=$((SECONDS - start_s))
invocation=""
for a in "${orig_args[@]}"; do invocation+=" $a"; done
chunk="${OPENNRT_SENDRECV_CHUNK:-8M}"

md="$out/sendrecv.md"
{
  echo "### OpenNRT send/recv vs fi_pingpong and Open MPI ($(date -u +%F))"
  echo
  echo "Machine: $(nproc) CPUs ($cpu_model), $mem_gib GiB RAM, $(uname -sr); $ompi_version;"
  echo "libfabric $fi_version, provider \`$provider\`; OpenNRT $commit, libnrt.so $lib_before.$lib_note"
  echo "\`bash bench/sendrecv.sh${invocation}\`: median of $runs run(s) per figure, runs alternating"
  echo "fi_pingpong, Open MPI, OpenNRT; OpenNRT tensors: $tensors, OPENNRT_SENDRECV_CHUNK=$chunk;"
  echo "script time ${elapsed} s. $netns_note"
  for p in "${places[@]}"; do
    [ -n "${idle_before[$p]:-}" ] || continue
    if [ "$p" = procs ]; then
      what="two processes on this host over 127.0.0.1"
    else
      what="two hosts: network namespaces of capi-tests/hosts/netns.sh joined by a veth bridge, 10.231.0.1 ↔ 10.231.0.2"
    fi
    echo
    echo "#### $p: $what"
    echo
    echo "Idle CPU in the 3 s before / after these runs: ${idle_before[$p]}% / ${idle_after[$p]}%."
    echo
    # Latency
    hdr="| size | OpenNRT one-way µs"
    sep="|---|---"
    if ((${#waits[@]} > 1)); then hdr+=" | OpenNRT (yield) µs"; sep+="|---"; fi
    echo "$hdr | Open MPI µs | fi_pingpong µs | OpenNRT / Open MPI | OpenNRT / fi_pingpong |"
    echo "$sep|---|---|---|---|"
    for b in "${size_bytes[@]}"; do
      ln="$(lat_of "$p nrt-${waits[0]} $b" | median)"
      lm="$(lat_of "$p mpi $b" | median)" lp="$(lat_of "$p pp $b" | median)"
      row="| $(size_label "$b") | $(fmt_us "$ln")"
      if ((${#waits[@]} > 1)); then row+=" | $(fmt_us "$(lat_of "$p nrt-${waits[1]} $b" | median)")"; fi
      echo "$row | $(fmt_us "$lm") | $(fmt_us "$lp") | $(fmt_ratio "$(ratio "$ln" "$lm")") | $(fmt_ratio "$(ratio "$ln" "$lp")") |"
    done
    echo
    # Bandwidth
    hdr="| size | OpenNRT MB/s"
    sep="|---|---"
    if ((${#waits[@]} > 1)); then hdr+=" | OpenNRT (yield) MB/s"; sep+="|---"; fi
    echo "$hdr | Open MPI MB/s | fi_pingpong MB/s | OpenNRT / fi_pingpong | OpenNRT / Open MPI |"
    echo "$sep|---|---|---|---|"
    for b in "${size_bytes[@]}"; do
      bn="$(bw_of "$p nrt-${waits[0]} $b" | median)"
      bm="$(bw_of "$p mpi $b" | median)" bp="$(bw_of "$p pp $b" | median)"
      row="| $(size_label "$b") | $(fmt_mbs "$bn")"
      if ((${#waits[@]} > 1)); then row+=" | $(fmt_mbs "$(bw_of "$p nrt-${waits[1]} $b" | median)")"; fi
      echo "$row | $(fmt_mbs "$bm") | $(fmt_mbs "$bp") | $(fmt_ratio "$(ratio "$bn" "$bp")") | $(fmt_ratio "$(ratio "$bn" "$bm")") |"
    done
    echo
    # Targets
    for b in "${size_bytes[@]}"; do
      if ((b == 64 << 20)); then
        bn="$(bw_of "$p nrt-${waits[0]} $b" | median)"
        bm="$(bw_of "$p mpi $b" | median)" bp="$(bw_of "$p pp $b" | median)"
        ln="$(lat_of "$p nrt-${waits[0]} $b" | median)"
        xp="$(ratio "$bn" "$bp")" xm="$(ratio "$bn" "$bm")"
        # fi_pingpong's MB/s is a ping-pong's (size / one-way time); OpenNRT's the same way:
        xpp="$(awk -v b="$b" -v l="$ln" -v p="$bp" 'BEGIN { printf "%.6g", b / l / p }')"
        echo "* Target 64 MiB bandwidth ≥ 0.8× fi_pingpong's: $(fmt_ratio "$xp"), $(verdict "$xp" ">=" 0.8)" \
          "(OpenNRT's own ping-pong rate, 64 MiB ÷ one-way time, is $(fmt_ratio "$xpp") fi_pingpong's: $(verdict "$xpp" ">=" 0.8))."
        echo "* Target 64 MiB bandwidth ≥ 1× Open MPI's: $(fmt_ratio "$xm"), $(verdict "$xm" ">=" 1)."
      elif ((b == 4 << 10)); then
        ln="$(lat_of "$p nrt-${waits[0]} $b" | median)" lm="$(lat_of "$p mpi $b" | median)"
        x="$(ratio "$ln" "$lm")"
        echo "* Target 4 KiB one-way latency ≤ 2× Open MPI's: $(fmt_ratio "$x"), $(verdict "$x" "<=" 2)."
      fi
    done
  done
  echo
  echo "One-way latency: a ping-pong's round trip ÷ 2, the median over the iterations (fi_pingpong:"
  echo "its usec/xfer, the mean). Bandwidth (MB = 10^6 bytes): OpenNRT and Open MPI stream one way,"
  echo "up to 16 messages in flight (a window of at most 256 MiB: 4 at 64 MiB, 1 from 256 MiB), each"
  echo "window acknowledged, timed by the sender; fi_pingpong's MB/sec is a ping-pong's, size ÷ one-way"
  echo "time, one message in flight. Ratios: OpenNRT ÷ the other (latency: higher = OpenNRT slower;"
  echo "bandwidth: lower = OpenNRT slower). OpenNRT polls nrt_async_sendrecv_test_request in a tight loop"
  echo "(\"spin\")$( ((${#waits[@]} > 1)) && echo "; the (yield) column calls sched_yield() between polls")."
  echo
  echo "<details><summary>every run (one-way µs / MB/s)</summary>"
  echo
  echo "| placement | size | peer | runs |"
  echo "|---|---|---|---|"
  for p in "${places[@]}"; do
    [ -n "${idle_before[$p]:-}" ] || continue
    for b in "${size_bytes[@]}"; do
      read -r li lw bb w pit < <(plan_for "$b")
      peers=("pp" "mpi")
      for wt in "${waits[@]}"; do peers+=("nrt-$wt"); done
      for q in "${peers[@]}"; do
        case "$q" in
          pp) name="fi_pingpong -I $pit" ;;
          mpi) name="Open MPI ($li ping-pongs, $bb × $w)" ;;
          nrt-*) name="OpenNRT ${q#nrt-} ($li ping-pongs, $bb × $w)" ;;
        esac
        each="$(tr ' ' '\n' <<<"${results[$p $q $b]:-}" | sed '/^$/d' |
          awk -F: '{ printf "%s%.4g / %.4g", (NR > 1 ? ", " : ""), $1, $2 }')"
        echo "| $p | $(size_label "$b") | $name | $each |"
      done
    done
  done
  echo
  echo "</details>"
} >"$md"

cat "$md"
say "== table written to ${md#"$root"/}; logs in ${logs#"$root"/}/sendrecv-*.log; total ${elapsed} s"
