#!/usr/bin/env bash
# The scale run: 4 hosts x 8 ranks, one rank per process (32 processes of `opennrt perf-rank`),
# one fp32 sum all-reduce of 16 MiB per rank, every element checked on every rank; prints each
# host's peak memory and the wall time. Hosts are the network namespaces of netns.sh (each with
# its own /dev/shm), as in run.sh, built here and removed at the end (on failure too).
#
#   bash capi-tests/hosts/scale.sh [lib-dir]        (default target/release; needs root)
#
# Process p runs on host p / 8, owns logical core p (NEURON_RT_VISIBLE_CORES=p, so its global
# rank is p) and bootstraps through NEURON_RT_ROOT_COMM_ID=10.231.0.1:<port>; process 0 gets
# --wait-stdin, closed once the others have exited (as run.sh and src/launch.rs do).
#
# Memory, per host:
#   * peak RSS: every process runs under `/usr/bin/time -f %M`, which reports the process's
#     ru_maxrss from wait4 (the kernel's high-water mark of its resident set, VmHWM, taken at
#     exit, so nothing is missed between samples); the host's figure is the sum over its 8
#     processes. RSS counts every page a process has mapped and touched, its /dev/shm device
#     segments included, so a segment page touched by two ranks of one host counts twice:
#     the sum is an upper bound of the host's memory, not its exact footprint.
#   * /dev/shm: the host's tmpfs in use (df), sampled every 0.2 s, the largest sample: the
#     simulated HBM and the other shared segments, each page once.
# The default shape needs a lot of memory (measured: ~840 MiB peak RSS per process, of which
# 512 MiB are perf-rank's check, every rank's input while it checks in its turn), so the script
# skips when MemAvailable is below OPENNRT_SCALE_NEED_MIB (default 40 x the per-rank size per process: 20 GiB here) and,
# while the job runs, stops it (a failure) if MemAvailable falls below
# OPENNRT_SCALE_FLOOR_MIB (default 1024) rather than let the kernel's OOM killer pick a victim
# on a shared machine.
#
# Environment:
#   OPENNRT_TEST_STRICT=1        no root / no netns support fails instead of skipping
#   OPENNRT_HOSTS_TIMEOUT=300    seconds per process
#   OPENNRT_SCALE_HOSTS=4 OPENNRT_SCALE_PER_HOST=8 OPENNRT_SCALE_BYTES=16777216   the shape
#   OPENNRT_SCALE_NEED_MIB, OPENNRT_SCALE_FLOOR_MIB      the memory guards above
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
lib="${1:-$root/target/release}"
lib="$(cd "$lib" && pwd)"
strict="${OPENNRT_TEST_STRICT:-0}"
per_proc_timeout="${OPENNRT_HOSTS_TIMEOUT:-300}"
nhosts="${OPENNRT_SCALE_HOSTS:-4}"
per="${OPENNRT_SCALE_PER_HOST:-8}"
bytes="${OPENNRT_SCALE_BYTES:-16777216}"
count=$((bytes / 4))
n=$((nhosts * per))
start_s=$SECONDS

# shellcheck source=capi-tests/hosts/netns.sh
source "$here/netns.sh"

skip() {
  if [ "$strict" = 1 ]; then
    echo "scale: FAILED: cannot run the scale test: $* (OPENNRT_TEST_STRICT=1)" >&2
    exit 1
  fi
  echo "scale: SKIPPED: $*"
  exit 0
}
why="$(hosts_unsupported)"
[ -z "$why" ] || skip "$why"
[ -x /usr/bin/time ] || skip "/usr/bin/time is not installed (Debian: apt-get install time); it reports each process's peak RSS"
[ -e "$lib/opennrt" ] || { echo "scale: $lib/opennrt is missing (cargo build --release --workspace)" >&2; exit 1; }
((bytes > 0 && bytes % 4 == 0)) || { echo "scale: OPENNRT_SCALE_BYTES must be a positive multiple of 4" >&2; exit 2; }
need_mib="${OPENNRT_SCALE_NEED_MIB:-$(( n * bytes * 40 >> 20 ))}"
floor_mib="${OPENNRT_SCALE_FLOOR_MIB:-1024}"
avail_mib() { awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo; }
have_mib="$(avail_mib)"
((have_mib >= need_mib)) || skip "MemAvailable is $have_mib MiB; $n processes x $bytes B need about $need_mib MiB (OPENNRT_SCALE_NEED_MIB)"

shm_before="$(ls /dev/shm | grep '^opennrt-' | sort || true)"
work="$(mktemp -d "${TMPDIR:-/tmp}/opennrt-scale.XXXXXX")"
sampler=""

