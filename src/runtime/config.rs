//! Configuration from the environment (spec/nrt-abi.md §5.2, §5.10), read once by `nrt_init`
//! (and on demand by the core-count getters, which are legal before `nrt_init`).
//!
//! The simulated instance comes from `OPENNRT_INSTANCE_TYPE`, else from the vendor's own
//! simulation variable `NEURON_RT_FAKE_INSTANCE_TYPE`, else defaults to `trn1.32xlarge`
//! (OpenNRT's choice: 16 devices × 2 NeuronCore-v2, LNC 1, 32 logical cores; documented in the
//! README). The instance table lives with the lowering's topology model
//! (`crate::lower::topology`, design.md §2.8) and is re-exported here.

use crate::error::{Error, Result};
pub use crate::lower::topology::{InstanceType, DEFAULT_INSTANCE, INSTANCE_TYPES};

/// What `nrt_init` derives from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The simulated instance.
    pub instance: InstanceType,
    /// Physical cores per logical core.
    pub lnc: u32,
    /// First logical core owned by this process (absolute).
    pub first_core: u32,
    /// Number of logical cores owned by this process.
    pub visible_cores: u32,
    /// `NEURON_RT_ROOT_COMM_ID` as read (validated when a world is created).
    pub root_comm_id: Option<String>,
    /// `NEURON_RT_EXEC_TIMEOUT` as read (parsed by [`Config::exec_timeout`]).
    pub exec_timeout_raw: Option<String>,
    /// `OPENNRT_SHARED_DEVICE=1`: every multi-rank collective on the shared device segments
    /// (`runtime::multi_process::run`), even without a job.
    pub shared_device: bool,
    /// `OPENNRT_TEST_KILL_IN_RUN`: the global id whose process kills itself inside its first
    /// shared-device collective (fault injection for tests).
    pub kill_in_run: Option<u32>,
    /// `OPENNRT_RESIDENT_BUDGET`: most bytes the resident machines of the process's prepared
    /// collectives keep loaded between runs (`runtime::resident`); see [`resident_budget`].
    pub resident_budget: u64,
}

impl Config {
    /// Logical cores on the whole instance.
    pub fn total_cores(&self) -> u32 {
        self.instance.devices * self.instance.cores_per_device / self.lnc
    }

    /// The execution timeout as read at `nrt_init` (see [`exec_timeout`]).
    pub fn exec_timeout(&self) -> Result<Option<std::time::Duration>> {
        exec_timeout(|_| self.exec_timeout_raw.clone())
    }

    /// Read the process environment.
    pub fn from_env() -> Result<Config> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Derive the configuration from a variable lookup (testable without touching the
    /// process environment).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let inst_name = get("OPENNRT_INSTANCE_TYPE")
            .or_else(|| get("NEURON_RT_FAKE_INSTANCE_TYPE"))
            .unwrap_or_else(|| DEFAULT_INSTANCE.to_string());
        let instance = *INSTANCE_TYPES
            .iter()
            .find(|t| t.name == inst_name.trim())
            .ok_or_else(|| {
                let names: Vec<_> = INSTANCE_TYPES.iter().map(|t| t.name).collect();
                Error::invalid(format!(
                    "unknown instance type {inst_name:?} (OPENNRT_INSTANCE_TYPE / NEURON_RT_FAKE_INSTANCE_TYPE); known: {}",
                    names.join(", ")
                ))
            })?;
        let lnc_var =
            get("NEURON_LOGICAL_NC_CONFIG").or_else(|| get("NEURON_RT_VIRTUAL_CORE_SIZE"));
        let lnc = match lnc_var {
            None => instance.default_lnc,
            Some(v) => match v.trim() {
                "1" => 1,
                "2" if instance.lnc2_allowed => 2,
                "2" => 1, // forced to 1 on v2 silicon (spec §5.10)
                other => {
                    return Err(Error::invalid(format!(
                        "NEURON_LOGICAL_NC_CONFIG={other:?}: the logical core size must be 1 or 2"
                    )))
                }
            },
        };
        let total = instance.devices * instance.cores_per_device / lnc;
        let (first_core, visible_cores) = if let Some(v) = get("NEURON_RT_VISIBLE_CORES") {
            let cores = parse_core_list(&v)?;
            let (lo, hi) = (cores[0], *cores.last().unwrap());
            if hi >= total {
                return Err(Error::invalid(format!(
                    "NEURON_RT_VISIBLE_CORES={v:?} names core {hi}, but {} has {total} logical cores (LNC {lnc})",
                    instance.name
                )));
            }
            (lo, hi - lo + 1)
        } else if let Some(v) = get("NEURON_RT_NUM_CORES") {
            let n: u32 = v.trim().parse().map_err(|_| {
                Error::invalid(format!("NEURON_RT_NUM_CORES={v:?} is not a number"))
            })?;
            if n > total {
                return Err(Error::invalid(format!(
                    "NEURON_RT_NUM_CORES={n} exceeds the {total} logical cores of {}",
                    instance.name
                )));
            }
            (0, if n == 0 { total } else { n })
        } else {
            (0, total)
        };
        Ok(Config {
            instance,
            lnc,
            first_core,
            visible_cores,
            root_comm_id: get("NEURON_RT_ROOT_COMM_ID"),
            exec_timeout_raw: get(EXEC_TIMEOUT_ENV),
            shared_device: get(crate::runtime::multi_process::run::SHARED_DEVICE_ENV)
                .is_some_and(|v| v.trim() == "1"),
            kill_in_run: get(crate::runtime::multi_process::run::KILL_IN_RUN_ENV)
                .and_then(|v| v.trim().parse().ok()),
            resident_budget: resident_budget(get(RESIDENT_BUDGET_ENV), physical_memory())?,
        })
    }
}

