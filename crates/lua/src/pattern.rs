//! Lua 5.4 pattern matching (the reference manual, §6.4.1), written for
//! the sandbox so that its work is billed against the step's budget.
//!
//! Lua's own matcher (in its C string library) backtracks without bound
//! on a crafted pattern, and nothing can interrupt a C call: one
//! `string.find` on a long subject could hold its worker for hours. This
//! one counts its work in *units* (one per step of the matcher: an item
//! tried, a character compared, a character of a set scanned, a few bytes
//! compared at once) and asks its [`Meter`] whether to go on every
//! [`CHECK_EVERY`] units; the sandbox's meter is the process's guard, so a
//! crafted pattern stops like a long loop does. The Lua functions around
//! it are in `strlib.rs`.
//!
//! The matcher works on bytes (Lua strings are bytes), with C's
//! classification of the "C" locale, and raises Lua's errors, with Lua's
//! messages, at the moment Lua's matcher would: an item is parsed when
//! the match reaches it, so a malformed tail that no attempt reaches is no
//! error, as in Lua.

#![deny(unsafe_code)]

use std::fmt;

/// How many captures a pattern may have (Lua's `LUA_MAXCAPTURES`).
pub(crate) const MAX_CAPTURES: usize = 32;

/// How deeply the matcher may nest its backtracking (a quantifier that
/// matched, a capture): past it the match fails with "pattern too complex",
/// as Lua's does at the same depth.
pub(crate) const MAX_DEPTH: usize = 200;

/// Units of work between two looks at the [`Meter`].
pub(crate) const CHECK_EVERY: u32 = 1 << 12;

/// Bytes compared at once (`==` on slices, `position`) per unit.
const BYTES_PER_UNIT: usize = 16;

/// The most bytes one unbilled scan for a byte covers.
const SCAN_WINDOW: usize = 1 << 14;

const ESC: u8 = b'%';

/// What stops the matcher: asked every [`CHECK_EVERY`] units of work.
pub(crate) trait Meter {
    /// Whether the matcher may go on. Once it says no, the matcher ends
    /// with [`Error::Stopped`].
    fn proceed(&mut self) -> bool;
}

/// A meter that never stops anything.
#[cfg(test)]
impl Meter for () {
    fn proceed(&mut self) -> bool {
        true
    }
}

/// Why a match did not end with a result: Lua's errors for a malformed
/// pattern or replacement, or the meter's stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Error {
    /// A pattern ends with `%`.
    EndsWithEscape,
    /// A set `[...]` has no `]`.
    MissingBracket,
    /// `%b` is not followed by two characters.
    MissingBalanceArguments,
    /// `%f` is not followed by `[`.
    MissingFrontierSet,
    /// A back-reference or a replacement names a capture that is not
    /// there (or not closed yet): the number written after `%`.
    InvalidCaptureIndex(u8),
    /// A `)` closes no capture.
    InvalidPatternCapture,
    /// A capture is used whose `)` the pattern never reached.
    UnfinishedCapture,
    /// The backtracking nested past [`MAX_DEPTH`].
    TooComplex,
    /// A pattern opens more than [`MAX_CAPTURES`] captures.
    TooManyCaptures,
    /// A replacement string has `%` followed by neither a digit nor `%`.
    InvalidReplacementEscape,
    /// The meter stopped the match.
    Stopped,
    /// The matcher panicked (a bug): reported instead of unwinding into
    /// Lua.
    Internal,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::EndsWithEscape => f.write_str("malformed pattern (ends with '%')"),
            Error::MissingBracket => f.write_str("malformed pattern (missing ']')"),
            Error::MissingBalanceArguments => {
                f.write_str("malformed pattern (missing arguments to '%b')")
            }
            Error::MissingFrontierSet => f.write_str("missing '[' after '%f' in pattern"),
            Error::InvalidCaptureIndex(n) => write!(f, "invalid capture index %{n}"),
            Error::InvalidPatternCapture => f.write_str("invalid pattern capture"),
            Error::UnfinishedCapture => f.write_str("unfinished capture"),
            Error::TooComplex => f.write_str("pattern too complex"),
            Error::TooManyCaptures => f.write_str("too many captures"),
            Error::InvalidReplacementEscape => {
                f.write_str("invalid use of '%' in replacement string")
            }
            Error::Stopped => f.write_str("stopped by the step's budget"),
            Error::Internal => f.write_str("stepsched: internal error in pattern matching"),
        }
    }
}

