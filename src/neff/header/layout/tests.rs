use super::*;

/// The fields tile the header from byte 0 with no gap or overlap, as `neff_header_t` does, and
/// end inside it.
#[test]
fn fields_tile_the_start_of_the_header() {
    let mut at = 0;
    for f in FIELDS {
        assert_eq!(f.off, at, "{}", f.name);
        at = f.range().end;
    }
    assert_eq!(at, 0x22C);
    assert!(at <= HEADER.len);
}
