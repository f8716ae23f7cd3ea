//! Configuration: the one place the environment is read (clippy's `disallowed-methods` forbids
//! `std::env::var` / `var_os` everywhere else).
//!
//! [`Config::from_lookup`] parses every variable OpenNRT knows ([`vars::VARIABLES`], the table
//! the README's "Environment" section is checked against) with one rule: unset means the
//! default, and a value that does not parse is an `NRT_INVALID` error at `nrt_init` naming the
//! variable. `nrt_init` reads the environment once ([`Config::from_env`]) and everything after
//! uses the parsed [`Config`]; the core-count getters, legal before `nrt_init`, parse it afresh,
//! and the log level is read on the first log line before `nrt_init` ([`log_level_from_env`]).
//!
//! The simulated instance comes from `OPENNRT_INSTANCE_TYPE`, else from the vendor's own
//! simulation variable `NEURON_RT_FAKE_INSTANCE_TYPE`, else defaults to `trn1.32xlarge`
//! (OpenNRT's choice: 16 devices × 2 NeuronCore-v2, LNC 1, 32 logical cores; documented in the
//! README). The instance table lives with the lowering's topology model
//! (`crate::lower::topology`, docs/design.md §2.8) and is re-exported here.
//!
//! To add a variable: a row in [`vars::VARIABLES`] (and the README table, which a test
//! compares), a field here parsed in [`Config::from_lookup`], a test in `config/tests.rs`.

use std::sync::Arc;
use std::time::Duration;

use crate::device::settings::DeviceSettings;
use crate::error::{Error, Result};
use crate::lower::pipeline::LowerConfig;
pub use crate::lower::topology::{InstanceType, DEFAULT_INSTANCE, INSTANCE_TYPES};
use crate::runtime::log::Level;

pub mod vars;

