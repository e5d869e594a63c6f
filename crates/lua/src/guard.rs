//! The guard of a process's Lua state: the C functions the sandbox
//! installs in it, and the per-process [`Guard`] they look at.
//!
//! # How a script is stopped
//!
//! A [`Guard`] holds the process's cancel token, its step deadline and its
//! *doom*: once the token is cancelled, the deadline passed or the state is
//! closing, the guard is doomed for good. Three things look at it:
//!
//! * the count hook, every [`HOOK_INSTRUCTIONS`] Lua instructions (it
//!   also reads the clock);
//! * every call into the standard library, before the call (and the clock
//!   every [`CLOCK_EVERY`] calls), so a loop of long C calls
//!   (`string.rep`) is looked at once per call, whatever its instruction
//!   count;
//! * the same calls after they return, so `pcall`, `xpcall`,
//!   `coroutine.resume`, `coroutine.close` and `load` (a reader function)
//!   re-raise an error they caught once the guard is doomed.
//!
//! A doomed guard raises at each of these, so `pcall` cannot swallow it: a
//! catch that returns has unwound one protected call, and entering
//! another is a library call, which raises.
//!
//! Lua runs some code with hooks off, where only these checks can stop
//! it. Finalizers (`__gc`) run so, with their errors swallowed: the
//! sandbox's `setmetatable` refuses them. And an error raised from the
//! hook leaves hooks off until it is caught: a message handler (`xpcall`)
//! runs before that, so it is checked at its entry; `__close` handlers of a
//! coroutine that the error left are run when its stack is cleared, so
//! the process's own coroutine catches its errors in [`run_main`] (Lua then
//! closes them with hooks back on), and `coroutine.wrap`'s function does
//! not close a failed coroutine once the guard is doomed.
//!
//! # The functions
//!
//! Each library function is replaced by a light C function
//! `guarded::<I>` (no allocation per state) that checks the guard, calls
//! the original C function `I` in the same stack frame, and checks again.
//! That is only sound for originals without upvalues (a light function
//! has none for them to read), which [`originals`] checks on a template
//! state: the rest (`math.random`, `math.randomseed`) stay as they are. The guard is
//! found through the state's extra space (`lua_getextraspace`), which the
//! main thread's install sets and every thread created later copies.
//!
//! Some C functions loop for as long as an argument says, not as long as
//! the memory they use: `string.rep` of the empty string, `table.move` over
//! a range, `table.insert` and `table.remove` of a table whose `__len` lies.
//! Their wrappers bound those loops ([`MAX_RANGE`]). Pattern matching
//! (`string.find`, `match`, `gmatch`, `gsub`) is not Lua's: Lua's matcher
//! backtracks without bound inside one C call, so the sandbox installs its
//! own (`strlib.rs`, `pattern.rs`), which looks at the guard every few
//! thousand steps of its work.
//!
//! `yield_cmd` and `send` are C functions too, so an error they raise
//! names the script's line even when they are tail-called (a C function in
//! tail position keeps its caller's frame, a Lua function replaces it).

use std::ffi::{CStr, c_int};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mlua::ffi::{self, lua_CFunction, lua_Debug, lua_KContext, lua_State};
use mlua::{Lua, LuaOptions, StdLib};
use stepsched::CancelToken;

use crate::{HOOK_INSTRUCTIONS, strlib};

/// Every how many library calls the guard reads the clock.
const CLOCK_EVERY: u32 = 16;

const RUNNING: u8 = 0;
const CANCELLED: u8 = 1;
const OVER_BUDGET: u8 = 2;
const CLOSING: u8 = 3;

/// Why a guard is doomed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Doom {
    /// The process's cancel token was cancelled (terminate or shutdown).
    Cancelled,
    /// A step ran past its time budget.
    OverBudget,
    /// The state is being dropped.
    Closing,
}

/// What a process's Lua code is checked against. See the module docs.
///
/// Only the thread running the process touches it (the scheduler hands a
/// process from one worker to the next with the ordering that needs), so
/// every field is read and written `Relaxed`: the atomics make it `Sync`
/// for the state's `Send`, not to publish anything.
pub(crate) struct Guard {
    token: CancelToken,
    doom: AtomicU8,
    /// Nanoseconds since [`epoch`] past which the step is over budget;
    /// [`UNSTARTED`]: the step's clock has not been read yet.
    deadline: AtomicU64,
    calls: AtomicU32,
    step_time: Option<Duration>,
}

