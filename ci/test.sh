#!/usr/bin/env bash
# The whole test suite (the README's test command). Fails on the first error.
#   format and lints → release build of both libraries → Rust tests (unit, property, headers)
#   → ABI identity checks → C tests against the built
#   libraries → Python ctypes tests → the swap
#   → one rank per process → chaos (random kills, stops, delays) → several hosts (network
#   namespaces; installs its Debian packages) → network chaos.
#   The fuzz targets (nightly, 30 s each) are built in the background from the start and run
#   beside the last steps, which mostly wait.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# Each step line carries the seconds since the start, so a slow step shows in CI's log.
# Test data that is missing fails the suite instead of skipping (src/testdata.rs).
export OPENNRT_TEST_STRICT=1
step() { printf '\n==== [%4ds] %s\n' "$SECONDS" "$*"; }

# Debian packages the multi-host step needs (capi-tests/hosts/): only the missing ones are
# installed, quietly; a failing apt stops the suite with apt's own output.
need_debs() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  echo "ci/test.sh: installing ${missing[*]}"
  command -v apt-get >/dev/null || { echo "ci/test.sh: apt-get is missing; install ${missing[*]}" >&2; exit 1; }
  local log
  log="$(mktemp)"
  if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "ci/test.sh: apt-get could not install ${missing[*]}" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
}

step "toolchain"
for tool in cargo rustc gcc g++ readelf; do
  command -v "$tool" >/dev/null || { echo "ci/test.sh: $tool is required but not installed" >&2; exit 1; }
done
cargo --version; rustc --version; gcc --version | head -1
cargo fmt --version >/dev/null 2>&1 || { echo "ci/test.sh: rustfmt is required (rustup component add rustfmt)" >&2; exit 1; }
cargo clippy --version >/dev/null 2>&1 || { echo "ci/test.sh: clippy is required (rustup component add clippy)" >&2; exit 1; }

step "the repository stands alone: no tracked file points outside it"
# Test data and facts live in testdata/ and docs/; a path into a sibling folder would work on
# the machine that wrote it and nowhere else.
if git -C "$root" grep -nE '\.\./shared|/work/shared' -- ':!ci/test.sh' >&2; then
  echo "ci/test.sh: the lines above point outside the repository" >&2
  exit 1
fi

step "packages: libfabric (the multi-host transport and its bindings test), libclang (bindgen), iproute2, Open MPI, time and nftables (the multi-host tests)"
need_debs libfabric1 libfabric-dev libfabric-bin iproute2 openmpi-bin libclang-dev time nftables

step "cargo fmt --check"
cargo fmt --all --check

# The fuzz targets' nightly build (fuzz/README.md; about 110 s, much of it on one core: the crate
# is built with codegen-units=1) runs in the background at the lowest priority, on the core that
# clippy and the release builds leave idle; the targets run later, beside the steps that mostly
# wait ("fuzz: run", "fuzz: results"). Each part's output goes to its log, printed on failure.
mkdir -p target
fuzz_build_log=target/ci-fuzz-build.log
fuzz_run_log=target/ci-fuzz-run.log
fuzz_pids=()
# A failing step ends the suite, and so does a signal; the background fuzz jobs (each its own
# process group) end with it.
trap 'for p in "${fuzz_pids[@]}"; do kill -- -"$p" 2>/dev/null || true; done' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# fuzz_wait PID LOG WHAT: waits for a background fuzz job and fails the suite with its log.
fuzz_wait() {
  if ! wait "$1"; then
    cat "$2" >&2
    echo "ci/test.sh: the fuzz $3 failed (log above, also in $2)" >&2
    exit 1
  fi
}
step "fuzz: nightly build of every target started in the background (log: $fuzz_build_log)"
setsid -w nice -n 19 bash ci/fuzz.sh build >"$fuzz_build_log" 2>&1 &
fuzz_pids+=("$!")

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

# One build for the libraries, the CLIs and every test binary of the next step: in one cargo
# run the dev-dependencies (bindgen, cbindgen, proptest) and the unit-test build of the crate
# compile beside the library instead of after it, on the core a single crate leaves idle.
step "cargo build --release (libnrt.so.1, libncfw.so, opennrt, and the test binaries that cargo test runs next)"
cargo build --release --workspace --lib --bins --tests --examples
shim/links.sh target/release

step "cargo test --release (unit, property, golden, headers; built above; the release profile is shared with the full matrix below)"
cargo test --release --workspace

step "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p opennrt

step "opennrt verify: every op x legal algorithm x ranks x counts, lowered, verified, emitted, decoded back"
log=target/opennrt-verify.log
if ! target/release/opennrt verify > "$log" 2>&1; then
  grep -E '^FAIL' "$log" | head -50
  tail -2 "$log"
  echo "opennrt verify failed (full log: $log)" >&2
  exit 1
fi
grep -c '^ok' "$log" | sed 's/^/cases verified: /'
tail -2 "$log"

step "opennrt perf: collectives on the software device, every element checked (#wrong must be 0)"
for op in all_reduce all_gather reduce_scatter all_to_all; do
  target/release/opennrt perf --op "$op" --ranks 8 --maxbytes 256K --iters 1