pub use vars::{LoweringEnv, Variable, LOWERING_VARS, VARIABLES};

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
    /// `NEURON_RT_EXEC_TIMEOUT`: `None` is no timeout ([`exec_timeout`]).
    pub exec_timeout: Option<Duration>,
    /// `OPENNRT_SHARED_DEVICE=1`: every multi-rank collective on the shared device segments
    /// (`runtime::multi_process::run`), even without a job.
    pub shared_device: bool,
    /// `OPENNRT_TEST_KILL_IN_RUN`: the global id whose process kills itself inside its first
    /// shared-device collective (fault injection for tests, armed by `nrt_init` in
    /// `runtime::fault_injection`).
    pub kill_in_run: Option<u32>,
    /// `OPENNRT_RESIDENT_BUDGET`: most bytes the resident machines of the process's prepared
    /// collectives keep loaded between runs (`runtime::resident`); see [`resident_budget`].
    pub resident_budget: u64,
    /// `NEURON_RT_LOG_LEVEL`.
    pub log_level: Level,
    /// `OPENNRT_NCFW_PATH`: the firmware carrier to load (a path or a library name).
    pub ncfw_path: String,
    /// `NEURON_RT_XU_COMPUTE_MAX_QUEUED_REQUESTS` ([`crate::runtime::xu::compute_queue_limit`]).
    pub compute_queue_limit: u64,
    /// `OPENNRT_VERSION_OVERRIDE`, else this crate's version: what a process announces at the
    /// bootstrap.
    pub version: String,
    /// `OPENNRT_BOOTSTRAP_TIMEOUT`: how long a process keeps trying to reach the job's root.
    pub bootstrap_timeout: Duration,
    /// `OPENNRT_JOB_SECRET`: the secret every process of the job proves it knows at the
    /// bootstrap hello (`runtime::multi_process::wire::proof`); `None`: no proof, anyone who
    /// can reach the root port can join.
    pub job_secret: Option<JobSecret>,
    /// `OPENNRT_WAIT_SPIN_US` and `OPENNRT_WAIT_YIELD_US`: how a wait of the shared device
    /// spins, then yields, before it sleeps (`runtime::multi_process::segment::Waits`).
    pub waits: crate::runtime::multi_process::segment::Waits,
    /// `OPENNRT_NET_PEER_TIMEOUT`: how long a linked process on another host may stay silent
    /// before it is lost (`runtime::multi_process::proxy`).
    pub net_peer_timeout: Duration,
    /// `CCOM_SOCKET_IFNAME`, else `NCCL_SOCKET_IFNAME` (the variable and its filter): the
    /// interfaces a job spanning hosts uses (`net::iface`).
    pub socket_ifname: Option<(&'static str, crate::net::iface::IfFilter)>,
    /// The lowering variables as read ([`LOWERING_VARS`]); validated here, turned into a
    /// [`LowerConfig`] per world by [`Config::lower_config`]. Shared: it keys the program cache.
    pub lowering: Arc<LoweringEnv>,
    /// `OPENNRT_CC_VERIFY`: run the symbolic verifier on every newly lowered collective.
    pub verify: bool,
    /// `NEURON_RT_VALIDATE_HASH`: check a NEFF's payload hash at load (default off, as the
    /// vendor's: the real NEFF in testdata would fail it, docs/neff.md §1).
    pub validate_hash: bool,
    /// The software device's knobs (`OPENNRT_DEVICE_THREADS`, `OPENNRT_DEVICE_POOL_MB`,
    /// `OPENNRT_HANG_DUMP`), applied to the device by `nrt_init`.
    pub device: DeviceSettings,
    /// The async send/recv variables (`runtime::sendrecv`).
    pub sendrecv: SendRecvConfig,
    /// `OPENNRT_FLIGHT_RECORDER_ENTRIES`: collectives each rank keeps in its flight record
    /// (`runtime::flight_recorder`); `0` turns the recorder off.
    pub flight_recorder_entries: usize,
    /// `OPENNRT_FLIGHT_RECORDER_DIR`: where a timeout, a hang or `nrt_close` writes one
    /// flight-record file per rank.
    pub flight_recorder_dir: Option<std::path::PathBuf>,
    /// `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` as read: accepted and ignored (implicit
    /// async mode was removed in runtime 2.34, docs/contract/abi.md §5.3); `nrt_init` warns.
    pub ignored_async_inflight: Option<String>,
}

/// A job's secret (`OPENNRT_JOB_SECRET`): the bytes of the value as set. Its `Debug` never
/// prints them.
#[derive(Clone, PartialEq, Eq)]
pub struct JobSecret(Arc<[u8]>);

impl JobSecret {
    /// The secret's bytes (the HMAC key of the hello's proof).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JobSecret(<{} bytes, hidden>)", self.0.len())
    }
}

/// The job-secret variable and the fewest bytes its value may have.
pub const JOB_SECRET_ENV: &str = "OPENNRT_JOB_SECRET";
/// A shorter secret is refused: it could be guessed from one recorded hello.
pub const JOB_SECRET_MIN_LEN: usize = 16;

fn job_secret(get: &impl Fn(&str) -> Option<String>) -> Result<Option<JobSecret>> {
    match get(JOB_SECRET_ENV) {
        None => Ok(None),
        Some(v) if v.len() < JOB_SECRET_MIN_LEN => Err(Error::invalid(format!(
            "{JOB_SECRET_ENV}=<hidden, {} bytes>: a job secret must have at least \
             {JOB_SECRET_MIN_LEN} bytes",
            v.len()
        ))
        .with_field(JOB_SECRET_ENV)),
        Some(v) => Ok(Some(JobSecret(v.into_bytes().into()))),
    }
}

/// The variables of `nrt_async_sendrecv_*` (`runtime::sendrecv::Settings` is made of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendRecvConfig {
    /// `NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1`.
    pub enabled: bool,
    /// `NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT`.
    pub port: Option<u16>,
    /// `OPENNRT_SENDRECV_CONNECT_TIMEOUT`.
    pub connect_timeout: Duration,
    /// `OPENNRT_SENDRECV_CHUNK` (bytes).
    pub chunk: usize,
}