/// A step whose clock has not been read yet: the first check that reads
/// the clock in the step starts its budget (at most [`HOOK_INSTRUCTIONS`]
/// instructions or [`CLOCK_EVERY`] library calls into the step), so a step
/// costs no clock read of its own.
const UNSTARTED: u64 = 0;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl Guard {
    pub(crate) fn new(token: CancelToken, step_time: Option<Duration>) -> Self {
        Guard {
            token,
            doom: AtomicU8::new(RUNNING),
            deadline: AtomicU64::new(UNSTARTED),
            calls: AtomicU32::new(0),
            step_time,
        }
    }

    /// Begins a step (or `init`): its budget starts at its first clock
    /// read (see [`UNSTARTED`]).
    pub(crate) fn begin_step(&self) {
        // Relaxed: see the type's docs.
        self.deadline.store(UNSTARTED, Ordering::Relaxed);
    }

    /// Why the guard is doomed, if it is.
    pub(crate) fn doom(&self) -> Option<Doom> {
        // Relaxed: see the type's docs.
        match self.doom.load(Ordering::Relaxed) {
            CANCELLED => Some(Doom::Cancelled),
            OVER_BUDGET => Some(Doom::OverBudget),
            CLOSING => Some(Doom::Closing),
            _ if self.token.is_cancelled() => {
                self.set(CANCELLED);
                Some(Doom::Cancelled)
            }
            _ => None,
        }
    }

    /// Dooms the guard before its state is dropped: Lua code that runs
    /// while the state closes raises at its first check.
    pub(crate) fn close(&self) {
        self.set(CLOSING);
    }

    fn set(&self, doom: u8) {
        // Relaxed: see the type's docs.
        if self.doom.load(Ordering::Relaxed) == RUNNING {
            self.doom.store(doom, Ordering::Relaxed);
        }
    }

    /// The check of the hook and of library calls: the message to raise,
    /// if the guard is (now) doomed.
    fn check(&self, clock: bool) -> Option<&'static CStr> {
        if let Some(d) = self.doom() {
            return Some(message(d));
        }
        let budget = self.step_time.filter(|_| clock)?;
        let now = now_ns();
        // Relaxed: see the type's docs.
        let deadline = self.deadline.load(Ordering::Relaxed);
        if deadline == UNSTARTED {
            let budget = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
            // `max(1)`: never UNSTARTED again within the step.
            let deadline = now.saturating_add(budget).max(1);
            self.deadline.store(deadline, Ordering::Relaxed);
        } else if now > deadline {
            self.set(OVER_BUDGET);
            return Some(message(Doom::OverBudget));
        }
        None
    }

    /// The check of long work inside a library call (pattern matching,
    /// every few thousand steps): the message to raise, if the guard is
    /// (now) doomed. Reads the clock.
    pub(crate) fn check_budget(&self) -> Option<&'static CStr> {
        self.check(true)
    }

    /// The check before a library call: every call, with the clock every
    /// [`CLOCK_EVERY`] calls.
    fn before_call(&self) -> Option<&'static CStr> {
        // Relaxed: see the type's docs. A load and a store, not an RMW:
        // one thread at a time.
        let n = self.calls.load(Ordering::Relaxed).wrapping_add(1);
        self.calls.store(n, Ordering::Relaxed);
        self.check(n.is_multiple_of(CLOCK_EVERY))
    }
}

fn message(d: Doom) -> &'static CStr {
    match d {
        Doom::Cancelled => c"stepsched: the process was cancelled",
        Doom::OverBudget => c"stepsched: the step ran past its time budget",
        Doom::Closing => c"stepsched: the process is closing",
    }
}

/// The guard of the state `l` belongs to (`None` before `install`).
///
/// # Safety
///
/// `l` is a thread of a state that `install` set up (or of none whose
/// extra space is null), and the guard outlives the state.
pub(crate) unsafe fn guard_of<'a>(l: *mut lua_State) -> Option<&'a Guard> {
    // SAFETY: every `lua_State` is preceded by LUA_EXTRASPACE bytes (the
    // size of a pointer) of extra space; `install` wrote a `*const Guard`
    // into the main thread's, and Lua copies it into every thread created
    // after that, which are the only ones that run the script's code.
    let p = unsafe {
        ptr::read_unaligned(
            ffi::lua_getextraspace(l)
                .cast::<*const Guard>()
                .cast_const(),
        )
    };
    // SAFETY: non-null, it points to the process's guard, which
    // `Running` drops only after the state (see the caller's contract).
    unsafe { p.as_ref() }
}

/// Raises `msg` as a Lua error.
///
/// # Safety
///
/// `l` is the running thread, inside a C function or hook called by Lua,
/// and no Rust value with a destructor is live in the frames the error
/// unwinds (Lua's errors are a `longjmp`).
pub(crate) unsafe fn raise(l: *mut lua_State, msg: &'static CStr) -> ! {
    // SAFETY: the caller's contract.
    unsafe {
        ffi::lua_pushstring(l, msg.as_ptr());
        ffi::lua_error(l)
    }
}

/// The count hook: raises once the guard is doomed. Looks at the clock.
unsafe extern "C-unwind" fn hook(l: *mut lua_State, _ar: *mut lua_Debug) {
    // SAFETY: Lua calls the hook on a thread of a state `install` set up.
    let g = unsafe { guard_of(l) };
    if let Some(msg) = g.and_then(|g| g.check(true)) {
        // SAFETY: called by Lua as a hook; nothing here has a destructor.
        unsafe { raise(l, msg) }
    }
}

