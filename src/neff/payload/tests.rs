//! The real NEFF's members against its README (listed there with Python's tarfile), and every
//! refusal on damaged or crafted payloads.

use super::*;
use crate::neff::header::HEADER_SIZE;

/// The vendor NEFF; tests that need it return early, saying so, when it is missing.
fn real() -> Option<Vec<u8>> {
    crate::testdata::read(
        crate::testdata::REAL_NEFF,
        "a payload test of the vendor NEFF",
    )
}

/// A package-1 (raw tar) NEFF around `tar`.
fn raw_neff(tar: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; HEADER_SIZE];
    f[0..8].copy_from_slice(&1u64.to_le_bytes());
    f[8..16].copy_from_slice(&(HEADER_SIZE as u64).to_le_bytes());
    f[16..24].copy_from_slice(&(tar.len() as u64).to_le_bytes());
    f[24..32].copy_from_slice(&2u64.to_le_bytes());
    f.extend_from_slice(tar);
    f
}

/// A tar of `(name, bytes)` members; names are written raw (hostile ones included).
fn tar_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in members {
        let mut h = tar::Header::new_ustar();
        h.as_mut_bytes()[..name.len()].copy_from_slice(name.as_bytes());
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

fn read(f: &[u8]) -> Result<Payload> {
    Payload::read(&NeffHeader::parse(f)?, f)
}

#[test]
fn the_real_neff_unpacks_to_the_members_its_readme_lists() {
    let Some(f) = real() else { return };
    let p = read(&f).unwrap();
    for name in [
        "info.json",
        "kelf-0.json",
        "neff.json",
        "hlo_stats.json",
        "sg00/def.json",
        "sg01/def.json",
    ] {
        let names: Vec<&str> = p.names().collect();
        assert!(p.get(name).is_some(), "{name} missing: {names:?}");
    }
    let kelf: serde_json::Value = serde_json::from_slice(p.get("kelf-0.json").unwrap()).unwrap();
    assert_eq!(kelf["graphs"].as_array().unwrap().len(), 2);
    // Engine programs are whole 64-byte slots.
    let bins: Vec<&str> = p
        .names()
        .filter(|n| n.starts_with("sg00/") && n.ends_with(".bin"))
        .collect();
    assert!(!bins.is_empty());
    for n in p
        .names()
        .filter(|n| n.starts_with("sg00/PE") && n.ends_with(".bin"))
    {
        assert_eq!(p.get(n).unwrap().len() % 64, 0, "{n}");
    }
}

#[test]
fn damaged_payloads_are_refused_naming_what_broke() {
    let Some(f) = real() else { return };
    // Bad gzip: the stream's first bytes flipped.
    let mut g = f.clone();
    for b in &mut g[HEADER_SIZE..HEADER_SIZE + 64] {
        *b ^= 0x5A;
    }
    let e = read(&g).unwrap_err();
    assert_eq!(e.status_name(), "NRT_INVALID");
    assert_eq!(e.fields().field.as_deref(), Some("payload"), "{e}");
    // Truncated gzip (data_size shortened to match).
    let mut g = f[..HEADER_SIZE + 20_000].to_vec();
    g[16..24].copy_from_slice(&20_000u64.to_le_bytes());
    assert_eq!(read(&g).unwrap_err().status_name(), "NRT_INVALID");
}

#[test]
fn crafted_tars_are_refused_by_rule() {
    let ok = raw_neff(&tar_of(&[("./neff.json", b"{}"), ("sg00/def.json", b"{}")]));
    let p = read(&ok).unwrap();
    assert_eq!(
        p.names().collect::<Vec<_>>(),
        ["neff.json", "sg00/def.json"]
    );
    for (members, field) in [
        (
            vec![("neff.json", &b"{}"[..]), ("./neff.json", b"[]")],
            "neff.json",
        ),
        (vec![("../etc/passwd", &b"x"[..])], "../etc/passwd"),
        (vec![("/abs", &b"x"[..])], "/abs"),
        (vec![("a//b", &b"x"[..])], "a//b"),
    ] {
        let e = read(&raw_neff(&tar_of(&members))).unwrap_err();
        assert_eq!(e.status_name(), "NRT_INVALID", "{e}");
        assert_eq!(e.fields().field.as_deref(), Some(field), "{e}");
    }
    // A member whose header claims more than the whole bound is refused before allocation.
    let mut t = tar_of(&[("big.bin", b"")]);
    let mut h = tar::Header::from_byte_slice(&t[..512]).clone();
    h.set_size(64 << 30);
    h.set_cksum();
    t[..512].copy_from_slice(h.as_bytes());
    let e = read(&raw_neff(&t)).unwrap_err();
    assert_eq!(e.fields().field.as_deref(), Some("big.bin"), "{e}");
    // Debug members are dropped; an empty payload is refused.
    let two = tar_of(&[("a.json", b"1"), ("sg00/x-wavegraph-bin.json", b"2")]);
    let p = read(&raw_neff(&two)).unwrap();
    assert_eq!(p.names().collect::<Vec<_>>(), ["a.json"]);
    assert!(read(&raw_neff(&[0u8; 1024])).is_err());
}

#[test]
fn the_unpacked_bound() {
    assert_eq!(unpacked_limit(0), 1 << 30);
    assert_eq!(unpacked_limit(61_440), 1 << 30);
    assert_eq!(unpacked_limit(1 << 30), 16 << 30);
}
