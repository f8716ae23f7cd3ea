use super::*;
use crate::error::ErrorKind;

#[test]
fn root_comm_id_forms() {
    assert_eq!(
        parse_root_comm_id("localhost:62182").unwrap(),
        ("localhost".to_string(), 62182)
    );
    assert_eq!(
        parse_root_comm_id("[::1]:5000").unwrap(),
        ("::1".to_string(), 5000)
    );
    assert_eq!(
        parse_root_comm_id("10.0.0.1:1").unwrap(),
        ("10.0.0.1".to_string(), 1)
    );
    for bad in [
        "",
        "host",
        ":80",
        "host:0",
        "host:70000",
        "::1:80",
        "[::1:80",
        "h:x",
    ] {
        assert!(parse_root_comm_id(bad).is_err(), "{bad:?} accepted");
    }
}

/// Process-global state: one test exercises the whole life of a world.
#[test]
fn join_rules() {
    let _s = crate::runtime::state::tests::SERIAL.lock();
    reset();
    join(Slot::HostCc, 0, 0, 4, 8, None).unwrap();
    join(Slot::HostCc, 0, 0, 4, 8, None).unwrap(); // idempotent
    let e = join(Slot::HostCc, 1, 1, 5, 8, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(e.fields().field.as_deref(), Some("count"), "{e:?}");
    assert_eq!(e.fields().expected.as_deref(), Some("4"), "{e:?}");
    assert_eq!(e.fields().actual.as_deref(), Some("5"), "{e:?}");
    assert!(join(Slot::HostCc, 0, 1, 4, 8, None).is_err()); // other id, same core
    assert!(join(Slot::HostCc, 1, 0, 4, 8, None).is_err()); // id held by core 0
    assert!(join(Slot::HostCc, 8, 1, 4, 8, None).is_err()); // not our core
    assert!(join(Slot::HostCc, 1, 4, 4, 8, None).is_err()); // id outside the world
    assert!(join(Slot::HostCc, 1, 1, 4, 8, Some("nohost".into())).is_err());
    join(Slot::HostCc, 1, 1, 4, 8, None).unwrap();
    check_member(Slot::HostCc, 1, 1, 4).unwrap();
    assert!(check_member(Slot::HostCc, 1, 2, 4).is_err());
    assert!(check_member(Slot::HostCc, 2, 2, 4).is_err());
    assert!(check_member(Slot::Neff, 0, 0, 4).is_err());
    assert_eq!(world(Slot::HostCc).unwrap().vnc_of(1), Some(1));
    reset();
    assert!(world(Slot::HostCc).is_none());
}
