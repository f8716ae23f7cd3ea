//! The core's error type.
//!
//! Every fallible function of the core returns [`Result`]. An [`Error`] says *what kind* of
//! failure it is (which decides the vendor status code: [`ErrorKind::status`], returned to C
//! exactly once, at the boundary in `abi::boundary`, or written to a request's `exec_ret` by
//! `runtime::xu`) and carries a human-readable message
//! that names what was wrong: the argument, the field, the byte offset, the rank or step, and
//! what was expected. The message is what lands in the log line under `NEURON_RT_LOG_LEVEL`.
//!
//! Where the failing site knows them, the same facts are also structured [`Fields`] (op, rank,
//! step, field, expected, actual), so callers and tests act on them instead of parsing the
//! message: `e.fields().field == Some("OPENNRT_CC_ALGO")`, not `message().contains(..)`.

use std::fmt;

use crate::status::nrt_status;

/// The failure classes the core distinguishes. Each maps to one `NRT_STATUS` value
/// ([`ErrorKind::status`]); the numbers are the vendor's (docs/contract/abi.md §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Generic failure (`NRT_FAILURE` 1), also "incompatible runtime state" in a forked child.
    Failure,
    /// The entry point is part of the surface but a later issue implements it (`NRT_FAILURE` 1).
    NotImplemented,
    /// A bad argument or a malformed input such as a rejected instruction word (`NRT_INVALID` 2).
    Invalid,
    /// A handle that does not name a live object (`NRT_INVALID_HANDLE` 3).
    InvalidHandle,
    /// Out of a resource (`NRT_RESOURCE` 4), e.g. a buffer too small.
    Resource,
    /// A wait expired (`NRT_TIMEOUT` 5).
    Timeout,
    /// An execution-unit queue is full (`NRT_QUEUE_FULL` 7).
    QueueFull,
    /// Not enough NeuronCores for the request (`NRT_LOAD_NOT_ENOUGH_NC` 9).
    NotEnoughCores,
    /// Unsupported NEFF version (`NRT_UNSUPPORTED_NEFF_VERSION` 10).
    UnsupportedNeffVersion,
    /// Host memory allocation failed (`NRT_FAIL_HOST_MEM_ALLOC` 11).
    HostAlloc,
    /// Called before `nrt_init` or after `nrt_close` returned (`NRT_UNINITIALIZED` 13).
    Uninitialized,
    /// Called while `nrt_close` tears down (`NRT_CLOSED` 14).
    Closed,
    /// Bad input found at execution time (`NRT_EXEC_BAD_INPUT` 1002).
    ExecBadInput,
    /// A collective hung or failed on the device (`NRT_EXEC_HW_ERR_COLLECTIVES` 1200).
    CollectivesHang,
    /// A DMA engine aborted on a bad descriptor, address, tag or CCE dtype
    /// (`NRT_EXEC_HW_ERR_DMA_ABORT` 1203, docs/contract/device.md §12).
    DmaAbort,
    /// The execution unit is dead; restart required (`NRT_EXEC_UNIT_UNRECOVERABLE` 101).
    ExecUnitUnrecoverable,
    /// The network between hosts failed: libfabric could not be loaded or opened, or a link
    /// to another host's process broke (`NRT_NETWORK_PROXY_FAILURE` 1206).
    NetworkProxy,
}

impl ErrorKind {
    /// The one mapping from the core's error classes to the vendor's status codes.
    pub fn status(self) -> nrt_status {
        use nrt_status::*;
        use ErrorKind::*;
        match self {
            Failure | NotImplemented => NRT_FAILURE,
            Invalid => NRT_INVALID,
            InvalidHandle => NRT_INVALID_HANDLE,
            Resource => NRT_RESOURCE,
            Timeout => NRT_TIMEOUT,
            QueueFull => NRT_QUEUE_FULL,
            NotEnoughCores => NRT_LOAD_NOT_ENOUGH_NC,
            UnsupportedNeffVersion => NRT_UNSUPPORTED_NEFF_VERSION,
            HostAlloc => NRT_FAIL_HOST_MEM_ALLOC,
            Uninitialized => NRT_UNINITIALIZED,
            Closed => NRT_CLOSED,
            ExecBadInput => NRT_EXEC_BAD_INPUT,
            CollectivesHang => NRT_EXEC_HW_ERR_COLLECTIVES,
            DmaAbort => NRT_EXEC_HW_ERR_DMA_ABORT,
            ExecUnitUnrecoverable => NRT_EXEC_UNIT_UNRECOVERABLE,
            NetworkProxy => NRT_NETWORK_PROXY_FAILURE,
        }
    }

