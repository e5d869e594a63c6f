//! The sandbox's `string.find`, `string.match`, `string.gmatch` and
//! `string.gsub`: Lua 5.4's arguments, results and errors, with the
//! matching done by [`crate::pattern`], which bills its work against the
//! process's [`Guard`] (see the module docs there).
//!
//! They are C functions like the rest of the guard, not `mlua` callbacks:
//! an error a callback returns reaches the script as a userdata, not as
//! Lua's string, so `pcall(string.find, s, "%")` would no longer give the
//! message, and `luaL_check*` gives the argument errors Lua's own
//! functions give, naming `string.find` the same way.
//!
//! What makes them sound: every Rust value in their frames is plain data
//! (slices into strings on the Lua stack, the matcher, integers), so a Lua
//! error (a `longjmp`, which any allocation may raise) skips no
//! destructor; the subject, pattern and replacement strings stay on the
//! stack (or in the iterator's upvalues) while slices of them are used,
//! and Lua's collector does not move strings; the matcher runs no Lua code,
//! and a panic in it is caught before it reaches Lua.

use std::ffi::{CStr, c_int};
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::slice;

use mlua::ffi::{self, lua_State};

use crate::guard::{self, Guard};
use crate::pattern::{self, Bill, Captured, Error, Matcher, Meter};

/// The process's guard as the matcher's meter: its check with the clock,
/// and the message to raise once it said stop.
struct GuardMeter<'g> {
    guard: Option<&'g Guard>,
    stop: Option<&'static CStr>,
}

impl Meter for GuardMeter<'_> {
    fn proceed(&mut self) -> bool {
        match self.guard.and_then(Guard::check_budget) {
            None => true,
            Some(msg) => {
                self.stop = Some(msg);
                false
            }
        }
    }
}

type M<'a> = Matcher<'a, GuardMeter<'a>>;

/// A matcher of `pat` in `src` metered by the guard of `l`.
///
/// # Safety
///
/// `l` is a thread of a state set up by `guard::install` (or of none),
/// whose guard outlives the returned matcher.
unsafe fn matcher<'a>(l: *mut lua_State, src: &'a [u8], pat: &'a [u8]) -> M<'a> {
    // SAFETY: the caller's contract.
    let guard = unsafe { guard::guard_of(l) };
    Matcher::new(src, pat, GuardMeter { guard, stop: None })
}

/// Runs `f`, a piece of matching, turning a panic into [`Error::Internal`]
/// (its payload dropped here) so that no unwind reaches Lua's C frames.
fn contain<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(Err(Error::Internal))
}

/// The bytes of the string at `idx` (`luaL_checklstring`: a number is
/// converted in place; anything else raises Lua's argument error).
///
/// # Safety
///
/// As [`guard::raise`]; the slice is valid while the value stays at `idx`.
unsafe fn check_bytes<'a>(l: *mut lua_State, idx: c_int) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: the caller's contract; Lua returns a pointer to `len` bytes
    // of the string now at `idx`, which stays there.
    unsafe {
        let p = ffi::luaL_checklstring(l, idx, &mut len);
        slice::from_raw_parts(p.cast::<u8>(), len)
    }
}

/// The bytes of the string at `idx`, which holds a string.
///
/// # Safety
///
/// As [`check_bytes`], with a string at `idx`.
unsafe fn string_at<'a>(l: *mut lua_State, idx: c_int) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: as `check_bytes`; a string is not converted.
    unsafe {
        let p = ffi::lua_tolstring(l, idx, &mut len);
        if p.is_null() {
            return &[];
        }
        slice::from_raw_parts(p.cast::<u8>(), len)
    }
}

/// Lua's reading of a start position (`init`), 1-based: negative counts
/// from the end, 0 and anything before the start is 1.
fn start_position(pos: i64, len: usize) -> u64 {
    let len = len as u64;
    match u64::try_from(pos) {
        Ok(0) => 1,
        Ok(p) => p,
        Err(_) => {
            let back = pos.unsigned_abs();
            if back > len { 1 } else { len - back + 1 }
        }
    }
}