/// The check before a library call, raising if the guard is doomed.
///
/// # Safety
///
/// As [`raise`].
pub(crate) unsafe fn before(l: *mut lua_State) {
    // SAFETY: the caller's contract: a thread of a state `install` set up.
    let g = unsafe { guard_of(l) };
    if let Some(msg) = g.and_then(Guard::before_call) {
        // SAFETY: the caller's contract.
        unsafe { raise(l, msg) }
    }
}

/// The check after a library call returned, raising if the guard is
/// doomed (so a catch re-raises).
///
/// # Safety
///
/// As [`raise`].
pub(crate) unsafe fn after(l: *mut lua_State) {
    // SAFETY: the caller's contract.
    let g = unsafe { guard_of(l) };
    if let Some(msg) = g.and_then(|g| g.check(false)) {
        // SAFETY: the caller's contract.
        unsafe { raise(l, msg) }
    }
}

/// When a library function is installed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum When {
    Always,
    /// With [`Lib::Print`](crate::Lib::Print).
    Print,
    /// In the sandbox's own `os` table, without [`Lib::Os`](crate::Lib::Os).
    OsSubset,
}

use When::{Always, OsSubset, Print};

/// The library functions the sandbox installs, guarded, by table (`_G`
/// for the base functions) and name. The first eight have wrappers
/// of their own.
const LIBRARY: [(&CStr, &CStr, When); 77] = [
    (c"_G", c"load", Always),
    (c"_G", c"setmetatable", Always),
    (c"string", c"rep", Always),
    (c"table", c"move", Always),
    (c"table", c"insert", Always),
    (c"table", c"remove", Always),
    (c"_G", c"xpcall", Always),
    (c"coroutine", c"wrap", Always),
    (c"_G", c"assert", Always),
    (c"_G", c"collectgarbage", Always),
    (c"_G", c"error", Always),
    (c"_G", c"getmetatable", Always),
    (c"_G", c"ipairs", Always),
    (c"_G", c"next", Always),
    (c"_G", c"pairs", Always),
    (c"_G", c"pcall", Always),
    (c"_G", c"rawequal", Always),
    (c"_G", c"rawget", Always),
    (c"_G", c"rawlen", Always),
    (c"_G", c"rawset", Always),
    (c"_G", c"select", Always),
    (c"_G", c"tonumber", Always),
    (c"_G", c"tostring", Always),
    (c"_G", c"type", Always),
    (c"_G", c"print", Print),
    (c"_G", c"warn", Print),
    (c"coroutine", c"close", Always),
    (c"coroutine", c"create", Always),
    (c"coroutine", c"isyieldable", Always),
    (c"coroutine", c"resume", Always),
    (c"coroutine", c"running", Always),
    (c"coroutine", c"status", Always),
    (c"coroutine", c"yield", Always),
    (c"string", c"byte", Always),
    (c"string", c"char", Always),
    (c"string", c"format", Always),
    (c"string", c"len", Always),
    (c"string", c"lower", Always),
    (c"string", c"pack", Always),
    (c"string", c"packsize", Always),
    (c"string", c"reverse", Always),
    (c"string", c"sub", Always),
    (c"string", c"unpack", Always),
    (c"string", c"upper", Always),
    (c"table", c"concat", Always),
    (c"table", c"pack", Always),
    (c"table", c"sort", Always),
    (c"table", c"unpack", Always),
    (c"math", c"abs", Always),
    (c"math", c"acos", Always),
    (c"math", c"asin", Always),
    (c"math", c"atan", Always),
    (c"math", c"ceil", Always),
    (c"math", c"cos", Always),
    (c"math", c"deg", Always),
    (c"math", c"exp", Always),
    (c"math", c"floor", Always),
    (c"math", c"fmod", Always),
    (c"math", c"log", Always),
    (c"math", c"max", Always),
    (c"math", c"min", Always),
    (c"math", c"modf", Always),
    (c"math", c"rad", Always),
    (c"math", c"sin", Always),
    (c"math", c"sqrt", Always),
    (c"math", c"tan", Always),
    (c"math", c"tointeger", Always),
    (c"math", c"type", Always),
    (c"math", c"ult", Always),
    (c"utf8", c"char", Always),
    (c"utf8", c"codepoint", Always),
    (c"utf8", c"codes", Always),
    (c"utf8", c"len", Always),
    (c"utf8", c"offset", Always),
    (c"os", c"clock", OsSubset),
    (c"os", c"date", OsSubset),
    (c"os", c"time", OsSubset),
];

const LOAD: usize = 0;
const SETMETATABLE: usize = 1;
const REP: usize = 2;
const MOVE: usize = 3;
const INSERT: usize = 4;
const REMOVE: usize = 5;
const XPCALL: usize = 6;
const WRAP: usize = 7;

