#!/usr/bin/env bash
# Every fuzz target (fuzz/README.md), built and run for a bounded time on a copy of the committed
# corpus, two at a time; any crash, timeout or out-of-memory fails the script with the target's
# log and the crashing input. Installs nightly when `cargo +nightly` fails. Builds with the
# flags of `cargo fuzz build -a -s none` (coverage, compare tracing, debug assertions, no
# sanitizer), so cargo-fuzz itself is not needed and a local `cargo fuzz` shares the build.
#   OPENNRT_FUZZ_SECONDS  seconds per target (default 30)
#   OPENNRT_FUZZ_JOBS     targets at once (default 2)
# `bash ci/fuzz.sh build` only builds, `bash ci/fuzz.sh run` only runs what the last build made
# (ci/test.sh builds while the compile-bound steps leave a core idle, and runs the targets beside
# the steps that mostly wait); no argument does both.
set -euo pipefail
phase="${1:-all}"
case "$phase" in
  all | build | run) ;;
  *) echo "ci/fuzz.sh: unknown phase '$phase' (build, run, or none for both)" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
fuzz="$root/fuzz"
secs="${OPENNRT_FUZZ_SECONDS:-30}"
jobs="${OPENNRT_FUZZ_JOBS:-2}"
start=$SECONDS

if [ "$phase" != run ]; then
  if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "ci/fuzz.sh: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
  fi
  cargo +nightly --version
  triple="$(rustc +nightly -vV | sed -n 's/^host: //p')"

  # cargo-fuzz 0.13's RUSTFLAGS for `build -a -s none` on Linux (src/project.rs there).
  export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
  -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing \
  -Cllvm-args=-simplifycfg-branch-fold-threshold=0 -Cllvm-args=-sanitizer-coverage-stack-depth \
  -Cdebug-assertions -Ccodegen-units=1"
  cargo +nightly build --manifest-path "$fuzz/Cargo.toml" --target "$triple" --release \
    --config 'profile.release.debug="line-tables-only"' --bins --locked || {
    echo "ci/fuzz.sh: the build failed; if cargo says fuzz/Cargo.lock needs an update (a dependency" \
      "of the root crate changed), run 'cd fuzz && cargo +nightly update -p opennrt' and commit it" >&2
    exit 1
  }
  unset RUSTFLAGS
  echo "ci/fuzz.sh: built in $((SECONDS - start)) s"
fi
[ "$phase" != build ] || exit 0
triple="$(rustc +nightly -vV | sed -n 's/^host: //p')"
bin="$fuzz/target/$triple/release"

targets=()
while IFS= read -r t; do targets+=("$t"); done < <(sed -n 's/^name = "\(.*\)"$/\1/p' "$fuzz/Cargo.toml" | grep -v '^opennrt')
[ "${#targets[@]}" -gt 0 ] || { echo "ci/fuzz.sh: no fuzz targets in fuzz/Cargo.toml" >&2; exit 1; }
for t in "${targets[@]}"; do
  [ -x "$bin/$t" ] || { echo "ci/fuzz.sh: $bin/$t is missing; run 'bash ci/fuzz.sh build' first" >&2; exit 1; }
done

# Runs write new inputs into a scratch copy of the corpus, never into fuzz/corpus.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
run() {
  local t="$1"
  mkdir -p "$work/$t" "$fuzz/artifacts/$t"
  cp -R "$fuzz/corpus/$t/." "$work/$t/"
  if "$bin/$t" "$work/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$fuzz/artifacts/$t/" -print_final_stats=1 >"$work/$t.log" 2>&1; then
    echo "ok   $t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$') runs," \
      "$(grep -E '^#[0-9]+' "$work/$t.log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+')"
  else
    echo "FAIL $t" >&2
    tail -40 "$work/$t.log" >&2
    ls -1 "$fuzz/artifacts/$t/" >&2
    return 1
  fi
}

failed=0
pids=()
names=()
for t in "${targets[@]}"; do
  run "$t" &
  pids+=("$!")
  names+=("$t")
  if [ "${#pids[@]}" -ge "$jobs" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
echo "ci/fuzz.sh: ${#targets[@]} targets, ${secs} s each, $((SECONDS - start)) s in all"
if [ "$failed" -ne 0 ]; then
  echo "ci/fuzz.sh: a fuzz target crashed; the inputs are in fuzz/artifacts/ (fuzz/README.md: replay, then a regression test)" >&2
  exit 1
fi
