//! Damaged and hostile NEFFs through the public loader, `opennrt::neff::Neff::parse`: every
//! one is refused with `NRT_INVALID` (or the header's own status) and an error that names the
//! member, the offset or key, and the rule; none panics, reads out of bounds or allocates from
//! a size the file states before checking it. Each `Neff::parse` here runs under
//! `catch_unwind`, so a panic fails the test naming the case.
//!
//! Where each rule comes from:
//! * the header (sizes, package version, feature bits, the hash under
//!   `NEURON_RT_VALIDATE_HASH`) and the tar payload (members, duplicates): docs/contract/abi.md
//!   §7.2;
//! * the members the descriptors name, a member present twice, the KELF's graphs: docs/neff.md
//!   §1.1;
//! * `def.json` (var kinds, dense `var_id`s, sizes up to 2^48, an output, replica groups,
//!   `src_target_pairs`, `num_streams` 0..=4): docs/neff.md §1.2;
//! * engine programs (64-byte slots, a 0xD9 followed by its 0xDA): docs/neff.md §1.3 and
//!   docs/contract/isa.md §9 rule 3;
//! * the gzip framing (a reader checks ID1, ID2, CM, FLG and the CRC-32/ISIZE trailer, and
//!   ignores MTIME, XFL and OS) is RFC 1952's; a tar ends with two zero blocks (POSIX ustar),
//!   so a payload cut at a member boundary is a truncation, not a shorter archive.
//!
//! The NEFFs are the builder's (`neff::build::build`, docs/neff.md §2) and, for broken member
//! lists, the generic writer `neff::build::container`; the real vendor NEFF of testdata is used
//! where it is present (a note says when it is not).

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use opennrt::isa::enums::Dtype;
use opennrt::neff::build::{build, container, trigger_program, BuildOp, BuildSpec, HeaderFields};
use opennrt::neff::{Neff, NeffHeader, ParseOptions, Payload, HEADER_SIZE};
use opennrt::{Error, ErrorKind, Result};
use serde_json::{json, Value};

/// The members `build` writes, in its order (docs/neff.md §2).
const ORDER: [&str; 7] = [
    "neff.json",
    "kelf-0.json",
    "info.json",
    "sg00/def.json",
    "sg00/SP.json",
    "sg00/SP.bin",
    "sg00/tensor_map.json",
];
const DEF: &str = "sg00/def.json";
const SP: &str = "sg00/SP.bin";
const KELF: &str = "kelf-0.json";

type Members = Vec<(String, Vec<u8>)>;

fn real() -> Option<Vec<u8>> {
    opennrt::testdata::read(
        opennrt::testdata::REAL_NEFF,
        "the real-NEFF part of this test",
    )
}

fn spec() -> BuildSpec {
    BuildSpec::new(BuildOp::AllReduce, 2, 16, Dtype::Fp32)
}

fn built() -> Vec<u8> {
    build(&spec()).unwrap()
}

/// The header `build` writes, for `container`.
fn header_fields(pkg_version: u64) -> HeaderFields {
    HeaderFields {
        pkg_version,
        name: spec().model_name(),
        ..HeaderFields::default()
    }
}

/// The members of the built NEFF, in the order `build` writes them.
fn members() -> Members {
    let f = built();
    let p = Payload::read(&NeffHeader::parse(&f).unwrap(), &f).unwrap();
    ORDER
        .iter()
        .map(|n| (n.to_string(), p.get(n).unwrap().to_vec()))
        .collect()
}

/// `members` packed as package `pkg` (1 raw tar, 2 gzip tar), the rest of the header as
/// `build` writes it.
fn pack(members: &[(String, Vec<u8>)], pkg: u64) -> Vec<u8> {
    container(members, &header_fields(pkg)).unwrap()
}

fn get<'a>(m: &'a Members, name: &str) -> &'a [u8] {
    &m.iter().find(|(n, _)| n == name).unwrap().1
}

fn with(mut m: Members, name: &str, data: impl Into<Vec<u8>>) -> Members {
    m.iter_mut().find(|(n, _)| n == name).unwrap().1 = data.into();
    m
}

fn without(mut m: Members, name: &str) -> Members {
    m.retain(|(n, _)| n != name);
    m
}

fn json_of(m: &Members, name: &str) -> Value {
    serde_json::from_slice(get(m, name)).unwrap()
}

/// The built NEFF with member `name`'s JSON changed by `f`.
fn edit_json(name: &str, f: impl FnOnce(&mut Value)) -> Vec<u8> {
    let m = members();
    let mut v = json_of(&m, name);
    f(&mut v);
    pack(&with(m, name, serde_json::to_vec_pretty(&v).unwrap()), 2)
}

fn put_u64(f: &mut [u8], off: usize, v: u64) {
    f[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

fn data_size(f: &[u8]) -> usize {
    u64::from_le_bytes(f[0x10..0x18].try_into().unwrap()) as usize
}

/// `Neff::parse` with a panic turned into a test failure that names `what`.
fn parse_opts(f: &[u8], opts: &ParseOptions, what: &dyn std::fmt::Display) -> Result<Neff> {
    match catch_unwind(AssertUnwindSafe(|| Neff::parse(f, opts))) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("?");
            panic!("Neff::parse panicked on {what}: {msg}")
        }
    }
}

