//! The core's error type.
//!
//! Every fallible function of the core returns [`Result`]. An [`Error`] says *what kind* of
//! failure it is (which decides the vendor status code, mapped exactly once at the C boundary in
//! `abi::boundary`) and carries a human-readable message that names what was wrong: the
//! argument, the field, the byte offset, the rank or step, and what was expected. The message is
//! what lands in the log line under `NEURON_RT_LOG_LEVEL`.

use std::fmt;

/// The failure classes the core distinguishes. Each maps to one `NRT_STATUS` value
/// (see `abi::boundary::status_of`); the numbers are the vendor's (docs/contract/abi.md §2.1).
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
}

impl ErrorKind {
    /// Every kind, in declaration order (tests that must cover each kind, the wire codec).
    pub const ALL: [ErrorKind; 16] = {
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
                | ExecUnitUnrecoverable => {}
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

/// A core error: a kind plus a message that says exactly what was wrong.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

/// The core's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }
    /// `NRT_INVALID`: a bad argument or malformed input.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
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
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
