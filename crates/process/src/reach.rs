//! What a process can do beyond itself — send, spawn, terminate — through
//! the scheduler that runs it ([`Reach`]), and the errors of those calls,
//! which a scheduler's own API returns too.

use core::fmt;

use std::sync::Arc;

use crate::{Error, Package, Pid, Process};

/// Why a message was refused (by a relay `Receiver`, a scheduler's `send`
/// or a [`Context::send`](crate::Context::send)); its [`Package`] is handed
/// back untouched in either case.
///
/// This is the one send error of the stack: `stepsched-relay`'s receivers,
/// the `stepsched` scheduler's `Handle::send` and a step's
/// [`Context::send`](crate::Context::send) all return it.
/// The two causes call for different reactions: an unknown PID names no
/// recipient this receiver knows of (a mistake, or one it keeps no record
/// of), a closed recipient existed and takes no more messages (it finished
/// or is shutting down; retrying does not help). Each receiver documents
/// which PIDs it answers `Closed` for.
///
/// `Debug` prints the envelope but not the payload, so `SendError<M>`
/// implements [`std::error::Error`] for every `M`. Errors compare equal
/// (`PartialEq`) when the cause and the whole package are equal.
///
/// # Examples
///
/// ```
/// use stepsched_process::{Package, Pid, SendError};
///
/// let err = SendError::UnknownPid(Package::new(Pid::new(0, 7), "ping", "hi"));
/// assert!(err.is_unknown_pid());
/// assert_eq!(err.to_string(), "unknown pid <0.7>");
/// assert_eq!(err, SendError::UnknownPid(Package::new(Pid::new(0, 7), "ping", "hi")));
/// match err {
///     SendError::UnknownPid(package) => assert_eq!(package.payload, "hi"),
///     SendError::Closed(_) => unreachable!(),
/// }
/// ```
#[derive(PartialEq, Eq)]
pub enum SendError<M> {
    /// The receiver knows no recipient with this PID.
    UnknownPid(Package<M>),
    /// The recipient existed but no longer accepts messages: it finished,
    /// or it is closing.
    Closed(Package<M>),
}

impl<M> SendError<M> {
    /// Borrows the refused package.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_process::{Package, Pid, SendError};
    ///
    /// let err = SendError::Closed(Package::new(Pid::new(0, 1), "t", 5));
    /// assert_eq!(err.package().payload, 5);
    /// ```
    #[must_use]
    pub fn package(&self) -> &Package<M> {
        match self {
            Self::UnknownPid(p) | Self::Closed(p) => p,
        }
    }

    /// Takes the refused package back.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_process::{Package, Pid, SendError};
    ///
    /// let err = SendError::UnknownPid(Package::new(Pid::new(0, 1), "t", 5));
    /// assert_eq!(err.into_package().into_payload(), 5);
    /// ```
    #[must_use]
    pub fn into_package(self) -> Package<M> {
        match self {
            Self::UnknownPid(p) | Self::Closed(p) => p,
        }
    }

    /// Takes the refused payload back (the package without its envelope).
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_process::{Package, Pid, SendError};
    ///
    /// let err = SendError::Closed(Package::new(Pid::new(0, 1), "t", 5));
    /// assert_eq!(err.into_payload(), 5);
    /// ```
    #[must_use]
    pub fn into_payload(self) -> M {
        self.into_package().payload
    }

    /// The PID the package was addressed to.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_process::{Package, Pid, SendError};
    ///
    /// let err = SendError::Closed(Package::new(Pid::new(0, 1), "t", ()));
    /// assert_eq!(err.pid(), Pid::new(0, 1));
    /// ```
    #[must_use]
    pub fn pid(&self) -> Pid {
        self.package().to
    }

    /// Whether the cause is [`SendError::UnknownPid`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_process::{Package, Pid, SendError};
    ///
    /// assert!(SendError::UnknownPid(Package::new(Pid::new(0, 1), "t", ())).is_unknown_pid());
    /// ```
    #[must_use]
    pub fn is_unknown_pid(&self) -> bool {
        matches!(self, Self::UnknownPid(_))
    }

    /// Whether the cause is [`SendError::Closed`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_process::{Package, Pid, SendError};
    ///
    /// assert!(SendError::Closed(Package::new(Pid::new(0, 1), "t", ())).is_closed());
    /// ```
    #[must_use]
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Closed(_))
    }
}