/// The longest range `table.move` may copy, and the longest length
/// `table.insert` and `table.remove` may shift, in one call: 2^24
/// elements. Lua runs each as one C loop without a check, and a `__len`
/// metamethod (or a range over missing elements) makes it as long as a
/// script likes, whatever the memory limit.
pub(crate) const MAX_RANGE: i64 = 1 << 24;

/// The standard libraries of a template state from which [`originals`]
/// reads the C functions.
fn template_libs() -> StdLib {
    StdLib::COROUTINE | StdLib::TABLE | StdLib::STRING | StdLib::UTF8 | StdLib::MATH | StdLib::OS
}

type Originals = [Option<lua_CFunction>; LIBRARY.len()];

static ORIGINALS: OnceLock<Originals> = OnceLock::new();

/// The original C function of each [`LIBRARY`] entry, read once from a
/// template state: `None` where it is missing or has upvalues (it is then
/// left unguarded). The functions are the same static C code in every
/// state.
fn originals() -> &'static Originals {
    ORIGINALS.get_or_init(|| {
        let mut out: Originals = [None; LIBRARY.len()];
        let Ok(lua) = Lua::new_with(template_libs(), LuaOptions::new()) else {
            return out;
        };
        let read = |l: *mut lua_State| {
            for (i, (table, name, _)) in LIBRARY.iter().enumerate() {
                // SAFETY: `l` is the template's running thread inside
                // `exec_raw`; each push is popped below, within the 3
                // slots `exec_raw` checked for.
                unsafe {
                    ffi::lua_pushglobaltable(l);
                    if table.to_bytes() != b"_G" {
                        ffi::lua_getfield(l, -1, table.as_ptr());
                    } else {
                        ffi::lua_pushvalue(l, -1);
                    }
                    ffi::lua_getfield(l, -1, name.as_ptr());
                    // A C function without upvalues only.
                    if ffi::lua_iscfunction(l, -1) != 0 && ffi::lua_getupvalue(l, -1, 1).is_null() {
                        out[i] = ffi::lua_tocfunction(l, -1);
                    }
                    ffi::lua_settop(l, -4);
                }
            }
        };
        // SAFETY: `read` only reads the template's tables with the raw API
        // and leaves the stack as it found it.
        let _ = unsafe { lua.exec_raw::<()>((), read) };
        out
    })
}

/// Library function `I`, guarded.
unsafe extern "C-unwind" fn guarded<const I: usize>(l: *mut lua_State) -> c_int {
    // SAFETY: Lua calls this on a thread of a state `install` set up;
    // this frame holds nothing with a destructor.
    unsafe { before(l) };
    let Some(f) = ORIGINALS.get().and_then(|o| o[I]) else {
        // SAFETY: as above.
        unsafe { raise(l, c"stepsched: a library function is missing") }
    };
    // SAFETY: `f` is the original C function of this entry, which has no
    // upvalues (see `originals`), so it runs in this frame, with this
    // frame's arguments, as if Lua had called it. If it errors or yields,
    // Lua unwinds past this frame, which has no destructor.
    let n = unsafe { f(l) };
    // SAFETY: as above.
    unsafe { after(l) };
    n
}

/// The guarded functions, one per [`LIBRARY`] entry.
macro_rules! guards {
    ($($i:literal)*) => { [$(guarded::<$i> as lua_CFunction),*] };
}

const GUARDS: [lua_CFunction; LIBRARY.len()] = guards!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
    30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59
    60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76
);

/// `load`, with its mode forced to text: Lua 5.4 has no bytecode verifier,
/// so crafted bytecode could break memory safety.
unsafe extern "C-unwind" fn sandbox_load(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; argument 4
    // (the environment) stays absent unless it was given.
    unsafe {
        if ffi::lua_gettop(l) < 3 {
            ffi::lua_settop(l, 3);
        }
        ffi::lua_pushstring(l, c"t".as_ptr());
        ffi::lua_replace(l, 3);
        guarded::<LOAD>(l)
    }
}

/// `setmetatable`, refusing a metatable with `__gc`: Lua runs finalizers
/// with hooks off and swallows their errors, so a finalizer's loop could
/// never be stopped.
unsafe extern "C-unwind" fn sandbox_setmetatable(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; this frame
    // holds nothing with a destructor.
    unsafe {
        if ffi::lua_type(l, 2) == ffi::LUA_TTABLE {
            ffi::lua_pushstring(l, c"__gc".as_ptr());
            let t = ffi::lua_rawget(l, 2);
            ffi::lua_settop(l, -2);
            if t != ffi::LUA_TNIL {
                raise(
                    l,
                    c"setmetatable: __gc metamethods (finalizers) are not available in the sandbox",
                );
            }
        }
        guarded::<SETMETATABLE>(l)
    }
}