fn parse(f: &[u8], what: &dyn std::fmt::Display) -> Result<Neff> {
    parse_opts(f, &ParseOptions::default(), what)
}

/// The refusal of `f`: `NRT_INVALID`, never a panic, never an acceptance.
fn refused(f: &[u8], what: &dyn std::fmt::Display) -> Error {
    match parse(f, what) {
        Ok(_) => panic!("{what}: accepted"),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Invalid, "{what}: {e:?}");
            assert_eq!(e.status_name(), "NRT_INVALID", "{what}: {e:?}");
            e
        }
    }
}

/// The refusal of `f`, which must name `member` as the error's field and in its message,
/// and mention each of `words` (a key, an offset, the rule).
fn refused_naming(f: &[u8], what: &str, member: &str, words: &[&str]) -> Error {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let e = refused(f, &what);
    assert_eq!(e.fields().field.as_deref(), Some(member), "{what}: {e:?}");
    assert!(e.message().contains(member), "{what}: {e:?}");
    for w in words {
        assert!(e.message().contains(w), "{what}: no {w:?} in {e:?}");
    }
    e
}

/// Where the gzip member of a package-2 payload ends (the real NEFF pads after it).
fn gzip_end(payload: &[u8]) -> usize {
    let mut d = flate2::bufread::GzDecoder::new(payload);
    std::io::copy(&mut d, &mut std::io::sink()).unwrap();
    payload.len() - d.into_inner().len()
}

/// A NEFF with `f`'s header and `payload` as its payload (`data_size` set to its length).
fn with_payload(f: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut g = f[..HEADER_SIZE].to_vec();
    put_u64(&mut g, 0x10, payload.len() as u64);
    g.extend_from_slice(payload);
    g
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Where each member's 512-byte ustar header starts in the raw tar of `members` (as
/// `container` writes it: header, data padded to 512; names here are short, so no pax
/// record), and where the end-of-archive marker starts.
fn tar_boundaries(members: &[(String, Vec<u8>)]) -> (Vec<usize>, usize) {
    let mut at = 0;
    let mut starts = Vec::new();
    for (name, data) in members {
        assert!(name.len() <= 100);
        starts.push(at);
        at += 512 + data.len().div_ceil(512) * 512;
    }
    (starts, at)
}

/// Set the ustar `size` field of the header block `h` (base-256 above 8 GiB, as GNU tar
/// writes it) and recompute the checksum.
fn set_tar_size(h: &mut [u8], size: u64) {
    let field = &mut h[124..136];
    if size < 1 << 33 {
        field.copy_from_slice(format!("{size:011o}\0").as_bytes());
    } else {
        field.fill(0);
        field[0] = 0x80;
        field[4..].copy_from_slice(&size.to_be_bytes());
    }
    fix_cksum(h);
}

fn fix_cksum(h: &mut [u8]) {
    h[148..156].fill(b' ');
    let sum: u32 = h[..512].iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

/// A ustar header block of a member `name` of `size` bytes and type `kind`.
fn tar_header(name: &str, size: u64, kind: u8) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = kind;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    set_tar_size(&mut h, size);
    h
}

/// The process's peak virtual size in KiB (Linux `/proc/self/status`), to see that a claimed
/// size was never reserved.
fn vm_peak_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find_map(|l| l.strip_prefix("VmPeak:"))?;
    line.trim().strip_suffix("kB")?.trim().parse().ok()
}

// ---------------------------------------------------------------------------------------------
// Sanity: the fixtures are what the rest assumes.

