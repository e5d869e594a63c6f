//! Process ids: [`Pid`], its text form and [`PidAllocator`].
//!
//! A [`Pid`] is a node number (`u32`) and a process number (`u64`) unique
//! within that node. The text form is `<node.number>`, as on the BEAM, so a
//! later multi-node relay can route on the node part without a format change.

use core::fmt;
use core::num::NonZeroU64;
use core::str::FromStr;

use crate::primitive::sync::atomic::{AtomicU64, Ordering};

/// A process id: the node it lives on and its number on that node.
///
/// `Pid` is `Copy`, 16 bytes, totally ordered by `(node, number)`, and hashes
/// with two integer writes, so [`PidBuildHasher`](crate::PidBuildHasher) turns
/// it into a table index in a handful of instructions.
///
/// Its [`Display`](fmt::Display) form `<node.number>` parses back with
/// [`FromStr`] to the same `Pid`.
///
/// # Examples
///
/// ```
/// use stepsched_relay::Pid;
///
/// let pid = Pid::new(0, 42);
/// assert_eq!(pid.node(), 0);
/// assert_eq!(pid.number(), 42);
/// assert_eq!(pid.to_string(), "<0.42>");
/// assert_eq!("<0.42>".parse::<Pid>(), Ok(pid));
/// assert!(Pid::new(0, 42) < Pid::new(1, 0));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid {
    // Field order is the `Ord` order: node first, then number.
    node: u32,
    number: u64,
}

impl Pid {
    /// Builds the id of process `number` on `node`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::Pid;
    ///
    /// const ROOT: Pid = Pid::new(0, 0);
    /// assert_eq!(ROOT.to_string(), "<0.0>");
    /// ```
    #[inline]
    #[must_use]
    pub const fn new(node: u32, number: u64) -> Self {
        Self { node, number }
    }

    /// The node this process lives on.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::Pid;
    ///
    /// assert_eq!(Pid::new(3, 9).node(), 3);
    /// ```
    #[inline]
    #[must_use]
    pub const fn node(self) -> u32 {
        self.node
    }

    /// The number of this process, unique on its node.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::Pid;
    ///
    /// assert_eq!(Pid::new(3, 9).number(), 9);
    /// ```
    #[inline]
    #[must_use]
    pub const fn number(self) -> u64 {
        self.number
    }
}

impl fmt::Display for Pid {
    /// Writes `<node.number>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}.{}>", self.node, self.number)
    }
}

impl fmt::Debug for Pid {
    /// Writes the same `<node.number>` form as `Display`, which keeps logs
    /// of packages and errors short.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Pid {
    type Err = ParsePidError;

    /// Parses `<node.number>` or the bare `node.number`.
    ///
    /// Both parts are plain decimal digits (no sign, no spaces); `node` must
    /// fit a `u32` and `number` a `u64`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::Pid;
    ///
    /// assert_eq!("<2.7>".parse(), Ok(Pid::new(2, 7)));
    /// assert_eq!("2.7".parse(), Ok(Pid::new(2, 7)));
    /// assert!("<2.7".parse::<Pid>().is_err());
    /// assert!("<2.+7>".parse::<Pid>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let inner = match (s.strip_prefix('<'), s.strip_suffix('>')) {
            // Both brackets present: `s` is at least `<>`, and `>` is one byte.
            (Some(rest), Some(_)) => &rest[..rest.len() - 1],
            (None, None) => s,
            _ => return Err(ParsePidError(ParseErrorKind::Brackets)),
        };
        let (node, number) = inner
            .split_once('.')
            .ok_or(ParsePidError(ParseErrorKind::MissingDot))?;
        Ok(Pid::new(parse_digits(node)?, parse_digits(number)?))
    }
}

/// Parses a non-empty run of ASCII digits, refusing the signs and other forms
/// the integer `FromStr` impls would accept.
fn parse_digits<N: FromStr>(s: &str) -> Result<N, ParsePidError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParsePidError(ParseErrorKind::NotDecimal));
    }
    // Only digits remain, so the sole failure left is overflow.
    s.parse()
        .map_err(|_| ParsePidError(ParseErrorKind::Overflow))
}

