# shellcheck shell=bash
# The --hosts H mode of bench/vs-openmpi.sh, sourced by it after the C programs are built (it
# uses that script's variables and helpers; not meant to be run on its own).
#
# What it measures: an fp32 sum all-reduce, out of place, of a job spanning H hosts with P
# ranks per host (P in --per-host, default 1 and 4), sizes 4 KiB and 64 MiB. The hosts are the
# network namespaces of capi-tests/hosts/netns.sh (host k is 10.231.0.(k+1) on one bridge,
# with its own /dev/shm), built here and removed at the end, on failure too.
#   * OpenNRT: target/bench/nrt_allreduce processes R ... --rank p, one process per rank,
#     process p started in host p / P (host_exec) with NEURON_RT_VISIBLE_CORES=p and
#     NEURON_RT_ROOT_COMM_ID=10.231.0.1:<port>; ranks on other hosts are reached through the
#     network proxy over libfabric (tcp;ofi_rxm). Rank 0 times schedule -> completion.
#   * Open MPI: target/bench/mpi_allreduce under mpirun started in host 0, its daemons on the
#     other hosts through capi-tests/hosts/netns-rsh (plm_rsh_agent), -H 10.231.0.1:P,...,
#     --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 10.231.0.0/24, --bind-to none
#     (every "host" is this machine: mpirun's default binding would pin each host's first rank
#     to the same core). Twice per run: with --mca mpi_yield_when_idle 1 and without it (Open
#     MPI's default); the table's Open MPI column is the better of the two medians.
#   * The link itself: fi_pingpong -p "tcp;ofi_rxm" -e rdm, server in host 1, client in host
#     0, at the same size: its one-way latency (usec/xfer) and bandwidth (MB/sec).
# Runs alternate (fi_pingpong, MPI with yield, MPI without, OpenNRT, then again); each figure
# is the median of --runs runs. Ratios are printed, never asserted. Under "every run", each
# library's row also has the min-max of its run medians, their spread (max / min) and its p99
# (the highest run p99 of single iterations), as in the single-host table.

command -v fi_pingpong >/dev/null 2>&1 ||
  die "--hosts: fi_pingpong not found (Debian/Ubuntu: apt-get install libfabric-bin)"
# shellcheck source=capi-tests/hosts/netns.sh
source "$root/capi-tests/hosts/netns.sh"
why="$(hosts_unsupported)"
[ -z "$why" ] || die "--hosts: this machine cannot build the hosts: $why"