#[test]
fn the_fixtures_parse() {
    let f = built();
    assert_eq!(
        pack(&members(), 2),
        f,
        "container reproduces build byte for byte"
    );
    let n = parse(&f, &"the built NEFF").unwrap();
    assert_eq!(n.graphs.len(), 1);
    let raw = pack(&members(), 1);
    let r = parse(&raw, &"the built NEFF as a raw tar").unwrap();
    assert_eq!(r.graphs, n.graphs);
    if let Some(real) = real() {
        parse(&real, &"the real NEFF").unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Truncation (docs/contract/abi.md §7.2: the header's sizes must fit the file; the payload is
// a whole gzip stream holding a whole tar).

/// Every cut of `f` inside the header, and a sample of cuts in the payload (every `step`-th
/// byte), with `data_size` left as it was: the header refuses each, naming its field.
fn cuts_are_refused(f: &[u8], step: usize, what: &str) {
    // Checks the message on purpose: it says which check fired; no field carries that.
    for cut in (0..HEADER_SIZE).chain((HEADER_SIZE..f.len()).step_by(step)) {
        let e = refused(&f[..cut], &format_args!("{what} cut at {cut}"));
        let want = match cut {
            c if c < HEADER_SIZE => "header",
            HEADER_SIZE => "header_size",
            _ => "data_size",
        };
        assert_eq!(
            e.fields().field.as_deref(),
            Some(want),
            "{what} cut at {cut}: {e:?}"
        );
        assert!(e.message().contains(want), "{what} cut at {cut}: {e:?}");
    }
}

#[test]
fn a_file_cut_anywhere_is_refused_by_the_header() {
    cuts_are_refused(&built(), 1, "the built NEFF");
    cuts_are_refused(&pack(&members(), 1), 1, "the built raw-tar NEFF");
    if let Some(real) = real() {
        cuts_are_refused(&real, 1, "the real NEFF");
    }
}

/// `f` cut `cut` bytes into its payload, with `data_size` saying so: the payload reader
/// itself meets the truncation.
fn cut_payload(f: &[u8], cut: usize) -> Vec<u8> {
    let mut g = f[..HEADER_SIZE + cut].to_vec();
    put_u64(&mut g, 0x10, cut as u64);
    g
}

#[test]
fn a_gzip_stream_cut_anywhere_is_refused() {
    let f = built();
    let n = data_size(&f);
    assert_eq!(
        gzip_end(&f[HEADER_SIZE..]),
        n,
        "the builder writes no padding"
    );
    for cut in 0..n {
        refused(
            &cut_payload(&f, cut),
            &format_args!("the built NEFF's gzip stream cut at {cut} of {n}"),
        );
    }
    if let Some(real) = real() {
        // The real payload pads after its gzip member; cut inside the member: densely at both
        // ends, every 97th byte between.
        let end = gzip_end(&real[HEADER_SIZE..]);
        let cuts = (0..64)
            .chain((64..end - 64).step_by(97))
            .chain(end - 64..end);
        for cut in cuts {
            refused(
                &cut_payload(&real, cut),
                &format_args!("the real NEFF's gzip stream cut at {cut} of {end}"),
            );
        }
    }
}

#[test]
fn a_raw_tar_cut_at_every_member_boundary_is_refused() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let m = members();
    let f = pack(&m, 1);
    let (starts, end) = tar_boundaries(&m);
    assert_eq!(data_size(&f), end + 1024, "members, then two zero blocks");
    // Each member's header start (dropping it and every later one), the end of its header
    // (its data missing), one byte either side, the end of the last member (the end-of-archive
    // marker missing) and its first block alone.
    let mut cuts = Vec::new();
    for &s in starts.iter().chain([&end]) {
        cuts.extend([s.saturating_sub(1), s, s + 1, s + 511, s + 512, s + 513]);
    }
    cuts.retain(|&c| c < end + 1024);
    for cut in cuts {
        let what = format!("the raw tar cut at {cut} (members start at {starts:?}, end {end})");
        let e = refused(&cut_payload(&f, cut), &what);
        assert!(e.fields().field.is_some(), "{what}: {e:?}");
        if cut == end || cut == end + 512 {
            // Every member is whole: only the end-of-archive marker tells the cut.
            assert_eq!(
                e.fields().field.as_deref(),
                Some("payload"),
                "{what}: {e:?}"
            );
            assert!(e.message().contains("end-of-archive"), "{what}: {e:?}");
        }
        // Without data_size patched, the header refuses it.
        refused(&f[..HEADER_SIZE + cut], &what);
    }
    // The whole payload parses.
    parse(&cut_payload(&f, end + 1024), &"the whole raw tar").unwrap();
}

// ---------------------------------------------------------------------------------------------
// Flipped bytes in the gzip stream.

#[test]
fn flipped_gzip_bytes_never_panic_and_the_framing_is_checked() {
    let f = built();
    let orig = parse(&f, &"the built NEFF").unwrap();
    let n = data_size(&f);
    let mut accepted = 0;
    for i in 0..n {
        for pat in [0xFF, 0x01, 0x80, 0x10] {
            let mut g = f.clone();
            g[HEADER_SIZE + i] ^= pat;
            let what = format!("gzip byte {i} of {n} xor {pat:#04x}");
            let r = parse(&g, &what);
            if let Err(e) = &r {
                assert_eq!(e.status_name(), "NRT_INVALID", "{what}: {e:?}");
            }
            match i {
                // ID1, ID2, CM: not a deflate gzip stream.
                0..=2 => {
                    let e = r.expect_err(&what);
                    assert_eq!(
                        e.fields().field.as_deref(),
                        Some("payload"),
                        "{what}: {e:?}"
                    );
                }
                // FLG: a reserved bit set must be refused; other flags change the framing and
                // may or may not decode.
                3 if pat & 0xE0 != 0 => {
                    r.expect_err(&what);
                }
                3 => {}
                // MTIME, XFL, OS: informational, a reader ignores them.
                4..=9 => assert_eq!(r.as_ref().ok(), Some(&orig), "{what}: {r:?}"),
                // CRC-32 and ISIZE of the trailer.
                _ if i >= n - 8 => {
                    let e = r.expect_err(&what);
                    assert_eq!(
                        e.fields().field.as_deref(),
                        Some("payload"),
                        "{what}: {e:?}"
                    );
                }
                // The deflate data: any change of the output fails the CRC; a flip in bits the
                // decoder never reads cannot matter.
                _ => {
                    if let Ok(p) = &r {
                        accepted += 1;
                        assert_eq!(p, &orig, "{what}: accepted with another content");
                    }
                }
            }
        }
    }
    // The CRC-32 catches every flip that changes the output: what is accepted is the few
    // flips in bits the decoder does not read (the last byte's padding, unused code lengths).
    assert!(
        accepted * 50 < 4 * n,
        "{accepted} of {} deflate flips accepted",
        4 * n
    );
    eprintln!("{accepted} of {} deflate flips accepted", 4 * n);
    if let Some(real) = real() {
        let end = HEADER_SIZE + gzip_end(&real[HEADER_SIZE..]);
        for i in (HEADER_SIZE..end).step_by(37).chain(end - 8..end) {
            let mut g = real.clone();
            g[i] ^= 0xFF;
            let what = format!("the real NEFF's byte {i} xor 0xff");
            let r = parse(&g, &what);
            if i >= end - 8 {
                let e = r.expect_err(&what);
                assert_eq!(
                    e.fields().field.as_deref(),
                    Some("payload"),
                    "{what}: {e:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Bad JSON (docs/neff.md §1.1): the member, then "line … column …".

#[test]
fn bad_json_names_the_member_line_and_column() {
    let broken = b"{\n  \"graphs\": [\n    oops\n  ]\n}\n";
    for member in ["neff.json", KELF, DEF, "sg00/tensor_map.json"] {
        let f = pack(&with(members(), member, &broken[..]), 2);
        refused_naming(&f, member, member, &["line 3 column 5", "JSON"]);
        // Cut short: the end of the text.
        let m = members();
        let half = get(&m, member)[..get(&m, member).len() / 2].to_vec();
        let f = pack(&with(m, member, half), 1);
        refused_naming(&f, member, member, &["line ", " column "]);
        // Deeply nested: refused by the JSON reader's depth limit, not by a stack overflow.
        let deep = "[".repeat(100_000);
        let f = pack(&with(members(), member, deep), 2);
        refused_naming(&f, member, member, &["line 1 column"]);
    }
    if let Some(real) = real() {
        // The real NEFF's members repacked (sorted; directories are not members): it parses
        // as the original does, and a broken def.json is refused naming it.
        let p = Payload::read(&NeffHeader::parse(&real).unwrap(), &real).unwrap();
        let m: Members = p
            .names()
            .map(|n| (n.to_string(), p.get(n).unwrap().to_vec()))
            .collect();
        let h = HeaderFields {
            lnc_size: 2,
            ..HeaderFields::default()
        };
        let f = container(&m, &h).unwrap();
        let want = parse(&real, &"the real NEFF").unwrap().graphs;
        assert_eq!(parse(&f, &"the real NEFF repacked").unwrap().graphs, want);
        for member in ["sg01/def.json", "kelf-0.json", "sg00/tensor_map.json"] {
            let f = container(&with(m.clone(), member, &broken[..]), &h).unwrap();
            refused_naming(&f, member, member, &["line 3 column 5"]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Absurd sizes.

#[test]
fn absurd_var_sizes_are_refused() {
    // docs/neff.md §1.2: `size` is a u64 of at most 2^48.
    for (size, shown) in [
        (json!((1u64 << 48) + 1), "281474976710657"),
        (json!(u64::MAX), "18446744073709551615"),
    ] {
        let f = edit_json(DEF, |v| v["var"]["input0"]["size"] = size.clone());
        let e = refused_naming(
            &f,
            shown,
            DEF,
            &["var.input0.size", shown, "281474976710656"],
        );
        assert_eq!(e.fields().actual.as_deref(), Some(shown), "{e:?}");
    }
    // At the limit: accepted.
    let f = edit_json(DEF, |v| v["var"]["input0"]["size"] = json!(1u64 << 48));
    let n = parse(&f, &"size 2^48").unwrap();
    assert_eq!(n.inputs().next().unwrap().size, 1 << 48);
    // Not a u64 at all: 2^64 (a float to JSON), negative, fractional, a string.
    for bad in [
        serde_json::from_str::<Value>("18446744073709551616").unwrap(),
        json!(-1),
        json!(1.5),
        json!("64"),
    ] {
        let f = edit_json(DEF, |v| v["var"]["output0"]["size"] = bad.clone());
        refused_naming(
            &f,
            &bad.to_string(),
            DEF,
            &["var.output0.size", "unsigned integer"],
        );
    }
    // A var of a kind the runtime binds, with no size.
    let f = edit_json(DEF, |v| {
        v["var"]["input0"].as_object_mut().unwrap().remove("size");
    });
    refused_naming(&f, "no size", DEF, &["var.input0", "size"]);
}

#[test]
fn header_sizes_beyond_the_file_are_refused() {
    // docs/contract/abi.md §7.2: data_size ≤ file size − header_size, header_size < file size.
    let f = built();
    let n = data_size(&f) as u64;
    for (off, field, v) in [
        (0x10, "data_size", n + 1),
        (0x10, "data_size", u64::MAX),
        (0x10, "data_size", 0),
        (0x08, "header_size", f.len() as u64),
        (0x08, "header_size", u64::MAX),
        (0x08, "header_size", 1023),
        (0x00, "pkg_version", 3),
    ] {
        let mut g = f.clone();
        put_u64(&mut g, off, v);
        let what = format!("{field} {v}");
        let e = refused_naming(&g, &what, field, &[&format!("{off:#x}")]);
        assert_eq!(e.fields().step, Some(off as u64), "{what}: {e:?}");
        assert_eq!(
            e.fields().actual.as_deref(),
            Some(&*v.to_string()),
            "{what}"
        );
    }
    // The header's other statuses: a major version above 2, an unknown feature bit.
    for (off, field, v) in [
        (0x18, "neff_version_major", 3),
        (0x220, "feature_bits", 1 << 40),
    ] {
        let mut g = f.clone();
        put_u64(&mut g, off, v);
        let e = parse(&g, &field).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnsupportedNeffVersion, "{e:?}");
        assert_eq!(e.status_name(), "NRT_UNSUPPORTED_NEFF_VERSION");
        assert_eq!(e.fields().field.as_deref(), Some(field), "{e:?}");
    }
}

/// A NEFF whose payload is `tar`, gzipped for package 2 or raw for package 1, behind the
/// header `build` writes (`data_size` refitted; the hash no longer matches, which the default
/// options do not check).
fn repacked(tar: &[u8], pkg: u64) -> Vec<u8> {
    let base = pack(&members(), pkg);
    if pkg == 1 {
        with_payload(&base, tar)
    } else {
        with_payload(&base, &gzip(tar))
    }
}

/// The raw tar of the built members.
fn raw_tar() -> Vec<u8> {
    let f = pack(&members(), 1);
    f[HEADER_SIZE..].to_vec()
}

#[test]
fn a_tar_member_claiming_huge_sizes_is_refused_before_allocating() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    // docs/contract/abi.md §7.2: the payload is unpacked in memory; a member's size is checked
    // against what the payload can hold before anything is allocated for it.
    let m = members();
    let (starts, _) = tar_boundaries(&m);
    let sp = starts[ORDER.iter().position(|&n| n == SP).unwrap()];
    let t0 = Instant::now();
    // Above the unpacked bound's 1 GiB floor (2^62, 2^40, 2^33), and below it (1 GiB − 1 MiB,
    // 16 MiB) but far above what these few packed bytes can hold (a raw tar its own length,
    // deflate 1032 times its input): all refused before a byte is read for the member.
    for size in [
        u64::MAX >> 2,
        1 << 40,
        1 << 33,
        (1 << 30) - (1 << 20),
        1 << 24,
    ] {
        for pkg in [1, 2] {
            let mut tar = raw_tar();
            set_tar_size(&mut tar[sp..sp + 512], size);
            let f = repacked(&tar, pkg);
            let what = format!("{SP} claiming {size} bytes (package {pkg})");
            let t = Instant::now();
            let peak = vm_peak_kib();
            let e = refused_naming(&f, &what, SP, &[&size.to_string(), "bound"]);
            assert!(
                !e.message().contains("truncated"),
                "{what}: read first: {e:?}"
            );
            assert!(
                t.elapsed() < Duration::from_secs(1),
                "{what}: {:?}",
                t.elapsed()
            );
            if let (Some(a), Some(b)) = (peak, vm_peak_kib()) {
                // Nothing near the claimed size was reserved (VmPeak counts untouched
                // reservations too; the margin is for other tests' threads).
                assert!(b - a < 256 << 10, "{what}: VmPeak grew by {} KiB", b - a);
            }
        }
    }
    // A pax `size` record overrides the ustar size: the record's size is the one checked.
    let mut tar = raw_tar();
    let rec = "22 size=1099511627776\n";
    assert_eq!(rec.len(), 22, "a pax record's length counts itself");
    let mut pax = tar_header("PaxHeader", rec.len() as u64, b'x');
    pax.extend_from_slice(rec.as_bytes());
    pax.resize(1024, 0);
    tar.splice(sp..sp, pax);
    for pkg in [1, 2] {
        let what = format!("{SP} with a pax size of 2^40 (package {pkg})");
        refused_naming(&repacked(&tar, pkg), &what, SP, &["1099511627776"]);
    }
    // A pax header claiming 2^40 bytes itself: the archive ends inside it.
    let mut tar = raw_tar();
    tar.splice(sp..sp, tar_header("PaxHeader", 1 << 40, b'x'));
    for pkg in [1, 2] {
        let e = refused(&repacked(&tar, pkg), &"a pax header claiming 2^40 bytes");
        assert!(e.fields().field.is_some(), "{e:?}");
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

// ---------------------------------------------------------------------------------------------
// Members: duplicates, missing ones, the KELF (docs/neff.md §1.1).

#[test]
fn duplicate_and_missing_members_are_refused_naming_them() {
    // Present twice, also under another spelling of the same name.
    for second in [DEF, "./sg00/def.json"] {
        let mut m = members();
        let d = get(&m, DEF).to_vec();
        m.push((second.to_string(), d));
        refused_naming(&pack(&m, 2), second, DEF, &["twice"]);
    }
    // Named but missing: the member, and who named it.
    refused_naming(
        &pack(&without(members(), DEF), 2),
        "no def.json",
        DEF,
        &["missing", KELF],
    );
    refused_naming(
        &pack(&without(members(), SP), 2),
        "no SP.bin",
        SP,
        &["missing", DEF, "sp_instr"],
    );
    refused_naming(
        &pack(&without(members(), KELF), 2),
        "no kelf",
        KELF,
        &["missing", "neff.json"],
    );
    // neff.json names another KELF, which is missing.
    let f = edit_json("neff.json", |v| {
        v["nodes"][1]["attrs"]["kelf"] = json!("kelf-a.json")
    });
    refused_naming(
        &f,
        "neff.json names kelf-a.json",
        "kelf-a.json",
        &["missing", "neff.json"],
    );
    // Without neff.json the known KELF names are tried: kelf-0.json is found.
    parse(&pack(&without(members(), "neff.json"), 2), &"no neff.json").unwrap();
    // No neff.json and no KELF at all.
    let m = without(without(members(), "neff.json"), KELF);
    refused_naming(&pack(&m, 2), "no KELF", "neff.json", &["kelf-0.json"]);
    // A def.json naming an engine program outside its directory is just missing.
    let f = edit_json(DEF, |v| v["sp_instr"] = json!("../../etc/passwd"));
    refused_naming(
        &f,
        "sp_instr ../..",
        "sg00/../../etc/passwd",
        &["missing", "sp_instr"],
    );
}

#[test]
fn kelf_graph_lists_are_checked() {
    let f = edit_json(KELF, |v| v["graphs"] = json!([]));
    refused_naming(&f, "no graphs", KELF, &["graphs", "no graph"]);
    let f = edit_json(KELF, |v| {
        v.as_object_mut().unwrap().remove("graphs");
    });
    refused_naming(&f, "graphs missing", KELF, &["graphs"]);
    let f = edit_json(KELF, |v| v["graphs"] = json!({"sg00": "sg00/def.json"}));
    refused_naming(&f, "graphs not an array", KELF, &["graphs", "array"]);
    let f = edit_json(KELF, |v| {
        let g = v["graphs"][0].clone();
        v["graphs"] = json!([g.clone(), g]);
    });
    refused_naming(
        &f,
        "duplicate graph names",
        KELF,
        &["graphs[1]", "\"sg00\"", "twice"],
    );
    let f = edit_json(KELF, |v| {
        v["graphs"] = json!(vec![v["graphs"][0].clone(); 65])
    });
    refused_naming(&f, "65 graphs", KELF, &["graphs", "64"]);
    let f = edit_json(KELF, |v| v["graphs"][0] = json!({"name": "sg00"}));
    refused_naming(&f, "no definition", KELF, &["graphs[0]", "definition"]);
    let f = edit_json(KELF, |v| v["graphs"][0]["name"] = json!(7));
    refused_naming(&f, "name not a string", KELF, &["graphs[0]", "string"]);
}

// ---------------------------------------------------------------------------------------------
// def.json (docs/neff.md §1.2).

#[test]
fn def_json_rules_are_enforced_naming_the_key() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit, &[&str], Option<&str>); 17] = [
        (
            "var_id out of range",
            |v| v["var"]["input0"]["var_id"] = json!(7),
            &["var.input0.var_id", "out of range", "0..3"],
            Some("7"),
        ),
        (
            "var_id above the u16 space",
            |v| v["var"]["input0"]["var_id"] = json!(70_000),
            &["var.input0.var_id", "70000"],
            Some("70000"),
        ),
        (
            "duplicate var_id",
            |v| v["var"]["output0"]["var_id"] = json!(1),
            &["var_id 1", "input0"],
            None,
        ),
        (
            "unknown var type",
            |v| v["var"]["input0"]["type"] = json!("weird"),
            &["var.input0.type", "\"weird\""],
            None,
        ),
        (
            "no output var",
            |v| v["var"]["output0"]["type"] = json!("input"),
            &["var", "output"],
            None,
        ),
        (
            "var is not an object",
            |v| v["var"] = json!([1, 2]),
            &["var", "object"],
            None,
        ),
        (
            "device twice in a sub-group",
            |v| v["replica_groups"] = json!([[[0, 1, 1]]]),
            &["replica_groups[0][0][2]", "device 1", "twice"],
            None,
        ),
        (
            "device twice across sub-groups",
            |v| v["replica_groups"] = json!([[[0, 1], [2, 1]]]),
            &["replica_groups[0][1][1]", "device 1", "twice"],
            None,
        ),
        (
            "empty sub-group",
            |v| v["replica_groups"] = json!([[[0, 1], []]]),
            &["replica_groups[0][1]", "empty"],
            None,
        ),
        (
            "17 replica groups",
            |v| v["replica_groups"] = json!(vec![json!([[0, 1]]); 17]),
            &["replica_groups", "16"],
            None,
        ),
        (
            "device id 2^20",
            |v| v["replica_groups"] = json!([[[0, 1 << 20]]]),
            &["replica_groups[0][0][1]", "1048576"],
            Some("1048576"),
        ),
        (
            "pairs of a group that does not exist",
            |v| v["src_target_pairs"] = json!([{"group_id": 3, "pairs": [[0, 1]]}]),
            &[
                "src_target_pairs[0].group_id",
                "group 3",
                "1 replica groups",
            ],
            None,
        ),
        (
            "a pair of three",
            |v| v["src_target_pairs"] = json!([{"group_id": 0, "pairs": [[0, 1, 0]]}]),
            &["src_target_pairs[0].pairs[0]"],
            None,
        ),
        (
            "num_streams 5 (cc_streams)",
            |v| v["cc_streams"]["num_streams"] = json!(5),
            &["num_streams", "5", "4"],
            Some("5"),
        ),
        (
            "num_streams 5 (top level)",
            |v| v["num_streams"] = json!(5),
            &["num_streams", "5"],
            Some("5"),
        ),
        (
            "num_queues 65",
            |v| v["dma_queue"] = json!({"q": {"owner": "COLLECTIVES", "num_queues": 65}}),
            &["dma_queue.q.num_queues", "65"],
            Some("65"),
        ),
        (
            "sp_instr not a string",
            |v| v["sp_instr"] = json!(1),
            &["sp_instr", "string"],
            None,
        ),
    ];
    for (what, edit, words, actual) in cases {
        let e = refused_naming(&edit_json(DEF, edit), what, DEF, words);
        if let Some(a) = actual {
            assert_eq!(e.fields().actual.as_deref(), Some(a), "{what}: {e:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Engine programs (docs/neff.md §1.3; docs/contract/isa.md §9 rule 3).

#[test]
fn engine_programs_are_whole_slots_and_d9_has_its_da() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let trigger = trigger_program(&spec());
    assert_eq!(trigger.len(), 64);
    let mut d9 = vec![0u8; 64];
    d9[0] = 0xD9;
    d9[1] = 0x10;
    // The refusal names the member, the slot's byte offset, the rule; the field and step are
    // the decoder's.
    let program_refused = |prog: Vec<u8>, what: &str, field: &str, step: u64, words: &[&str]| {
        let f = pack(&with(members(), SP, prog), 2);
        let e = refused(&f, &what);
        assert!(e.message().contains(SP), "{what}: {e:?}");
        for w in words {
            assert!(e.message().contains(w), "{what}: no {w:?} in {e:?}");
        }
        assert_eq!(e.fields().field.as_deref(), Some(field), "{what}: {e:?}");
        assert_eq!(e.fields().step, Some(step), "{what}: {e:?}");
    };
    for tail in [1usize, 5, 63] {
        let mut p = trigger.clone();
        p.extend(std::iter::repeat_n(0xB1, tail));
        program_refused(
            p,
            &format!("a tail of {tail} bytes"),
            "word",
            64,
            &["0x40", "multiple of the 64-byte word"],
        );
    }
    program_refused(
        trigger[..63].to_vec(),
        "63 bytes",
        "word",
        0,
        &["0x0", "multiple"],
    );
    program_refused(
        [trigger.clone(), d9.clone()].concat(),
        "0xD9 last",
        "next_opcode",
        64,
        &["0x40", "0xDA", "rule 3"],
    );
    program_refused(
        [d9.clone(), trigger.clone()].concat(),
        "0xD9 then 0xC8",
        "next_opcode",
        0,
        &["slot 0", "0xDA", "rule 3"],
    );
    // An empty program is no program words, not an error.
    let n = parse(&pack(&with(members(), SP, Vec::new()), 2), &"empty SP.bin").unwrap();
    assert!(n.graphs[0].programs[0].stream.words.is_empty());
}

// ---------------------------------------------------------------------------------------------
// NEURON_RT_VALIDATE_HASH (docs/contract/abi.md §7.2: pkg 2 MD5 of the compressed payload in
// the first 16 bytes of `hash`, pkg 1 SHA-256 of the raw tar).

#[test]
fn the_hash_is_checked_when_asked() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let on = ParseOptions {
        validate_hash: true,
    };
    for pkg in [2, 1] {
        let f = pack(&members(), pkg);
        parse_opts(&f, &on, &format_args!("package {pkg}, hash on")).unwrap();
        // One payload byte changed, anywhere (header, deflate data, trailer; tar padding).
        let n = data_size(&f);
        for i in [0, 1, 10, n / 3, n / 2, n - 9, n - 1] {
            let mut g = f.clone();
            g[HEADER_SIZE + i] = g[HEADER_SIZE + i].wrapping_add(1);
            let what = format!("package {pkg}, payload byte {i} changed");
            let e = parse_opts(&g, &on, &what).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Invalid, "{what}: {e:?}");
            assert_eq!(e.status_name(), "NRT_INVALID");
            assert_eq!(e.fields().field.as_deref(), Some("hash"), "{what}: {e:?}");
            assert!(e.message().contains("hash at 0x0AC is"), "{what}: {e:?}");
            assert_ne!(e.fields().expected, e.fields().actual, "{what}");
        }
        // The hash field itself changed.
        let mut g = f.clone();
        g[0xAC] ^= 1;
        let e = parse_opts(&g, &on, &"hash byte 0 changed").unwrap_err();
        assert_eq!(e.fields().field.as_deref(), Some("hash"), "{e:?}");
        // With the check off (the default) the same file loads.
        parse(&g, &"hash changed, check off").unwrap();
    }
    if let Some(real) = real() {
        parse(&real, &"the real NEFF, hash off").unwrap();
        let e = parse_opts(&real, &on, &"the real NEFF, hash on").unwrap_err();
        assert_eq!(e.status_name(), "NRT_INVALID");
        assert_eq!(e.fields().field.as_deref(), Some("hash"), "{e:?}");
        assert_eq!(
            e.fields().expected.as_deref(),
            Some("efe9b3bc98163077b94c8bcdacf51f47"),
            "testdata README: the payload's MD5"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Random mutations: never a panic.

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One random mutation of `f`: flips, a cut, an insertion, a deletion, an overwrite, or a
/// header field set to an edge value; `data_size` re-fitted half the time so that the payload
/// reader, not the header check, meets the damage.
fn mutate(rng: &mut XorShift, f: &[u8], payload_only: bool) -> Vec<u8> {
    let mut g = f.to_vec();
    let lo = if payload_only { HEADER_SIZE } else { 0 };
    let pos = |rng: &mut XorShift, g: &Vec<u8>| lo + rng.below(g.len() - lo);
    for _ in 0..1 + rng.below(3) {
        match rng.below(7) {
            0 => {
                for _ in 0..1 + rng.below(4) {
                    let i = pos(rng, &g);
                    g[i] ^= 1 << rng.below(8);
                }
            }
            1 => {
                let i = pos(rng, &g);
                g.truncate(i.max(lo));
            }
            2 => {
                let i = pos(rng, &g);
                let n = 1 + rng.below(600);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                g.splice(i..i, bytes);
            }
            3 => {
                let i = pos(rng, &g);
                let n = rng.below(600).min(g.len() - i);
                g.drain(i..i + n);
            }
            4 => {
                let i = pos(rng, &g);
                let n = (1 + rng.below(32)).min(g.len() - i);
                for b in &mut g[i..i + n] {
                    *b = rng.next() as u8;
                }
            }
            5 if !payload_only && g.len() >= HEADER_SIZE => {
                let off = [0x00, 0x08, 0x10, 0x18, 0x220][rng.below(5)];
                let v = [0, 1, 2, 1023, 1024, u64::MAX, 1 << 63, rng.next()][rng.below(8)];
                put_u64(&mut g, off, v);
            }
            _ => {
                let i = pos(rng, &g);
                g[i] = [0, 0xFF, b'0', b'7', b'"', b'{', b'/'][rng.below(7)];
            }
        }
        if g.len() <= lo {
            break;
        }
    }
    if g.len() > HEADER_SIZE && rng.below(2) == 0 {
        let n = (g.len() - HEADER_SIZE) as u64;
        put_u64(&mut g, 0x10, n);
    }
    g
}

#[test]
fn random_mutations_never_panic() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let gz = built();
    let raw = pack(&members(), 1);
    let ops: Vec<BuildOp> = BuildOp::ALL.to_vec();
    let t0 = Instant::now();
    let mut outcomes = [0usize; 2];
    for case in 0..6000 {
        // A third on the gzip NEFF as a file, a third on the raw tar (the tar and JSON
        // readers see the damage), a third with one member's bytes mutated and repacked.
        let f = match case % 3 {
            0 => mutate(&mut rng, &gz, false),
            1 => mutate(&mut rng, &raw, true),
            _ => {
                let op = ops[rng.below(ops.len())];
                let f = build(&BuildSpec::new(op, 4, 8, Dtype::Fp32)).unwrap();
                let p = Payload::read(&NeffHeader::parse(&f).unwrap(), &f).unwrap();
                let mut m: Members = ORDER
                    .iter()
                    .map(|n| (n.to_string(), p.get(n).unwrap().to_vec()))
                    .collect();
                let k = rng.below(m.len());
                let mut data = std::mem::take(&mut m[k].1);
                if data.is_empty() {
                    data.push(0);
                }
                for _ in 0..1 + rng.below(3) {
                    let i = rng.below(data.len());
                    match rng.below(3) {
                        0 => data[i] ^= 1 << rng.below(8),
                        1 => data.truncate(i),
                        _ => data.insert(i, [b'"', b'[', b'}', b'9', b'-', 0][rng.below(6)]),
                    }
                    if data.is_empty() {
                        break;
                    }
                }
                m[k].1 = data;
                pack(&m, 1 + rng.below(2) as u64)
            }
        };
        let r = parse(&f, &format_args!("random case {case}"));
        outcomes[usize::from(r.is_ok())] += 1;
        if let Err(e) = r {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::Invalid | ErrorKind::UnsupportedNeffVersion
                ),
                "random case {case}: {e:?}"
            );
        }
    }
    eprintln!(
        "random mutations: {} refused, {} accepted, {:?}",
        outcomes[0],
        outcomes[1],
        t0.elapsed()
    );
    assert!(outcomes[0] > 1000);
}