/// The error returned when a string is not a [`Pid`].
///
/// # Examples
///
/// ```
/// use stepsched_relay::Pid;
///
/// let err = "<1.x>".parse::<Pid>().unwrap_err();
/// assert_eq!(err.to_string(), "invalid pid: a part is not a decimal number");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsePidError(ParseErrorKind);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParseErrorKind {
    Brackets,
    MissingDot,
    NotDecimal,
    Overflow,
}

impl fmt::Display for ParsePidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            ParseErrorKind::Brackets => "invalid pid: unbalanced `<` `>`",
            ParseErrorKind::MissingDot => "invalid pid: expected `node.number`",
            ParseErrorKind::NotDecimal => "invalid pid: a part is not a decimal number",
            ParseErrorKind::Overflow => "invalid pid: a part is too large",
        })
    }
}

impl std::error::Error for ParsePidError {}

/// Hands out unique [`Pid`]s for one node from an atomic counter.
///
/// [`allocate`](Self::allocate) is a single lock-free read-modify-write, so
/// every worker can call it on a shared allocator. Numbers start at 1 (or at
/// the value given to [`starting_at`](Self::starting_at)) and are never
/// handed out twice; `<node.0>` is left free for a well-known process of the
/// caller's choice.
///
/// # Examples
///
/// ```
/// use stepsched_relay::{Pid, PidAllocator};
///
/// let pids = PidAllocator::new(7);
/// assert_eq!(pids.allocate(), Pid::new(7, 1));
/// assert_eq!(pids.allocate(), Pid::new(7, 2));
/// ```
#[derive(Debug)]
pub struct PidAllocator {
    node: u32,
    /// The next number to hand out; `u64::MAX` once the space is used up
    /// (`u64::MAX` itself is never handed out, see `try_allocate`).
    next: AtomicU64,
}

impl PidAllocator {
    /// An allocator for `node` whose first id is `<node.1>`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::PidAllocator;
    ///
    /// assert_eq!(PidAllocator::new(0).allocate().to_string(), "<0.1>");
    /// ```
    #[must_use]
    pub fn new(node: u32) -> Self {
        Self::starting_at(node, NonZeroU64::MIN)
    }

    /// An allocator for `node` whose first id is `<node.first>`, for example
    /// to resume above the ids a previous run of the node handed out.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use stepsched_relay::{Pid, PidAllocator};
    ///
    /// let pids = PidAllocator::starting_at(1, NonZeroU64::new(1000).unwrap());
    /// assert_eq!(pids.allocate(), Pid::new(1, 1000));
    /// ```
    #[must_use]
    pub fn starting_at(node: u32, first: NonZeroU64) -> Self {
        Self {
            node,
            next: AtomicU64::new(first.get()),
        }
    }

    /// The node whose ids this allocator hands out.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::PidAllocator;
    ///
    /// assert_eq!(PidAllocator::new(5).node(), 5);
    /// ```
    #[must_use]
    pub fn node(&self) -> u32 {
        self.node
    }

    /// Hands out a fresh id.
    ///
    /// # Panics
    ///
    /// When all `u64::MAX - 1` numbers have been handed out (about 580 years
    /// at a billion ids a second). Use [`try_allocate`](Self::try_allocate)
    /// to handle that case.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::PidAllocator;
    ///
    /// let pids = PidAllocator::new(0);
    /// assert_ne!(pids.allocate(), pids.allocate());
    /// ```
    #[must_use]
    pub fn allocate(&self) -> Pid {
        self.try_allocate().unwrap_or_else(|| exhausted(self.node))
    }

    /// Hands out a fresh id, or `None` once the node's numbers are used up.
    ///
    /// Exhaustion is sticky: the counter stops at `u64::MAX` instead of
    /// wrapping, so no id is ever handed out twice.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use stepsched_relay::{Pid, PidAllocator};
    ///
    /// let pids = PidAllocator::starting_at(0, NonZeroU64::new(u64::MAX - 1).unwrap());
    /// assert_eq!(pids.try_allocate(), Some(Pid::new(0, u64::MAX - 1)));
    /// assert_eq!(pids.try_allocate(), None);
    /// assert_eq!(pids.try_allocate(), None);
    /// ```
    #[must_use]
    pub fn try_allocate(&self) -> Option<Pid> {
        self.next
            // Relaxed: uniqueness needs only the atomicity of the RMW (all
            // RMWs on one location are totally ordered); the counter
            // publishes no other memory, so nothing needs happens-before.
            // `u64::MAX` is never handed out: it marks exhaustion.
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
            .ok()
            .map(|number| Pid::new(self.node, number))
    }
}

