use super::*;

/// A trigger fires for the one id it was armed with, and for none once disarmed; the highest
/// `u32` id is an id like any other, not "unarmed".
#[test]
fn trigger_fires_for_its_id_only() {
    let t = Trigger::unarmed();
    assert!(!(0..8).any(|g| t.fires_for(g)));
    assert!(!t.fires_for(u32::MAX));
    t.set(Some(5));
    assert!(t.fires_for(5));
    assert!(!t.fires_for(4) && !t.fires_for(6));
    t.set(Some(u32::MAX));
    assert!(t.fires_for(u32::MAX));
    t.set(None);
    assert!(!t.fires_for(5) && !t.fires_for(u32::MAX));
}