impl<M> fmt::Display for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPid(p) => write!(f, "unknown pid {}", p.to),
            Self::Closed(p) => write!(f, "process {} is closed", p.to),
        }
    }
}

impl<M> fmt::Debug for SendError<M> {
    /// Prints the cause and envelope, never the payload.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, p) = match self {
            Self::UnknownPid(p) => ("UnknownPid", p),
            Self::Closed(p) => ("Closed", p),
        };
        f.debug_struct(name)
            .field("from", &p.from)
            .field("to", &p.to)
            .field("topic", &p.topic)
            .finish_non_exhaustive()
    }
}

impl<M> std::error::Error for SendError<M> {}

/// Why a scheduler refused to start a process (a scheduler's `submit`, a
/// step's [`Context::spawn`](crate::Context::spawn)).
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

/// Why a terminate (a scheduler's `terminate`, a step's
/// [`Context::terminate`](crate::Context::terminate)) did nothing.
///
/// Which of the two a PID gets follows the scheduler's rule for
/// [`SendError`]: the `stepsched` scheduler answers `AlreadyComplete` for a
/// PID it handed out (or one still registered to a completed process),
/// `UnknownPid` otherwise.
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
    /// use stepsched_process::{Pid, TerminateError};
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

/// A refused send as a process's error (so a step can use `?`): an
/// [`Error::Failed`] naming the cause and the PID; the message is dropped.
///
/// ```
/// use stepsched_process::{Error, Package, Pid, SendError};
///
/// let e: Error = SendError::Closed(Package::new(Pid::new(0, 2), "", 5)).into();
/// assert_eq!(e, Error::failed("process <0.2> is closed"));
/// ```
impl<M> From<SendError<M>> for Error {
    fn from(e: SendError<M>) -> Self {
        Error::Failed(e.to_string())
    }
}

/// A refused spawn as a process's error (so a step can use `?`): the
/// child's `init` error itself, or an [`Error::Failed`] naming the
/// refusal; the child is dropped.
///
/// ```
/// use stepsched_process::{Error, SubmitError};
///
/// let e: Error = SubmitError::<()>::Init(Error::UnknownMethod("x".into())).into();
/// assert_eq!(e, Error::UnknownMethod("x".into()));
/// let e: Error = SubmitError::Stopping(()).into();
/// assert_eq!(e, Error::failed("the scheduler is stopping"));
/// ```
impl<P> From<SubmitError<P>> for Error {
    fn from(e: SubmitError<P>) -> Self {
        match e {
            SubmitError::Init(e) => e,
            other => Error::Failed(other.to_string()),
        }
    }
}

/// A refused terminate as a process's error (so a step can use `?`): an
/// [`Error::Failed`] naming the cause and the PID.
///
/// ```
/// use stepsched_process::{Error, Pid, TerminateError};
///
/// let e: Error = TerminateError::UnknownPid(Pid::new(0, 4)).into();
/// assert_eq!(e, Error::failed("no process has pid <0.4>"));
/// ```
impl From<TerminateError> for Error {
    fn from(e: TerminateError) -> Self {
        Error::Failed(e.to_string())
    }
}

/// The scheduler side of a [`Context`](crate::Context): what a process can
/// ask of the scheduler that runs it.
///
/// A scheduler implements it (the `stepsched` scheduler does, and a
/// deterministic simulator can) and hands it to each `init` and `step`
/// inside the [`Context`](crate::Context); processes call the context's
/// methods, not these. [`NoReach`] refuses everything, for running a
/// process by hand.
pub trait Reach<P: Process> {
    /// Delivers `package.payload` as a message event to `package.to`, with
    /// `package.from` as its sender.
    ///
    /// # Errors
    ///
    /// The package is handed back when no live process has `package.to`.
    fn send(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>>;

    /// Starts `child` under a fresh PID (its `init` runs on this thread
    /// with `method` and `input`) and returns the PID.
    ///
    /// # Errors
    ///
    /// When the scheduler refuses the process (stopping, at its limit) or
    /// its `init` fails.
    fn spawn(&self, child: P, method: &str, input: P::Input) -> Result<Pid, SubmitError<P>>;

    /// Ends process `pid` with [`Error::Terminated`].
    ///
    /// # Errors
    ///
    /// When no process that has not completed has `pid`.
    fn terminate(&self, pid: Pid) -> Result<(), TerminateError>;

    /// The scheduler behind this reach, for a scheduler's own extensions
    /// of [`Context`](crate::Context) (the `stepsched` scheduler's
    /// `ContextExt` reaches its `Handle` through it: addresses, spawns
    /// that return one, shutdown). `None` (the default): no such
    /// extension is offered.
    fn as_any(&self) -> Option<&dyn core::any::Any> {
        None
    }

    /// Where a host that is not the `stepsched` scheduler (a simulator)
    /// takes the messages sent through addresses it handed out, from any
    /// thread: see [`Outbox`]. `None` (the default): the host has none,
    /// and the scheduler's own addresses need none.
    fn outbox(&self) -> Option<Arc<dyn Outbox<P::Message>>>
    where
        P::Message: Send,
    {
        None
    }
}

/// A host's mailbox for messages sent through the addresses it hands out
/// (a simulator's, whose state lives on one thread while an address may be
/// used from any): [`post`](Outbox::post) queues, and the host delivers
/// the queued messages on its own thread, in the order they were posted,
/// as it would deliver [`Reach::send`]s.
///
/// Processes never use it; the `stepsched` crate's `Address` does.
pub trait Outbox<M>: Send + Sync {
    /// The token of the process that has `pid` now, if one is live: an
    /// address keeps it, so that it names that process, not a later one
    /// submitted under the same PID.
    fn token(&self, pid: Pid) -> Option<u64>;

