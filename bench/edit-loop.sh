#!/usr/bin/env bash
# The edit-build-test loop, timed: change one line in src/runtime, then build and run one
# targeted test, as a contributor does between two edits (CONTRIBUTING.md, "The loop").
#
#   bash bench/edit-loop.sh [PROFILE] [ROUNDS]
#
# PROFILE is `quick` (the default; CONTRIBUTING's loop) or `release` (what the loop was before
# the quick profile). Each timed command follows a fresh edit of a string literal inside
# `Config::from_lookup` (src/runtime/config.rs), the function every runtime path reads its
# configuration through: a change of code, not of a comment, so even an incremental build must
# generate that function's code again. Then it times, wall clock:
#   unit         cargo test --profile P -p opennrt --lib -- <one test in src/runtime>
#   integration  cargo test --profile P -p opennrt --test neff_models
#   everything   cargo test --profile P -- <the same unit test>   (every crate of the workspace)
# The file is restored on exit, also on failure or Ctrl-C. The first round also pays for any
# build the profile has not made yet, so it is printed but left out of the medians.
# Wall-clock seconds on a shared machine are noisy: run it when the machine is quiet and read
# the medians side by side, never one number alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
profile="${1:-quick}"
rounds="${2:-3}"
case "$profile" in
  quick | release) ;;
  *) echo "bench/edit-loop.sh: PROFILE is quick or release, not $profile" >&2; exit 2 ;;
esac
file=src/runtime/config.rs
unit_test=runtime::config::tests::unknown_instance_is_a_clear_error
saved="$(mktemp)"
cp "$file" "$saved"
trap 'cp "$saved" "$file"; rm -f "$saved"' EXIT

# One timed command after a fresh edit; prints the seconds, fails loudly with the log.
timed() {
  cp "$saved" "$file"
  sed -i "s/\"the logical core size must be 1 or 2\"/\"the logical core size must be 1 or 2 (edit $(date +%s%N))\"/" "$file"
  cmp -s "$saved" "$file" && { echo "bench/edit-loop.sh: the line to edit is gone from $file" >&2; exit 1; }
  local log start end
  log="$(mktemp)"
  start=$(date +%s.%N)
  if ! "$@" > "$log" 2>&1; then
    tail -30 "$log" >&2
    rm -f "$log"
    echo "bench/edit-loop.sh: failed: $*" >&2
    exit 1
  fi
  end=$(date +%s.%N)
  grep -q 'test result: ok. [1-9]' "$log" || { tail -20 "$log" >&2; echo "bench/edit-loop.sh: no test ran: $*" >&2; exit 1; }
  rm -f "$log"
  cp "$saved" "$file"
  echo "$end - $start" | bc
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }

declare -A times
for kind in unit integration everything; do times[$kind]=""; done
for r in $(seq 0 "$rounds"); do
  u=$(timed cargo test --profile "$profile" -p opennrt --lib -- "$unit_test")
  i=$(timed cargo test --profile "$profile" -p opennrt --test neff_models)
  e=$(timed cargo test --profile "$profile" -- "$unit_test")
  printf 'round %d%s: unit %.1f s, integration %.1f s, everything %.1f s\n' \
    "$r" "$([ "$r" = 0 ] && echo ' (warm-up)')" "$u" "$i" "$e"
  if [ "$r" != 0 ]; then
    times[unit]+="$u"$'\n'; times[integration]+="$i"$'\n'; times[everything]+="$e"$'\n'
  fi
done
for kind in unit integration everything; do
  printf 'median %-12s %s s (profile %s, %s rounds, %s)\n' "$kind" \
    "$(printf '%s' "${times[$kind]}" | grep . | median)" "$profile" "$rounds" "$(uptime | sed 's/.*load/load/')"
done
