use super::*;

#[test]
fn create_open_share_and_unlink() {
    let port = "1-test";
    let pid = std::process::id();
    let name = format!("{}test", prefix(port, pid));
    unlink(&name);
    let a = Segment::create(&name, 4096).unwrap();
    assert!(Segment::create(&name, 4096).is_err(), "exclusive create");
    let b = Segment::open(&name, 4096).unwrap();
    a.write(100, b"hello").unwrap();
    let mut got = [0u8; 5];
    b.read(100, &mut got).unwrap();
    assert_eq!(&got, b"hello");
    assert!(a.write(4095, b"xy").is_err());
    assert_eq!(list(&prefix(port, pid)), vec![name.clone()]);
    b.unlink();
    assert!(list(&prefix(port, pid)).is_empty());
    // Still mapped on both sides after the unlink.
    b.write(0, b"z").unwrap();
    a.read(0, &mut got[..1]).unwrap();
    assert_eq!(got[0], b'z');
    let n2 = format!("{}left", prefix(port, pid));
    let _c = Segment::create(&n2, 10).unwrap();
    assert_eq!(unlink_pid(port, pid), 1);
    assert!(Segment::open(&n2, 10).is_err());
}

/// More than /dev/shm holds is an error naming /dev/shm, never a SIGBUS later; nothing
/// stays behind.
#[test]
fn an_oversized_segment_is_an_error_not_a_crash() {
    // Checks the message a user reads, on purpose.
    let name = format!("{}huge", prefix("1-test", std::process::id()));
    let e = Segment::create(&name, 1 << 50).unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::Resource, "{e}");
    assert!(
        e.message().contains("/dev/shm") || e.message().contains("ftruncate"),
        "{e}"
    );
    assert!(list(&name).is_empty());
}

/// Two roots on one port of two addresses get two tags; the port leads.
#[test]
fn job_tags_differ_per_address() {
    let a = job_tag(&"127.0.0.1:5000".parse().unwrap());
    let b = job_tag(&"127.0.0.2:5000".parse().unwrap());
    let c = job_tag(&"[::1]:5000".parse().unwrap());
    assert!(a.starts_with("5000-") && b.starts_with("5000-") && c.starts_with("5000-"));
    assert!(a != b && b != c && a != c, "{a} {b} {c}");
    assert_eq!(a, job_tag(&"127.0.0.1:5000".parse().unwrap()));
    assert_eq!(a.len(), "5000-".len() + 8);
}