/// A capture slot while matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Opened at this position, not closed yet.
    Open(usize),
    /// The text from the first position to the second.
    Closed(usize, usize),
    /// A position capture `()`.
    Position(usize),
}

/// What a capture of a match holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Captured {
    /// The subject's bytes from the first position to the second.
    Text(usize, usize),
    /// A position capture: the 0-based position (Lua shows it 1-based).
    Position(usize),
}

/// Whether `p` has a byte that makes it a pattern rather than plain text
/// (`string.find` searches plain text when it has none).
pub(crate) fn has_specials(p: &[u8]) -> bool {
    p.iter().any(|b| b"^$*+?.([%-".contains(b))
}

/// Whether byte `c` is in the class `%cl` (`cl` a letter of a class, upper
/// case for its complement; any other byte stands for itself).
fn in_class(c: u8, cl: u8) -> bool {
    let yes = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        // C's isspace: \t \n \v \f \r and space (Rust's ASCII whitespace
        // leaves out \v).
        b's' => c == b' ' || (b'\t'..=b'\r').contains(&c),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return cl == c,
    };
    yes != cl.is_ascii_uppercase()
}

/// Whether byte `c` is in the set `set`, the bytes between `[` and its
/// `]` (a leading `^` included).
fn in_set(c: u8, set: &[u8]) -> bool {
    let (negated, mut set) = match set.split_first() {
        Some((b'^', rest)) => (true, rest),
        _ => (false, set),
    };
    while let Some((&b, rest)) = set.split_first() {
        match rest {
            _ if b == ESC => {
                // An escape that ends the set (its `%` was the end of a
                // range, `[.-%%]`, for the parse) escapes the `]`, as in
                // Lua.
                let (&cl, rest) = rest.split_first().unwrap_or((&b']', &[]));
                if in_class(c, cl) {
                    return !negated;
                }
                set = rest;
            }
            [b'-', hi, rest @ ..] => {
                if (b..=*hi).contains(&c) {
                    return !negated;
                }
                set = rest;
            }
            _ => {
                if b == c {
                    return !negated;
                }
                set = rest;
            }
        }
    }
    negated
}

/// Work billed to a [`Meter`]: asks it every [`CHECK_EVERY`] units.
pub(crate) struct Bill<M> {
    credit: u32,
    meter: M,
}

impl<M: Meter> Bill<M> {
    /// A bill to `meter`, with a full credit.
    pub(crate) fn new(meter: M) -> Self {
        Bill {
            credit: CHECK_EVERY,
            meter,
        }
    }

    /// The meter.
    pub(crate) fn meter(&self) -> &M {
        &self.meter
    }

    /// Bills `units` of work, asking the meter once the credit is spent.
    #[inline]
    pub(crate) fn add(&mut self, units: usize) -> Result<(), Error> {
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        if units < self.credit {
            self.credit -= units;
            return Ok(());
        }
        self.credit = CHECK_EVERY;
        if self.meter.proceed() {
            Ok(())
        } else {
            Err(Error::Stopped)
        }
    }
}

/// The first occurrence of `needle` in `hay` at `from` or later (`from` at
/// most `hay`'s length), as plain bytes. Each candidate is billed, so a
/// quadratic search stops like a backtracking one.
pub(crate) fn find_plain<M: Meter>(
    hay: &[u8],
    needle: &[u8],
    from: usize,
    bill: &mut Bill<M>,
) -> Result<Option<usize>, Error> {
    let Some((&first, rest)) = needle.split_first() else {
        return Ok(Some(from));
    };
    let Some(last) = hay.len().checked_sub(needle.len()) else {
        return Ok(None);
    };
    let compare = 1 + needle.len() / BYTES_PER_UNIT;
    let mut i = from;
    while i <= last {
        let window = &hay[i..=last.min(i + SCAN_WINDOW)];
        match window.iter().position(|&b| b == first) {
            None => {
                bill.add(1 + window.len() / BYTES_PER_UNIT)?;
                i += window.len();
            }
            Some(k) => {
                bill.add(compare + k / BYTES_PER_UNIT)?;
                i += k;
                if hay[i + 1..i + needle.len()] == *rest {
                    return Ok(Some(i));
                }
                i += 1;
            }
        }
    }
    Ok(None)
}