done
target/release/opennrt perf --op all_reduce --ranks 3 --dtype bf16 --redop max --maxbytes 64K --iters 1
target/release/opennrt perf --op all_reduce --ranks 5 --dtype fp16 --redop min --maxbytes 64K --iters 1
# every op once more, small sizes, other dtypes (out-of-place and in-place halves)
for op in all_to_all_v permute permute_implicit send_recv barrier; do
  target/release/opennrt perf --op "$op" --ranks 8 --dtype bf16 --maxbytes 64K --iters 1
done
target/release/opennrt perf --op permute_reduce_implicit --ranks 4 --dtype fp8_e4m3 --maxbytes 16K --iters 1
target/release/opennrt perf --op reduce_scatter --ranks 16 --dtype fp8_e5m2 --redop max --maxbytes 64K --iters 1
target/release/opennrt perf --op all_gather --ranks 4 --dtype uint64 --maxbytes 64K --iters 1
# the C API in 1 process and in 2 processes of 2 ranks (opennrt perf --procs; every rank checked)
for op in all_reduce all_gather reduce_scatter; do target/release/opennrt perf --op "$op" --ranks 4 --procs 2 --maxbytes 64K --iters 2; done

step "device correctness matrix, full (release): every op x legal algorithm x dtype x redop x ranks x count x in-place"
OPENNRT_MATRIX=full cargo test --release --test device_matrix

step "ABI identity checks"
bash ci/abi-check.sh target/release

step "C tests"
bash capi-tests/run.sh target/release

# 30 s a target, as `bash ci/fuzz.sh` alone (OPENNRT_FUZZ_SECONDS sets any other bound). The
# steps from here to the end mostly wait on other processes and the network, so the targets run
# beside them, niced below them; "fuzz: results" waits for them. With 20 s the runs ended
# within the 185 s those steps took (clean-clone CI, 2026-12-08), and waiting took 0 s.
step "fuzz: run every parser's target ${OPENNRT_FUZZ_SECONDS:-30} s on its corpus, two at a time, in the background (log: $fuzz_run_log)"
fuzz_wait "${fuzz_pids[0]}" "$fuzz_build_log" build
tail -1 "$fuzz_build_log"
OPENNRT_FUZZ_SECONDS="${OPENNRT_FUZZ_SECONDS:-30}" setsid -w nice -n 10 bash ci/fuzz.sh run >"$fuzz_run_log" 2>&1 &
fuzz_pids+=("$!")

step "point-to-point send/recv between processes: the rules, the KV-cache hand-off (C), killed peers"
bash capi-tests/sendrecv/run.sh target/release

step "Python ctypes tests (multi-rank collectives in one process, one thread per core)"
bash capi-tests/python/run.sh target/release

step "library swap: a program linked against a stand-in libnrt.so.1 runs on OpenNRT via shim/opennrt-run"
bash capi-tests/swap/run.sh target/release

step "one rank per process: forked C driver (R = 2, 3, 4, 8, mixed mode, two jobs, two groups, kills, errors)"
bash capi-tests/mp/run.sh target/release

step "chaos: one-rank-per-process jobs whose ranks are killed, stopped and delayed at random (seed printed; docs/hangs.md §4)"
# 60 rounds of 2-4 ranks, about 450 collectives, four rounds at once: 28-40 s on 2 cores
# (2026-12-07, also beside a release build). OPENNRT_CHAOS_SEED replays a printed seed,
# OPENNRT_CHAOS_ROUNDS sets the count.
bash capi-tests/mp/run.sh target/release chaos

step "several hosts on one machine: network namespaces, one /dev/shm each"
# Ranks on different hosts reach each other through the network proxy over libfabric
# (docs/design.md §2 item 12); each case checks every element (capi-tests/hosts/README.md).
bash capi-tests/hosts/run.sh target/release

step "network chaos across hosts: cut links, flaps, packet loss, throttling (a fresh seed)"
# Rounds of 2-3 host jobs with every result checked, one fault per round in a random host
# (capi-tests/hosts/README.md, "Network chaos"): 10 rounds, 37-50 s on 2 cores (2026-12-07,
# also beside other builds). The log prints the seed; OPENNRT_CHAOS_SEED replays it.
bash capi-tests/hosts/chaos.sh target/release

step "the scale run across hosts: 4 hosts x 4 ranks, 16 MiB all-reduce, peak RSS per host"
# The issue's 4 x 8 shape needs about 20 GiB on this kind of machine (README, "Measured across
# hosts"): CI runs half of it; `bash capi-tests/hosts/scale.sh target/release` runs the whole.
OPENNRT_SCALE_PER_HOST=4 bash capi-tests/hosts/scale.sh target/release

step "fuzz: results (started before the send/recv step)"
fuzz_wait "${fuzz_pids[1]}" "$fuzz_run_log" run
grep -E '^(ok|FAIL) |^ci/fuzz.sh: ' "$fuzz_run_log"

step "done: all checks passed"