    /// The name of the `NRT_STATUS` this kind maps to (from the one table of names,
    /// [`nrt_status::ALL`]).
    pub fn status_name(self) -> &'static str {
        self.status().name()
    }

    /// Every kind, in declaration order (tests that must cover each kind, the wire codec).
    pub const ALL: [ErrorKind; 17] = {
        use ErrorKind::*;
        let all = [
            Failure,
            NotImplemented,
            Invalid,
            InvalidHandle,
            Resource,
            Timeout,
            QueueFull,
            NotEnoughCores,
            UnsupportedNeffVersion,
            HostAlloc,
            Uninitialized,
            Closed,
            ExecBadInput,
            CollectivesHang,
            DmaAbort,
            ExecUnitUnrecoverable,
            NetworkProxy,
        ];
        // A new variant fails to compile here until it is listed above (and the array grows).
        let mut i = 0;
        while i < all.len() {
            match all[i] {
                Failure
                | NotImplemented
                | Invalid
                | InvalidHandle
                | Resource
                | Timeout
                | QueueFull
                | NotEnoughCores
                | UnsupportedNeffVersion
                | HostAlloc
                | Uninitialized
                | Closed
                | ExecBadInput
                | CollectivesHang
                | DmaAbort
                | ExecUnitUnrecoverable
                | NetworkProxy => {}
            }
            assert!(
                all[i] as usize == i,
                "ErrorKind::ALL is in declaration order"
            );
            i += 1;
        }
        all
    };
}

/// A core error: a kind, a message that says exactly what was wrong, and the structured facts
/// behind the message where the failing site has them.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    /// Boxed: most errors carry none, and `Result<T>` stays small.
    fields: Option<Box<Fields>>,
}

/// The structured facts of an [`Error`]; every one optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fields {
    /// The operation or entry point (`"all_reduce"`, `"nrt_tensor_read"`).
    pub op: Option<String>,
    /// The rank (global id) the failure is about.
    pub rank: Option<u32>,
    /// The step: a cc_op entry, a SLOT SPAD record, a sequence counter.
    pub step: Option<u64>,
    /// The field, argument or environment variable that was wrong.
    pub field: Option<String>,
    /// What it should have been.
    pub expected: Option<String>,
    /// What it was.
    pub actual: Option<String>,
}

static NO_FIELDS: Fields = Fields {
    op: None,
    rank: None,
    step: None,
    field: None,
    expected: None,
    actual: None,
};

/// The core's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            fields: None,
        }
    }
    /// The structured facts (all `None` where the site gave none).
    pub fn fields(&self) -> &Fields {
        self.fields.as_deref().unwrap_or(&NO_FIELDS)
    }
    /// The same error with its structured facts replaced by `f`.
    pub fn with_fields(mut self, f: Fields) -> Self {
        self.fields = (f != Fields::default()).then(|| Box::new(f));
        self
    }
    fn fields_mut(&mut self) -> &mut Fields {
        self.fields.get_or_insert_with(Default::default)
    }
    /// Record the operation.
    pub fn with_op(mut self, op: impl Into<String>) -> Self {
        self.fields_mut().op = Some(op.into());
        self
    }
    /// Record the rank.
    pub fn with_rank(mut self, rank: u32) -> Self {
        self.fields_mut().rank = Some(rank);
        self
    }
    /// Record the step.
    pub fn with_step(mut self, step: u64) -> Self {
        self.fields_mut().step = Some(step);
        self
    }
    /// Record the field (argument, variable) that was wrong.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.fields_mut().field = Some(field.into());
        self
    }
    /// Record what was expected and what was found.
    pub fn with_values(mut self, expected: impl fmt::Display, actual: impl fmt::Display) -> Self {
        let f = self.fields_mut();
        f.expected = Some(expected.to_string());
        f.actual = Some(actual.to_string());
        self
    }
    /// Record what was found (no single expected value).
    pub fn with_actual(mut self, actual: impl fmt::Display) -> Self {
        self.fields_mut().actual = Some(actual.to_string());
        self
    }
    /// The `NRT_STATUS` this error becomes at the C boundary (or in a request's `exec_ret`).
    pub fn status(&self) -> nrt_status {
        self.kind.status()
    }
    /// The name of the `NRT_STATUS` this error becomes at the C boundary.
    pub fn status_name(&self) -> &'static str {
        self.kind.status_name()
    }
    /// `NRT_INVALID`: a bad argument or malformed input.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }
    /// `NRT_INVALID` for an environment variable whose value does not parse: the message
    /// `VAR="value": why`, the field `VAR`, the actual value `value`.
    pub fn bad_variable(var: &str, value: &str, why: impl fmt::Display) -> Self {
        Self::invalid(format!("{var}={value:?}: {why}"))
            .with_field(var)
            .with_actual(value)
    }
    /// `NRT_FAILURE`: a generic failure.
    pub fn failure(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Failure, message)
    }
    /// `NRT_RESOURCE`.
    pub fn resource(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Resource, message)
    }
    /// `NRT_INVALID_HANDLE`.
    pub fn invalid_handle(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidHandle, message)
    }
    /// An entry point that a later issue implements; `what` is its name.
    pub fn not_implemented(what: &str) -> Self {
        Self::new(
            ErrorKind::NotImplemented,
            format!("{what} is not implemented yet in OpenNRT"),
        )
    }
    /// The failure class.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// Prefix the message with context (e.g. the function or object being worked on).
    pub fn context(mut self, ctx: impl fmt::Display) -> Self {
        self.message = format!("{ctx}: {}", self.message);
        self
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)?;
        if let Some(x) = &self.fields {
            write!(f, " {x:?}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