/// `string.rep`: an empty string (and separator) repeated `n` times is
/// the empty string at once; Lua's own loop would run `n` times copying
/// nothing, for as long as `n` is large, without a check.
unsafe extern "C-unwind" fn sandbox_rep(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; this frame
    // holds nothing with a destructor.
    unsafe {
        let (mut len, mut sep) = (0usize, 0usize);
        ffi::luaL_checklstring(l, 1, &mut len);
        ffi::luaL_checkinteger(l, 2);
        ffi::luaL_optlstring(l, 3, c"".as_ptr(), &mut sep);
        if len == 0 && sep == 0 {
            before(l);
            ffi::lua_pushstring(l, c"".as_ptr());
            return 1;
        }
        guarded::<REP>(l)
    }
}

/// `table.move`, refusing a range longer than [`MAX_RANGE`].
unsafe extern "C-unwind" fn sandbox_move(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; this frame
    // holds nothing with a destructor.
    unsafe {
        let f = ffi::luaL_checkinteger(l, 2);
        let e = ffi::luaL_checkinteger(l, 3);
        if i128::from(e) - i128::from(f) >= i128::from(MAX_RANGE) {
            raise(
                l,
                c"table.move: the sandbox moves at most 2^24 elements in one call",
            );
        }
        guarded::<MOVE>(l)
    }
}

/// Refuses a length past [`MAX_RANGE`] for `table.insert` and
/// `table.remove`. Only a `__len` metamethod can make it longer than the
/// memory limit allows; it is then called once more than Lua would.
///
/// # Safety
///
/// As [`raise`], with the table at index 1.
unsafe fn check_len(l: *mut lua_State, what: &'static CStr) {
    // SAFETY: the caller's contract.
    unsafe {
        if ffi::luaL_getmetafield(l, 1, c"__len".as_ptr()) != ffi::LUA_TNIL {
            ffi::lua_settop(l, -2);
            if ffi::luaL_len(l, 1) > MAX_RANGE {
                raise(l, what);
            }
        }
    }
}

/// `table.insert`, refusing a `__len` past [`MAX_RANGE`].
unsafe extern "C-unwind" fn sandbox_insert(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; this frame
    // holds nothing with a destructor.
    unsafe {
        check_len(
            l,
            c"table.insert: the sandbox shifts at most 2^24 elements in one call",
        );
        guarded::<INSERT>(l)
    }
}

/// `table.remove`, refusing a `__len` past [`MAX_RANGE`].
unsafe extern "C-unwind" fn sandbox_remove(l: *mut lua_State) -> c_int {
    // SAFETY: as `sandbox_insert`.
    unsafe {
        check_len(
            l,
            c"table.remove: the sandbox shifts at most 2^24 elements in one call",
        );
        guarded::<REMOVE>(l)
    }
}

/// `xpcall(f, handler, ...)`, with the handler checked at its entry.
///
/// An error the count hook raises leaves hooks off until the error is
/// caught (Lua raises it from inside the hook), and the handler runs
/// before that: without the check, its loop could never be stopped. A
/// doomed guard raises in the handler, which Lua answers by calling the
/// handler again, until its C stack limit turns it into an "error in
/// error handling" that `xpcall` returns and the after-check re-raises.
unsafe extern "C-unwind" fn sandbox_xpcall(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; this frame
    // holds nothing with a destructor.
    unsafe {
        ffi::luaL_checktype(l, 2, ffi::LUA_TFUNCTION);
        ffi::lua_pushvalue(l, 2);
        ffi::lua_pushcclosure(l, checked_handler, 1);
        ffi::lua_replace(l, 2);
        guarded::<XPCALL>(l)
    }
}

/// A message handler (its upvalue), checked at its entry.
unsafe extern "C-unwind" fn checked_handler(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua as a message handler with the error on the
    // stack; the closure has one upvalue, the script's handler.
    unsafe {
        after(l);
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
        ffi::lua_insert(l, 1);
        ffi::lua_call(l, ffi::lua_gettop(l) - 1, ffi::LUA_MULTRET);
        ffi::lua_gettop(l)
    }
}

/// `coroutine.wrap(f)`: Lua's own, but the function it returns does not
/// close a coroutine that failed once the guard is doomed (its `__close`
/// handlers would run with hooks off, see [`sandbox_xpcall`]).
unsafe extern "C-unwind" fn sandbox_wrap(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; this frame
    // holds nothing with a destructor. The new thread takes this one's
    // hook and (from the main thread) its extra space.
    unsafe {
        before(l);
        ffi::luaL_checktype(l, 1, ffi::LUA_TFUNCTION);
        let co = ffi::lua_newthread(l);
        ffi::lua_pushvalue(l, 1);
        ffi::lua_xmove(l, co, 1);
        ffi::lua_pushcclosure(l, wrapped_resume, 1);
        1
    }
}