/// The execution timeout of `NEURON_RT_EXEC_TIMEOUT` (whole seconds; spec/nrt-abi.md env table:
/// default 30, the guide's value — older prose says 2). Choice: `0` means no timeout; a value
/// that is not a number is an error naming the variable.
pub fn exec_timeout(get: impl Fn(&str) -> Option<String>) -> Result<Option<std::time::Duration>> {
    match get(EXEC_TIMEOUT_ENV) {
        None => Ok(Some(std::time::Duration::from_secs(
            crate::device::executor::DEFAULT_EXEC_TIMEOUT_S,
        ))),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(0) => Ok(None),
            Ok(s) => Ok(Some(std::time::Duration::from_secs(s))),
            Err(_) => Err(Error::invalid(format!(
                "{EXEC_TIMEOUT_ENV}={v:?} is not a whole number of seconds"
            ))),
        },
    }
}

/// The variable [`resident_budget`] reads.
pub const RESIDENT_BUDGET_ENV: &str = "OPENNRT_RESIDENT_BUDGET";

/// The resident-machine budget from `OPENNRT_RESIDENT_BUDGET` (bytes, with an optional K, M or
/// G suffix of powers of 1024; `0` keeps no machine loaded, every run loads afresh). Choice
/// (no vendor counterpart: the hardware's machine is the chip): by default a quarter of the
/// physical memory `phys` (6 GiB on a 24 GiB machine), and at least 2 GiB. A collective whose
/// machine does not fit is loaded afresh for each run, as before residency.
pub fn resident_budget(raw: Option<String>, phys: u64) -> Result<u64> {
    let Some(v) = raw else {
        return Ok((phys / 4).max(2 << 30));
    };
    let t = v.trim();
    let (num, unit) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| {
            Error::invalid(format!(
                "{RESIDENT_BUDGET_ENV}={v:?} is not a byte count (a whole number with an \
                 optional K, M or G suffix)"
            ))
        })
}

/// The machine's physical memory in bytes (0 if the system does not say).
fn physical_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    u64::try_from(pages).unwrap_or(0) * u64::try_from(page).unwrap_or(0)
}

/// The variable [`exec_timeout`] reads.
pub const EXEC_TIMEOUT_ENV: &str = "NEURON_RT_EXEC_TIMEOUT";

/// Parse `"n"`, `"a-b"` or a comma list of those; duplicates merge; the result must be one
/// contiguous range (spec §5.2 step 4). Returns the sorted cores.
pub fn parse_core_list(s: &str) -> Result<Vec<u32>> {
    let bad = |why: &str| Error::invalid(format!("NEURON_RT_VISIBLE_CORES={s:?}: {why}"));
    let mut cores = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(bad("empty element"));
        }
        let num = |t: &str| {
            t.trim()
                .parse::<u32>()
                .map_err(|_| bad("not a core number or range"))
        };
        if let Some((a, b)) = part.split_once('-') {
            let (a, b) = (num(a)?, num(b)?);
            if a > b || b - a > 4096 {
                return Err(bad("bad range"));
            }
            cores.extend(a..=b);
        } else {
            cores.push(num(part)?);
        }
    }
    cores.sort_unstable();
    cores.dedup();
    if cores.windows(2).any(|w| w[1] != w[0] + 1) {
        return Err(bad("the visible cores must be contiguous"));
    }
    Ok(cores)
}

