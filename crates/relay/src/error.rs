//! The errors of sending and registering; each hands back what it refused.

use core::fmt;

use crate::{Package, Pid};

/// Why a [`Receiver`](crate::Receiver) refused a [`Package`]; the package is
/// handed back untouched in either case.
///
/// This is the one send error of the stack: the `stepsched` scheduler's
/// `Handle::send` returns it too (re-exported as `stepsched::SendError`).
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
/// use stepsched_relay::{Package, Pid, Receiver, Router, SendError};
///
/// let router: Router<&str> = Router::default();
/// let err = router.send(Package::new(Pid::new(0, 7), "ping", "hi")).unwrap_err();
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
    /// use stepsched_relay::{Package, Pid, SendError};
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
    /// use stepsched_relay::{Package, Pid, SendError};
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
    /// use stepsched_relay::{Package, Pid, SendError};
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
    /// use stepsched_relay::{Package, Pid, SendError};
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
    /// use stepsched_relay::{Package, Pid, SendError};
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
    /// use stepsched_relay::{Package, Pid, SendError};
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

/// Why [`RoutingTable::register`](crate::RoutingTable::register) refused a
/// route; the target is handed back.
///
/// `Debug` does not print the target, so `RegisterError<T>` implements
/// [`std::error::Error`] for every `T`.
///
/// # Examples
///
/// ```
/// use stepsched_relay::{Pid, RegisterError, RoutingTable};
///
/// let table = RoutingTable::new();
/// let pid = Pid::new(0, 1);
/// table.register(pid, "first").unwrap();
/// let err = table.register(pid, "second").unwrap_err();
/// assert_eq!(err.to_string(), "pid <0.1> is already registered");
/// let RegisterError::AlreadyRegistered { target, .. } = err;
/// assert_eq!(target, "second");
/// assert_eq!(table.get(pid), Some("first"));
/// ```
pub enum RegisterError<T> {
    /// A live route already uses this PID; the table is unchanged.
    AlreadyRegistered {
        /// The PID that is taken.
        pid: Pid,
        /// The target that was not registered.
        target: T,
    },
}

impl<T> RegisterError<T> {
    /// The PID that could not be registered.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RegisterError};
    ///
    /// let err = RegisterError::AlreadyRegistered { pid: Pid::new(0, 3), target: () };
    /// assert_eq!(err.pid(), Pid::new(0, 3));
    /// ```
    #[must_use]
    pub fn pid(&self) -> Pid {
        match self {
            Self::AlreadyRegistered { pid, .. } => *pid,
        }
    }

    /// Takes the refused target back.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RegisterError};
    ///
    /// let err = RegisterError::AlreadyRegistered { pid: Pid::new(0, 3), target: 'x' };
    /// assert_eq!(err.into_target(), 'x');
    /// ```
    #[must_use]
    pub fn into_target(self) -> T {
        match self {
            Self::AlreadyRegistered { target, .. } => target,
        }
    }
}

impl<T> fmt::Display for RegisterError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AlreadyRegistered { pid, .. } => write!(f, "pid {pid} is already registered"),
        }
    }
}

impl<T> fmt::Debug for RegisterError<T> {
    /// Prints the cause and PID, never the target.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AlreadyRegistered { pid, .. } => f
                .debug_struct("AlreadyRegistered")
                .field("pid", pid)
                .finish_non_exhaustive(),
        }
    }
}

impl<T> std::error::Error for RegisterError<T> {}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    /// A payload without `Debug`, to show the errors do not need one.
    struct Opaque(u8);

    fn package(n: u8) -> Package<Opaque> {
        Package::new(Pid::new(0, 4), "topic", Opaque(n)).with_sender(Pid::new(0, 1))
    }

    #[test]
    fn send_error_accessors() {
        let unknown = SendError::UnknownPid(package(1));
        let closed = SendError::Closed(package(2));
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
        let unknown = SendError::UnknownPid(package(1));
        let closed = SendError::Closed(package(1));
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

    #[test]
    fn register_error_accessors_display_debug() {
        let err = RegisterError::AlreadyRegistered {
            pid: Pid::new(2, 3),
            target: Opaque(9),
        };
        assert_eq!(err.pid(), Pid::new(2, 3));
        assert_eq!(err.to_string(), "pid <2.3> is already registered");
        assert_eq!(format!("{err:?}"), "AlreadyRegistered { pid: <2.3>, .. }");
        assert_eq!(err.into_target().0, 9);
        let _: Box<dyn std::error::Error + Send + Sync> =
            Box::new(RegisterError::AlreadyRegistered {
                pid: Pid::new(0, 0),
                target: (),
            });
    }
}
