use super::*;

#[test]
fn statuses_name_the_call() {
    // Checks the message a user reads, on purpose.
    assert_eq!(ok(nrt_status::NRT_SUCCESS, "x"), Ok(()));
    let e = ok(nrt_status::NRT_FAILURE, "nrt_execute (iteration 1)").unwrap_err();
    assert!(
        e.starts_with("nrt_execute (iteration 1): NRT_FAILURE"),
        "{e}"
    );
}

#[test]
fn a_failed_check_dumps_three_tensors() {
    let dir = std::env::temp_dir().join(format!("nccom_test_dump_{}", std::process::id()));
    let got = dump(&dir, 3, &[1, 2], &[3], &[4]).unwrap();
    assert!(got.ends_with("rank3_{input,output,golden}.bin"), "{got}");
    assert_eq!(std::fs::read(dir.join("rank3_input.bin")).unwrap(), [1, 2]);
    assert_eq!(std::fs::read(dir.join("rank3_golden.bin")).unwrap(), [4]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_jobs_exit_2() {
    assert_eq!(main(&[]), 2);
    assert_eq!(main(&["{".to_string()]), 2);
}
