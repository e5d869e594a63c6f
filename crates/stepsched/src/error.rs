//! The errors of the scheduler's operations. Each hands the value back and
//! names its cause. (A refused send is the relay's
//! [`SendError`](stepsched_relay::SendError), re-exported by the crate.)

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

/// Why [`terminate`](crate::Handle::terminate) did nothing.
///
/// Which of the two a PID gets follows the rule of
/// [`Handle::send`](crate::Handle::send): `AlreadyComplete` for a PID this
/// scheduler's [`allocate_pid`](crate::Handle::allocate_pid) handed out (or
/// one still registered to a completed process), `UnknownPid` otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminateError {
    /// No process has this PID, and the scheduler has no record that one
    /// had.
    UnknownPid(Pid),
    /// The process completed before the terminate took effect (on its own,
    /// or ended by another terminate or by shutdown).
    AlreadyComplete(Pid),
}

impl TerminateError {
    /// The PID the terminate was for.
    ///
    /// ```
    /// use stepsched::{Pid, TerminateError};
    ///
    /// assert_eq!(TerminateError::UnknownPid(Pid::new(0, 3)).pid(), Pid::new(0, 3));
    /// ```
    pub fn pid(&self) -> Pid {
        match self {
            TerminateError::UnknownPid(p) | TerminateError::AlreadyComplete(p) => *p,
        }
    }
}

impl fmt::Display for TerminateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TerminateError::UnknownPid(p) => write!(f, "no process has pid {p}"),
            TerminateError::AlreadyComplete(p) => write!(f, "process {p} has already completed"),
        }
    }
}

impl std::error::Error for TerminateError {}