/// A match of one pattern against one subject, with its captures and its
/// bill. Positions are 0-based byte offsets into the subject; pattern
/// positions are offsets into the pattern.
pub(crate) struct Matcher<'a, M> {
    src: &'a [u8],
    pat: &'a [u8],
    level: usize,
    slots: [Slot; MAX_CAPTURES],
    depth: usize,
    bill: Bill<M>,
}

impl<'a, M: Meter> Matcher<'a, M> {
    /// A matcher of `pat` in `src`, billing `meter`.
    pub(crate) fn new(src: &'a [u8], pat: &'a [u8], meter: M) -> Self {
        Matcher {
            src,
            pat,
            level: 0,
            slots: [Slot::Open(0); MAX_CAPTURES],
            depth: 0,
            bill: Bill::new(meter),
        }
    }

    /// The meter.
    pub(crate) fn meter(&self) -> &M {
        self.bill.meter()
    }

    /// Bills `units` of work (see [`Bill::add`]).
    #[inline]
    pub(crate) fn bill(&mut self, units: usize) -> Result<(), Error> {
        self.bill.add(units)
    }

    /// How many captures the last match has.
    pub(crate) fn captures(&self) -> usize {
        self.level
    }

    /// Capture `i` of the last match, which spans `s..e`: the whole match
    /// when the pattern has no captures and `i` is 0.
    pub(crate) fn captured(&self, i: usize, s: usize, e: usize) -> Result<Captured, Error> {
        if i >= self.level {
            return if i == 0 {
                Ok(Captured::Text(s, e))
            } else {
                Err(Error::InvalidCaptureIndex(
                    u8::try_from(i + 1).unwrap_or(u8::MAX),
                ))
            };
        }
        match self.slots[i] {
            Slot::Open(_) => Err(Error::UnfinishedCapture),
            Slot::Closed(a, b) => Ok(Captured::Text(a, b)),
            Slot::Position(p) => Ok(Captured::Position(p)),
        }
    }

    /// Matches the pattern from its position `p` at subject position `s`
    /// (captures reset): the end of the match, if any.
    pub(crate) fn match_at(&mut self, s: usize, p: usize) -> Result<Option<usize>, Error> {
        self.level = 0;
        self.depth = 0;
        self.descend(s, p)
    }

    /// The first match of the pattern from its position `p` that starts at
    /// `from` or later (only at `from` if `anchored`): its start and end.
    /// `from` is at most the subject's length.
    pub(crate) fn search(
        &mut self,
        from: usize,
        p: usize,
        anchored: bool,
    ) -> Result<Option<(usize, usize)>, Error> {
        let mut s = from;
        loop {
            if !anchored {
                s = self.skip(s, p)?;
            }
            if let Some(e) = self.match_at(s, p)? {
                return Ok(Some((s, e)));
            }
            if anchored || s >= self.src.len() {
                return Ok(None);
            }
            s += 1;
        }
    }

    /// The first position at `from` or later where the pattern from its
    /// position `p` may match: when its first item is a single-character
    /// class that must match at least once, the positions whose byte it
    /// does not match are skipped, as each would fail at once with no
    /// error to raise. Lua's matcher tries them one by one; the results
    /// and errors are the same. The subject's length if no byte matches.
    pub(crate) fn skip(&mut self, from: usize, p: usize) -> Result<usize, Error> {
        let pat = self.pat;
        let special = matches!(
            (pat.get(p), pat.get(p + 1)),
            (None | Some(b'(' | b')'), _)
                | (Some(b'$'), None)
                | (Some(&ESC), Some(b'b' | b'f' | b'0'..=b'9'))
        );
        if special {
            return Ok(from);
        }
        let ep = self.item_end(p)?;
        if matches!(pat.get(ep), Some(b'*' | b'?' | b'-')) {
            return Ok(from);
        }
        let literal = match pat[p] {
            b'.' | ESC | b'[' => None,
            b => Some(b),
        };
        let cost = 1 + (ep - p) / BYTES_PER_UNIT;
        let mut s = from;
        while s < self.src.len() {
            let window = &self.src[s..self.src.len().min(s + SCAN_WINDOW)];
            let found = match literal {
                Some(b) => window.iter().position(|&c| c == b),
                None => window.iter().position(|&c| self.single(c, p, ep)),
            };
            let scanned = found.unwrap_or(window.len());
            self.bill(1 + scanned * cost / BYTES_PER_UNIT)?;
            s += scanned;
            if found.is_some() {
                break;
            }
        }
        Ok(s)
    }

