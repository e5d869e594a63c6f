//! [`Error`]: why a process did not produce a result, and why a yield failed.

use std::any::Any;
use std::error::Error as StdError;
use std::fmt;

/// A boxed error from a process, a handler or a runtime, kept as the
/// [`source`](StdError::source) of an [`Error::Source`].
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Why a process did not produce a result, or why one of its yields failed.
///
/// The same type travels in both directions: a [`Process`](crate::Process)
/// returns it from `init` or `step`, and a scheduler hands it back inside a
/// failed completion ([`Event::completion`](crate::Event::completion) with
/// `Err`). The variants separate the causes a scheduler must report
/// differently: the caller asked for an entry point (or an upgrade to a
/// factory) that does not exist, the process (or a handler) failed, the
/// process was cancelled or terminated, or it panicked.
///
/// ```
/// use stepsched_process::Error;
///
/// let e = Error::UnknownMethod("sum".into());
/// assert_eq!(e.to_string(), "unknown method `sum`");
///
/// let e = Error::failed("disk full");
/// assert!(matches!(e, Error::Failed(ref m) if m == "disk full"));
///
/// let io = std::io::Error::other("connection reset");
/// let e = Error::from_source(io);
/// assert!(std::error::Error::source(&e).is_some());
/// ```
///
/// # Equality
///
/// Errors compare equal when they have the same variant and the same
/// message, so results can be compared in tests:
///
/// ```
/// use stepsched_process::Error;
///
/// let result: Result<u32, Error> = Err(Error::Terminated);
/// assert_eq!(result, Err(Error::Terminated));
/// assert_ne!(Error::failed("a"), Error::failed("b"));
/// ```
///
/// An [`Error::Source`] is never equal to any error, itself included: a
/// boxed error has no equality of its own (and comparing the boxes'
/// addresses would make two zero-sized errors equal). Match on it, or
/// downcast its [`source`](StdError::source), instead:
///
/// ```
/// use stepsched_process::Error;
///
/// let e = Error::from_source(std::io::Error::other("reset"));
/// assert_ne!(e, e);
/// assert!(matches!(e, Error::Source(ref s) if s.is::<std::io::Error>()));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// `init` was called with a method name the process does not expose.
    UnknownMethod(String),
    /// An upgrade named a process factory the scheduler does not have
    /// ([`Context::upgrade_from`](crate::Context::upgrade_from)); the string
    /// is the name asked for. The process ends with this error.
    ///
    /// ```
    /// use stepsched_process::Error;
    ///
    /// let e = Error::UnknownFactory("worker-v3".into());
    /// assert_eq!(e.to_string(), "no process factory named `worker-v3`");
    /// ```
    UnknownFactory(String),
    /// The process, or a handler running one of its commands, failed; the
    /// message says why.
    Failed(String),
    /// The process, a handler or a runtime failed with an error value of its
    /// own, kept as this error's [`source`](StdError::source).
    Source(BoxError),
    /// The process stopped because it was asked to: it returned this on a
    /// cancel event or a cancelled token (for example at shutdown), or a
    /// scheduler forced it to complete when a shutdown deadline passed.
    Cancelled,
    /// The process was terminated: a scheduler's `terminate` forced it to
    /// complete before it finished. (A process forced at a shutdown
    /// deadline ends with [`Error::Cancelled`], not this.)
    Terminated,
    /// A call into the process panicked; the message is the panic payload
    /// when it was a string.
    Panicked(String),
}

impl Error {
    /// An [`Error::Failed`] with the given message.
    ///
    /// ```
    /// use stepsched_process::Error;
    ///
    /// let e = Error::failed(format!("bad input {}", 7));
    /// assert_eq!(e.to_string(), "process failed: bad input 7");
    /// ```
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// An [`Error::Source`] wrapping `error`.
    ///
    /// ```
    /// use stepsched_process::Error;
    ///
    /// let e = Error::from_source(std::io::Error::other("timed out"));
    /// assert_eq!(e.to_string(), "timed out");
    /// ```
    pub fn from_source(error: impl Into<BoxError>) -> Self {
        Self::Source(error.into())
    }

    /// An [`Error::Panicked`] from the payload of a caught panic (what
    /// [`std::panic::catch_unwind`] returns), keeping its message when the
    /// payload is a `&str` or a `String`.
    ///
    /// ```
    /// use stepsched_process::Error;
    ///
    /// let payload = std::panic::catch_unwind(|| panic!("step {} broke", 3)).unwrap_err();
    /// let e = Error::from_panic(payload.as_ref());
    /// assert!(matches!(e, Error::Panicked(ref m) if m == "step 3 broke"));
    /// ```
    pub fn from_panic(payload: &(dyn Any + Send)) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&'static str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "panic payload is not a string".to_owned()
        };
        Self::Panicked(message)
    }

    /// Whether the process ended because it was cancelled or terminated
    /// rather than because it (or a handler) failed.
    ///
    /// ```
    /// use stepsched_process::Error;
    ///
    /// assert!(Error::Cancelled.is_stopped());
    /// assert!(Error::Terminated.is_stopped());
    /// assert!(!Error::failed("x").is_stopped());
    /// ```
    pub fn is_stopped(&self) -> bool {
        matches!(self, Self::Cancelled | Self::Terminated)
    }

    /// Whether this is [`Error::Cancelled`].
    ///
    /// ```
    /// use stepsched_process::Error;
    ///
    /// assert!(Error::Cancelled.is_cancelled());
    /// assert!(!Error::Terminated.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Self::Cancelled)
    }

    /// Whether this is [`Error::Terminated`].
    ///
    /// ```
    /// use stepsched_process::Error;
    ///
    /// assert!(Error::Terminated.is_terminated());
    /// assert!(!Error::Cancelled.is_terminated());
    /// ```
    pub fn is_terminated(&self) -> bool {
        matches!(self, Self::Terminated)
    }

    /// Whether this is [`Error::Panicked`], whatever the message.
    ///
    /// ```
    /// use stepsched_process::Error;
    ///
    /// assert!(Error::Panicked("boom".into()).is_panicked());
    /// assert!(!Error::failed("boom").is_panicked());
    /// ```
    pub fn is_panicked(&self) -> bool {
        matches!(self, Self::Panicked(_))
    }
}

