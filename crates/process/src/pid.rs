//! Process ids: [`Pid`] and its text form.
//!
//! A [`Pid`] is a node number (`u32`) and a process number (`u64`) unique
//! within that node. The text form is `<node.number>`, as on the BEAM, so a
//! later multi-node relay can route on the node part without a format change.

use core::fmt;
use core::str::FromStr;

/// A process id: the node it lives on and its number on that node.
///
/// `Pid` is `Copy`, 16 bytes, totally ordered by `(node, number)`, and hashes
/// with two integer writes, so `stepsched-relay`'s `PidBuildHasher` turns
/// it into a table index in a handful of instructions.
///
/// Its [`Display`](fmt::Display) form `<node.number>` parses back with
/// [`FromStr`] to the same `Pid`.
///
/// # Examples
///
/// ```
/// use stepsched_process::Pid;
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
    /// use stepsched_process::Pid;
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
    /// use stepsched_process::Pid;
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
    /// use stepsched_process::Pid;
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
    /// use stepsched_process::Pid;
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
/// use stepsched_process::Pid;
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
}