/// Raises `e`: the guard's message for [`Error::Stopped`] (as the hook
/// raises it), Lua's message at the caller's line for the rest (as
/// `luaL_error` does).
///
/// # Safety
///
/// As [`guard::raise`].
unsafe fn fail(l: *mut lua_State, e: Error, meter: &GuardMeter<'_>) -> ! {
    if e == Error::Stopped {
        let msg = meter
            .stop
            .unwrap_or(c"stepsched: the step ran past its time budget");
        // SAFETY: the caller's contract.
        unsafe { guard::raise(l, msg) }
    }
    let mut buf = [0u8; 96];
    let len = {
        let mut w = &mut buf[..];
        let _ = write!(w, "{e}");
        96 - w.len()
    };
    // SAFETY: the caller's contract; `buf` is plain bytes.
    unsafe {
        ffi::luaL_where(l, 1);
        ffi::lua_pushlstring(l, buf.as_ptr().cast(), len);
        ffi::lua_concat(l, 2);
        ffi::lua_error(l)
    }
}

/// Pushes capture `i` of the match `s..e` (a string, or a position as an
/// integer), raising Lua's error for a capture that is not there.
///
/// # Safety
///
/// As [`guard::raise`], with a free stack slot; `m`'s subject is `src`.
unsafe fn push_capture(l: *mut lua_State, m: &M<'_>, src: &[u8], i: usize, s: usize, e: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        match m.captured(i, s, e) {
            Ok(Captured::Text(a, b)) => {
                ffi::lua_pushlstring(l, src[a..b].as_ptr().cast(), b - a);
            }
            Ok(Captured::Position(p)) => ffi::lua_pushinteger(l, p as i64 + 1),
            Err(err) => fail(l, err, m.meter()),
        }
    }
}

/// Pushes the captures of the match `s..e` (the whole match if the
/// pattern has none and `whole`): how many.
///
/// # Safety
///
/// As [`push_capture`].
unsafe fn push_captures(
    l: *mut lua_State,
    m: &M<'_>,
    src: &[u8],
    s: usize,
    e: usize,
    whole: bool,
) -> c_int {
    let n = if m.captures() == 0 && whole {
        1
    } else {
        m.captures()
    };
    // SAFETY: the caller's contract; the stack is grown for `n` values.
    unsafe {
        ffi::luaL_checkstack(l, n as c_int, c"too many captures".as_ptr());
        for i in 0..n {
            push_capture(l, m, src, i, s, e);
        }
    }
    n as c_int
}

/// `string.find` and `string.match`.
///
/// # Safety
///
/// Called from a C function Lua called, with its arguments.
unsafe fn find_or_match(l: *mut lua_State, find: bool) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; every value
    // in this frame is plain data (see the module docs).
    unsafe {
        guard::before(l);
        let src = check_bytes(l, 1);
        let pat = check_bytes(l, 2);
        let init = start_position(ffi::luaL_optinteger(l, 3, 1), src.len());
        if init > src.len() as u64 + 1 {
            ffi::lua_pushnil(l);
            return 1;
        }
        let from = (init - 1) as usize;
        if find && (ffi::lua_toboolean(l, 4) != 0 || !pattern::has_specials(pat)) {
            let mut bill = Bill::new(GuardMeter {
                guard: guard::guard_of(l),
                stop: None,
            });
            return match contain(|| pattern::find_plain(src, pat, from, &mut bill)) {
                Ok(Some(i)) => {
                    ffi::lua_pushinteger(l, i as i64 + 1);
                    ffi::lua_pushinteger(l, (i + pat.len()) as i64);
                    2
                }
                Ok(None) => {
                    ffi::lua_pushnil(l);
                    1
                }
                Err(e) => fail(l, e, bill.meter()),
            };
        }
        let anchored = pat.first() == Some(&b'^');
        let mut m = matcher(l, src, pat);
        let n = match contain(|| m.search(from, usize::from(anchored), anchored)) {
            Ok(Some((s, e))) if find => {
                ffi::lua_pushinteger(l, s as i64 + 1);
                ffi::lua_pushinteger(l, e as i64);
                2 + push_captures(l, &m, src, s, e, false)
            }
            Ok(Some((s, e))) => push_captures(l, &m, src, s, e, true),
            Ok(None) => {
                ffi::lua_pushnil(l);
                1
            }
            Err(e) => fail(l, e, m.meter()),
        };
        guard::after(l);
        n
    }
}

/// `string.find(s, pattern [, init [, plain]])`.
pub(crate) unsafe extern "C-unwind" fn find(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments.
    unsafe { find_or_match(l, true) }
}

/// `string.match(s, pattern [, init])`.
pub(crate) unsafe extern "C-unwind" fn match_(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments.
    unsafe { find_or_match(l, false) }
}