/// Same variant and same message; an [`Error::Source`] is equal to nothing
/// (see [`Error`]'s "Equality").
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::UnknownMethod(a), Self::UnknownMethod(b))
            | (Self::UnknownFactory(a), Self::UnknownFactory(b))
            | (Self::Failed(a), Self::Failed(b))
            | (Self::Panicked(a), Self::Panicked(b)) => a == b,
            (Self::Cancelled, Self::Cancelled) | (Self::Terminated, Self::Terminated) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownMethod(method) => write!(f, "unknown method `{method}`"),
            Self::UnknownFactory(name) => write!(f, "no process factory named `{name}`"),
            Self::Failed(message) => write!(f, "process failed: {message}"),
            Self::Source(source) => fmt::Display::fmt(source, f),
            Self::Cancelled => f.write_str("process cancelled"),
            Self::Terminated => f.write_str("process terminated"),
            Self::Panicked(message) => write!(f, "process panicked: {message}"),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Source(source) => Some(source.as_ref()),
            _ => None,
        }
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_cause() {
        assert_eq!(Error::Cancelled.to_string(), "process cancelled");
        assert_eq!(Error::Terminated.to_string(), "process terminated");
        assert_eq!(
            Error::Panicked("boom".into()).to_string(),
            "process panicked: boom"
        );
        assert_eq!(
            Error::UnknownMethod("m".into()).to_string(),
            "unknown method `m`"
        );
        assert_eq!(
            Error::UnknownFactory("v2".into()).to_string(),
            "no process factory named `v2`"
        );
    }

    #[test]
    fn from_panic_keeps_str_and_string_payloads() {
        let s: Box<dyn Any + Send> = Box::new("static");
        assert!(matches!(Error::from_panic(s.as_ref()), Error::Panicked(m) if m == "static"));
        let s: Box<dyn Any + Send> = Box::new(String::from("owned"));
        assert!(matches!(Error::from_panic(s.as_ref()), Error::Panicked(m) if m == "owned"));
        let s: Box<dyn Any + Send> = Box::new(42_u8);
        assert!(
            matches!(Error::from_panic(s.as_ref()), Error::Panicked(m) if m.contains("not a string"))
        );
    }

    #[test]
    fn only_source_has_a_source() {
        assert!(Error::failed("x").source().is_none());
        let e = Error::from_source(std::io::Error::other("inner"));
        assert_eq!(
            e.source().map(ToString::to_string).as_deref(),
            Some("inner")
        );
    }

    #[test]
    #[allow(clippy::eq_op)] // `a != a` is the point
    fn equality_compares_variant_and_message_never_sources() {
        assert_eq!(Error::Cancelled, Error::Cancelled);
        assert_eq!(Error::Terminated, Error::Terminated);
        assert_ne!(Error::Cancelled, Error::Terminated);
        assert_eq!(Error::failed("x"), Error::failed("x"));
        assert_ne!(Error::failed("x"), Error::failed("y"));
        assert_ne!(Error::failed("x"), Error::Panicked("x".into()));
        assert_eq!(Error::Panicked("p".into()), Error::Panicked("p".into()));
        assert_eq!(
            Error::UnknownMethod("m".into()),
            Error::UnknownMethod("m".into())
        );
        assert_ne!(Error::UnknownMethod("m".into()), Error::failed("m"));
        assert_eq!(
            Error::UnknownFactory("f".into()),
            Error::UnknownFactory("f".into())
        );
        assert_ne!(
            Error::UnknownFactory("f".into()),
            Error::UnknownFactory("g".into())
        );
        assert_ne!(
            Error::UnknownFactory("f".into()),
            Error::UnknownMethod("f".into())
        );
        // Zero-sized sources share an address: still not equal.
        #[derive(Debug)]
        struct Zst;
        impl fmt::Display for Zst {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("zst")
            }
        }
        impl StdError for Zst {}
        let a = Error::from_source(Zst);
        assert_ne!(a, Error::from_source(Zst));
        assert_ne!(a, a);
    }

    #[test]
    fn is_helpers_name_one_variant_each() {
        let all = [
            Error::Cancelled,
            Error::Terminated,
            Error::Panicked("p".into()),
            Error::failed("f"),
        ];
        let flags: Vec<_> = all
            .iter()
            .map(|e| (e.is_cancelled(), e.is_terminated(), e.is_panicked()))
            .collect();
        assert_eq!(
            flags,
            [
                (true, false, false),
                (false, true, false),
                (false, false, true),
                (false, false, false)
            ]
        );
    }

    #[test]
    fn error_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Error>();
    }
}
