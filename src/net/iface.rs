//! Which network interface a process uses to reach other hosts: `CCOM_SOCKET_IFNAME` or
//! `NCCL_SOCKET_IFNAME`, read as NCCL reads the latter (the vendor honours both names).
//!
//! A value is a comma-separated list of interface-name prefixes: `eth` matches `eth0`, `eth1`,
//! …; `=eth0` matches exactly `eth0`. A leading `^` turns the whole list into exclusions
//! (`^docker,lo`: any interface but those). Without a variable, the process uses the address
//! its bootstrap connection to the job's root goes out of (the route to the root decides).
//!
//! The chosen interface gives the address the network proxy's endpoint binds to
//! (`runtime::multi_process::proxy`): its first IPv4 address, else its first IPv6 address,
//! or, when the job's root is an IPv6 address, the other way round.

use std::ffi::CStr;
use std::net::IpAddr;

use crate::error::{Error, Result};

/// A parsed `*_SOCKET_IFNAME` value (module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfFilter {
    /// `^`: the names below are excluded, not selected.
    exclude: bool,
    /// Prefixes, or exact names when `exact`.
    names: Vec<(String, bool)>,
    /// The value as written (for messages).
    text: String,
}

impl IfFilter {
    /// Parse a value read from `var`; an empty list is an error naming the variable.
    pub fn parse(var: &str, value: &str) -> Result<IfFilter> {
        let v = value.trim();
        let (exclude, list) = match v.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, v),
        };
        let names: Vec<(String, bool)> = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| match n.strip_prefix('=') {
                Some(exact) => (exact.to_string(), true),
                None => (n.to_string(), false),
            })
            .collect();
        if names.is_empty() || names.iter().any(|(n, _)| n.is_empty()) {
            return Err(Error::bad_variable(
                var,
                value,
                "not a list of interface names or prefixes (e.g. eth, =eth0, ^docker,lo)",
            ));
        }
        Ok(IfFilter {
            exclude,
            names,
            text: v.to_string(),
        })
    }

    /// Whether interface `name` is one the filter allows.
    pub fn allows(&self, name: &str) -> bool {
        let listed = self.names.iter().any(|(n, exact)| match exact {
            true => name == n,
            false => name.starts_with(n.as_str()),
        });
        listed != self.exclude
    }

    /// The value as written.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Every (interface name, address) of this host, from `getifaddrs`, in its order.
pub fn addresses() -> Result<Vec<(String, IpAddr)>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(Error::failure(format!(
            "listing this host's network interfaces (getifaddrs): {}",
            std::io::Error::last_os_error()
        )));
    }
    let mut out = Vec::new();
    let mut at = head;
    while !at.is_null() {
        // SAFETY: a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*at };
        at = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: a NUL-terminated name owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_addr points to a sockaddr of the family it names.
        let ip = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sa = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::from(sa.sin_addr.s_addr.to_ne_bytes()))
                }
                libc::AF_INET6 => {
                    let sa = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::from(sa.sin6_addr.s6_addr))
                }
                _ => None,
            }
        };
        if let Some(ip) = ip {
            out.push((name, ip));
        }
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The address to use on the interfaces `filter` allows among `addrs` (module doc): IPv4
/// first unless `v6` (the root is an IPv6 address). IPv6 link-local addresses are skipped:
/// they need a scope that peers on other hosts cannot share.
pub fn pick(filter: &IfFilter, addrs: &[(String, IpAddr)], v6: bool) -> Option<(String, IpAddr)> {
    let usable = |(n, ip): &&(String, IpAddr)| {
        filter.allows(n)
            && match ip {
                IpAddr::V6(a) => (a.segments()[0] & 0xffc0) != 0xfe80,
                IpAddr::V4(_) => true,
            }
    };
    let of = |want_v6: bool| {
        addrs
            .iter()
            .filter(usable)
            .find(|(_, ip)| ip.is_ipv6() == want_v6)
            .cloned()
    };
    of(v6).or_else(|| of(!v6))
}

/// The address for this process's network endpoint under `filter`, or an error that lists
/// the interfaces there are.
pub fn address_for(var: &str, filter: &IfFilter, v6: bool) -> Result<IpAddr> {
    let all = addresses()?;
    match pick(filter, &all, v6) {
        Some((_, ip)) => Ok(ip),
        None => {
            let mut names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
            names.dedup();
            Err(Error::bad_variable(
                var,
                filter.text(),
                format_args!(
                    "no interface of this host matches it with an address (interfaces: {})",
                    names.join(", ")
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// The grammar of NCCL's NCCL_SOCKET_IFNAME (NCCL user guide, "Environment Variables").
    #[test]
    fn prefixes_exact_names_and_exclusions() {
        let f = IfFilter::parse("NCCL_SOCKET_IFNAME", "eth").unwrap();
        assert!(f.allows("eth0") && f.allows("eth1") && !f.allows("lo"));
        let f = IfFilter::parse("NCCL_SOCKET_IFNAME", "=eth0,=eth1").unwrap();
        assert!(f.allows("eth0") && f.allows("eth1") && !f.allows("eth10"));
        let f = IfFilter::parse("NCCL_SOCKET_IFNAME", "^docker,lo").unwrap();
        assert!(f.allows("eth0") && !f.allows("docker0") && !f.allows("lo"));
        let f = IfFilter::parse("NCCL_SOCKET_IFNAME", "^=docker0").unwrap();
        assert!(f.allows("docker1") && !f.allows("docker0"));
        for bad in ["", ",", "^", "=", "eth,="] {
            let e = IfFilter::parse("CCOM_SOCKET_IFNAME", bad).expect_err(bad);
            assert_eq!(
                e.fields().field.as_deref(),
                Some("CCOM_SOCKET_IFNAME"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_family_of_the_root_comes_first_and_link_local_never() {
        let addrs = vec![
            ("lo".to_string(), ip("127.0.0.1")),
            ("eth0".to_string(), ip("fe80::1")),
            ("eth0".to_string(), ip("10.231.0.2")),
            ("eth0".to_string(), ip("fd31:6e72:7400::2")),
        ];
        let f = IfFilter::parse("NCCL_SOCKET_IFNAME", "eth").unwrap();
        assert_eq!(pick(&f, &addrs, false).unwrap().1, ip("10.231.0.2"));
        assert_eq!(pick(&f, &addrs, true).unwrap().1, ip("fd31:6e72:7400::2"));
        let f = IfFilter::parse("NCCL_SOCKET_IFNAME", "=lo").unwrap();
        assert_eq!(
            pick(&f, &addrs, true).unwrap().1,
            ip("127.0.0.1"),
            "the other family"
        );
        let f = IfFilter::parse("NCCL_SOCKET_IFNAME", "ib").unwrap();
        assert_eq!(pick(&f, &addrs, false), None);
    }

    #[test]
    fn this_host_has_a_loopback_address() {
        let all = addresses().unwrap();
        assert!(all.iter().any(|(_, ip)| ip.is_loopback()), "{all:?}");
        let f = IfFilter::parse("NCCL_SOCKET_IFNAME", "=lo").unwrap();
        assert!(address_for("NCCL_SOCKET_IFNAME", &f, false)
            .unwrap()
            .is_loopback());
        let f = IfFilter::parse("NCCL_SOCKET_IFNAME", "=no-such-if9").unwrap();
        let e = address_for("NCCL_SOCKET_IFNAME", &f, false).unwrap_err();
        assert!(e.message().contains("interfaces: "), "{e}");
    }
}