fn sendrecv_config(get: &impl Fn(&str) -> Option<String>) -> Result<SendRecvConfig> {
    use crate::runtime::sendrecv as sr;
    let port = match number::<u16>(get, sr::PORT_ENV, "a TCP port (1-65535)")? {
        Some(0) => {
            return Err(Error::bad_variable(
                sr::PORT_ENV,
                "0",
                "not a TCP port (1-65535)",
            ))
        }
        p => p,
    };
    let connect_timeout =
        match number::<u64>(get, sr::CONNECT_TIMEOUT_ENV, "a whole number of seconds")? {
            Some(0) => {
                return Err(Error::bad_variable(
                    sr::CONNECT_TIMEOUT_ENV,
                    "0",
                    "at least 1 second",
                ))
            }
            n => Duration::from_secs(n.unwrap_or(DEFAULT_SENDRECV_CONNECT_TIMEOUT_S)),
        };
    let chunk = match get(sr::CHUNK_ENV) {
        None => sr::DEFAULT_CHUNK,
        Some(v) => match parse_size(&v) {
            Some(n) if n >= sr::MIN_CHUNK as u64 && n <= 1 << 30 => n as usize,
            _ => {
                return Err(Error::bad_variable(
                    sr::CHUNK_ENV,
                    &v,
                    format_args!(
                        "not a size from {} bytes to 1G (K/M/G suffixes)",
                        sr::MIN_CHUNK
                    ),
                ))
            }
        },
    };
    Ok(SendRecvConfig {
        enabled: flag(get, sr::ENABLED_ENV)?.unwrap_or(false),
        port,
        connect_timeout,
        chunk,
    })
}

impl Config {
    /// Logical cores on the whole instance.
    pub fn total_cores(&self) -> u32 {
        self.instance.logical_cores(self.lnc)
    }

    /// The execution timeout as read at `nrt_init` (see [`exec_timeout`]).
    pub fn exec_timeout(&self) -> Option<Duration> {
        self.exec_timeout
    }

    /// The lowering configuration for a world of `world` ranks.
    pub fn lower_config(&self, world: u32) -> Result<LowerConfig> {
        LowerConfig::from_lookup(|k| self.lowering.get(k), world)
    }

    /// Read the process environment.
    pub fn from_env() -> Result<Config> {
        Self::from_lookup(env_lookup)
    }

