//! The device runs and dumps with the carrier `nrt_init` loaded (docs/contract/carrier.md §1.2):
//! the stand-in carrier `capi-tests/standin/standin_ncfw.c` forwards to OpenNRT's libncfw.so,
//! marks every `ctx_log` dump with `"stand_in_carrier": 1`, and (with STANDIN_NCFW_NO_RING=1)
//! hands out an image without the RING handler. Through it, a stuck machine's dump carries
//! the mark, and a ring program is refused at load; OpenNRT's built-in copies do neither.
//! One test in this binary: it sets process-wide variables and initialises the runtime.

#[path = "common/hang_ctx.rs"]
mod hang_ctx;

use std::path::{Path, PathBuf};

use opennrt::error::ErrorKind;

/// The stand-in, compiled into `dir`.
fn build_standin(root: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("libncfw_standin.so");
    let st = std::process::Command::new("cc")
        .args(["-O2", "-std=c11", "-Wall", "-Werror", "-shared", "-fPIC"])
        .arg(format!("-I{}", root.join("include").display()))
        .arg("-o")
        .arg(&out)
        .arg(root.join("capi-tests/standin/standin_ncfw.c"))
        .arg("-ldl")
        .status()
        .expect("a C compiler (cc) builds the stand-in carrier");
    assert!(st.success(), "building the stand-in carrier failed");
    out
}

#[test]
fn the_loaded_carrier_supplies_the_image_and_the_dump() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // target/<profile>/deps/<this test> → target/<profile>/libncfw.so (ci/test.sh builds it).
    let exe = std::env::current_exe().unwrap();
    let real = exe.parent().unwrap().parent().unwrap().join("libncfw.so");
    assert!(
        real.is_file(),
        "{} is missing: run `cargo build --release --workspace` first",
        real.display()
    );
    let dir = std::env::temp_dir().join(format!("opennrt-standin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let standin = build_standin(root, &dir);
    std::env::set_var("OPENNRT_NCFW_PATH", &standin);
    std::env::set_var("STANDIN_NCFW_REAL", &real);

    // The dump of a stuck TOP_SP comes from the carrier's libncfw_ctx_log.
    let (mut m, _) = hang_ctx::loaded(None, true);
    let (t_chip, t_topsp) = {
        assert_eq!(m.run().unwrap_err().kind(), ErrorKind::CollectivesHang);
        m.stuck_topsps()[0]
    };
    let builtin = m.ctx_log(t_chip, t_topsp).unwrap();
    assert!(
        !builtin.contains("stand_in_carrier"),
        "no carrier yet: OpenNRT's own writer"
    );
    std::env::set_var("STANDIN_NCFW_NO_RING", "0");
    opennrt::runtime::process::init(0, "", "").unwrap();
    let (mut m, _) = hang_ctx::loaded(None, true);
    assert_eq!(m.run().unwrap_err().kind(), ErrorKind::CollectivesHang);
    let (chip, topsp) = m.stuck_topsps()[0];
    let dump = m.ctx_log(chip, topsp).unwrap();
    assert!(
        dump.starts_with("{\"stand_in_carrier\": 1, "),
        "{}",
        &dump[..200.min(dump.len())]
    );
    // Apart from the mark, the stand-in forwards: the same text as OpenNRT's writer (`%p`
    // fields print host addresses of the image buffer, which differ between calls).
    let same = hang_ctx::without_host_addrs(&dump.replacen("\"stand_in_carrier\": 1, ", "", 1))
        == hang_ctx::without_host_addrs(&builtin);
    assert!(
        same,
        "the stand-in's dump differs from OpenNRT's beyond its mark"
    );
    opennrt::runtime::process::close(|| {});

    // The image comes from the carrier's libncfw_get_image: without a RING handler in its
    // dispatch table, the ring program is refused at load.
    std::env::set_var("STANDIN_NCFW_NO_RING", "1");
    opennrt::runtime::process::init(0, "", "").unwrap();
    let e = hang_ctx::try_loaded(None, false).unwrap_err();
    assert_eq!(e.status_name(), "NRT_INVALID", "{e}");
    assert_eq!(e.fields().field.as_deref(), Some("algo_type"), "{e:?}");
    assert_eq!(
        e.fields().actual.as_deref(),
        Some("0"),
        "RING, the ring program's pattern"
    );
    opennrt::runtime::process::close(|| {});

    // After nrt_close the device is back on OpenNRT's own images: the program loads and runs.
    let (mut m, _) = hang_ctx::loaded(None, false);
    m.run().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