hosts_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  hosts_down || { echo "vs-openmpi.sh: FAILED: network namespaces left behind" >&2; rc=1; }
  exit "$rc"
}
say "== hosts_up $hosts (namespaces ${HOSTS_PREFIX}h0..h$((hosts - 1)), bridge $HOSTS_BR)"
hosts_up "$hosts" || die "--hosts: hosts_up $hosts failed"
trap hosts_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ompi_version="$(ompi_info --version 2>/dev/null | head -n 1 | sed 's/^ *//' || true)"
[ -n "$ompi_version" ] || ompi_version="$(mpirun --version 2>/dev/null | head -n 1 || true)"
net="$HOSTS_NET4.0/24"
mpi_host_opts=(--allow-run-as-root --oversubscribe --bind-to none --mca plm_rsh_agent "$HOSTS_RSH_AGENT"
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$net" --mca oob_tcp_if_include "$net")
say "== mpirun ${mpi_host_opts[*]} -H <hosts>:P -np R [--mca mpi_yield_when_idle 1] mpi_allreduce"

declare -A results # key "what P bytes" -> "time_us:iter_us:faults:p99_us " per run; pp: "usec:MBps "
port=31000
n=0
total_runs=$(( ${#size_bytes[@]} * ${#per_host[@]} * 4 * runs ))

fail_run() { # log what
  tail -n 30 "$1" >&2
  die "$2 (log: ${1#"$root"/})"
}

host_list() { # P -> 10.231.0.1:P,10.231.0.2:P,...
  local p=$1 k l=""
  for ((k = 0; k < hosts; k++)); do l+="${l:+,}$(host_addr "$k"):$p"; done
  echo "$l"
}

# fi_pingpong at `b` bytes: server on host 1, client on host 0; one port per run.
run_pp() { # bytes P run#
  local b=$1 p=$2 k=$3 log it line rc=0 tries
  n=$((n + 1))
  log="$logs/pp-p$p-b$b-run$k.log"
  if ((b <= 64 << 10)); then it=2000; else it=10; fi # cheap: the same in --quick
  port=$((port + 1))
  host_exec 1 timeout -k 5 120 fi_pingpong -p "tcp;ofi_rxm" -e rdm -B "$port" -S "$b" -I "$it" \
    >"$log.server" 2>&1 &
  local server=$!
  for ((tries = 0; tries < 50; tries++)); do
    rc=0
    host_exec 0 timeout -k 5 120 fi_pingpong -p "tcp;ofi_rxm" -e rdm -P "$port" -S "$b" -I "$it" \
      "$(host_addr 1)" >"$log" 2>&1 || rc=$?
    # The client fails at once while the server is not listening yet: try again.
    if ((rc == 0)) || ! kill -0 "$server" 2>/dev/null; then break; fi
    sleep 0.1
  done
  wait "$server" || true
  ((rc == 0)) || fail_run "$log" "fi_pingpong, $b bytes, run $k: exit status $rc"
  # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
  line="$(awk '$1 ~ /^[0-9]+[kmg]?$/ && NF >= 8 { l = $0 } END { print l }' "$log")"
  [ -n "$line" ] || fail_run "$log" "fi_pingpong, $b bytes, run $k: no result line"
  read -r _ _ _ _ _ mbps usec _ <<<"$line"
  results["pp $p $b"]+="$usec:$mbps "
  say "[$n/$total_runs] fi_pingpong $(size_label "$b"), run $k: $usec us one-way, $mbps MB/s"
}

run_mpi() { # yield(1|-) P bytes iters warmup run#
  local y=$1 p=$2 b=$3 it=$4 wu=$5 k=$6 r=$((hosts * p)) log rc=0 line t p99 yopt=()
  n=$((n + 1))
  log="$logs/mpi-y$y-p$p-b$b-run$k.log"
  [ "$y" = 1 ] && yopt=(--mca mpi_yield_when_idle 1)
  host_exec 0 timeout -k 10 300 mpirun "${mpi_host_opts[@]}" "${yopt[@]}" -H "$(host_list "$p")" -np "$r" \
    "$out/mpi_allreduce" "$b" "$it" "$wu" >"$log" 2>&1 || rc=$?
  ((rc == 0)) || fail_run "$log" "mpi (yield_when_idle $y), $hosts hosts x $p, $b bytes, run $k: exit status $rc"
  line="$(grep '^RESULT' "$log" | tail -n 1 || true)"
  [ -n "$line" ] || fail_run "$log" "mpi (yield_when_idle $y), $hosts hosts x $p, $b bytes, run $k: no RESULT line"
  t="$(field "$line" time_us)" p99="$(field "$line" p99_us)"
  results["mpi$y $p $b"]+="$t:$t:-:${p99:--} "
  say "[$n/$total_runs] mpi yield_when_idle=$y $hosts hosts x $p $(size_label "$b"), run $k: $t us per all-reduce"
}

run_nrt() { # P bytes iters warmup run#
  local p=$1 b=$2 it=$3 wu=$4 k=$5 r=$((hosts * p)) q h rc rootid pids=() bad="" line t iter flt p99
  n=$((n + 1))
  port=$((port + 1))
  rootid="$(host_addr 0):$port"
  for ((q = 0; q < r; q++)); do
    h=$((q / p))
    NEURON_RT_VISIBLE_CORES="$q" NEURON_RT_ROOT_COMM_ID="$rootid" \
      host_exec "$h" timeout -k 10 300 "$out/nrt_allreduce" processes "$r" "$b" "$it" "$wu" \
      --wait "$wait_mode" --rank "$q" </dev/null >"$logs/nrt-p$p-b$b-run$k.rank$q.log" 2>&1 &
    pids+=($!)
  done
  for ((q = 0; q < r; q++)); do
    rc=0
    wait "${pids[$q]}" || rc=$?
    ((rc == 0)) || bad+=" rank $q: exit $rc;"
  done
  local log0="$logs/nrt-p$p-b$b-run$k.rank0.log"
  if [ -n "$bad" ]; then
    for ((q = 0; q < r; q++)); do tail -n 5 "$logs/nrt-p$p-b$b-run$k.rank$q.log" | sed "s/^/rank $q: /" >&2; done
    die "nrt, $hosts hosts x $p, $b bytes, run $k:$bad (logs: ${log0%.rank0.log}.rank*.log)"
  fi
  line="$(grep '^RESULT' "$log0" | tail -n 1 || true)"
  [ -n "$line" ] || fail_run "$log0" "nrt, $hosts hosts x $p, $b bytes, run $k: no RESULT line"
  t="$(field "$line" time_us)" iter="$(field "$line" iter_us)" flt="$(field "$line" minflt_per_iter)"
  p99="$(field "$line" p99_us)"
  results["nrt $p $b"]+="$t:$iter:${flt:--}:${p99:--} "
  say "[$n/$total_runs] nrt $hosts hosts x $p $(size_label "$b"), run $k: $t us per all-reduce"
}

# Iterations: as the single-host rows, except that several ranks per host at small sizes take
# milliseconds per call (Open MPI without yield_when_idle: tens of ms), so fewer calls there.
hosts_iters_for() { # bytes P
  local it wu
  read -r it wu < <(iters_for "$1")
  if (($2 > 1 && $1 <= 64 << 10)); then it=$(( (it + 9) / 10 )) wu=$(( (wu + 9) / 10 )); fi
  echo "$it $wu"
}

lib_before="$(lib_id)"
idle_before="$(idle_pct)"
if ((idle_before < 90)); then
  say "warning: the machine is busy before the runs (${idle_before}% idle CPU over 3 s); the figures will be noisy"
fi
for b in "${size_bytes[@]}"; do
  for p in "${per_host[@]}"; do
    read -r iters warmup < <(hosts_iters_for "$b" "$p")
    say "== $(size_label "$b"), $hosts hosts x $p ranks: $iters timed iterations (+$warmup warm-up) per run, $runs run(s) each"
    for ((k = 1; k <= runs; k++)); do
      run_pp "$b" "$p" "$k"
      run_mpi 1 "$p" "$b" "$iters" "$warmup" "$k"
      run_mpi - "$p" "$b" "$iters" "$warmup" "$k"
      run_nrt "$p" "$b" "$iters" "$warmup" "$k"
    done
  done
done
idle_after="$(idle_pct)"
lib_after="$(lib_id)"
lib_note=""
if [ "$lib_after" != "$lib_before" ]; then
  lib_note=" **target/release/libnrt.so changed during the runs** (now $lib_after): later runs measured another build."
  say "warning: target/release/libnrt.so changed during the runs ($lib_before -> $lib_after)"
fi

# ---------------------------------------------------------------- the table

pp_usec() { tr ' ' '\n' <<<"${results[$1]}" | sed -n 's/^\([^:]*\):.*/\1/p' | tr '\n' ' '; }
pp_mbps() { tr ' ' '\n' <<<"${results[$1]}" | sed -n 's/^[^:]*:\(.*\)$/\1/p' | tr '\n' ' '; }
# Targets (reported, not asserted): 2 hosts x 1: 64 MiB busbw >= 1x Open MPI's, 4 KiB time <=
# 2x Open MPI's; 2 hosts x 4: 64 MiB busbw >= 1x Open MPI's.
target_of() { # P bytes ratio -> text
  local p=$1 b=$2 x=$3
  if ((b >= 1 << 20)); then
    awk -v x="$x" 'BEGIN { printf "≥ 1×: %s", (x >= 1 ? "met" : "missed") }'
  elif ((p == 1)); then
    awk -v x="$x" 'BEGIN { printf "≤ 2×: %s", (x <= 2 ? "met" : "missed") }'
  else echo "—"; fi
}

machine_facts
md="$out/vs-openmpi-hosts.md"
{
  echo "### OpenNRT vs Open MPI across $hosts hosts: fp32 sum all-reduce, out of place ($(date -u +%F))"
  echo
  echo "Machine: $(nproc) CPUs ($cpu_model), $mem_gib GiB RAM, $(uname -sr); $ompi_version;"
  echo "OpenNRT $commit, libnrt.so $lib_before.$lib_note"
  echo "Hosts: $hosts network namespaces of capi-tests/hosts/netns.sh on one Linux bridge (veth), all"
  echo "on this machine's CPUs. Idle CPU in the 3 s before / after the runs: ${idle_before}% / ${idle_after}%."
  echo "\`bash bench/vs-openmpi.sh${invocation}\`: median of $runs run(s) per figure," \
    "runs alternating; nrt_allreduce --wait $wait_mode; script time ${elapsed} s."
  echo
  echo "| case | Open MPI (best) | OpenNRT | OpenNRT / Open MPI | target | link (fi_pingpong) | OpenNRT / link |"
  echo "|---|---|---|---|---|---|---|"
  for b in "${size_bytes[@]}"; do
    for p in "${per_host[@]}"; do
      r=$((hosts * p))
      t1="$(times_of "mpi1 $p $b" | median)" t0="$(times_of "mpi- $p $b" | median)"
      tn="$(times_of "nrt $p $b" | median)"
      best="$t1" bestname="yield_when_idle 1"
      if awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(a < b) }'; then best="$t0" bestname="default"; fi
      lu="$(pp_usec "pp $p $b" | median)" lm="$(pp_mbps "pp $p $b" | median)"
      how="$hosts hosts × $p rank$([ "$p" = 1 ] || echo s)"
      if ((b >= 1 << 20)); then
        bm="$(busbw "$b" "$best" "$r")" bn="$(busbw "$b" "$tn" "$r")"
        lg="$(awk -v m="$lm" 'BEGIN { printf "%.3f", m / 1000 }')"
        x="$(ratio "$bn" "$bm")"
        echo "| $(size_label "$b") busbw, $how | $bm GB/s ($bestname) | $bn GB/s | $(fmt_ratio "$x") | $(target_of "$p" "$b" "$x") | $lg GB/s one way | $(fmt_ratio "$(ratio "$bn" "$lg")") |"
      else
        x="$(ratio "$tn" "$best")"
        echo "| $(size_label "$b"), $how | $(fmt_us "$best") µs ($bestname) | $(fmt_us "$tn") µs | $(fmt_ratio "$x") | $(target_of "$p" "$b" "$x") | $(fmt_us "$lu") µs one-way | $(fmt_ratio "$(ratio "$tn" "$lu")") |"
      fi
    done
  done
  echo
  echo "Small sizes: time per all-reduce, ratio = OpenNRT time / Open MPI time (higher = OpenNRT slower);"
  echo "the link column is fi_pingpong's one-way latency (half a round trip) at that size. Large sizes:"
  echo "busbw = bytes / time × 2(R−1)/R, ratio = OpenNRT busbw / Open MPI busbw (lower = OpenNRT"
  echo "slower); the link column is fi_pingpong's bandwidth at that size (one direction at a time)."
  echo "Open MPI (best): the lower median time of mpi_yield_when_idle 1 and Open MPI's default (both"
  echo "below). Targets are reported, not asserted. Every run: min–max of the run medians (µs),"
  echo "spread = slowest / fastest (bold above ${spread_limit}×), p99 = the highest run p99 of single iterations."
  echo
  echo "<details><summary>every run (µs per all-reduce; fi_pingpong: µs one-way / MB/s)</summary>"
  echo
  echo "| case | what | iterations | runs | median | min–max | spread | p99 |"
  echo "|---|---|---|---|---|---|---|---|"
  for b in "${size_bytes[@]}"; do
    for p in "${per_host[@]}"; do
      read -r iters warmup < <(hosts_iters_for "$b" "$p")
      for key in "mpi1" "mpi-" "nrt"; do
        t="$(times_of "$key $p $b")"
        case "$key" in
          mpi1) name="Open MPI, mpi_yield_when_idle 1" ;;
          mpi-) name="Open MPI, default (no yield_when_idle)" ;;
          nrt) name="OpenNRT (incl. nrta_cc_prepare: $(fmt_us "$(iters_of "$key $p $b" | median)") µs)" ;;
        esac
        each="$(for v in $t; do fmt_us "$v"; echo; done | paste -sd, - | sed 's/,/, /g')"
        sp="$(spread_of "$t")" mm="—" spc="—" p99="$(p99s_of "$key $p $b" | max_of || true)"
        if [ -n "$sp" ]; then
          read -r lo hi x <<<"$sp"
          mm="$(fmt_us "$lo")–$(fmt_us "$hi")" spc="$(fmt_spread "$x")"
        fi
        echo "| $(size_label "$b"), $hosts hosts × $p | $name | $iters (+$warmup) | $each | $(fmt_us "$(median <<<"$t")") | $mm | $spc | ${p99:+$(fmt_time "$p99")} |"
      done
      each="$(tr ' ' '\n' <<<"${results[pp $p $b]}" | sed '/^$/d; s/:/ \/ /' | paste -sd, - | sed 's/,/, /g')"
      echo "| $(size_label "$b"), $hosts hosts × $p | fi_pingpong host 0 ↔ host 1 | | $each | $(fmt_us "$(pp_usec "pp $p $b" | median)") / $(pp_mbps "pp $p $b" | median) | | | |"
    done
  done
  echo
  echo "</details>"
} >"$md"

cat "$md"
say "== table written to ${md#"$root"/}; logs in ${logs#"$root"/}/; total ${elapsed} s"
