use super::*;
use std::ptr::{null, null_mut};

fn filled() -> ncfw_image_t {
    let r = ncfw_ram_image_t {
        ram_image: 0x5A5A as *const c_void,
        ram_image_size: 0xA5A5,
    };
    ncfw_image_t { iram: r, dram: r }
}

#[test]
fn version_is_two() {
    assert_eq!(libncfw_get_version(), 2);
}

/// docs/contract/carrier.md §1.5: NULL `out` → 22 before the key test; unknown key → 2, `out` untouched.
#[test]
fn get_image_check_order() {
    // SAFETY: NULL and valid out-pointers are both allowed inputs.
    unsafe {
        assert_eq!(libncfw_get_image(12, null_mut()), NCFW_EINVAL);
        assert_eq!(libncfw_get_image(36, null_mut()), NCFW_EINVAL);
        for bad in [0, 4, 6, 13, 36, u32::MAX] {
            let mut o = filled();
            assert_eq!(libncfw_get_image(bad, &mut o), NCFW_ENOENT, "key {bad}");
            assert_eq!(o.iram.ram_image as usize, 0x5A5A);
            assert_eq!(o.dram.ram_image_size, 0xA5A5);
        }
        for (key, dram) in [(5, 0x36C0), (12, 0x4E00), (20, 0x4E00), (28, 0x4E00)] {
            let mut o = filled();
            assert_eq!(libncfw_get_image(key, &mut o), NCFW_OK);
            assert_eq!(o.dram.ram_image_size, dram);
            assert!(o.iram.ram_image_size > 0 && o.iram.ram_image_size >> 32 == 0);
            let (iram, dram) = image_for(Arch::from_id(key).unwrap());
            assert_eq!(o.iram.ram_image, iram.as_ptr().cast());
            assert_eq!(o.dram.ram_image, dram.as_ptr().cast());
        }
    }
}

/// docs/contract/carrier.md §1.6: unknown arch → 22 without touching the buffer; NULL arguments → 22.
#[test]
fn ctx_log_check_order() {
    let ctx = crate::ncfw::sample_context(Arch::V3);
    let mut buf = vec![0x55u8; LOG_BUF_SIZE];
    let bp = buf.as_mut_ptr().cast::<c_char>();
    let name = c"m".as_ptr();
    // SAFETY: the pointers are valid or NULL as each case intends; the buffer is 1 MiB.
    unsafe {
        assert_eq!(
            libncfw_ctx_log(ctx.as_ptr().cast(), bp, name, 36),
            NCFW_EINVAL
        );
        assert_eq!(libncfw_ctx_log(null(), null_mut(), null(), 0), NCFW_EINVAL);
        assert!(buf.iter().all(|&b| b == 0x55));
        assert_eq!(libncfw_ctx_log(null(), bp, name, 12), NCFW_EINVAL);
        assert_eq!(
            libncfw_ctx_log(ctx.as_ptr().cast(), null_mut(), name, 12),
            NCFW_EINVAL
        );
        assert_eq!(
            libncfw_ctx_log(ctx.as_ptr().cast(), bp, null(), 12),
            NCFW_EINVAL
        );
        assert!(buf.iter().all(|&b| b == 0x55));
        assert_eq!(libncfw_ctx_log(ctx.as_ptr().cast(), bp, name, 12), NCFW_OK);
    }
    assert!(buf.starts_with(b"{\n  \"model_name\": \"m\",\n"));
    assert_eq!(buf[LOG_BUF_SIZE - 1], 0, "memset of the whole 1 MiB");
}

/// A model name longer than 1 MiB truncates: 28, NUL-terminated, the flag is per call.
#[test]
fn ctx_log_truncation_is_28_and_per_call() {
    let ctx = crate::ncfw::sample_context(Arch::V2);
    let mut long = vec![b'x'; LOG_BUF_SIZE + 10];
    long.push(0);
    let mut buf = vec![0u8; LOG_BUF_SIZE];
    let bp = buf.as_mut_ptr().cast::<c_char>();
    // SAFETY: valid pointers; `long` is NUL-terminated; the buffer is 1 MiB.
    unsafe {
        assert_eq!(
            libncfw_ctx_log(ctx.as_ptr().cast(), bp, long.as_ptr().cast(), 5),
            NCFW_ENOSPC
        );
        assert_eq!(buf[LOG_BUF_SIZE - 1], 0);
        assert_eq!(buf[LOG_BUF_SIZE - 2], b'x');
        assert_eq!(
            libncfw_ctx_log(ctx.as_ptr().cast(), bp, c"ok".as_ptr(), 5),
            NCFW_OK
        );
    }
}
