#!/usr/bin/env bash
# bench/waits.sh: tune the shared device's waits (spin, then yield, then sleep) by measurement.
#
# Runs bench/nrt_allreduce.c (fp32 sum all-reduce of 4 KiB, one rank per process) for every
# combination of
#   * processes: 2, 4, 8 (--procs);
#   * the caller's wait between polls of nrta_is_completed: yield (a caller that polls and
#     yields), eventfd (a caller that blocks in poll(2) on an eventfd) and spin (a caller that
#     polls in a tight loop) (--callers);
#   * the runtime's waits, OPENNRT_WAIT_SPIN_US / OPENNRT_WAIT_YIELD_US, as spin:yield pairs
#     in microseconds (--settings; the default pair 20:300 is the runtime's default);
# and prints, per combination, the median over --runs runs of rank 0's median
# nrta_cc_schedule -> completion time, the spread of the run medians (max / min) and the
# highest p99. The best setting per (processes, caller) is marked. Runs are interleaved (every
# setting once, then again) so that a slow minute of the machine does not land on one setting.
# Output: a Markdown table on stdout, also written to target/bench/waits.md.
#
#   bash bench/waits.sh [--procs 2,4,8] [--callers yield,eventfd,spin]
#                       [--settings 0:0,5:100,20:300,50:1000] [--runs 3] [--bytes 4096]
#
# Builds OpenNRT if target/release/libnrt.so is missing and always rebuilds
# target/bench/nrt_allreduce. Every run has `timeout 120`; a failure stops the script.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
procs_list="2,4,8" callers="yield,eventfd,spin" settings="0:0,5:100,20:300,50:1000" runs=3 bytes=4096
while [ $# -gt 0 ]; do
  case "$1" in
    --procs) procs_list="${2:?}"; shift ;;
    --callers) callers="${2:?}"; shift ;;
    --settings) settings="${2:?}"; shift ;;
    --runs) runs="${2:?}"; shift ;;
    --bytes) bytes="${2:?}"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "waits.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
die() { echo "waits.sh: FAILED: $*" >&2; exit 1; }
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer"

lib="$root/target/release"
if [ ! -f "$lib/libnrt.so" ]; then
  cargo build --release --workspace >&2 || die "cargo build --release --workspace failed"
fi
shim/links.sh "$lib" >/dev/null || die "shim/links.sh failed"
out="$root/target/bench"
mkdir -p "$out"
gcc -O2 -Wall -Wextra -Werror -std=c11 -pthread -I"$root/include" -o "$out/nrt_allreduce" \
  "$root/bench/nrt_allreduce.c" -L"$lib" -lnrt -Wl,-rpath,"$lib" || die "gcc bench/nrt_allreduce.c failed"

IFS=, read -r -a P <<<"$procs_list"
IFS=, read -r -a C <<<"$callers"
IFS=, read -r -a S <<<"$settings"
declare -A times p99s
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR] = $1} END {
  if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
start=$SECONDS
for ((k = 1; k <= runs; k++)); do
  for p in "${P[@]}"; do
    iters=$((p <= 2 ? 2000 : p <= 4 ? 1000 : 400))
    for c in "${C[@]}"; do
      for s in "${S[@]}"; do
        sp="${s%%:*}" yi="${s##*:}"
        line="$(OPENNRT_WAIT_SPIN_US="$sp" OPENNRT_WAIT_YIELD_US="$yi" LD_LIBRARY_PATH="$lib" \
          timeout -k 5 120 "$out/nrt_allreduce" processes "$p" "$bytes" "$iters" 100 --wait "$c" 2>/dev/null |
          grep '^RESULT')" || die "nrt_allreduce processes $p $bytes --wait $c with $s failed"
        key="$p $c $s"
        times[$key]+=" $(field "$line" time_us)"
        p99s[$key]+=" $(field "$line" p99_us)"
        echo "[run $k] $p processes, caller $c, spin:yield $s µs: $(field "$line" time_us) µs" >&2
      done
    done
  done
done
elapsed=$((SECONDS - start))
{
  echo "4 KiB fp32 all-reduce, one rank per process; rank 0's nrta_cc_schedule → completion,"
  echo "median of $runs run(s) (each the median over its iterations); spread = slowest / fastest run"
  echo "median; p99 = the highest p99 of the runs. **bold**: the fastest setting of its row group."
  echo "\`bash bench/waits.sh --procs $procs_list --callers $callers --settings $settings --runs $runs\`"
  echo "($elapsed s, $(date -u +%Y-%m-%d), $(nproc) CPUs)."
  echo
  echo "| processes | caller | OPENNRT_WAIT_SPIN_US:YIELD_US | median | spread | p99 |"
  echo "|---|---|---|---|---|---|"
  for p in "${P[@]}"; do
    for c in "${C[@]}"; do
      best="" bt=""
      for s in "${S[@]}"; do
        m="$(median <<<"${times["$p $c $s"]}")"
        if [ -z "$bt" ] || awk -v a="$m" -v b="$bt" 'BEGIN {exit !(a < b)}'; then bt="$m" best="$s"; fi
      done
      for s in "${S[@]}"; do
        t="${times["$p $c $s"]}"
        m="$(median <<<"$t")"
        spread="$(tr ' ' '\n' <<<"$t" | sed '/^$/d' | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f", hi / lo}')"
        p99="$(tr ' ' '\n' <<<"${p99s["$p $c $s"]}" | sed '/^$/d' | sort -g | tail -1)"
        cell="$(printf '%.1f µs' "$m")"
        [ "$s" = "$best" ] && cell="**$cell**"
        echo "| $p | $c | $s | $cell | ${spread}× | $(printf '%.0f µs' "$p99") |"
      done
    done
  done
} | tee "$out/waits.md"
