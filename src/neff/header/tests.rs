//! The header of the real NEFF in testdata against what its README says (read there with
//! Python's struct, not with OpenNRT), and every refusal rule on damaged copies of it.

use super::*;

/// The vendor NEFF; tests that need it return early, saying so, when it is missing.
fn real() -> Option<Vec<u8>> {
    crate::testdata::read(
        crate::testdata::REAL_NEFF,
        "a header test of the vendor NEFF",
    )
}

fn put_u64(f: &mut [u8], off: usize, v: u64) {
    f[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn the_real_neff_header_reads_as_its_readme_says() {
    let Some(f) = real() else { return };
    assert_eq!(f.len(), 62_464);
    let h = NeffHeader::parse(&f).unwrap();
    assert_eq!(h.pkg_version, PkgVersion::GzipTar);
    assert_eq!((h.header_size, h.data_size), (1024, 61_440));
    assert_eq!((h.version_major, h.version_minor), (2, 0));
    assert_eq!(h.num_tpb, 1);
    assert_eq!(h.name, "file.neff");
    assert_eq!(h.requested_tpb_count, 1);
    assert_eq!(h.tpb_per_node[0], 1);
    assert!(h.tpb_per_node[1..].iter().all(|&t| t == 0));
    assert_eq!(h.feature_bits, 0x20_9c00);
    assert_eq!(h.lnc_size, 2);
    assert_eq!(
        &h.hash[..16],
        &[
            0xbc, 0xb3, 0xe9, 0xef, 0x77, 0x30, 0x16, 0x98, 0xcd, 0x8b, 0x4c, 0xb9, 0x47, 0x1f,
            0xf5, 0xac
        ]
    );
    let p = h.payload(&f);
    assert_eq!(p.len(), 61_440);
    assert_eq!(&p[..2], &[0x1f, 0x8b], "a gzip stream");
}

#[test]
fn a_truncated_header_is_refused_at_every_length() {
    let Some(f) = real() else { return };
    for n in [0, 1, 8, 0x227, 0x3FF] {
        let e = NeffHeader::parse(&f[..n]).unwrap_err();
        assert_eq!(e.status_name(), "NRT_INVALID");
        assert_eq!(e.fields().field.as_deref(), Some("header"), "{n}");
    }
    // The header alone, with no payload: header_size is not below the file size.
    let e = NeffHeader::parse(&f[..HEADER_SIZE]).unwrap_err();
    assert_eq!(e.fields().field.as_deref(), Some("header_size"));
    // Cut inside the payload: data_size no longer fits.
    let e = NeffHeader::parse(&f[..HEADER_SIZE + 100]).unwrap_err();
    assert_eq!(e.fields().field.as_deref(), Some("data_size"));
    assert_eq!(e.fields().actual.as_deref(), Some("61440"));
}

#[test]
fn each_rule_names_its_field_offset_and_status() {
    let Some(f) = real() else { return };
    let case = |off: usize, v: u64| {
        let mut g = f.clone();
        put_u64(&mut g, off, v);
        NeffHeader::parse(&g).unwrap_err()
    };
    for (off, v, field, status) in [
        (0x000, 0, "pkg_version", "NRT_INVALID"),
        (0x000, 3, "pkg_version", "NRT_INVALID"),
        (0x008, 0x3FF, "header_size", "NRT_INVALID"),
        (0x008, u64::MAX, "header_size", "NRT_INVALID"),
        (0x010, 0, "data_size", "NRT_INVALID"),
        (0x010, u64::MAX, "data_size", "NRT_INVALID"),
        (
            0x018,
            3,
            "neff_version_major",
            "NRT_UNSUPPORTED_NEFF_VERSION",
        ),
        (
            0x220,
            1 << 27,
            "feature_bits",
            "NRT_UNSUPPORTED_NEFF_VERSION",
        ),
        (0x228, 3, "lnc_size", "NRT_INVALID"),
    ] {
        let e = case(off, v);
        assert_eq!(e.status_name(), status, "{field}: {e}");
        assert_eq!(e.fields().field.as_deref(), Some(field), "{e:?}");
        assert_eq!(e.fields().step, Some(off as u64), "the offset: {e:?}");
    }
    // Bits 0..=26 are known features: bit 26 passes.
    let mut g = f.clone();
    put_u64(&mut g, 0x220, 1 << 26);
    assert!(NeffHeader::parse(&g).is_ok());
    // A name that is not UTF-8.
    let mut g = f.clone();
    g[0x0DC] = 0xFF;
    let e = NeffHeader::parse(&g).unwrap_err();
    assert_eq!(e.fields().field.as_deref(), Some("name"));
}