finish() {
  local rc=$? leaked=0
  trap - EXIT INT TERM
  [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
  hosts_down_checked scale "$shm_before" || leaked=1
  rm -rf "$work"
  if [ "$leaked" = 1 ] && [ "$rc" = 0 ]; then rc=1; fi
  exit "$rc"
}

echo "+ hosts_up $nhosts   (namespaces ${HOSTS_PREFIX}h0..h$((nhosts - 1)), bridge ${HOSTS_BR})"
hosts_up "$nhosts"
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Each host's /dev/shm in use (KiB), every 0.2 s, one line "k kib" per host and sample; and the
# memory floor: below it, the job's processes (the opennrt processes in our namespaces) are
# killed.
(
  while :; do
    if (($(avail_mib) < floor_mib)) && ! [ -e "$work/low-memory" ]; then
      avail_mib >"$work/low-memory"
      for ns in "${HOSTS_NS[@]}"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null || true); do
          [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = opennrt ] && kill -KILL "$pid" 2>/dev/null || true
        done
      done
    fi
    for ((k = 0; k < nhosts; k++)); do
      echo "$k $(host_exec "$k" df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $3 }')"
    done
    sleep 0.2
  done
) >"$work/shm" 2>/dev/null &
sampler=$!

rootid="$(host_addr 0):31000"
echo "# all_reduce fp32 add, $count elements ($bytes B) per rank, $n ranks: $nhosts hosts x $per, one rank per process; root $rootid"
fifo="$work/stdin0"
mkfifo "$fifo"
exec {hold}<>"$fifo"
pids=()
t0=$SECONDS
for ((p = 0; p < n; p++)); do
  h=$((p / per))
  echo "$h" >"$work/host$p"
  argv=("$lib/opennrt" perf-rank --op all_reduce --ranks "$n" --procs "$n" --proc "$p" --dtype fp32
    --redop add --counts "$count" --iters 1 --check 1)
  in=/dev/null
  if [ "$p" = 0 ]; then argv+=(--wait-stdin); in="$fifo"; fi
  NEURON_RT_VISIBLE_CORES="$p" NEURON_RT_ROOT_COMM_ID="$rootid" NEURON_RT_EXEC_TIMEOUT="$per_proc_timeout" \
    OPENNRT_NCFW_PATH="$lib/libncfw.so" \
    host_exec "$h" timeout -k 5 "$per_proc_timeout" /usr/bin/time -f '%M %e' -o "$work/rss$p" "${argv[@]}" \
    <"$in" >"$work/out$p" 2>"$work/err$p" {hold}>&- &
  pids+=($!)
done
for ((p = 1; p < n; p++)); do
  rc=0; wait "${pids[$p]}" || rc=$?
  echo "$rc" >"$work/rc$p"
done
exec {hold}>&-
rc=0; wait "${pids[0]}" || rc=$?
echo "$rc" >"$work/rc0"
case_s=$((SECONDS - t0))
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=""

if [ -e "$work/low-memory" ]; then
  echo "scale: FAILED: MemAvailable fell to $(cat "$work/low-memory") MiB (< $floor_mib, OPENNRT_SCALE_FLOOR_MIB):" \
    "the job was stopped before the OOM killer could pick a victim" >&2
  exit 1
fi
failed=0
for ((p = 0; p < n; p++)); do
  why=""
  if [ "$(cat "$work/rc$p")" != 0 ]; then why="exit $(cat "$work/rc$p")"
  elif ! grep -qE "\"count\":$count,.*\"wrong\":0[,}]" "$work/out$p"; then why="no report with 0 wrong elements"; fi
  if [ -n "$why" ]; then
    failed=1
    echo "---- process $p (host $(cat "$work/host$p")): $why; stderr:" >&2
    sed 's/^/    /' "$work/err$p" >&2 || true
    sed 's/^/    stdout: /' "$work/out$p" | cut -c1-300 >&2 || true
  fi
done
if [ "$failed" = 1 ]; then
  echo "scale: FAILED: $nhosts hosts x $per ranks, all_reduce $bytes B per rank (stderr above)" >&2
  exit 1
fi

# Rank 0's time for the all-reduce (perf-rank's "times", seconds).
t_s="$(sed -n 's/.*"times":\[\([0-9.e+-]*\).*/\1/p' "$work/out0" | head -n 1)"
echo "ok   scale: $n ranks on $nhosts hosts, every element of every rank exact; all-reduce on rank 0: ${t_s:-?} s; processes start to exit: ${case_s} s"
echo
echo "| host | processes | peak RSS, sum over processes (MiB) | largest process (MiB) | /dev/shm in use, peak (MiB) |"
echo "|---|---|---|---|---|"
tot=0
for ((k = 0; k < nhosts; k++)); do
  sum=0 big=0
  for ((p = k * per; p < (k + 1) * per; p++)); do
    kib="$(awk 'NR == 1 { print $1 }' "$work/rss$p")"
    [[ "$kib" =~ ^[0-9]+$ ]] || { echo "scale: FAILED: no peak RSS for process $p (/usr/bin/time wrote: $(cat "$work/rss$p"))" >&2; exit 1; }
    sum=$((sum + kib))
    ((kib > big)) && big=$kib
  done
  tot=$((tot + sum))
  shm="$(awk -v k="$k" '$1 == k && $2 ~ /^[0-9]+$/ && $2 > m { m = $2 } END { print m + 0 }' "$work/shm")"
  printf '| %d (%s) | %d | %d | %d | %d |\n' "$k" "$(host_addr "$k")" "$per" $((sum >> 10)) $((big >> 10)) $((shm >> 10))
done
printf '| all | %d | %d | | |\n' "$n" $((tot >> 10))
echo
echo "scale: passed in $((SECONDS - start_s)) s (hosts up, $n processes, check, cleanup)"
