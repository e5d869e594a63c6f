//! The errors of the scheduler's operations. Each hands the value back and
//! names its cause.

use std::fmt;

use stepsched_relay::Pid;

use stepsched_process::Error;

/// Why [`submit`](crate::Handle::submit) refused a process.
///
/// Except for [`Init`](SubmitError::Init), the process is handed back
/// without having been initialized.
#[non_exhaustive]
pub enum SubmitError<P> {
    /// The scheduler is shutting down or has shut down.
    Stopping(P),
    /// The scheduler already runs its maximum number of processes.
    LimitReached(P),
    /// A live process already has this PID. The new process was initialized
    /// and closed.
    DuplicatePid(Pid, P),
    /// The process's `init` failed (for example with
    /// [`Error::UnknownMethod`]); it was closed and nothing was registered.
    Init(Error),
}

impl<P> SubmitError<P> {
    /// The process, if the error hands it back.
    pub fn into_process(self) -> Option<P> {
        match self {
            SubmitError::Stopping(p)
            | SubmitError::LimitReached(p)
            | SubmitError::DuplicatePid(_, p) => Some(p),
            SubmitError::Init(_) => None,
        }
    }
}

impl<P> fmt::Debug for SubmitError<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::Stopping(_) => f.write_str("Stopping(..)"),
            SubmitError::LimitReached(_) => f.write_str("LimitReached(..)"),
            SubmitError::DuplicatePid(pid, _) => write!(f, "DuplicatePid({pid}, ..)"),
            SubmitError::Init(e) => f.debug_tuple("Init").field(e).finish(),
        }
    }
}

impl<P> fmt::Display for SubmitError<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::Stopping(_) => f.write_str("the scheduler is stopping"),
            SubmitError::LimitReached(_) => {
                f.write_str("the maximum number of processes is reached")
            }
            SubmitError::DuplicatePid(pid, _) => write!(f, "a live process already has pid {pid}"),
            SubmitError::Init(e) => write!(f, "init failed: {e}"),
        }
    }
}

impl<P> std::error::Error for SubmitError<P> {}

/// Why [`send`](crate::Handle::send) did not deliver a message. The message
/// is handed back.
#[derive(PartialEq, Eq)]
pub enum SendError<M> {
    /// No live process has this PID.
    UnknownPid(Pid, M),
    /// The process has finished (or is finishing) and takes no more
    /// messages.
    Finished(Pid, M),
}

impl<M> SendError<M> {
    /// The undelivered message.
    pub fn into_message(self) -> M {
        match self {
            SendError::UnknownPid(_, m) | SendError::Finished(_, m) => m,
        }
    }

    /// The PID the message was for.
    pub fn pid(&self) -> Pid {
        match self {
            SendError::UnknownPid(p, _) | SendError::Finished(p, _) => *p,
        }
    }
}

impl<M> fmt::Debug for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::UnknownPid(p, _) => write!(f, "UnknownPid({p}, ..)"),
            SendError::Finished(p, _) => write!(f, "Finished({p}, ..)"),
        }
    }
}

impl<M> fmt::Display for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::UnknownPid(p, _) => write!(f, "no live process has pid {p}"),
            SendError::Finished(p, _) => write!(f, "process {p} has finished"),
        }
    }
}

impl<M> std::error::Error for SendError<M> {}

/// Why [`terminate`](crate::Handle::terminate) did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminateError {
    /// No live process has this PID.
    UnknownPid(Pid),
    /// The process completed before the terminate took effect.
    AlreadyComplete(Pid),
}

impl fmt::Display for TerminateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TerminateError::UnknownPid(p) => write!(f, "no live process has pid {p}"),
            TerminateError::AlreadyComplete(p) => write!(f, "process {p} has already completed"),
        }
    }
}

impl std::error::Error for TerminateError {}