/// The function `coroutine.wrap` returns: Lua 5.4's `auxwrap`, with the
/// guard's checks.
unsafe extern "C-unwind" fn wrapped_resume(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; the closure
    // has one upvalue, the coroutine; this frame holds nothing with a
    // destructor. The steps are `auxresume` and `auxwrap` of lcorolib.c.
    unsafe {
        before(l);
        let co = ffi::lua_tothread(l, ffi::lua_upvalueindex(1));
        let narg = ffi::lua_gettop(l);
        if ffi::lua_checkstack(co, narg) == 0 {
            raise(l, c"too many arguments to resume");
        }
        ffi::lua_xmove(l, co, narg);
        let mut nres: c_int = 0;
        let status = ffi::lua_resume(co, l, narg, &mut nres);
        if status == ffi::LUA_OK || status == ffi::LUA_YIELD {
            if ffi::lua_checkstack(l, nres + 1) == 0 {
                ffi::lua_settop(co, -nres - 1);
                raise(l, c"too many results to resume");
            }
            ffi::lua_xmove(co, l, nres);
            after(l);
            return nres;
        }
        ffi::lua_xmove(co, l, 1);
        after(l);
        let mut stat = ffi::lua_status(co);
        if stat != ffi::LUA_OK && stat != ffi::LUA_YIELD {
            stat = ffi::lua_closethread(co, l);
            ffi::lua_xmove(co, l, 1);
        }
        if stat != ffi::LUA_ERRMEM && ffi::lua_type(l, -1) == ffi::LUA_TSTRING {
            ffi::luaL_where(l, 1);
            ffi::lua_insert(l, -2);
            ffi::lua_concat(l, 2);
        }
        ffi::lua_error(l)
    }
}

/// Raises the string at `idx` as an error at the caller's line: level 1
/// is the Lua function that called the running C function, even through a
/// tail call.
///
/// # Safety
///
/// As [`raise`].
unsafe fn raise_at_caller(l: *mut lua_State, idx: c_int) -> ! {
    // SAFETY: the caller's contract.
    unsafe {
        ffi::luaL_where(l, 1);
        ffi::lua_pushvalue(l, idx);
        ffi::lua_concat(l, 2);
        ffi::lua_error(l)
    }
}

/// Yields `(tag, a, b)` to the step, `a` and `b` being the first two
/// arguments of the call, and resumes in `done`.
///
/// # Safety
///
/// Called from a C function Lua called, with `tag` a NUL-terminated
/// string; the frame holds nothing with a destructor (the yield does not
/// return).
unsafe fn yield_two(l: *mut lua_State, tag: &std::ffi::CStr, done: ffi::lua_KFunction) -> c_int {
    // SAFETY: as the caller promises; the stack is set to exactly the
    // three values yielded.
    unsafe {
        before(l);
        ffi::lua_settop(l, 2);
        ffi::lua_pushstring(l, tag.as_ptr());
        ffi::lua_rotate(l, 1, 1);
        ffi::lua_yieldk(l, 3, 0, Some(done))
    }
}

/// The continuation of a call resumed with `(true, value)` or `(false,
/// message)`: raises the message at the script's line, or returns
/// `results` values (the value, or none).
///
/// # Safety
///
/// Called by Lua as a continuation, with the values of the resume on the
/// stack.
unsafe fn resumed(l: *mut lua_State, results: c_int) -> c_int {
    // SAFETY: as the caller promises; settop makes the values exactly two.
    unsafe {
        ffi::lua_settop(l, 2);
        if ffi::lua_toboolean(l, 1) == 0 {
            raise_at_caller(l, 2);
        }
        results
    }
}

/// `yield_cmd(name, args)`: yields `("cmd", name, args)` to the step.
unsafe extern "C-unwind" fn yield_cmd(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua (see `yield_two`).
    unsafe { yield_two(l, c"cmd", cmd_done) }
}

/// `yield_cmd`'s continuation: the step resumed it with `(true, value)`
/// or `(false, message)`.
unsafe extern "C-unwind" fn cmd_done(
    l: *mut lua_State,
    _status: c_int,
    _ctx: lua_KContext,
) -> c_int {
    // SAFETY: called by Lua as the continuation (see `resumed`).
    unsafe { resumed(l, 1) }
}

/// `send(pid, value)`: yields `("send", pid, value)` to the step.
unsafe extern "C-unwind" fn send(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua (see `yield_two`).
    unsafe { yield_two(l, c"send", send_done) }
}

/// `send`'s continuation: the step resumed it with `(true)` or
/// `(false, message)`.
unsafe extern "C-unwind" fn send_done(
    l: *mut lua_State,
    _status: c_int,
    _ctx: lua_KContext,
) -> c_int {
    // SAFETY: called by Lua as the continuation (see `resumed`).
    unsafe { resumed(l, 0) }
}

/// `receive()`: yields `"recv"`; the step resumes it with the message and
/// its sender, which are its results.
unsafe extern "C-unwind" fn receive(l: *mut lua_State) -> c_int {
    // SAFETY: as `yield_cmd`; without a continuation the values of the
    // resume are this function's results.
    unsafe {
        before(l);
        ffi::lua_settop(l, 0);
        ffi::lua_pushstring(l, c"recv".as_ptr());
        ffi::lua_yieldk(l, 1, 0, None)
    }
}

