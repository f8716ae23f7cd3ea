#!/usr/bin/env bash
# Give the libraries that cargo built the file names the vendor's clients look for.
#
# cargo names the library file libnrt.so (its SONAME is already libnrt.so.1). Programs linked
# against the vendor library, and clients that dlopen("libnrt.so.1"), need that file name too:
#   <dir>/libnrt.so.1 -> libnrt.so      (the runtime name; DT_NEEDED of linked programs)
#   <dir>/libnrt.so                     (the dev link; -lnrt and ctypes.CDLL("libnrt.so"))
#   <dir>/libncfw.so                    (the name libnrt dlopens; found through RUNPATH=$ORIGIN)
# Usage: shim/links.sh [target/release]
set -euo pipefail
dir=${1:-"$(cd "$(dirname "$0")/.." && pwd)/target/release"}
for f in libnrt.so libncfw.so; do
  [ -f "$dir/$f" ] || { echo "shim/links.sh: $dir/$f not found; run cargo build --release first" >&2; exit 1; }
done
ln -sfn libnrt.so "$dir/libnrt.so.1"
echo "$dir/libnrt.so.1 -> libnrt.so"
