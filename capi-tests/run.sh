#!/usr/bin/env bash
# Build and run the C tests against the libraries in <lib-dir> (default target/release).
# Every C file is compiled with -Wall -Wextra -Werror; the layout checks also as C++.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
lib="${1:-$root/target/release}"
lib="$(cd "$lib" && pwd)"
out="$root/capi-tests/build"
mkdir -p "$out"
"$root/shim/links.sh" "$lib" >/dev/null
CFLAGS=(-std=c11 -Wall -Wextra -Werror -I"$root/include" -I"$root/capi-tests")
cc() { echo "+ gcc $*"; gcc "$@"; }
# shellcheck source=capi-tests/testdata.sh
. "$root/capi-tests/testdata.sh"

cc "${CFLAGS[@]}" -o "$out/abi_layout" "$root/capi-tests/abi_layout.c"
echo "+ g++ abi_layout.c as C++"
g++ -std=c++17 -Wall -Wextra -Werror -x c++ -I"$root/include" -o "$out/abi_layout_cxx" "$root/capi-tests/abi_layout.c"
"$out/abi_layout" && "$out/abi_layout_cxx" && echo "abi_layout: compile-time layout checks passed (C and C++)"

cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -DFAKE_VERSION=3 -o "$out/fake_ncfw_v3.so" "$root/capi-tests/fake_ncfw.c"
cc "${CFLAGS[@]}" -o "$out/nrt_test" "$root/capi-tests/nrt_test.c" -ldl
"$out/nrt_test" "$lib/libnrt.so.1" "$out/fake_ncfw_v3.so"

cc "${CFLAGS[@]}" -o "$out/link_test" "$root/capi-tests/link_test.c" -L"$lib" -lnrt
readelf -V "$out/link_test" | grep -q 'Name: NRT_2.0.0' && readelf -V "$out/link_test" | grep -q 'Name: NRT_3.0.0' \
  || { echo "link_test does not require both NRT_2.0.0 and NRT_3.0.0" >&2; exit 1; }
echo "link_test requires libnrt.so.1 versions NRT_2.0.0 and NRT_3.0.0"
LD_LIBRARY_PATH="$lib" "$out/link_test"

cc "${CFLAGS[@]}" -o "$out/tensor_test" "$root/capi-tests/tensor_test.c" -L"$lib" -lnrt
LD_LIBRARY_PATH="$lib" "$out/tensor_test"

# The README's C example: the text in README.md must be capi-tests/example.c, which must build
# warning-free and run (it checks its own result).
awk '/^<!-- example.c -->$/ {getline; f=1; next} f && /^```$/ {exit} f' "$root/README.md" > "$out/readme_example.c"
diff -u "$root/capi-tests/example.c" "$out/readme_example.c" \
  || { echo "README.md's C example differs from capi-tests/example.c" >&2; exit 1; }
cc "${CFLAGS[@]}" -pthread -o "$out/example" "$root/capi-tests/example.c" -L"$lib" -lnrt
LD_LIBRARY_PATH="$lib" "$out/example"
echo "example: the README's C example ran"
awk '/^<!-- example.py -->$/ {getline; f=1; next} f && /^```$/ {exit} f' "$root/README.md" > "$out/readme_example.py"
diff -u "$root/capi-tests/python/example.py" "$out/readme_example.py" \
  || { echo "README.md's Python example differs from capi-tests/python/example.py" >&2; exit 1; }