    /// Derive the configuration from a variable lookup (testable without touching the
    /// process environment). Every variable read here is a row of [`VARIABLES`] (tested).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config> {
        // An empty value counts as unset, for every variable.
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let inst_name = get("OPENNRT_INSTANCE_TYPE")
            .or_else(|| get("NEURON_RT_FAKE_INSTANCE_TYPE"))
            .unwrap_or_else(|| DEFAULT_INSTANCE.to_string());
        let instance = *INSTANCE_TYPES
            .iter()
            .find(|t| t.name == inst_name.trim())
            .ok_or_else(|| {
                let names: Vec<_> = INSTANCE_TYPES.iter().map(|t| t.name).collect();
                let var = if get("OPENNRT_INSTANCE_TYPE").is_some() {
                    "OPENNRT_INSTANCE_TYPE"
                } else {
                    "NEURON_RT_FAKE_INSTANCE_TYPE"
                };
                Error::bad_variable(
                    var,
                    &inst_name,
                    format_args!("unknown instance type; known: {}", names.join(", ")),
                )
            })?;
        let lnc_var =
            get("NEURON_LOGICAL_NC_CONFIG").or_else(|| get("NEURON_RT_VIRTUAL_CORE_SIZE"));
        let lnc = match lnc_var {
            None => instance.default_lnc,
            Some(v) => match v.trim() {
                "1" => Some(1),
                "2" => Some(2),
                _ => None,
            }
            .and_then(|asked| instance.effective_lnc(Some(asked)))
            .ok_or_else(|| {
                Error::bad_variable(
                    "NEURON_LOGICAL_NC_CONFIG",
                    v.trim(),
                    "the logical core size must be 1 or 2",
                )
            })?,
        };
        let total = instance.logical_cores(lnc);
        let (first_core, visible_cores) = if let Some(v) = get("NEURON_RT_VISIBLE_CORES") {
            let cores = parse_core_list(&v)?;
            let (lo, hi) = (cores[0], *cores.last().unwrap());
            if hi >= total {
                return Err(Error::bad_variable(
                    "NEURON_RT_VISIBLE_CORES",
                    &v,
                    format_args!(
                        "names core {hi}, but {} has {total} logical cores (LNC {lnc})",
                        instance.name
                    ),
                ));
            }
            (lo, hi - lo + 1)
        } else if let Some(v) = get("NEURON_RT_NUM_CORES") {
            let n: u32 = v
                .trim()
                .parse()
                .map_err(|_| Error::bad_variable("NEURON_RT_NUM_CORES", &v, "not a number"))?;
            if n > total {
                return Err(Error::bad_variable(
                    "NEURON_RT_NUM_CORES",
                    &v,
                    format_args!("exceeds the {total} logical cores of {}", instance.name),
                ));
            }
            (0, if n == 0 { total } else { n })
        } else {
            (0, total)
        };
        let lowering = Arc::new(LoweringEnv::read(&get));
        // Validate the lowering knobs now (a one-rank world accepts every topology form), so a
        // bad value fails `nrt_init`, not the first collective.
        LowerConfig::from_lookup(|k| lowering.get(k), 1)?;
        Ok(Config {
            instance,
            lnc,
            first_core,
            visible_cores,
            root_comm_id: get("NEURON_RT_ROOT_COMM_ID"),
            exec_timeout: exec_timeout(&get)?,
            shared_device: flag(&get, crate::runtime::multi_process::run::SHARED_DEVICE_ENV)?
                .unwrap_or(false),
            kill_in_run: number(
                &get,
                crate::runtime::fault_injection::KILL_IN_RUN_ENV,
                "a global rank id",
            )?,
            resident_budget: resident_budget(get(RESIDENT_BUDGET_ENV), physical_memory())?,
            log_level: match get(LOG_LEVEL_ENV) {
                None => Level::Error,
                Some(v) => Level::parse(&v).ok_or_else(|| {
                    Error::bad_variable(
                        LOG_LEVEL_ENV,
                        &v,
                        "not one of ERROR, WARNING, INFO, DEBUG, TRACE",
                    )
                })?,
            },
            ncfw_path: get(NCFW_PATH_ENV).unwrap_or_else(|| DEFAULT_NCFW.to_string()),
            compute_queue_limit: crate::runtime::xu::compute_queue_limit(&get)?,
            version: get(VERSION_OVERRIDE_ENV)
                .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string()),
            bootstrap_timeout: Duration::from_secs(
                number(&get, BOOTSTRAP_TIMEOUT_ENV, "a whole number of seconds")?
                    .unwrap_or(DEFAULT_BOOTSTRAP_TIMEOUT_S),
            ),
            job_secret: job_secret(&get)?,
            waits: {
                let d = crate::runtime::multi_process::segment::Waits::default();
                let us = |var, default: Duration| -> Result<Duration> {
                    Ok(number::<u64>(&get, var, "a whole number of microseconds")?
                        .map_or(default, Duration::from_micros))
                };
                crate::runtime::multi_process::segment::Waits {
                    spin: us(WAIT_SPIN_ENV, d.spin)?,
                    yield_until: us(WAIT_YIELD_ENV, d.yield_until)?,
                }
            },
            net_peer_timeout: Duration::from_secs(
                match number::<u64>(&get, NET_PEER_TIMEOUT_ENV, "a whole number of seconds")? {
                    Some(0) => {
                        return Err(Error::bad_variable(
                            NET_PEER_TIMEOUT_ENV,
                            "0",
                            "at least 1 second",
                        ))
                    }
                    n => n.unwrap_or(DEFAULT_NET_PEER_TIMEOUT_S),
                },
            ),
            socket_ifname: match SOCKET_IFNAME_ENVS
                .iter()
                .find_map(|&var| get(var).map(|v| (var, v)))
            {
                None => None,
                Some((var, v)) => Some((var, crate::net::iface::IfFilter::parse(var, &v)?)),
            },
            verify: flag(&get, VERIFY_ENV)?.unwrap_or(true),
            validate_hash: flag(&get, VALIDATE_HASH_ENV)?.unwrap_or(false),
            lowering,
            device: DeviceSettings {
                threads: match number::<usize>(&get, DEVICE_THREADS_ENV, "a thread count")? {
                    Some(0) => {
                        return Err(Error::bad_variable(
                            DEVICE_THREADS_ENV,
                            "0",
                            "at least 1 thread",
                        ))
                    }
                    n => n,
                },
                pool_cap: number::<usize>(&get, DEVICE_POOL_MB_ENV, "a whole number of MiB")?
                    .map(|mb| mb.saturating_mul(1 << 20)),
                hang_dump_dir: get(HANG_DUMP_ENV).map(std::path::PathBuf::from),
            },
            flight_recorder_entries: {
                use crate::runtime::flight_recorder as fr;
                let what = "a whole number of collectives (0 = off)";
                match number::<usize>(&get, fr::ENTRIES_ENV, what)? {
                    Some(n) if n > fr::MAX_ENTRIES => {
                        return Err(Error::bad_variable(
                            fr::ENTRIES_ENV,
                            &n.to_string(),
                            format_args!("at most {} collectives", fr::MAX_ENTRIES),
                        ))
                    }
                    n => n.unwrap_or(fr::DEFAULT_ENTRIES),
                }
            },
            flight_recorder_dir: get(crate::runtime::flight_recorder::DIR_ENV)
                .map(std::path::PathBuf::from),
            ignored_async_inflight: get(ASYNC_INFLIGHT_ENV),
            sendrecv: sendrecv_config(&get)?,
        })
    }
}