/// `self()`: the PID string in its upvalue.
unsafe extern "C-unwind" fn self_pid(l: *mut lua_State) -> c_int {
    // SAFETY: the closure was made with one upvalue, the PID.
    unsafe {
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
    }
    1
}

/// The registry field of the host's module loaders (a table by name).
pub(crate) const MODULES: &CStr = c"stepsched.modules";
/// The registry field of the modules loaded so far.
const LOADED: &CStr = c"stepsched.loaded";

/// `require(name)`: the host's module `name`, loaded on first use.
unsafe extern "C-unwind" fn require(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack; `name` points
    // into the string at index 1, which stays there; this frame holds
    // nothing with a destructor.
    unsafe {
        before(l);
        let name = ffi::luaL_checklstring(l, 1, ptr::null_mut());
        ffi::lua_settop(l, 1);
        ffi::luaL_getsubtable(l, ffi::LUA_REGISTRYINDEX, LOADED.as_ptr()); // 2
        if ffi::lua_getfield(l, 2, name) != ffi::LUA_TNIL {
            return 1;
        }
        ffi::lua_settop(l, 2);
        let found = ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, MODULES.as_ptr()) == ffi::LUA_TTABLE // 3
            && ffi::lua_getfield(l, 3, name) == ffi::LUA_TFUNCTION; // 4
        if !found {
            ffi::luaL_error(
                l,
                c"module '%s' not found: the host provides no module of that name (scripts cannot load files or C libraries)".as_ptr(),
                name,
            );
        }
        ffi::lua_pushvalue(l, 1);
        ffi::lua_call(l, 1, 1); // 4: the module
        if ffi::lua_type(l, 4) == ffi::LUA_TNIL {
            ffi::lua_pushboolean(l, 1);
            ffi::lua_replace(l, 4);
        }
        ffi::lua_pushvalue(l, 4);
        ffi::lua_setfield(l, 2, name);
        1
    }
}

/// The body of a process's coroutine: calls the script's method (its
/// upvalue) in a protected call and raises its error again.
///
/// An error the count hook raises leaves hooks off until it is caught,
/// and an error that leaves a coroutine uncaught is never caught: the
/// `__close` handlers of its pending to-be-closed variables would then run
/// with hooks off when the thread's stack is cleared, and a loop in one of
/// them could never be stopped. Caught here, Lua closes them with hooks
/// back on, so a doomed guard stops each of them.
unsafe extern "C-unwind" fn run_main(l: *mut lua_State) -> c_int {
    // SAFETY: called by Lua as the coroutine's body with the method's
    // arguments on the stack; the closure has one upvalue, the method; the
    // protected call is yieldable (it has a continuation) and leaves the
    // stack as `main_done` expects it.
    unsafe {
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
        ffi::lua_insert(l, 1);
        let n = ffi::lua_gettop(l) - 1;
        let status = ffi::lua_pcallk(l, n, ffi::LUA_MULTRET, 0, 0, Some(main_done));
        main_done(l, status, 0)
    }
}

/// `run_main`'s continuation: the method's results, or its error raised
/// again.
unsafe extern "C-unwind" fn main_done(
    l: *mut lua_State,
    status: c_int,
    _ctx: lua_KContext,
) -> c_int {
    // SAFETY: Lua passes the protected call's status with its results, or
    // its error object on top.
    unsafe {
        if status != ffi::LUA_OK && status != ffi::LUA_YIELD {
            ffi::lua_error(l);
        }
        ffi::lua_gettop(l)
    }
}

/// The function a process's coroutine runs: `method`, through
/// [`run_main`].
pub(crate) fn main_function(lua: &Lua, method: mlua::Function) -> mlua::Result<mlua::Function> {
    // SAFETY: `exec_raw` pushes `method` and runs this in a protected
    // call; the closure takes it as its upvalue and is the one result.
    unsafe {
        lua.exec_raw::<mlua::Function>(method, |l| {
            ffi::lua_pushcclosure(l, run_main, 1);
        })
    }
}

/// What `install` puts in a state besides the guard.
pub(crate) struct Install<'a> {
    pub(crate) guard: &'a Guard,
    pub(crate) pid: &'a str,
    pub(crate) print: bool,
    pub(crate) os_subset: bool,
    /// Seeds for `math.randomseed`: Lua 5.4's own seed is the clock's
    /// second and the state's address, alike for processes started
    /// together.
    pub(crate) seeds: (i64, i64),
}

