use super::*;

#[test]
fn parses_vendor_spellings() {
    assert_eq!(Level::parse("error"), Some(Level::Error));
    assert_eq!(Level::parse("WARNING"), Some(Level::Warning));
    assert_eq!(Level::parse("warn"), Some(Level::Warning));
    assert_eq!(Level::parse(" Info "), Some(Level::Info));
    assert_eq!(Level::parse("DEBUG"), Some(Level::Debug));
    assert_eq!(Level::parse("trace"), Some(Level::Trace));
    assert_eq!(Level::parse("verbose"), None);
    assert!(Level::Error < Level::Trace);
}