    /// The next match of `gmatch` (of the whole pattern, unanchored) from
    /// `from`, skipping a match that ends at `last`, the end of the
    /// previous one (an empty match there).
    pub(crate) fn next_match(
        &mut self,
        from: usize,
        last: Option<usize>,
    ) -> Result<Option<(usize, usize)>, Error> {
        let mut s = from;
        while s <= self.src.len() {
            s = self.skip(s, 0)?;
            match self.match_at(s, 0)? {
                Some(e) if Some(e) != last => return Ok(Some((s, e))),
                _ => s += 1,
            }
        }
        Ok(None)
    }

    /// One level of backtracking deeper.
    fn descend(&mut self, s: usize, p: usize) -> Result<Option<usize>, Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Error::TooComplex);
        }
        let r = self.run(s, p);
        self.depth -= 1;
        r
    }

    /// Matches `pat[p..]` at `src[s..]`: the end of the match. Recurses
    /// (through [`descend`](Self::descend)) only where it may have to come
    /// back: after a quantifier that matched, and into a capture.
    fn run(&mut self, mut s: usize, mut p: usize) -> Result<Option<usize>, Error> {
        let (src, pat) = (self.src, self.pat);
        loop {
            self.bill(1)?;
            let Some(&c) = pat.get(p) else {
                return Ok(Some(s));
            };
            let next = pat.get(p + 1).copied();
            match (c, next) {
                (b'(', Some(b')')) => return self.capture(s, p + 2, Slot::Position(s)),
                (b'(', _) => return self.capture(s, p + 1, Slot::Open(s)),
                (b')', _) => return self.close(s, p + 1),
                (b'$', None) => return Ok((s == src.len()).then_some(s)),
                (ESC, Some(b'b')) => match self.balance(s, p + 2)? {
                    Some(e) => {
                        s = e;
                        p += 4;
                        continue;
                    }
                    None => return Ok(None),
                },
                (ESC, Some(b'f')) => {
                    p += 2;
                    if pat.get(p) != Some(&b'[') {
                        return Err(Error::MissingFrontierSet);
                    }
                    let ep = self.item_end(p)?;
                    let set = &pat[p + 1..ep - 1];
                    let before = if s == 0 { 0 } else { src[s - 1] };
                    let here = src.get(s).copied().unwrap_or(0);
                    if in_set(before, set) || !in_set(here, set) {
                        return Ok(None);
                    }
                    p = ep;
                    continue;
                }
                (ESC, Some(d @ b'0'..=b'9')) => match self.back_reference(s, d)? {
                    Some(e) => {
                        s = e;
                        p += 2;
                        continue;
                    }
                    None => return Ok(None),
                },
                _ => {}
            }
            // A single-character item, maybe quantified.
            let ep = self.item_end(p)?;
            let cost = 1 + (ep - p) / BYTES_PER_UNIT;
            let here = src.get(s).is_some_and(|&b| self.single(b, p, ep));
            match pat.get(ep) {
                Some(b'?') => {
                    if here && let Some(e) = self.descend(s + 1, ep + 1)? {
                        return Ok(Some(e));
                    }
                    p = ep + 1;
                }
                Some(b'+') => {
                    return if here {
                        self.longest(s + 1, p, ep, cost)
                    } else {
                        Ok(None)
                    };
                }
                Some(b'*') if here => return self.longest(s, p, ep, cost),
                Some(b'-') if here => return self.shortest(s, p, ep, cost),
                Some(b'*' | b'-') => p = ep + 1,
                _ if here => {
                    s += 1;
                    p = ep;
                }
                _ => return Ok(None),
            }
        }
    }

    /// The end of the single-character item at `p` (a byte, `.`, `%x` or
    /// a set), which the pattern has.
    fn item_end(&mut self, p: usize) -> Result<usize, Error> {
        let pat = self.pat;
        match pat[p] {
            ESC if p + 1 < pat.len() => Ok(p + 2),
            ESC => Err(Error::EndsWithEscape),
            b'[' => {
                let mut q = p + 1;
                if pat.get(q) == Some(&b'^') {
                    q += 1;
                }
                // The first byte of a set is never its end, so `[]]` is
                // the set of `]`; an escape takes the byte after it.
                loop {
                    let Some(&b) = pat.get(q) else {
                        return Err(Error::MissingBracket);
                    };
                    q += 1;
                    if b == ESC && q < pat.len() {
                        q += 1;
                    }
                    if pat.get(q) == Some(&b']') {
                        self.bill((q - p) / BYTES_PER_UNIT)?;
                        return Ok(q + 1);
                    }
                }
            }
            _ => Ok(p + 1),
        }
    }

    /// Whether byte `c` matches the single-character item `pat[p..ep]`.
    #[inline]
    fn single(&self, c: u8, p: usize, ep: usize) -> bool {
        match self.pat[p] {
            b'.' => true,
            ESC => in_class(c, self.pat[p + 1]),
            b'[' => in_set(c, &self.pat[p + 1..ep - 1]),
            b => b == c,
        }
    }

    /// The item `pat[p..ep]` repeated as often as it matches from `s`,
    /// then fewer times, until the rest of the pattern matches.
    fn longest(
        &mut self,
        s: usize,
        p: usize,
        ep: usize,
        cost: usize,
    ) -> Result<Option<usize>, Error> {
        let mut n = 0;
        while let Some(&b) = self.src.get(s + n) {
            if !self.single(b, p, ep) {
                break;
            }
            self.bill(cost)?;
            n += 1;
        }
        loop {
            if let Some(e) = self.descend(s + n, ep + 1)? {
                return Ok(Some(e));
            }
            if n == 0 {
                return Ok(None);
            }
            n -= 1;
        }
    }

    /// The item `pat[p..ep]` repeated as few times as lets the rest of the
    /// pattern match from `s`.
    fn shortest(
        &mut self,
        mut s: usize,
        p: usize,
        ep: usize,
        cost: usize,
    ) -> Result<Option<usize>, Error> {
        loop {
            if let Some(e) = self.descend(s, ep + 1)? {
                return Ok(Some(e));
            }
            self.bill(cost)?;
            match self.src.get(s) {
                Some(&b) if self.single(b, p, ep) => s += 1,
                _ => return Ok(None),
            }
        }
    }

    /// Opens capture `slot` at `s` and matches the rest of the pattern
    /// from `p`.
    fn capture(&mut self, s: usize, p: usize, slot: Slot) -> Result<Option<usize>, Error> {
        if self.level >= MAX_CAPTURES {
            return Err(Error::TooManyCaptures);
        }
        self.slots[self.level] = slot;
        self.level += 1;
        let r = self.descend(s, p)?;
        if r.is_none() {
            self.level -= 1;
        }
        Ok(r)
    }

    /// Closes the innermost open capture at `s` and matches the rest of
    /// the pattern from `p`.
    fn close(&mut self, s: usize, p: usize) -> Result<Option<usize>, Error> {
        let Some((i, start)) =
            self.slots[..self.level]
                .iter()
                .enumerate()
                .rev()
                .find_map(|(i, slot)| match *slot {
                    Slot::Open(start) => Some((i, start)),
                    _ => None,
                })
        else {
            return Err(Error::InvalidPatternCapture);
        };
        self.slots[i] = Slot::Closed(start, s);
        let r = self.descend(s, p)?;
        if r.is_none() {
            self.slots[i] = Slot::Open(start);
        }
        Ok(r)
    }

    /// `%bxy` at `s`, `x` and `y` at pattern position `p`: the end of the
    /// balanced text.
    fn balance(&mut self, s: usize, p: usize) -> Result<Option<usize>, Error> {
        let (open, close) = match self.pat.get(p..p + 2) {
            Some(&[open, close]) => (open, close),
            _ => return Err(Error::MissingBalanceArguments),
        };
        if self.src.get(s) != Some(&open) {
            return Ok(None);
        }
        let mut depth = 1usize;
        for (i, &b) in self.src.iter().enumerate().skip(s + 1) {
            self.bill(1)?;
            if b == close {
                depth -= 1;
                if depth == 0 {
                    return Ok(Some(i + 1));
                }
            } else if b == open {
                depth += 1;
            }
        }
        Ok(None)
    }

    /// `%d` at `s`, `d` the digit: the end of the repeated capture.
    fn back_reference(&mut self, s: usize, d: u8) -> Result<Option<usize>, Error> {
        let i = usize::from(d - b'0');
        let slot = match i.checked_sub(1) {
            Some(i) if i < self.level => self.slots[i],
            _ => return Err(Error::InvalidCaptureIndex(d - b'0')),
        };
        match slot {
            Slot::Open(_) => Err(Error::InvalidCaptureIndex(d - b'0')),
            // A position has no text: it repeats nowhere.
            Slot::Position(_) => Ok(None),
            Slot::Closed(a, b) => {
                let len = b - a;
                self.bill(1 + len / BYTES_PER_UNIT)?;
                let src = self.src;
                Ok((src.get(s..s + len) == Some(&src[a..b])).then_some(s + len))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(s: &str, p: &str) -> Result<Option<(usize, usize)>, Error> {
        let (p, anchored) = match p.strip_prefix('^') {
            Some(rest) => (rest, true),
            None => (p, false),
        };
        let mut m = Matcher::new(s.as_bytes(), p.as_bytes(), ());
        m.search(0, 0, anchored)
    }

    #[test]
    fn classes_follow_the_c_locale() {
        assert!(in_class(0x0b, b's'), "\\v is a space in C");
        assert!(!in_class(0x0b, b'S'));
        assert!(in_class(b'_', b'p'));
        assert!(in_class(b'y', b'y'), "an unknown letter is itself");
        assert!(in_class(b'Y', b'Y'));
        assert!(in_class(0, b'z'));
        assert!(in_class(0x7f, b'c'));
    }

    #[test]
    fn sets() {
        assert!(in_set(b']', b"]"));
        assert!(in_set(b'a', b"]-a"));
        assert!(in_set(b'-', b"a-"));
        assert!(!in_set(b'b', b"a-%z"));
        assert!(in_set(b'5', b"^%a"));
        // `.-%` is a range, so the last `%` escapes the `]`.
        assert!(in_set(b']', b".-%%"));
        assert!(!in_set(b'%', b".-%%"));
    }

    #[test]
    fn a_few_matches() {
        assert_eq!(find("hello world", "o w"), Ok(Some((4, 7))));
        assert_eq!(find("hello", "l+"), Ok(Some((2, 4))));
        assert_eq!(find("hello", "^h.-l"), Ok(Some((0, 3))));
        assert_eq!(find("THE (quick) fox", "%f[%a]%a+"), Ok(Some((0, 3))));
        assert_eq!(find("x(a(b)c)y", "%b()"), Ok(Some((1, 8))));
        assert_eq!(find("abab", "(ab)%1"), Ok(Some((0, 4))));
        assert_eq!(find("a", "(a"), Ok(Some((0, 1))));
        assert_eq!(find("a", "%"), Err(Error::EndsWithEscape));
        assert_eq!(find("a", "a)"), Err(Error::InvalidPatternCapture));
        assert_eq!(find("b", "a%"), Ok(None), "a tail no attempt reaches");
    }

    #[test]
    fn the_depth_limit_is_lua_s() {
        let s = "a".repeat(300);
        assert!(find(&s, &"a?".repeat(199)).is_ok());
        assert_eq!(find(&s, &"a?".repeat(200)), Err(Error::TooComplex));
    }

    #[test]
    fn a_stopping_meter_stops() {
        struct Stop(u32);
        impl Meter for Stop {
            fn proceed(&mut self) -> bool {
                self.0 += 1;
                false
            }
        }
        let s = "a".repeat(10_000);
        let mut m = Matcher::new(s.as_bytes(), b".-.-.-b", Stop(0));
        assert_eq!(m.search(0, 0, false), Err(Error::Stopped));
        assert_eq!(m.meter().0, 1);
    }
}