/// Read one variable of the process environment: the only call of `std::env::var` in the
/// crate. Tools that drive the lowering or the device without `nrt_init` (the `opennrt`
/// binary) read their variables through it too. A value that is not Unicode counts as unset.
#[allow(clippy::disallowed_methods)] // the one sanctioned environment read
pub fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// `NEURON_RT_LOG_LEVEL` from the environment, for log lines written before `nrt_init` parsed
/// it: an unknown value is ERROR here (`nrt_init` then refuses it, naming the variable).
pub fn log_level_from_env() -> Level {
    env_lookup(LOG_LEVEL_ENV)
        .and_then(|v| Level::parse(&v))
        .unwrap_or(Level::Error)
}

/// The device settings of the environment, for tools that drive the device without
/// `nrt_init` (the same parser and errors as [`Config::from_lookup`]).
pub fn device_settings_from_env() -> Result<DeviceSettings> {
    Config::from_env().map(|c| c.device)
}

/// `0` or `1` (unset: `None`); anything else is an error naming `var`.
fn flag(get: &impl Fn(&str) -> Option<String>, var: &str) -> Result<Option<bool>> {
    match get(var) {
        None => Ok(None),
        Some(v) => match v.trim() {
            "0" => Ok(Some(false)),
            "1" => Ok(Some(true)),
            other => Err(Error::bad_variable(var, other, "must be 0 or 1")),
        },
    }
}

/// A whole number (unset: `None`); anything else is an error naming `var` and saying `what`.
fn number<T: std::str::FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    var: &str,
    what: &str,
) -> Result<Option<T>> {
    match get(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<T>()
            .map(Some)
            .map_err(|_| Error::bad_variable(var, &v, format_args!("not {what}"))),
    }
}

