//! Every environment variable OpenNRT reads: one table, which the README's "Environment"
//! section reproduces row for row (a test compares them, and another checks that
//! [`Config::from_lookup`](super::Config::from_lookup) asks for exactly these names).

/// One variable: its name, its default and what it means, as the README prints them
/// (Markdown inside a table cell).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    /// The name.
    pub name: &'static str,
    /// The default, or what unset means.
    pub default: &'static str,
    /// What it does.
    pub meaning: &'static str,
}

const fn v(name: &'static str, default: &'static str, meaning: &'static str) -> Variable {
    Variable {
        name,
        default,
        meaning,
    }
}

/// Every variable, grouped: the process, the job, the lowering, the device. An empty value
/// counts as unset for all of them; a value that does not parse fails `nrt_init` with
/// `NRT_INVALID` and a log line naming the variable.
pub const VARIABLES: &[Variable] = &[
    v("NEURON_RT_LOG_LEVEL", "`ERROR`", "`ERROR`, `WARNING`, `INFO`, `DEBUG`, `TRACE` (`WARN` too); logs go to stderr"),
    v("NEURON_RT_VISIBLE_CORES", "all", "logical cores this process owns (`n`, `a-b`, or a list; must be contiguous)"),
    v("NEURON_RT_NUM_CORES", "0 (= all)", "number of logical cores to own, when `NEURON_RT_VISIBLE_CORES` is unset"),
    v("NEURON_LOGICAL_NC_CONFIG", "1 on trn1, 2 on trn2", "physical cores per logical core, 1 or 2 (2 is forced to 1 on trn1)"),
    v("NEURON_RT_VIRTUAL_CORE_SIZE", "unset", "older name of `NEURON_LOGICAL_NC_CONFIG`, read when that one is unset"),
    v("OPENNRT_INSTANCE_TYPE", "`trn1.32xlarge`", "simulated instance: `trn1.2xlarge`, `trn1.32xlarge`, `trn1n.32xlarge`, `trn2.3xlarge`, `trn2.48xlarge`, `trn2u.48xlarge`"),
    v("NEURON_RT_FAKE_INSTANCE_TYPE", "unset", "the vendor's name for the simulated instance, read when `OPENNRT_INSTANCE_TYPE` is unset"),
    v("OPENNRT_NCFW_PATH", "`libncfw.so`", "the firmware carrier `nrt_init` loads (a path or a library name); its images and `ctx_log` are what the device runs and dumps"),
    v("NEURON_RT_EXEC_TIMEOUT", "30 (seconds)", "how long a collective waits for missing ranks (then `NRT_TIMEOUT`) and how long a device run may take (then 1200 with the hang report of that moment); `0` = no limit"),
    v("NEURON_RT_XU_COMPUTE_MAX_QUEUED_REQUESTS", "8", "depth of the compute XU queue (`NRT_QUEUE_FULL` beyond); the tensor-op and collectives queues are unbounded"),
    v("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "unset", "ignored with a warning (implicit async mode was removed in runtime 2.34), so the `nrta_*` interlock never fires"),
    v("OPENNRT_RESIDENT_BUDGET", "¼ of physical memory, ≥ 2 GiB", "most bytes of loaded machines kept resident between runs of prepared collectives (K/M/G suffixes; `0`: none, every run loads afresh)"),
    v("NEURON_RT_ROOT_COMM_ID", "unset", "`host:port`, `[v6]:port` or `hostname:port` of the job's root (the process owning global id 0 binds it); required when a world is larger than the process's cores, optional while all ranks are in one process"),
    v("OPENNRT_BOOTSTRAP_TIMEOUT", "30 (seconds)", "how long a process keeps trying to reach the job's root (then `NRT_TIMEOUT`)"),
    v("OPENNRT_JOB_SECRET", "unset", "a secret of at least 16 bytes that every process of a job must hold: a process proves it at the bootstrap hello (HMAC-SHA256 over the root's random nonce; the secret never crosses the wire), so a stranger who reaches the root port cannot join or take a rank; unset on every process: anyone who can reach the port can join (docs/design.md §2.6)"),
    v("OPENNRT_NET_PEER_TIMEOUT", "5 (seconds)", "how long a process on another host may stay silent (its network proxy speaks every 0.5 s) before a run waiting on it fails with `NRT_NETWORK_PROXY_FAILURE` (1206) naming it; also how long a connected send/recv peer may stay silent before its requests fail with `NRT_TIMEOUT`"),
    v("OPENNRT_WAIT_SPIN_US", "20", "how long a wait of the shared device (a go meeting, a semaphore, the end of a run, the caller's thread waiting for its peers) spins before it yields; with more ranks than cores it spins about 2 µs whatever this says"),
    v("OPENNRT_WAIT_YIELD_US", "300", "until when (µs from its start) a wait of the shared device yields the CPU before it sleeps on its futex; also how long `nrta_cc_schedule` waits for the peers of a small multi-process collective before it hands the rest to the XU's worker"),
    v("NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED", "0", "`1`: turns on `nrt_async_sendrecv_*` (point-to-point tensors over libfabric); `nrt_async_sendrecv_init` fails without it"),
    v("NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT", "unset", "TCP port of the send/recv rendezvous store (required with the above): the first process of a host to start a send/recv service serves it, a sender asks the store at its `peer_ip`"),
    v("OPENNRT_SENDRECV_CONNECT_TIMEOUT", "30 (seconds)", "how long a send/recv `connect` or `accept` may take before `nrt_async_sendrecv_test_comm` says `NRT_TIMEOUT`"),
    v("OPENNRT_SENDRECV_CHUNK", "8M", "largest send/recv message: a larger tensor range moves in chunks of this size (4K to 1G, K/M/G suffixes)"),
    v("CCOM_SOCKET_IFNAME", "unset", "the interfaces a job spanning hosts uses (prefixes `eth`, exact `=eth0`, exclusions `^docker,lo`, as NCCL reads it); read before `NCCL_SOCKET_IFNAME`; unset: the one the route to the job's root goes out of"),
    v("NCCL_SOCKET_IFNAME", "unset", "read when `CCOM_SOCKET_IFNAME` is unset, with the same meaning"),
    v("OPENNRT_VERSION_OVERRIDE", "this build's version", "the version a process announces at the bootstrap (tests of the version check)"),
    v("OPENNRT_SHARED_DEVICE", "0", "`1`: run every multi-rank device collective on shared device segments, one executor per rank, even without a job (tests)"),
    v("OPENNRT_TEST_KILL_IN_RUN", "unset", "fault injection for tests: the process holding this global id SIGKILLs itself inside its first `nrta_cc_*` collective on the shared device, once every peer's executor is stepping"),
    v("OPENNRT_FLIGHT_RECORDER_ENTRIES", "2000", "collectives each rank keeps in its flight record (last N; `0` = off): printed into the log on a timeout or hang, written with `OPENNRT_FLIGHT_RECORDER_DIR`"),
    v("OPENNRT_FLIGHT_RECORDER_DIR", "unset", "directory where a timeout, a hang and `nrt_close` write one flight-record file per rank (`flight-<job>-rank<gid>.json`); `opennrt flight-recorder DIR` reads them and names the rank that never entered a collective"),
    v("NEURON_RT_VALIDATE_HASH", "0", "`1`: `nrt_load` checks the NEFF header's payload hash (MD5 for package 2, SHA-256 for package 1) and refuses a mismatch with `NRT_INVALID`"),
    v("OPENNRT_TOPOLOGY", "derived from the world size", "`trn1.32xlarge`, `trn2.48xlarge:lnc=1`, `trn2-ultraserver`, `custom:2x16x8:lnc=2:gen=v3`, … (grammar in `src/lower/topology.rs`); `job`: in a job spanning hosts, the hosts are the nodes for every collective (unset, only for collectives of the whole world)"),
    v("OPENNRT_CC_ALGO", "auto", "force an algorithm like `NCCL_ALGO` (an illegal force is an error, never a silent fallback)"),
    v("OPENNRT_CC_ALGOS", "all", "comma list of allowed algorithms"),
    v("OPENNRT_CC_RDH", "0", "`1`: RDH mode"),
    v("OPENNRT_CC_MESH", "1", "`0`: no mesh"),
    v("OPENNRT_CC_CHANNELS", "2", "ring channels per leg (1..=32)"),
    v("NEURON_RT_CC_CHUNK_SIZE", "2 MiB", "chunk bytes"),
    v("OPENNRT_CC_VERIFY", "1", "run the symbolic verifier on every newly prepared collective; `0` skips it"),
    v("OPENNRT_DEVICE_THREADS", "available parallelism (≤ 16)", "worker threads for bulk data; `1` = everything on the calling thread"),
    v("OPENNRT_DEVICE_POOL_MB", "unset (= the peak in use)", "host memory kept for recycling large simulated-device regions between collectives: unset, at most the peak the process had in use at once (never raising its peak); set, a fixed cap in MiB (`0` disables it); emptied by `nrt_close`"),
    v("OPENNRT_HANG_DUMP", "unset", "directory where a hang report writes the CC-context dumps of stuck TOP_SPs"),
];

/// The variables that decide a lowered program (`lower::pipeline::LowerConfig::from_lookup`
/// and the selection and topology it reads): kept as read, they key the program cache.
pub const LOWERING_VARS: [&str; 11] = [
    "NEURON_RT_CC_CHUNK_SIZE",
    "OPENNRT_TOPOLOGY",
    "OPENNRT_CC_CHANNELS",
    "OPENNRT_CC_ALGO",
    "OPENNRT_CC_ALGOS",
    "OPENNRT_CC_MESH",
    "OPENNRT_CC_RDH",
    "NEURON_LOGICAL_NC_CONFIG",
    "NEURON_RT_FAKE_INSTANCE_TYPE",
    "NEURON_RT_VIRTUAL_CORE_SIZE",
    "OPENNRT_INSTANCE_TYPE",
];

/// The lowering variables as read (`None`: unset), in [`LOWERING_VARS`] order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LoweringEnv {
    values: [Option<String>; LOWERING_VARS.len()],
}

impl LoweringEnv {
    /// Read the lowering variables from `get`.
    pub fn read(get: &impl Fn(&str) -> Option<String>) -> LoweringEnv {
        LoweringEnv {
            values: LOWERING_VARS.map(get),
        }
    }

    /// The value of `name` as read; `None` for an unset variable or one that is not a
    /// lowering variable.
    pub fn get(&self, name: &str) -> Option<String> {
        let i = LOWERING_VARS.iter().position(|k| *k == name)?;
        self.values[i].clone()
    }

    /// A copy with lowering variable `name` set to `value` (a value the runtime derives, such
    /// as a job's topology, keys the program cache as a variable would).
    pub fn with(&self, name: &str, value: &str) -> LoweringEnv {
        let mut out = self.clone();
        if let Some(i) = LOWERING_VARS.iter().position(|k| *k == name) {
            out.values[i] = Some(value.to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests;
