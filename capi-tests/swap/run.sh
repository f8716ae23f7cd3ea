#!/usr/bin/env bash
# The library swap: a program linked against a stand-in "vendor" libnrt.so.1 runs on OpenNRT
# through shim/opennrt-run, unchanged (docs/contract/abi.md §1.1).
#
#   bash capi-tests/swap/run.sh [lib-dir]     (lib-dir: OpenNRT's libraries, default target/release)
#
# 1. Build the stand-in libnrt.so.1 (SONAME libnrt.so.1, version nodes NRT_2.0.0/NRT_3.0.0,
#    every symbol aborts) in a temporary directory, and link swap_prog against it with -lnrt,
#    once with DT_RUNPATH pointing at the stand-in (how clients find /opt/aws/neuron/lib) and
#    once with the older DT_RPATH.
# 2. Check with readelf/ldd that the program needs libnrt.so.1 and the two version nodes.
# 3. Run it directly: it must reach the stand-in and abort (expected non-zero).
# 4. Run it under shim/opennrt-run (LD_LIBRARY_PATH beats RUNPATH) and under
#    shim/opennrt-run --preload (LD_PRELOAD also beats RPATH): both must pass and print
#    OpenNRT's version string. A program that dlopens the stand-in by absolute path
#    (swap_dlopen.c) reaches the stand-in even under opennrt-run, and OpenNRT under --preload
#    (the dlopen interposer, cdylib/preload).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
lib="${1:-$root/target/release}"
lib="$(cd "$lib" && pwd)"
here="$root/capi-tests/swap"
say() { printf 'capi-tests/swap: %s\n' "$*"; }
run() { echo "+ $*"; "$@"; }
fail() { say "FAIL: $*" >&2; exit 1; }

for tool in gcc readelf ldd; do
  command -v "$tool" >/dev/null || fail "$tool is required but not installed"
done
"$root/shim/links.sh" "$lib" >/dev/null

tmp="$(mktemp -d "${TMPDIR:-/tmp}/opennrt-swap.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
stand_in="$tmp/vendor-lib"
mkdir -p "$stand_in"

say "1. stand-in libnrt.so.1 and the program linked against it (in $tmp)"
run gcc -std=c11 -Wall -Wextra -Werror -shared -fPIC -o "$stand_in/libnrt.so.1" \
  -Wl,-soname,libnrt.so.1 -Wl,--version-script="$here/stand_in_libnrt.map" \
  "$here/stand_in_libnrt.c"
ln -s libnrt.so.1 "$stand_in/libnrt.so"
CFLAGS=(-std=c11 -Wall -Wextra -Werror -I"$root/include")
run gcc "${CFLAGS[@]}" -o "$tmp/prog_runpath" "$here/swap_prog.c" -pthread \
  -L"$stand_in" -lnrt -Wl,--enable-new-dtags,-rpath,"$stand_in"
run gcc "${CFLAGS[@]}" -o "$tmp/prog_rpath" "$here/swap_prog.c" -pthread \
  -L"$stand_in" -lnrt -Wl,--disable-new-dtags,-rpath,"$stand_in"
run gcc "${CFLAGS[@]}" -o "$tmp/prog_dlopen" "$here/swap_dlopen.c" -ldl

say "2. what the program needs"
for prog in prog_runpath prog_rpath; do
  readelf -d "$tmp/$prog" | grep -q 'NEEDED.*\[libnrt\.so\.1\]' || fail "$prog: no DT_NEEDED libnrt.so.1"
  vr="$(readelf -V "$tmp/$prog")"
  grep -q 'File: libnrt.so.1' <<<"$vr" || fail "$prog: no version requirement on libnrt.so.1"
  for node in NRT_2.0.0 NRT_3.0.0; do
    grep -q "Name: $node" <<<"$vr" || fail "$prog does not require $node"
  done