/// Sets up the sandbox in `lua`, a fresh state with the base, coroutine,
/// string, table, math and utf8 libraries (and `os`/`io` if the host
/// allowed them): the guard and the hook, the guarded library, the
/// removals, and the crate's functions.
///
/// The guard must outlive `lua`.
pub(crate) fn install(lua: &Lua, how: &Install<'_>) -> mlua::Result<()> {
    let originals = originals();
    let set = |l: *mut lua_State| {
        // SAFETY: `l` is the main thread of `lua`, inside `exec_raw` (a
        // protected call: an error raised here is returned as `Err`); this
        // closure holds nothing with a destructor, and leaves the stack as
        // it found it. The guard outlives the state (the caller's
        // contract), so the pointer written into the extra space stays
        // valid while any Lua code runs.
        unsafe {
            let top = ffi::lua_gettop(l);
            ffi::luaL_checkstack(l, 8, ptr::null());
            ptr::write_unaligned(
                ffi::lua_getextraspace(l).cast::<*const Guard>(),
                ptr::from_ref(how.guard),
            );
            ffi::lua_sethook(
                l,
                Some(hook),
                ffi::LUA_MASKCOUNT,
                HOOK_INSTRUCTIONS as c_int,
            );
            ffi::lua_pushglobaltable(l);
            let g = ffi::lua_gettop(l);
            for name in [c"dofile", c"loadfile", c"print", c"warn", c"require"] {
                ffi::lua_pushnil(l);
                ffi::lua_setfield(l, g, name.as_ptr());
            }
            if how.os_subset {
                ffi::lua_newtable(l);
                ffi::lua_setfield(l, g, c"os".as_ptr());
            }
            for (i, (table, name, when)) in LIBRARY.iter().enumerate() {
                let wanted = match when {
                    Always => true,
                    Print => how.print,
                    OsSubset => how.os_subset,
                };
                if !wanted || originals[i].is_none() {
                    continue;
                }
                if ffi::lua_getfield(l, g, table.as_ptr()) != ffi::LUA_TTABLE {
                    ffi::lua_settop(l, -2);
                    continue;
                }
                let f = match i {
                    LOAD => sandbox_load as lua_CFunction,
                    SETMETATABLE => sandbox_setmetatable,
                    REP => sandbox_rep,
                    MOVE => sandbox_move,
                    INSERT => sandbox_insert,
                    REMOVE => sandbox_remove,
                    XPCALL => sandbox_xpcall,
                    WRAP => sandbox_wrap,
                    _ => GUARDS[i],
                };
                ffi::lua_pushcfunction(l, f);
                ffi::lua_setfield(l, -2, name.as_ptr());
                ffi::lua_settop(l, -2);
            }
            if ffi::lua_getfield(l, g, c"string".as_ptr()) == ffi::LUA_TTABLE {
                ffi::lua_pushnil(l);
                ffi::lua_setfield(l, -2, c"dump".as_ptr());
                for (name, f) in strlib::FUNCTIONS {
                    ffi::lua_pushcfunction(l, f);
                    ffi::lua_setfield(l, -2, name.as_ptr());
                }
            }
            ffi::lua_settop(l, g);
            for (name, f) in [
                (c"yield_cmd", yield_cmd as lua_CFunction),
                (c"send", send),
                (c"receive", receive),
                (c"require", require),
            ] {
                ffi::lua_pushcfunction(l, f);
                ffi::lua_setfield(l, g, name.as_ptr());
            }
            ffi::lua_pushlstring(l, how.pid.as_ptr().cast(), how.pid.len());
            ffi::lua_pushcclosure(l, self_pid, 1);
            ffi::lua_setfield(l, g, c"self".as_ptr());
            if ffi::lua_getfield(l, g, c"math".as_ptr()) == ffi::LUA_TTABLE
                && ffi::lua_getfield(l, -1, c"randomseed".as_ptr()) == ffi::LUA_TFUNCTION
            {
                ffi::lua_pushinteger(l, how.seeds.0);
                ffi::lua_pushinteger(l, how.seeds.1);
                ffi::lua_call(l, 2, 0);
            }
            ffi::lua_settop(l, top);
        }
    };
    // SAFETY: see `set`.
    unsafe { lua.exec_raw::<()>((), set) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_special_entries_are_where_their_wrappers_expect() {
        assert_eq!(LIBRARY[LOAD].1, c"load");
        assert_eq!(LIBRARY[SETMETATABLE].1, c"setmetatable");
        assert_eq!(LIBRARY[REP].1, c"rep");
        assert_eq!(LIBRARY[MOVE].1, c"move");
        assert_eq!(LIBRARY[INSERT].1, c"insert");
        assert_eq!(LIBRARY[REMOVE].1, c"remove");
        assert_eq!(LIBRARY[XPCALL].1, c"xpcall");
        assert_eq!(LIBRARY[WRAP].1, c"wrap");
    }

    #[test]
    fn every_library_function_but_the_random_ones_is_guarded() {
        let o = originals();
        for (i, (table, name, _)) in LIBRARY.iter().enumerate() {
            assert!(o[i].is_some(), "{table:?}.{name:?} has no plain C function");
        }
    }
}