#[cold]
#[inline(never)]
fn exhausted(node: u32) -> ! {
    panic!("stepsched-relay: pid numbers of node {node} are exhausted")
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    #[test]
    fn accessors_and_order() {
        let pid = Pid::new(4, 2);
        assert_eq!((pid.node(), pid.number()), (4, 2));
        assert!(Pid::new(0, u64::MAX) < Pid::new(1, 0));
        assert!(Pid::new(1, 1) < Pid::new(1, 2));
        assert_eq!(core::mem::size_of::<Pid>(), 16);
    }

    #[test]
    fn display_and_debug() {
        let pid = Pid::new(u32::MAX, u64::MAX);
        assert_eq!(pid.to_string(), format!("<{}.{}>", u32::MAX, u64::MAX));
        assert_eq!(format!("{pid:?}"), pid.to_string());
    }

    #[test]
    fn parse_accepts_both_forms() {
        assert_eq!("<0.42>".parse(), Ok(Pid::new(0, 42)));
        assert_eq!("0.42".parse(), Ok(Pid::new(0, 42)));
        assert_eq!("<007.1>".parse(), Ok(Pid::new(7, 1)));
        let max = format!("<{}.{}>", u32::MAX, u64::MAX);
        assert_eq!(max.parse(), Ok(Pid::new(u32::MAX, u64::MAX)));
    }

    #[test]
    fn parse_rejects_malformed() {
        let cases = [
            ("", ParseErrorKind::MissingDot),
            ("<>", ParseErrorKind::MissingDot),
            ("<", ParseErrorKind::Brackets),
            (">", ParseErrorKind::Brackets),
            ("<1.2", ParseErrorKind::Brackets),
            ("1.2>", ParseErrorKind::Brackets),
            ("12", ParseErrorKind::MissingDot),
            ("<1.>", ParseErrorKind::NotDecimal),
            ("<.1>", ParseErrorKind::NotDecimal),
            ("<1.2.3>", ParseErrorKind::NotDecimal),
            ("<+1.2>", ParseErrorKind::NotDecimal),
            ("<1.-2>", ParseErrorKind::NotDecimal),
            ("< 1.2>", ParseErrorKind::NotDecimal),
            ("<<1.2>>", ParseErrorKind::NotDecimal),
            ("<4294967296.0>", ParseErrorKind::Overflow),
            ("<0.18446744073709551616>", ParseErrorKind::Overflow),
        ];
        for (input, kind) in cases {
            assert_eq!(input.parse::<Pid>(), Err(ParsePidError(kind)), "{input:?}");
        }
    }

    #[test]
    fn parse_error_messages_differ() {
        let kinds = [
            ParseErrorKind::Brackets,
            ParseErrorKind::MissingDot,
            ParseErrorKind::NotDecimal,
            ParseErrorKind::Overflow,
        ];
        let messages: std::collections::HashSet<String> = kinds
            .iter()
            .map(|&k| ParsePidError(k).to_string())
            .collect();
        assert_eq!(messages.len(), kinds.len());
        assert!(messages.iter().all(|m| m.starts_with("invalid pid: ")));
    }

    #[test]
    fn allocator_counts_up_from_one() {
        let pids = PidAllocator::new(9);
        assert_eq!(pids.node(), 9);
        let got: Vec<Pid> = (0..3).map(|_| pids.allocate()).collect();
        assert_eq!(got, [Pid::new(9, 1), Pid::new(9, 2), Pid::new(9, 3)]);
    }

    #[test]
    fn allocator_exhaustion_is_sticky() {
        let pids = PidAllocator::starting_at(0, NonZeroU64::new(u64::MAX - 2).unwrap());
        assert_eq!(pids.try_allocate(), Some(Pid::new(0, u64::MAX - 2)));
        assert_eq!(pids.try_allocate(), Some(Pid::new(0, u64::MAX - 1)));
        for _ in 0..3 {
            assert_eq!(pids.try_allocate(), None);
        }
    }

    #[test]
    #[should_panic(expected = "pid numbers of node 3 are exhausted")]
    fn allocate_panics_when_exhausted() {
        let pids = PidAllocator::starting_at(3, NonZeroU64::new(u64::MAX).unwrap());
        let _ = pids.allocate();
    }
}
