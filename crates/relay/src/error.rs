//! The error of registering a route; it hands back what it refused.
//! (`SendError` is defined by `stepsched-process` and re-exported.)

use core::fmt;

use crate::Pid;

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