    /// Queues `message` for process `to` of token `token`, with `from` as
    /// its sender.
    ///
    /// # Errors
    ///
    /// The message is handed back once that process has ended as far as
    /// the host knows, or once the host is gone.
    fn post(&self, to: Pid, token: u64, from: Option<Pid>, message: M) -> Result<(), M>;

    /// Whether process `pid` of token `token` has ended, as far as the
    /// host knows now: from then on every [`post`](Outbox::post) to it
    /// fails.
    fn is_closed(&self, pid: Pid, token: u64) -> bool;
}

/// A [`Reach`] that refuses everything: sends answer
/// [`SendError::UnknownPid`], spawns [`SubmitError::Stopping`], terminates
/// [`TerminateError::UnknownPid`]. [`Context::detached`](crate::Context::detached)
/// uses it, to run a process by hand (in a unit test, say).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoReach;

impl<P: Process> Reach<P> for NoReach {
    fn send(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>> {
        Err(SendError::UnknownPid(package))
    }

    fn spawn(&self, child: P, _: &str, _: P::Input) -> Result<Pid, SubmitError<P>> {
        Err(SubmitError::Stopping(child))
    }

    fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        Err(TerminateError::UnknownPid(pid))
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    /// A payload without `Debug`, to show the errors do not need one.
    struct Opaque(u8);

    fn opaque_package(n: u8) -> Package<Opaque> {
        Package::new(Pid::new(0, 4), "topic", Opaque(n)).with_sender(Pid::new(0, 1))
    }

    #[test]
    fn send_error_accessors() {
        let unknown = SendError::UnknownPid(opaque_package(1));
        let closed = SendError::Closed(opaque_package(2));
        assert!(unknown.is_unknown_pid() && !unknown.is_closed());
        assert!(closed.is_closed() && !closed.is_unknown_pid());
        assert_eq!(unknown.pid(), Pid::new(0, 4));
        assert_eq!(closed.package().payload.0, 2);
        assert_eq!(unknown.into_package().payload.0, 1);
        assert_eq!(closed.into_payload().0, 2);
    }

    #[test]
    fn send_errors_are_equal_only_with_the_same_cause_and_package() {
        let p = |n: u8| Package::new(Pid::new(0, 4), "topic", n);
        assert_eq!(SendError::Closed(p(1)), SendError::Closed(p(1)));
        assert_ne!(SendError::Closed(p(1)), SendError::UnknownPid(p(1)));
        assert_ne!(SendError::Closed(p(1)), SendError::Closed(p(2)));
    }

    #[test]
    fn send_error_display_and_debug_name_the_cause() {
        let unknown = SendError::UnknownPid(opaque_package(1));
        let closed = SendError::Closed(opaque_package(1));
        assert_eq!(unknown.to_string(), "unknown pid <0.4>");
        assert_eq!(closed.to_string(), "process <0.4> is closed");
        assert_eq!(
            format!("{unknown:?}"),
            r#"UnknownPid { from: Some(<0.1>), to: <0.4>, topic: "topic", .. }"#
        );
        assert!(format!("{closed:?}").starts_with("Closed { "));
        let boxed: Box<dyn std::error::Error> = Box::new(closed);
        assert!(boxed.source().is_none());
    }
}
