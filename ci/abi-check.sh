#!/usr/bin/env bash
# Check the identities of the built shared objects (docs/contract/abi.md §1.1, §1.3; design.md §2.3):
#  libnrt.so: SONAME libnrt.so.1; version definitions BASE libnrt.so.1 + NRT_2.0.0 + NRT_3.0.0;
#             exactly the names of shim/libnrt.exports, each at its node (nrta_* and only they
#             at NRT_3.0.0); no other defined dynamic symbol (no Rust or std leaks).
#  libncfw.so: exactly libncfw_get_image, libncfw_get_version, libncfw_ctx_log, unversioned,
#             and no version definitions.
# usage: ci/abi-check.sh [target/release]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/target/release}"
nrt="$dir/libnrt.so"; ncfw="$dir/libncfw.so"
fail() { echo "abi-check: FAIL: $*" >&2; exit 1; }
pass=0
ok() { echo "abi-check: ok - $*"; pass=$((pass + 1)); }

readelf -d "$nrt" | grep -q 'Library soname: \[libnrt.so.1\]' || fail "SONAME of $nrt is not libnrt.so.1"
ok "libnrt SONAME libnrt.so.1"
vd=$(readelf -V "$nrt" | sed -n '/.gnu.version_d/,/.gnu.version_r/p')
echo "$vd" | grep -q 'Flags: BASE.*Name: libnrt.so.1' || fail "no BASE version definition libnrt.so.1"
echo "$vd" | grep -q 'Name: NRT_2.0.0' || fail "no version definition NRT_2.0.0"
echo "$vd" | grep -q 'Name: NRT_3.0.0' || fail "no version definition NRT_3.0.0"
ok "version definitions BASE libnrt.so.1, NRT_2.0.0, NRT_3.0.0"

# Defined dynamic symbols, as "name@@node" (readelf -W keeps names whole).
defined=$(readelf --dyn-syms -W "$nrt" | awk '$7 != "UND" && $5 != "LOCAL" && ($4 == "FUNC" || $4 == "OBJECT" || $4 == "NOTYPE" || $4 == "IFUNC") {print $8}' | sort)
expected=$(grep -v '^#' "$root/shim/libnrt.exports" | awk 'NF {print $1 "@@" $2}' | sort)
want_n=$(echo "$expected" | grep -c .)
if [ "$defined" != "$expected" ]; then
  diff <(echo "$expected") <(echo "$defined") | sed 's/^/  /' >&2 || true
  fail "the dynamic symbols of libnrt.so differ from shim/libnrt.exports (< expected, > found)"
fi
ok "libnrt exports exactly the $want_n names of shim/libnrt.exports at their nodes"
bad3=$(echo "$defined" | grep '@@NRT_3.0.0' | grep -v '^nrta_' || true)
[ -z "$bad3" ] || fail "non-nrta symbols in NRT_3.0.0: $bad3"
bad2=$(echo "$defined" | grep '^nrta_' | grep -v '@@NRT_3.0.0' || true)
[ -z "$bad2" ] || fail "nrta symbols outside NRT_3.0.0: $bad2"
ok "nrta_* sit in NRT_3.0.0 and nothing else does"
leaks=$(readelf --dyn-syms -W "$nrt" | awk '$7 != "UND" {print $8}' | grep -E '^_(ZN|R)|rust_|__rdl|__rust' || true)
[ -z "$leaks" ] || fail "Rust/std symbols leak into .dynsym: $leaks"
ok "no Rust or std symbols in libnrt .dynsym"
if [ "$want_n" -ne 151 ]; then fail "shim/libnrt.exports lists $want_n names, expected 151 (145 of 2.31 + 4 newer + OpenNRT's nrt_cc_prepare / nrt_cc_schedule)"; fi
ok "151 exports (145 of runtime 2.31.24 + nrt_get_status_as_str + 2 nrta_event_register_* + nrt_tensor_get_lnc_index + nrt_cc_prepare / nrt_cc_schedule)"

nf=$(readelf --dyn-syms -W "$ncfw" | awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $5 != "LOCAL" && $4 != "SECTION" && $4 != "FILE" {print $8}' | sort | tr '\n' ' ')
[ "$nf" = "libncfw_ctx_log libncfw_get_image libncfw_get_version " ] || fail "libncfw.so exports: '$nf'"
ok "libncfw exports exactly the three unversioned libncfw_* names"
if readelf -V "$ncfw" | grep -q '.gnu.version_d'; then fail "libncfw.so has version definitions"; fi
ok "libncfw has no version definitions"
readelf -d "$ncfw" | grep -q 'Library soname: \[libncfw.so.2.31.1.0.cf13a49f\]' || fail "SONAME of $ncfw is not the vendor's libncfw.so.2.31.1.0.cf13a49f"
ok "libncfw SONAME libncfw.so.2.31.1.0.cf13a49f"
# The vendor's carrier needs libc only; Rust's std adds its unwinder and the TLS resolver
# (cdylib/ncfw/build.rs says why). Nothing else may appear.
needed=$(readelf -d "$ncfw" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
[ "$needed" = "ld-linux-x86-64.so.2 libc.so.6 libgcc_s.so.1 " ] || fail "libncfw.so needs '$needed'"
ok "libncfw needs libc.so.6 (+ libgcc_s.so.1, ld-linux-x86-64.so.2 from Rust's std: documented deviation)"
# libnrt loads libfabric with dlopen only when a collective first spans hosts (src/net/fabric.rs),
# as the vendor's libnrt loads its net plugin: a single-host job runs where libfabric is absent.
needed=$(readelf -d "$nrt" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
[ "$needed" = "ld-linux-x86-64.so.2 libc.so.6 libgcc_s.so.1 " ] || fail "libnrt.so needs '$needed'"
ok "libnrt needs only libc.so.6, libgcc_s.so.1 and ld-linux-x86-64.so.2 (no libfabric: dlopen'ed across hosts)"
echo "abi-check: $pass passed, 0 failed"
