#!/usr/bin/env bash
# Remake the seed corpora in fuzz/corpus/ (fuzz/README.md, "Seeds"): NEFFs and what is cut out
# of them, then the seeds OpenNRT's own encoders write (fuzz/examples/seeds.rs). Needs the
# release CLI (`cargo build --release`), python3 and cargo (any toolchain).
set -euo pipefail
fuzz="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$fuzz")"
bin="$root/target/release/opennrt"
[ -x "$bin" ] || { echo "fuzz/seeds.sh: build the CLI first: cargo build --release" >&2; exit 1; }
corpus="$fuzz/corpus"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The NEFFs: the vendor's (testdata/neff/README.md) and what `opennrt neff build` writes.
cp "$root/testdata/neff/matmul_small.neff" "$tmp/vendor_matmul_small.neff"
b() { local name="$1"; shift; "$bin" neff build "$@" -o "$tmp/$name.neff" >/dev/null; }
b all_reduce_r2_bf16 --op all_reduce --ranks 2 --count 16 --dtype bf16
b all_to_all_v_r3_fp32 --op all_to_all_v --ranks 3 --count 8 --dtype fp32
b permute_r4_int8 --op permute --ranks 4 --count 4 --dtype int8 --pairs 0:1,1:0,2:3,3:2
b reduce_scatter_r2_lnc2_ops2 --op reduce_scatter --ranks 2 --count 8 --dtype fp16 --redop max --lnc 2 --ops 2
b all_gather_r8_fp8_ring --op all_gather --ranks 8 --count 4 --dtype fp8_e4m3 --alg ring
b send_recv_r2 --op send_recv --ranks 2 --count 4 --dtype bf16
b all_gather_v_r2 --op all_gather_v --ranks 2 --count 4 --dtype fp32

rm -rf "$corpus"
mkdir -p "$corpus"/{neff,neff_payload,def_json,isa_stream}
python3 - "$tmp" "$corpus" <<'PY'
import gzip, hashlib, io, json, os, struct, sys, tarfile
tmp, corpus = sys.argv[1], sys.argv[2]

def members(neff):
    """The payload's regular members, in order, and the raw tar."""
    pkg, hsize, dsize = struct.unpack_from("<QQQ", neff, 0)
    payload = neff[hsize:hsize + dsize]
    tar = gzip.decompress(payload) if pkg == 2 else payload
    t = tarfile.open(fileobj=io.BytesIO(tar))
    return [(m.name, t.extractfile(m).read()) for m in t.getmembers() if m.isfile()], tar

def tar_of(ms):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in ms:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()

def pad(tar):
    """The tar up to its end-of-archive marker (two zero blocks), without record padding."""
    at = 0
    while at + 512 <= len(tar) and tar[at:at + 512] != b"\0" * 512:
        size = int(tar[at + 124:at + 136].strip(b"\0 ") or b"0", 8)
        at += 512 + (size + 511) // 512 * 512
    return tar[:at] + b"\0" * 1024

def raw_neff(neff, tar):
    """The same NEFF as package 1: the raw tar, hashed with SHA-256."""
    h = bytearray(neff[:1024])
    struct.pack_into("<QQQ", h, 0, 1, 1024, len(tar))
    h[0xAC:0xAC + 32] = hashlib.sha256(tar).digest()
    return bytes(h) + tar

def put(sub, name, data):
    with open(os.path.join(corpus, sub, name), "wb") as f:
        f.write(data)

for fn in sorted(os.listdir(tmp)):
    stem = fn[:-5]
    neff = open(os.path.join(tmp, fn), "rb").read()
    ms, tar = members(neff)
    vendor = stem.startswith("vendor")
    put("neff", stem, neff)
    if stem in ("all_reduce_r2_bf16", "reduce_scatter_r2_lnc2_ops2"):
        put("neff", stem + "_pkg1", raw_neff(neff, pad(tar)))
    # neff_payload: mode byte (1: gzip, 0: raw) + the tar; the vendor's without its bulky
    # data and debug members, so that the seed stays small.
    small = [(n, d) for n, d in ms if len(d) <= 4096 and "debug" not in n]
    ptar = pad(tar) if not vendor else pad(tar_of(small))
    put("neff_payload", stem, (b"\x01" if vendor else b"\x00") + ptar)
    by = dict(ms)
    for n, d in ms:
        if n.endswith("def.json"):
            g = n.split("/")[0]
            put("def_json", f"{stem}_{g}", d)
            for k, v in json.loads(d).items():
                if k.endswith("_instr"):
                    put("isa_stream", f"{stem}_{g}_{k[:-6]}", by[f"{g}/{v}"])
PY

# Seeds written by OpenNRT's encoders: wire messages, CTRL SPAD tables, environments, nccom-test files.
(cd "$fuzz" && cargo run --quiet --release --example seeds -- "$corpus")
# Identical seeds (the two graphs of an LNC-2 NEFF, equal programs) are kept once.
find "$corpus" -type f -print0 | xargs -0 md5sum | sort | awk 'seen[$1]++ {print $2}' | xargs -r rm -f
du -sh "$corpus"; for d in "$corpus"/*/; do echo "$(ls "$d" | wc -l) $(basename "$d")"; done
