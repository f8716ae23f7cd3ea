use super::*;

#[test]
fn line_states_count_percent_and_item() {
    let l = line("verify", 3, 12, Duration::from_secs(5), "all_reduce ring 4");
    assert_eq!(l, "verify [3/12]  25% 5s: all_reduce ring 4");
}

#[test]
fn line_never_exceeds_a_terminal_row() {
    let l = line("perf", 1, 2, Duration::ZERO, &"x".repeat(500));
    assert_eq!(l.chars().count(), 100);
}

#[test]
fn an_empty_total_is_zero_percent() {
    assert!(line("perf", 0, 0, Duration::ZERO, "").contains("  0%"));
}

#[test]
fn an_off_line_is_never_drawn() {
    let mut p = Progress::off("nccom-test", 4);
    assert!(!p.is_on());
    p.update(1, "size 8 B");
    p.finish();
    assert_eq!(p.shown, 0);
}