/// How long a shared-device wait spins (microseconds).
pub const WAIT_SPIN_ENV: &str = "OPENNRT_WAIT_SPIN_US";
/// Until when a shared-device wait yields (microseconds from its start).
pub const WAIT_YIELD_ENV: &str = "OPENNRT_WAIT_YIELD_US";

/// The log level variable.
pub const LOG_LEVEL_ENV: &str = "NEURON_RT_LOG_LEVEL";
/// The carrier variable and its default.
pub const NCFW_PATH_ENV: &str = "OPENNRT_NCFW_PATH";
/// The carrier `nrt_init` loads by default: found by the dynamic loader's search (the one
/// installed next to `libnrt.so.1`).
pub const DEFAULT_NCFW: &str = "libncfw.so";
/// The announced-version override (tests of the version check).
pub const VERSION_OVERRIDE_ENV: &str = "OPENNRT_VERSION_OVERRIDE";
/// The bootstrap deadline variable and its default (seconds).
pub const BOOTSTRAP_TIMEOUT_ENV: &str = "OPENNRT_BOOTSTRAP_TIMEOUT";
const DEFAULT_BOOTSTRAP_TIMEOUT_S: u64 = 30;
/// How long a linked process on another host may stay silent (seconds).
pub const NET_PEER_TIMEOUT_ENV: &str = "OPENNRT_NET_PEER_TIMEOUT";
const DEFAULT_NET_PEER_TIMEOUT_S: u64 = 5;
const DEFAULT_SENDRECV_CONNECT_TIMEOUT_S: u64 = 30;
/// The interface variables, the vendor's own name first.
pub const SOCKET_IFNAME_ENVS: [&str; 2] = ["CCOM_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"];
/// The symbolic-verifier switch.
pub const VERIFY_ENV: &str = "OPENNRT_CC_VERIFY";
/// `NEURON_RT_VALIDATE_HASH`: check NEFF payload hashes at load.
pub const VALIDATE_HASH_ENV: &str = "NEURON_RT_VALIDATE_HASH";
/// The device's bulk-data threads.
pub const DEVICE_THREADS_ENV: &str = "OPENNRT_DEVICE_THREADS";
/// The device's recycled-buffer pool cap (MiB).
pub const DEVICE_POOL_MB_ENV: &str = "OPENNRT_DEVICE_POOL_MB";
/// The hang-dump directory.
pub const HANG_DUMP_ENV: &str = crate::device::cc_context::HANG_DUMP_ENV;
/// The implicit-async depth variable, ignored with a warning.
pub const ASYNC_INFLIGHT_ENV: &str = "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS";

/// The execution timeout of `NEURON_RT_EXEC_TIMEOUT` (whole seconds; docs/contract/abi.md env table:
/// default 30, the guide's value — older prose says 2). Choice: `0` means no timeout; a value
/// that is not a number is an error naming the variable.
pub fn exec_timeout(get: &impl Fn(&str) -> Option<String>) -> Result<Option<Duration>> {
    Ok(
        match number::<u64>(get, EXEC_TIMEOUT_ENV, "a whole number of seconds")? {
            None => Some(Duration::from_secs(
                crate::device::executor::DEFAULT_EXEC_TIMEOUT_S,
            )),
            Some(0) => None,
            Some(s) => Some(Duration::from_secs(s)),
        },
    )
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
    parse_size(&v).ok_or_else(|| {
        Error::bad_variable(
            RESIDENT_BUDGET_ENV,
            &v,
            "not a byte count (a whole number with an optional K, M or G suffix)",
        )
    })
}

/// A byte count: a whole number with an optional K, M or G suffix (powers of 1024).
fn parse_size(v: &str) -> Option<u64> {
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
/// contiguous range (docs/contract/abi.md §5.2 step 4). Returns the sorted cores.
pub fn parse_core_list(s: &str) -> Result<Vec<u32>> {
    let bad = |why: &str| Error::bad_variable("NEURON_RT_VISIBLE_CORES", s, why);
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
mod tests;
