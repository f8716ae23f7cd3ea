//! Tests of the firmware image format (docs/contract/carrier.md §2.3 for the size contract).

use super::*;
use crate::error::ErrorKind;

fn reseal(b: &mut [u8]) {
    let s = fnv1a(b);
    b[CHECKSUM_OFF..CHECKSUM_OFF + 4].copy_from_slice(&s.to_le_bytes());
}

#[test]
fn every_shipped_image_parses() {
    for arch in Arch::ALL {
        let (iram, dram) = image_for(arch);
        let fw = FirmwareImage::parse(iram, dram).unwrap_or_else(|e| panic!("{arch:?}: {e}"));
        assert_eq!(fw.arch, arch);
        assert_eq!(fw.generation, arch.codename());
        assert_eq!(fw.format_version, 1);
        assert_eq!(fw.dram.ctx_size, arch.layout().min_size);
        assert_eq!(fw.dram.ctx_offset, DRAM_CTX_OFFSET);
        assert_eq!(fw.dispatch.len(), 7);
        assert_eq!(fw.handler_for_algo_type(0), Handler::Ring);
        assert_eq!(fw.handler_for_algo_type(1), Handler::Mesh);
        assert_eq!(fw.handler_for_algo_type(2), Handler::Fault);
        assert_eq!(
            fw.lookup(DispatchClass::Barrier, 1),
            Some(Handler::DeviceBarrier)
        );
        assert_eq!(
            fw.lookup(DispatchClass::Barrier, 0),
            Some(Handler::HostBarrier)
        );
        assert_eq!(fw.lookup(DispatchClass::Chain, 0), Some(Handler::ChainNext));
        assert_eq!(
            fw.lookup(DispatchClass::Chain, 1),
            Some(Handler::BlockSwitch)
        );
        let notice = &iram[HEADER_SIZE + 7 * ENTRY_SIZE..][..NOTICE.len()];
        assert_eq!(notice, NOTICE);
    }
}

/// docs/contract/carrier.md §2.3: DRAM sizes equal to the vendor's; both non-zero; u32-sized; 20
/// and 28 share one DRAM image.
#[test]
fn sizes_follow_the_spec() {
    let want = [
        (Arch::V2, 0x36C0),
        (Arch::V3, 0x4E00),
        (Arch::V4, 0x4E00),
        (Arch::V4Plus, 0x4E00),
    ];
    for (arch, dram_size) in want {
        let (iram, dram) = image_for(arch);
        assert_eq!(dram.len(), dram_size, "{arch:?}");
        assert!(!iram.is_empty());
        assert!(u32::try_from(iram.len()).is_ok() && u32::try_from(dram.len()).is_ok());
    }
    assert_eq!(
        image_for(Arch::V4).1.as_ptr(),
        image_for(Arch::V4Plus).1.as_ptr()
    );
    assert_ne!(
        image_for(Arch::V4).0.as_ptr(),
        image_for(Arch::V4Plus).0.as_ptr()
    );
}

/// Which image and which header offset an error is about.
fn at(e: &Error) -> (Option<&str>, Option<u64>) {
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    (e.fields().field.as_deref(), e.fields().step)
}

#[test]
fn corrupt_magic_is_rejected() {
    // Checks the message on purpose: a bad magic and a short image are both at offset 0.
    let (iram, dram) = image_for(Arch::V3);
    let mut i = iram.to_vec();
    i[0] ^= 0xFF;
    let e = FirmwareImage::parse(&i, dram).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(at(&e), (Some("IRAM"), Some(0)), "{e:?}");
    assert!(e.message().contains("magic"), "{e}");
    let mut d = dram.to_vec();
    d[3] = b'X';
    let e = FirmwareImage::parse(iram, &d).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(at(&e), (Some("DRAM"), Some(0)), "{e:?}");
    assert!(e.message().contains("magic"), "{e}");
}

#[test]
fn unsupported_version_is_rejected() {
    let (iram, dram) = image_for(Arch::V2);
    let mut i = iram.to_vec();
    i[0x08] = 2;
    reseal(&mut i);
    let e = FirmwareImage::parse(&i, dram).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(at(&e), (Some("IRAM"), Some(0x08)), "{e:?}");
}

#[test]
fn checksum_and_geometry_are_checked() {
    // Checks the message on purpose where two checks share an offset (size or family; short).
    let (iram, dram) = image_for(Arch::V3);
    let mut i = iram.to_vec();
    i[0x100] ^= 1;
    let e = FirmwareImage::parse(&i, dram).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(at(&e), (Some("IRAM"), Some(CHECKSUM_OFF as u64)), "{e:?}");
    // A v2 DRAM template does not serve a v3 IRAM.
    let e = FirmwareImage::parse(iram, image_for(Arch::V2).1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(
        e.message().contains("DRAM size") || e.message().contains("family"),
        "{e}"
    );
    // Unknown handler id.
    let mut i = iram.to_vec();
    i[HEADER_SIZE + 2] = 0x77;
    reseal(&mut i);
    let e = FirmwareImage::parse(&i, dram).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(
        at(&e),
        (Some("IRAM"), Some((HEADER_SIZE + 2) as u64)),
        "{e:?}"
    );
    // Truncated image.
    let e = FirmwareImage::parse(&iram[..0x20], dram).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(at(&e), (Some("IRAM"), Some(0)), "{e:?}");
    assert!(e.message().contains("shorter"), "{e}");
    // Wrong arch id.
    let mut i = iram.to_vec();
    i[0x0C] = 36;
    reseal(&mut i);
    let e = FirmwareImage::parse(&i, dram).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(at(&e), (Some("IRAM"), Some(0x0C)), "{e:?}");
}
