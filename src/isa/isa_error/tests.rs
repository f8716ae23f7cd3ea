use super::*;
use crate::error::ErrorKind;

/// The message format the brief and docs/design.md §4 ask for.
#[test]
fn display_names_opcode_field_offset_value_rule() {
    // Checks the message a user reads, on purpose.
    let e = IsaError::new(
        0xC8,
        "update_mode",
        6,
        0x03,
        "collective pseudo-ops must use update mode SEM_INC_COMPLETE (0x13)",
        rule::RULE_1,
    );
    assert_eq!(
        e.to_string(),
        "opcode 0xC8: field update_mode at byte 6 = 0x03: collective pseudo-ops must use \
             update mode SEM_INC_COMPLETE (0x13) (docs/contract/isa.md §9 rule 1)"
    );
    let e = e.at(0x80).at(0x40);
    assert_eq!(e.word_at, Some(0x80));
    assert!(e.to_string().starts_with("word at byte 0x80: opcode 0xC8"));
    let core: Error = e.into();
    assert_eq!(core.kind(), ErrorKind::Invalid);
    assert!(core.message().contains("rule 1"));
}