/// `string.gmatch(s, pattern [, init])`: an iterator, a closure over the
/// subject, the pattern, the position to go on from and the end of the
/// last match (-1 before the first).
pub(crate) unsafe extern "C-unwind" fn gmatch(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; this frame
    // holds only plain data.
    unsafe {
        guard::before(l);
        let len = check_bytes(l, 1).len();
        check_bytes(l, 2);
        // Past the end (one past the empty match at the end): no match.
        let init = start_position(ffi::luaL_optinteger(l, 3, 1), len).min(len as u64 + 2);
        ffi::lua_settop(l, 2);
        ffi::lua_pushinteger(l, init as i64 - 1);
        ffi::lua_pushinteger(l, -1);
        ffi::lua_pushcclosure(l, gmatch_next, 4);
        1
    }
}

/// The iterator `string.gmatch` returns: the captures of the next match.
unsafe extern "C-unwind" fn gmatch_next(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua as the closure `gmatch` made, with its four
    // upvalues (two strings, two integers); the strings stay in the
    // upvalues while their slices are used; this frame holds only plain
    // data.
    unsafe {
        guard::before(l);
        let src = string_at(l, ffi::lua_upvalueindex(1));
        let pat = string_at(l, ffi::lua_upvalueindex(2));
        let from = usize::try_from(ffi::lua_tointeger(l, ffi::lua_upvalueindex(3))).unwrap_or(0);
        let last = usize::try_from(ffi::lua_tointeger(l, ffi::lua_upvalueindex(4))).ok();
        let mut m = matcher(l, src, pat);
        match contain(|| m.next_match(from, last)) {
            Ok(Some((s, e))) => {
                ffi::lua_pushinteger(l, e as i64);
                ffi::lua_copy(l, -1, ffi::lua_upvalueindex(3));
                ffi::lua_replace(l, ffi::lua_upvalueindex(4));
                push_captures(l, &m, src, s, e, true)
            }
            Ok(None) => 0,
            Err(e) => fail(l, e, m.meter()),
        }
    }
}

/// Raises Lua's argument error "`expected` expected, got `type`" for
/// argument `arg` (`luaL_typeerror`).
///
/// # Safety
///
/// As [`guard::raise`].
unsafe fn type_error(l: *mut lua_State, arg: c_int, expected: &CStr) -> ! {
    // SAFETY: the caller's contract.
    unsafe {
        let got = if ffi::luaL_getmetafield(l, arg, c"__name".as_ptr()) == ffi::LUA_TSTRING {
            ffi::lua_tostring(l, -1)
        } else if ffi::lua_type(l, arg) == ffi::LUA_TLIGHTUSERDATA {
            c"light userdata".as_ptr()
        } else {
            ffi::luaL_typename(l, arg)
        };
        let msg = ffi::lua_pushfstring(l, c"%s expected, got %s".as_ptr(), expected.as_ptr(), got);
        ffi::luaL_argerror(l, arg, msg);
        unreachable!("luaL_argerror returned")
    }
}

/// Adds the replacement string `repl` for the match `s..e` to `b`:
/// `%0` the match, `%1`..`%9` its captures, `%%` a `%`.
///
/// # Safety
///
/// As [`push_capture`], with `b` the buffer in use.
unsafe fn add_string(
    l: *mut lua_State,
    b: *mut ffi::luaL_Buffer,
    m: &mut M<'_>,
    src: &[u8],
    repl: &[u8],
    s: usize,
    e: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        if let Err(err) = m.bill(1 + repl.len() / 16) {
            fail(l, err, m.meter());
        }
        let mut rest = repl;
        while let Some(k) = rest.iter().position(|&c| c == b'%') {
            ffi::luaL_addlstring(b, rest.as_ptr().cast(), k);
            let (capture, after) = match rest.get(k + 1) {
                Some(b'%') => {
                    ffi::luaL_addlstring(b, c"%".as_ptr(), 1);
                    (None, k + 2)
                }
                Some(b'0') => (Some(Captured::Text(s, e)), k + 2),
                Some(&d @ b'1'..=b'9') => match m.captured(usize::from(d - b'1'), s, e) {
                    Ok(c) => (Some(c), k + 2),
                    Err(err) => fail(l, err, m.meter()),
                },
                _ => fail(l, Error::InvalidReplacementEscape, m.meter()),
            };
            match capture {
                Some(Captured::Text(a, z)) => {
                    ffi::luaL_addlstring(b, src[a..z].as_ptr().cast(), z - a);
                }
                Some(Captured::Position(p)) => {
                    ffi::lua_pushinteger(l, p as i64 + 1);
                    ffi::luaL_addvalue(b);
                }
                None => {}
            }
            rest = &rest[after..];
        }
        ffi::luaL_addlstring(b, rest.as_ptr().cast(), rest.len());
    }
}