# The collective tests: plain, then under AddressSanitizer + UndefinedBehaviorSanitizer (the
# Rust library itself is not instrumented; ASan checks every access the C side makes and the
# buffers the library hands back). Leak checking is on: what the library keeps for the process
# (handle table, caches) stays reachable from its globals.
for t in cc_test async_test; do
  cc "${CFLAGS[@]}" -pthread -o "$out/$t" "$root/capi-tests/$t.c" -L"$lib" -lnrt
  LD_LIBRARY_PATH="$lib" "$out/$t"
  # The same, with every collective on the shared simulated devices (one executor per rank,
  # HBM and semaphores in shared memory: the multi-process path, met in one process).
  echo "+ $t with OPENNRT_SHARED_DEVICE=1"
  OPENNRT_SHARED_DEVICE=1 LD_LIBRARY_PATH="$lib" "$out/$t"
  cc "${CFLAGS[@]}" -pthread -g -fsanitize=address,undefined -fno-sanitize-recover=all \
    -o "$out/${t}_asan" "$root/capi-tests/$t.c" -L"$lib" -lnrt
  echo "+ $t under ASan/UBSan"
  LD_LIBRARY_PATH="$lib" ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$out/${t}_asan"
done

if [ -f "$root/capi-tests/ncfw_test.c" ]; then
  cc "${CFLAGS[@]}" -o "$out/ncfw_test" "$root/capi-tests/ncfw_test.c" -ldl
  (cd "$root/capi-tests" && "$out/ncfw_test" "$lib/libncfw.so")
fi

# NEFF models (neff_test.c says what it checks): NEFFs written by `opennrt neff build`, each
# run with one forked process per rank as the spectral-DNS driver does (docs/contract/abi.md
# §8); the vendor NEFF of testdata/neff; bad
# input. Plain, then under ASan/UBSan as above. neff_test forks its processes through the
# multi-process harness (capi-tests/mp/mp_harness.c), which bounds every job (60 s, then
# SIGKILL); `timeout` is only a last resort against a bug in the test.
neff_build() { echo "+ opennrt neff build $*"; "$lib/opennrt" neff build "$@"; }
neff_build --op all_reduce --ranks 2 --count 1000 --dtype fp32 -o "$out/neff_all_reduce_r2.neff"
neff_build --op all_reduce --ranks 3 --count 777 --dtype fp32 -o "$out/neff_all_reduce_r3.neff"
neff_build --op all_gather --ranks 2 --count 333 --dtype fp32 -o "$out/neff_all_gather_r2.neff"
neff_build --op all_to_all_v --ranks 3 --count 5 --dtype fp32 -o "$out/neff_all_to_all_v_r3.neff"
# Two NEFFs whose collective sequences differ (one trigger, two): rank 0 loads one, rank 1 the other.
neff_build --op all_reduce --ranks 2 --count 64 --dtype fp32 -o "$out/neff_mismatch_a.neff"
neff_build --op all_reduce --ranks 2 --count 64 --dtype fp32 --ops 2 -o "$out/neff_mismatch_b.neff"
neff_args=(
  "all_reduce:2:1000:$out/neff_all_reduce_r2.neff"
  "all_reduce:3:777:$out/neff_all_reduce_r3.neff"
  "all_gather:2:333:$out/neff_all_gather_r2.neff"
  "all_to_all_v:3:5:$out/neff_all_to_all_v_r3.neff"
  "mismatch:2:64:$out/neff_mismatch_a.neff,$out/neff_mismatch_b.neff"
)
if real_neff="$(testdata_file neff/matmul_small.neff "neff_test's real-NEFF checks")"; then
  neff_args=(--real "$real_neff" "${neff_args[@]}")
fi
neff_src=("$root/capi-tests/neff_test.c" "$root/capi-tests/mp/mp_harness.c")
cc "${CFLAGS[@]}" -pthread -o "$out/neff_test" "${neff_src[@]}" -L"$lib" -lnrt
echo "+ neff_test ${neff_args[*]}"
LD_LIBRARY_PATH="$lib" timeout -k 5 600 "$out/neff_test" "${neff_args[@]}"
cc "${CFLAGS[@]}" -pthread -g -fsanitize=address,undefined -fno-sanitize-recover=all \
  -o "$out/neff_test_asan" "${neff_src[@]}" -L"$lib" -lnrt
echo "+ neff_test under ASan/UBSan"
LD_LIBRARY_PATH="$lib" ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 timeout -k 5 600 "$out/neff_test_asan" "${neff_args[@]}"
echo "capi-tests: all C tests passed"
