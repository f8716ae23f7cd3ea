//! A hang-dump directory (`OPENNRT_HANG_DUMP=<dir>`, which `nrt_init` applies through
//! `device::settings`): the hang report itself writes the stuck TOP_SPs' CC-context dumps and
//! names the files (src/device/cc_context.rs module doc). This binary holds a single test,
//! because it changes a process-wide device setting.

#[path = "common/hang_ctx.rs"]
mod hang_ctx;

use hang_ctx::{json, loaded};
use opennrt::device::settings::{apply, DeviceSettings};
use opennrt::error::ErrorKind;

#[test]
fn hang_report_writes_and_names_the_dumps() {
    let base = std::env::temp_dir().join(format!("opennrt-hang-env-{}", std::process::id()));
    let dir = base.join("dumps");
    let dump_to = |d: Option<std::path::PathBuf>| {
        apply(&DeviceSettings {
            hang_dump_dir: d,
            ..DeviceSettings::default()
        })
    };
    dump_to(Some(dir.clone()));
    let (mut m, _) = loaded(None, true);
    let e = m.run().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CollectivesHang);
    let report = e.to_string();
    let stuck = m.stuck_topsps();
    assert!(!stuck.is_empty());
    for (chip, t) in stuck {
        let f = dir.join(format!("chip{chip}_topsp{t}.json"));
        let named = format!("CC context dump: {}", f.display());
        assert!(report.contains(&named), "{named:?} not in {report}");
        let j = json(&std::fs::read_to_string(&f).unwrap());
        assert_ne!(j["ncfw_ctx_top_sp"]["algo"]["hierarchical"]["run_state"], 3);
        assert!(f.with_extension("ctx").exists());
    }

    // A directory that cannot be created: the report says so instead of naming files.
    std::fs::write(base.join("file"), b"x").unwrap();
    dump_to(Some(base.join("file").join("sub")));
    let (mut m, _) = loaded(None, true);
    let report = m.run().unwrap_err().to_string();
    dump_to(None);
    assert!(report.contains("CC context dumps not written"), "{report}");
    std::fs::remove_dir_all(&base).unwrap();
}