/// `string.gsub(s, pattern, repl [, n])`.
pub(crate) unsafe extern "C-unwind" fn gsub(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; the subject,
    // pattern and replacement stay at 1, 2 and 3; this frame holds only
    // plain data (the buffer is Lua's, and stays where `luaL_buffinit`
    // put it); the replacement's Lua code runs with the stack balanced
    // above the buffer, as `luaL_Buffer` wants.
    unsafe {
        guard::before(l);
        let src = check_bytes(l, 1);
        let pat = check_bytes(l, 2);
        let kind = ffi::lua_type(l, 3);
        let max = ffi::luaL_optinteger(l, 4, src.len() as i64 + 1);
        let repl: &[u8] = match kind {
            ffi::LUA_TNUMBER | ffi::LUA_TSTRING => check_bytes(l, 3),
            ffi::LUA_TFUNCTION | ffi::LUA_TTABLE => &[],
            _ => type_error(l, 3, c"string/function/table"),
        };
        let anchored = pat.first() == Some(&b'^');
        let p = usize::from(anchored);
        let mut buf = std::mem::MaybeUninit::<ffi::luaL_Buffer>::uninit();
        let b = buf.as_mut_ptr();
        ffi::luaL_buffinit(l, b);
        let mut m = matcher(l, src, pat);
        let (mut at, mut copied, mut n, mut last) = (0usize, 0usize, 0i64, None);
        while n < max {
            let attempt = contain(|| {
                if !anchored {
                    // The positions skipped fail: their bytes are copied.
                    at = m.skip(at, p)?;
                }
                m.match_at(at, p)
            });
            match attempt {
                Ok(Some(e)) if Some(e) != last => {
                    n += 1;
                    ffi::luaL_addlstring(b, src[copied..at].as_ptr().cast(), at - copied);
                    match kind {
                        ffi::LUA_TFUNCTION => {
                            ffi::lua_pushvalue(l, 3);
                            let k = push_captures(l, &m, src, at, e, true);
                            ffi::lua_call(l, k, 1);
                        }
                        ffi::LUA_TTABLE => {
                            push_capture(l, &m, src, 0, at, e);
                            ffi::lua_gettable(l, 3);
                        }
                        _ => add_string(l, b, &mut m, src, repl, at, e),
                    }
                    if kind == ffi::LUA_TFUNCTION || kind == ffi::LUA_TTABLE {
                        if ffi::lua_toboolean(l, -1) == 0 {
                            ffi::lua_settop(l, -2);
                            ffi::luaL_addlstring(b, src[at..e].as_ptr().cast(), e - at);
                        } else if ffi::lua_isstring(l, -1) == 0 {
                            ffi::luaL_error(
                                l,
                                c"invalid replacement value (a %s)".as_ptr(),
                                ffi::luaL_typename(l, -1),
                            );
                        } else {
                            ffi::luaL_addvalue(b);
                        }
                    }
                    at = e;
                    copied = e;
                    last = Some(e);
                }
                Ok(_) if at < src.len() => at += 1,
                Ok(_) => break,
                Err(e) => fail(l, e, m.meter()),
            }
            if anchored {
                break;
            }
        }
        ffi::luaL_addlstring(b, src[copied..].as_ptr().cast(), src.len() - copied);
        ffi::luaL_pushresult(b);
        ffi::lua_pushinteger(l, n);
        guard::after(l);
        2
    }
}

/// The functions, by their name in the `string` table.
pub(crate) const FUNCTIONS: [(&CStr, ffi::lua_CFunction); 4] = [
    (c"find", find),
    (c"match", match_),
    (c"gmatch", gmatch),
    (c"gsub", gsub),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_positions() {
        assert_eq!(start_position(1, 3), 1);
        assert_eq!(start_position(0, 3), 1);
        assert_eq!(start_position(-1, 3), 3);
        assert_eq!(start_position(-3, 3), 1);
        assert_eq!(start_position(-4, 3), 1);
        assert_eq!(start_position(i64::MIN, 3), 1);
        assert_eq!(start_position(10, 3), 10);
    }
}