done
readelf -d "$tmp/prog_runpath" | grep -E 'NEEDED.*libnrt|RUNPATH'
readelf -d "$tmp/prog_rpath" | grep -E 'RPATH'
readelf -V "$tmp/prog_runpath" | grep -A3 'File: libnrt.so.1'
echo "+ ldd prog_runpath"
ldd "$tmp/prog_runpath" | grep libnrt
grep -q "libnrt.so.1 => $stand_in/libnrt.so.1" <(ldd "$tmp/prog_runpath") || fail "ldd: not the stand-in"
echo "+ shim/opennrt-run --lib-dir $lib -- ldd prog_runpath"
"$root/shim/opennrt-run" --lib-dir "$lib" -- ldd "$tmp/prog_runpath" | grep libnrt
grep -q "libnrt.so.1 => $lib/libnrt.so.1" <("$root/shim/opennrt-run" --lib-dir "$lib" -- ldd "$tmp/prog_runpath") \
  || fail "ldd under opennrt-run does not resolve libnrt.so.1 to $lib"

expect_stand_in() { # name, then the command: it must die in the stand-in
  local name="$1" rc=0; shift
  echo "+ $*"
  { "$@" >"$tmp/out" 2>"$tmp/err"; } 2>/dev/null || rc=$?   # (no shell "Aborted" line)
  cat "$tmp/err"
  [ "$rc" -ne 0 ] || fail "$name ran to success on the stand-in"
  grep -q 'stand-in libnrt.so.1: nrt_init called' "$tmp/err" || fail "$name did not die in the stand-in (rc $rc)"
  say "$name exited with $rc in the stand-in, as expected"
}
say "3. run directly: the stand-in must be reached and abort"
expect_stand_in prog_runpath "$tmp/prog_runpath"
expect_stand_in prog_rpath "$tmp/prog_rpath"
say "   and DT_RPATH beats LD_LIBRARY_PATH, so without --preload the RPATH program still gets it:"
expect_stand_in "opennrt-run (RPATH program, no --preload)" \
  "$root/shim/opennrt-run" --lib-dir "$lib" -- "$tmp/prog_rpath"

say "   a program that dlopens the stand-in by absolute path gets it, also under opennrt-run:"
expect_stand_in "prog_dlopen (absolute path)" "$tmp/prog_dlopen" "$stand_in/libnrt.so.1"
expect_stand_in "opennrt-run (absolute-path dlopen, no --preload)" \
  "$root/shim/opennrt-run" --lib-dir "$lib" -- "$tmp/prog_dlopen" "$stand_in/libnrt.so.1"

say "4. the same binaries on OpenNRT"
check_pass() { # name, then the command
  local name="$1"; shift
  echo "+ $*"
  if ! "$@" >"$tmp/out" 2>"$tmp/err"; then
    cat "$tmp/out" "$tmp/err"
    fail "$name failed"
  fi
  cat "$tmp/out"
  grep -q '^runtime: libnrt version .*OpenNRT' "$tmp/out" || fail "$name: version string is not OpenNRT's"
  grep -q 'every element right' "$tmp/out" || fail "$name: no result line"
}
check_pass "opennrt-run (RUNPATH program)" "$root/shim/opennrt-run" --lib-dir "$lib" -- "$tmp/prog_runpath"
check_pass "opennrt-run --preload (RUNPATH program)" "$root/shim/opennrt-run" --preload --lib-dir "$lib" -- "$tmp/prog_runpath"
check_pass "opennrt-run --preload (RPATH program)" "$root/shim/opennrt-run" --preload --lib-dir "$lib" -- "$tmp/prog_rpath"
echo "+ shim/opennrt-run --preload -- prog_dlopen $stand_in/libnrt.so.1"
OPENNRT_PRELOAD_VERBOSE=1 "$root/shim/opennrt-run" --preload --lib-dir "$lib" -- \
  "$tmp/prog_dlopen" "$stand_in/libnrt.so.1" >"$tmp/out" 2>"$tmp/err" \
  || { cat "$tmp/out" "$tmp/err"; fail "prog_dlopen under --preload failed"; }
cat "$tmp/out" "$tmp/err"
grep -q '^runtime: libnrt version .*OpenNRT' "$tmp/out" || fail "prog_dlopen under --preload: not OpenNRT"
grep -qF "opennrt-preload: dlopen($stand_in/libnrt.so.1) -> $lib/libnrt.so.1" "$tmp/err" \
  || fail "prog_dlopen under --preload: the interposer did not report the redirect"
say "the swap works: one binary, linked against the stand-in, ran on OpenNRT; so did an absolute-path dlopen"
