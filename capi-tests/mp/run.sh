#!/usr/bin/env bash
# Multi-process tests against the libraries in <lib-dir> (default
# target/release): one process per rank, forked before nrt_init as the plain-C driver of
# docs/contract/abi.md §8 does, bootstrapped through NEURON_RT_ROOT_COMM_ID (spec §5.10-§5.11).
#
#   bash capi-tests/mp/run.sh [lib-dir] [group...]     groups: collectives mixed two-jobs groups tensors kill errors chaos
#                                                      (none named: all but chaos, a CI step of its own;
#                                                      OPENNRT_CHAOS_SEED / OPENNRT_CHAOS_ROUNDS replay and size it)
#
# mp_driver.c says what each group checks. Every wait is bounded inside the driver (each job
# has a deadline after which its processes are SIGKILLed and the job fails); `timeout` here is
# only a last resort against a bug in the harness itself. The Python variant
# (capi-tests/python/test_multiprocess.py) runs with the other Python tests
# (capi-tests/python/run.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
lib="${1:-$root/target/release}"
lib="$(cd "$lib" && pwd)"
shift || true
out="$root/capi-tests/build"
mkdir -p "$out"
"$root/shim/links.sh" "$lib" >/dev/null
src="$root/capi-tests/mp"
CFLAGS=(-std=c11 -Wall -Wextra -Werror -pthread -I"$root/include" -I"$root/capi-tests")
echo "+ gcc ${CFLAGS[*]} -o $out/mp_driver mp_driver.c mp_faults.c mp_groups.c mp_tensors.c mp_chaos.c mp_rank.c mp_harness.c -lnrt"
gcc "${CFLAGS[@]}" -o "$out/mp_driver" "$src/mp_driver.c" "$src/mp_faults.c" "$src/mp_groups.c" "$src/mp_tensors.c" "$src/mp_chaos.c" "$src/mp_rank.c" \
  "$src/mp_harness.c" -L"$lib" -lnrt
echo "+ mp_driver $*"
LD_LIBRARY_PATH="$lib" timeout -k 5 600 "$out/mp_driver" "$@"
echo "capi-tests/mp: all multi-process tests passed"