#[cfg(test)]
mod tests {
    #[test]
    fn resident_budget_default_suffixes_and_errors() {
        use super::resident_budget;
        let g = 1u64 << 30;
        assert_eq!(resident_budget(None, 24 * g).unwrap(), 6 * g);
        assert_eq!(
            resident_budget(None, 4 * g).unwrap(),
            2 * g,
            "at least 2 GiB"
        );
        assert_eq!(resident_budget(None, 0).unwrap(), 2 * g);
        assert_eq!(resident_budget(Some("0".into()), 24 * g).unwrap(), 0);
        assert_eq!(
            resident_budget(Some(" 512M ".into()), 0).unwrap(),
            512 << 20
        );
        assert_eq!(resident_budget(Some("3g".into()), 0).unwrap(), 3 * g);
        assert_eq!(resident_budget(Some("4096".into()), 0).unwrap(), 4096);
        for bad in ["", "G", "-1", "1.5G", "1T", "99999999999999999999G"] {
            let e = resident_budget(Some(bad.into()), 0).unwrap_err();
            assert!(
                e.message().contains("OPENNRT_RESIDENT_BUDGET"),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn exec_timeout_default_zero_and_errors() {
        use std::time::Duration;
        let t = |v: Option<&str>| {
            super::exec_timeout(|k| {
                (k == "NEURON_RT_EXEC_TIMEOUT")
                    .then(|| v.map(String::from))
                    .flatten()
            })
        };
        // Default 30 s: spec/nrt-abi.md environment table.
        assert_eq!(t(None).unwrap(), Some(Duration::from_secs(30)));
        assert_eq!(t(Some("5")).unwrap(), Some(Duration::from_secs(5)));
        assert_eq!(t(Some("0")).unwrap(), None);
        let e = t(Some("soon")).unwrap_err();
        assert!(
            e.message().contains("NEURON_RT_EXEC_TIMEOUT"),
            "{}",
            e.message()
        );
    }

    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<Config> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_to_trn1_32xlarge() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.instance.name, "trn1.32xlarge");
        assert_eq!(
            (c.total_cores(), c.visible_cores, c.first_core),
            (32, 32, 0)
        );
    }

    #[test]
    fn trn2_lnc_changes_logical_counts() {
        let c = cfg(&[("OPENNRT_INSTANCE_TYPE", "trn2.48xlarge")]).unwrap();
        assert_eq!((c.lnc, c.total_cores()), (2, 64));
        let c = cfg(&[
            ("OPENNRT_INSTANCE_TYPE", "trn2.48xlarge"),
            ("NEURON_LOGICAL_NC_CONFIG", "1"),
        ])
        .unwrap();
        assert_eq!(c.total_cores(), 128);
        // v2 silicon forces LNC 1.
        let c = cfg(&[("NEURON_LOGICAL_NC_CONFIG", "2")]).unwrap();
        assert_eq!(c.lnc, 1);
    }

    #[test]
    fn visible_cores_rules() {
        let c = cfg(&[("NEURON_RT_VISIBLE_CORES", "4-7")]).unwrap();
        assert_eq!((c.first_core, c.visible_cores), (4, 4));
        let c = cfg(&[("NEURON_RT_VISIBLE_CORES", "3,2,2")]).unwrap();
        assert_eq!((c.first_core, c.visible_cores), (2, 2));
        assert!(cfg(&[("NEURON_RT_VISIBLE_CORES", "0,2")])
            .unwrap_err()
            .message()
            .contains("contiguous"));
        assert!(cfg(&[("NEURON_RT_VISIBLE_CORES", "40")]).is_err());
        assert!(cfg(&[("NEURON_RT_VISIBLE_CORES", "x")]).is_err());
        // VISIBLE_CORES wins over NUM_CORES.
        let c = cfg(&[
            ("NEURON_RT_VISIBLE_CORES", "1"),
            ("NEURON_RT_NUM_CORES", "8"),
        ])
        .unwrap();
        assert_eq!(c.visible_cores, 1);
        let c = cfg(&[("NEURON_RT_NUM_CORES", "0")]).unwrap();
        assert_eq!(c.visible_cores, 32);
        let c = cfg(&[("NEURON_RT_NUM_CORES", "3")]).unwrap();
        assert_eq!(c.visible_cores, 3);
    }

    #[test]
    fn unknown_instance_is_a_clear_error() {
        let e = cfg(&[("OPENNRT_INSTANCE_TYPE", "p5.48xlarge")]).unwrap_err();
        assert!(e.message().contains("trn1.32xlarge"), "{e}");
    }
}
