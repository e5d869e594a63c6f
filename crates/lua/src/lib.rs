//! Lua scripts as [`stepsched`] processes, in a sandbox.
//!
//! A [`Script`] is compiled once and shared (`Arc<Script>`) with the
//! [`Sandbox`] it runs in; each [`LuaProcess`] gets a fresh Lua 5.4 state
//! set up by that sandbox, runs the script's top-level code and then the
//! global function named by its method in a coroutine. Inside the script:
//!
//! | Lua | what it does |
//! |---|---|
//! | `local r = yield_cmd("name", args)` | yields the command `name` to the Rust handler registered under that name; the completion resumes the coroutine with its value, or raises a Lua error with the handler's message at the script's line |
//! | `local msg, from = receive()` | waits (status `Idle`) for a message; `from` is the sender's PID or `nil` |
//! | `send(pid, value)` | sends `value` to any process on the scheduler, Lua or Rust |
//! | `self()` | this process's PID |
//! | `require(name)` | a module the host provided ([`Sandbox::with_module`]) |
//! | `return value` | ends the process with that value |
//!
//! A PID appears in Lua as its string form, `"<node.number>"` (what
//! [`Pid`]'s `Display` writes and its `FromStr` reads). Values cross as
//! [`Value`]; functions, userdata, threads and tables nested deeper than
//! [`MAX_DEPTH`] are refused with an error, never a panic.
//!
//! # The sandbox
//!
//! By default a script sees Lua's base functions (without `dofile`,
//! `loadfile`, `print`, `warn`; `load` of text only; `setmetatable`
//! without `__gc`), `coroutine`, `string` (without `dump`), `table`,
//! `math`, `utf8` and `os.time`, `os.clock`, `os.date`: no files, no
//! commands, no environment, no `debug`, no bytecode. [`Sandbox::allow`]
//! adds what reaches outside ([`Lib`]), [`Sandbox::with_module`] gives
//! scripts libraries. The crate's README lists what a script can still
//! reach.
//!
//! # Limits
//!
//! Each process's Lua state may hold at most [`Sandbox::memory_limit`]
//! bytes ([`DEFAULT_MEMORY_LIMIT`]), and each step may run for at most
//! [`Sandbox::step_time`] ([`DEFAULT_STEP_TIME`]). `send`, `receive`,
//! `yield_cmd` end a step; a loop that never calls them keeps its worker
//! (the scheduler cannot preempt a step), but an instruction-count hook
//! every [`HOOK_INSTRUCTIONS`] instructions, and a check at every call into
//! the standard library, look at the process's cancel token and its step's
//! clock: `terminate`, shutdown and the budget stop such a loop, and once
//! they have, every later check raises again and `pcall` and its kin raise
//! it again when they return, so a script cannot catch its way past them.
//! A process stopped by shutdown ends with [`Error::Cancelled`]. Pattern
//! matching (`string.find`, `match`, `gmatch`, `gsub`) is the crate's own,
//! which looks at the same checks every few thousand steps of its work, so
//! a crafted pattern is stopped like a loop. What nothing stops: one long
//! call into a host function; the rest of Lua's C library runs each call
//! for at most as long as the memory it works on allows.
//!
//! What a script copies into the host is bounded too: a value leaving it
//! (`send`, `yield_cmd`, `return`) by [`Sandbox::value_limit`]
//! ([`DEFAULT_VALUE_LIMIT`]), a `send` by the receiver's queue
//! ([`Sandbox::send_queue_limit`], [`DEFAULT_SEND_QUEUE_LIMIT`]), the store
//! behind `kv_put` by its limit ([`DEFAULT_STORE_LIMIT`]); messages a
//! process has not received yet wait in its Lua state, under its memory
//! limit.
//!
//! The process's logic is generic over the scheduler's process type
//! ([`LuaProcess::init_in`], [`LuaProcess::step_in`]), so Lua and Rust
//! processes share one scheduler as an enum whose Lua variant delegates
//! to them; [`LuaProcess`] also implements [`Process`] itself for a
//! scheduler that runs only Lua.
#![deny(missing_docs)]

/// The README's example, compiled as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use mlua::chunk::ChunkMode;
use mlua::thread::ThreadStatus;
use mlua::{Lua, LuaOptions, MultiValue, StdLib};
use stepsched::{
    Builder, Command, Completer, Context, Error, Event, Events, Handle, Pid, Process, Status,
    StepOutput,
};

mod guard;
mod pattern;
mod sandbox;
mod strlib;

use guard::{Doom, Guard, Install};
use sandbox::ModuleKind;
pub use sandbox::{
    DEFAULT_MEMORY_LIMIT, DEFAULT_SEND_QUEUE_LIMIT, DEFAULT_STEP_TIME, DEFAULT_VALUE_LIMIT, Lib,
    Module, Sandbox,
};

/// How many Lua instructions run between two looks of the count hook at
/// the process's guard (its cancel token and its step's time budget).
pub const HOOK_INSTRUCTIONS: u32 = 10_000;

/// How deeply tables may nest when they cross between Lua and Rust.
pub const MAX_DEPTH: usize = 32;

/// A value that crosses between Lua and Rust.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `nil`.
    Nil,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Num(f64),
    /// A string (Lua strings that are not UTF-8 are converted lossily).
    Str(String),
    /// A table, as its key-value pairs.
    Table(Vec<(Value, Value)>),
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Num(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}
impl From<Pid> for Value {
    fn from(v: Pid) -> Self {
        Value::Str(v.to_string())
    }
}
impl TryFrom<Value> for i64 {
    type Error = ValueError;
    fn try_from(v: Value) -> Result<Self, ValueError> {
        match v {
            Value::Int(i) => Ok(i),
            other => Err(ValueError(format!("expected an integer, got {other:?}"))),
        }
    }
}
impl TryFrom<Value> for String {
    type Error = ValueError;
    fn try_from(v: Value) -> Result<Self, ValueError> {
        match v {
            Value::Str(s) => Ok(s),
            other => Err(ValueError(format!("expected a string, got {other:?}"))),
        }
    }
}
impl TryFrom<Value> for Pid {
    type Error = ValueError;
    fn try_from(v: Value) -> Result<Self, ValueError> {
        match v {
            Value::Str(s) => s
                .parse()
                .map_err(|e| ValueError(format!("not a PID: {s:?} ({e})"))),
            other => Err(ValueError(format!("expected a PID string, got {other:?}"))),
        }
    }
}

/// A value that cannot cross between Lua and Rust, with the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueError(pub String);

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ValueError {}

/// What each value counts for under a value limit besides its string's
/// bytes: the size of a [`Value`] (so a table pair counts twice it), about
/// what the host pays for it.
pub const VALUE_OVERHEAD: usize = std::mem::size_of::<Value>();

/// The bytes left of a value limit while a value is converted.
struct Budget {
    left: usize,
    limit: Option<usize>,
}

impl Budget {
    fn new(limit: Option<usize>) -> Self {
        Budget {
            left: limit.unwrap_or(usize::MAX),
            limit,
        }
    }

    /// Takes `bytes`, or fails once the limit is passed.
    #[inline]
    fn take(&mut self, bytes: usize) -> Result<(), ValueError> {
        match self.left.checked_sub(bytes) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => Err(ValueError(format!(
                "a value of more than {} bytes (the sandbox's value limit)",
                self.limit.unwrap_or(usize::MAX)
            ))),
        }
    }
}

impl Value {
    /// Converts a Lua value; see the crate docs for what is refused.
    pub fn from_lua(v: &mlua::Value) -> Result<Self, ValueError> {
        Self::from_lua_at(v, 0, &mut Budget::new(None))
    }

    /// Converts a Lua value as [`from_lua`](Self::from_lua) does, counting
    /// its size as it goes ([`size`](Self::size)); stops with an error
    /// naming `limit` as soon as it passes it, without building the rest.
    /// `None`: no limit.
    pub fn from_lua_limited(v: &mlua::Value, limit: Option<usize>) -> Result<Self, ValueError> {
        Self::from_lua_at(v, 0, &mut Budget::new(limit))
    }

    /// The bytes this value counts for under a value limit: its strings'
    /// lengths plus [`VALUE_OVERHEAD`] for each value in it (a table, each
    /// of its keys and values, nested tables as a whole).
    pub fn size(&self) -> usize {
        VALUE_OVERHEAD
            + match self {
                Value::Str(s) => s.len(),
                Value::Table(pairs) => pairs
                    .iter()
                    .map(|(k, v)| k.size().saturating_add(v.size()))
                    .fold(0, usize::saturating_add),
                _ => 0,
            }
    }

    fn from_lua_at(v: &mlua::Value, depth: usize, budget: &mut Budget) -> Result<Self, ValueError> {
        budget.take(VALUE_OVERHEAD)?;
        Ok(match v {
            mlua::Value::Nil => Value::Nil,
            mlua::Value::Boolean(b) => Value::Bool(*b),
            mlua::Value::Integer(i) => Value::Int(*i),
            mlua::Value::Number(n) => Value::Num(*n),
            mlua::Value::String(s) => {
                let bytes = s.as_bytes();
                // Counted before the copy; a lossy conversion that grows
                // the string (a replacement character for each bad byte)
                // counts what it grew by.
                budget.take(bytes.len())?;
                let text = String::from_utf8_lossy(&bytes);
                budget.take(text.len() - bytes.len())?;
                Value::Str(text.into_owned())
            }
            mlua::Value::Table(t) => {
                if depth >= MAX_DEPTH {
                    return Err(ValueError(format!(
                        "table nested deeper than {MAX_DEPTH} (or cyclic)"
                    )));
                }
                let mut pairs = Vec::new();
                for pair in t.pairs::<mlua::Value, mlua::Value>() {
                    let (k, v) = pair.map_err(|e| ValueError(e.to_string()))?;
                    pairs.push((
                        Self::from_lua_at(&k, depth + 1, budget)?,
                        Self::from_lua_at(&v, depth + 1, budget)?,
                    ));
                }
                Value::Table(pairs)
            }
            other => {
                return Err(ValueError(format!(
                    "a Lua {} cannot cross to Rust",
                    other.type_name()
                )));
            }
        })
    }

    /// Converts into a value of `lua`.
    pub fn to_lua(&self, lua: &Lua) -> Result<mlua::Value, ValueError> {
        self.to_lua_raw(lua)
            .map_err(|e| ValueError(lua_message(&e)))
    }

    /// [`to_lua`](Self::to_lua) with Lua's error (a memory error stays
    /// one).
    fn to_lua_raw(&self, lua: &Lua) -> mlua::Result<mlua::Value> {
        Ok(match self {
            Value::Nil => mlua::Value::Nil,
            Value::Bool(b) => mlua::Value::Boolean(*b),
            Value::Int(i) => mlua::Value::Integer(*i),
            Value::Num(n) => mlua::Value::Number(*n),
            Value::Str(s) => mlua::Value::String(lua.create_string(s)?),
            Value::Table(pairs) => {
                let t = lua.create_table()?;
                for (k, v) in pairs {
                    if *k == Value::Nil {
                        return Err(mlua::Error::runtime("a table key cannot be nil"));
                    }
                    t.raw_set(k.to_lua_raw(lua)?, v.to_lua_raw(lua)?)?;
                }
                mlua::Value::Table(t)
            }
        })
    }
}

/// A command a Lua process yields: the handler's name and its argument.
#[derive(Debug, Clone, PartialEq)]
pub struct LuaCommand {
    /// The handler to dispatch to.
    pub name: String,
    /// The argument (`nil` when the script passed none).
    pub args: Value,
}

impl Command for LuaCommand {
    fn name(&self) -> &str {
        &self.name
    }
}

/// A compiled script and the [`Sandbox`] it runs in, shared by every
/// process that runs it.
#[derive(Debug)]
pub struct Script {
    name: String,
    chunk: String,
    bytecode: Vec<u8>,
    sandbox: Sandbox,
}

/// Compiles `source` as text under the chunk name `@name`: the chunk name
/// and the bytecode, or the syntax error as [`Error::Failed`].
fn compile(name: &str, source: &str) -> Result<(String, Vec<u8>), Error> {
    let lua = Lua::new_with(StdLib::NONE, LuaOptions::default())
        .map_err(|e| Error::failed(lua_message(&e)))?;
    let chunk = format!("@{name}");
    let f = lua
        .load(source)
        .set_name(chunk.clone())
        .set_mode(ChunkMode::Text)
        .into_function()
        .map_err(|e| Error::failed(lua_message(&e)))?;
    Ok((chunk, f.dump(false)))
}

impl Script {
    /// Compiles `source` to run in the default [`Sandbox`]; `name` appears
    /// in error messages (`name:line: message`; Lua shows at most the last
    /// 57 bytes of a longer name, after `...`). A syntax error is returned
    /// as [`Error::Failed`] naming the script and line.
    pub fn new(name: impl Into<String>, source: &str) -> Result<Arc<Self>, Error> {
        Self::with_sandbox(name, source, Sandbox::default())
    }

    /// Compiles `source` (as [`Script::new`]) to run in `sandbox`.
    pub fn with_sandbox(
        name: impl Into<String>,
        source: &str,
        sandbox: Sandbox,
    ) -> Result<Arc<Self>, Error> {
        let name = name.into();
        let (chunk, bytecode) = compile(&name, source)?;
        Ok(Arc::new(Script {
            name,
            chunk,
            bytecode,
            sandbox,
        }))
    }

    /// The script's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sandbox its processes run in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The error of a process whose Lua code failed with `e`, or whose
    /// guard is doomed.
    fn error(&self, doom: Option<Doom>, e: Option<&mlua::Error>) -> Error {
        match doom {
            Some(Doom::Cancelled) | Some(Doom::Closing) => Error::Cancelled,
            Some(Doom::OverBudget) => Error::failed(format!(
                "{}: a step ran past its time budget of {:?}",
                self.name,
                self.sandbox.step_time().unwrap_or_default()
            )),
            None => {
                let Some(e) = e else {
                    return Error::failed(format!("{}: stopped", self.name));
                };
                let msg = lua_message(e);
                match self.sandbox.memory_limit() {
                    Some(limit)
                        if matches!(e, mlua::Error::MemoryError(_))
                            || msg.ends_with("not enough memory") =>
                    {
                        Error::failed(format!(
                            "{}: the memory limit of {limit} bytes was exceeded ({msg})",
                            self.name
                        ))
                    }
                    _ => Error::failed(msg),
                }
            }
        }
    }
}

impl Script {
    /// The error of a process whose mailbox could not take a message
    /// (`len` waiting).
    fn mailbox_error(&self, e: &mlua::Error, len: usize) -> Error {
        match self.sandbox.memory_limit() {
            Some(limit) if matches!(e, mlua::Error::MemoryError(_)) => Error::failed(format!(
                "{}: the memory limit of {limit} bytes was exceeded by messages it had not received ({len} waiting)",
                self.name
            )),
            _ => Error::failed(format!("{}: a message: {}", self.name, lua_message(e))),
        }
    }
}

/// What a Lua process is waiting for.
#[derive(Debug)]
enum Wait {
    /// Its first resume, with its input.
    Start(Value),
    /// The completion of the yield with this tag.
    Cmd(u64),
    /// A message.
    Recv,
}

/// A Lua script running as a process. See the crate docs.
pub struct LuaProcess {
    script: Arc<Script>,
    state: Option<Running>,
}

/// A started process. Its fields drop in order after `Drop::drop` has
/// doomed the guard: the Lua state first, the guard its C functions point
/// to last.
struct Running {
    lua: Lua,
    thread: mlua::Thread,
    wait: Wait,
    mailbox: Mailbox,
    next_tag: u64,
    guard: Box<Guard>,
}

/// The messages a process has taken from its queue but its script has not
/// received yet, kept in its Lua state, where its memory limit bounds
/// them: converted as they arrive, in two tables (messages, senders)
/// holding the messages `head + 1` to `tail` (from 1, so in the tables'
/// array parts), made on the first message.
#[derive(Default)]
struct Mailbox {
    tables: Option<(mlua::Table, mlua::Table)>,
    head: i64,
    tail: i64,
}

impl Mailbox {
    fn len(&self) -> usize {
        usize::try_from(self.tail - self.head).unwrap_or(0)
    }

    /// Converts `msg` and `from` into `lua` and puts them last.
    fn push(&mut self, lua: &Lua, msg: &Value, from: Option<Pid>) -> mlua::Result<()> {
        let (msgs, froms) = match &self.tables {
            Some(t) => t,
            None => self
                .tables
                .insert((lua.create_table()?, lua.create_table()?)),
        };
        let msg = msg.to_lua_raw(lua)?;
        let from = match from {
            Some(pid) => mlua::Value::String(lua.create_string(pid.to_string())?),
            None => mlua::Value::Nil,
        };
        let at = self.tail + 1;
        msgs.raw_set(at, msg)?;
        froms.raw_set(at, from)?;
        self.tail = at;
        Ok(())
    }

    /// The first message and its sender (`nil` if it has none), taken out.
    fn pop(&mut self) -> mlua::Result<Option<MultiValue>> {
        let Some((msgs, froms)) = &self.tables else {
            return Ok(None);
        };
        if self.head == self.tail {
            return Ok(None);
        }
        let at = self.head + 1;
        let msg: mlua::Value = msgs.raw_get(at)?;
        let from: mlua::Value = froms.raw_get(at)?;
        msgs.raw_set(at, mlua::Value::Nil)?;
        froms.raw_set(at, mlua::Value::Nil)?;
        self.head = at;
        if self.head == self.tail {
            // Empty: the next message starts again at the tables' start.
            self.head = 0;
            self.tail = 0;
        }
        Ok(Some(MultiValue::from_iter([msg, from])))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Lua code that runs while the state closes (a `__close` handler)
        // raises at its first check instead of running on.
        self.guard.close();
    }
}

impl fmt::Debug for LuaProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LuaProcess")
            .field("script", &self.script.name)
            .field("started", &self.state.is_some())
            .finish()
    }
}

fn lua_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => lua_message(cause),
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => m.clone(),
        other => other.to_string(),
    }
}

/// Two seeds for `math.randomseed` no script can predict.
fn random_seeds(pid: &str) -> (i64, i64) {
    let s = RandomState::new();
    let a = s.hash_one(pid);
    let b = s.hash_one(a);
    (a as i64, b as i64)
}

impl LuaProcess {
    /// A process that will run `script`; `init` starts it.
    pub fn new(script: Arc<Script>) -> Self {
        LuaProcess {
            script,
            state: None,
        }
    }

    /// `init` for any process type whose Lua variant this is: sets up a
    /// fresh Lua state in the script's [`Sandbox`], runs the script's
    /// top-level code (under the step budget) and prepares a coroutine at
    /// the global function `method` ([`Error::UnknownMethod`] if there is
    /// none).
    pub fn init_in<P>(
        &mut self,
        ctx: &Context<'_, P>,
        method: &str,
        input: Value,
    ) -> Result<(), Error>
    where
        P: Process,
    {
        let script = &*self.script;
        let sandbox = &script.sandbox;
        let fail = |e: mlua::Error| Error::failed(lua_message(&e));
        let mut libs =
            StdLib::COROUTINE | StdLib::TABLE | StdLib::STRING | StdLib::UTF8 | StdLib::MATH;
        if sandbox.allows(Lib::Os) {
            libs |= StdLib::OS;
        }
        if sandbox.allows(Lib::Io) {
            libs |= StdLib::IO;
        }
        // Declared before the state, so it drops after it: the state's C
        // functions point to it.
        let guard = Box::new(Guard::new(ctx.cancel_token().clone(), sandbox.step_time()));
        let lua = Lua::new_with(libs, LuaOptions::default()).map_err(fail)?;
        let pid = ctx.pid().to_string();
        guard::install(
            &lua,
            &Install {
                guard: &guard,
                pid: &pid,
                print: sandbox.allows(Lib::Print),
                os_subset: !sandbox.allows(Lib::Os),
                seeds: random_seeds(&pid),
            },
        )
        .map_err(fail)?;
        if !sandbox.modules().is_empty() {
            install_modules(&lua, sandbox).map_err(fail)?;
        }
        if let Some(limit) = sandbox.memory_limit() {
            lua.set_memory_limit(limit).map_err(fail)?;
        }
        // The chunk's top-level code runs under the guard like a step. The
        // bytecode is what `compile` made from source, never bytecode the
        // host was handed.
        guard.begin_step();
        let loaded = lua
            .load(&script.bytecode[..])
            .set_mode(ChunkMode::Binary)
            .set_name(script.chunk.as_str())
            .exec();
        if let Err(e) = loaded {
            return Err(script.error(guard.doom(), Some(&e)));
        }
        if let Some(d) = guard.doom() {
            return Err(script.error(Some(d), None));
        }
        let f = match lua.globals().get::<mlua::Value>(method).map_err(fail)? {
            mlua::Value::Function(f) => f,
            _ => return Err(Error::UnknownMethod(method.to_string())),
        };
        // The thread takes the hook `install` set on the main thread.
        let main = guard::main_function(&lua, f).map_err(fail)?;
        let thread = lua.create_thread(main).map_err(fail)?;
        self.state = Some(Running {
            lua,
            thread,
            wait: Wait::Start(input),
            mailbox: Mailbox::default(),
            next_tag: 0,
            guard,
        });
        Ok(())
    }

    /// `step` for any process type whose messages and responses are
    /// [`Value`], commands [`LuaCommand`] and output [`Value`]. On
    /// `stepsched`'s scheduler, `send` looks at the receiver's queue
    /// ([`Sandbox::with_send_queue_limit`]); on another (a context without
    /// a [`stepsched::Handle`] behind it) that limit is not looked at.
    pub fn step_in<P>(
        &mut self,
        ctx: &mut Context<'_, P>,
        events: Events<'_, Value, Value>,
        out: &mut StepOutput<LuaCommand, Value>,
    ) -> Result<(), Error>
    where
        P: Process<Message = Value, Response = Value, Command = LuaCommand, Output = Value>
            + Send
            + 'static,
    {
        let Some(run) = self.state.as_mut() else {
            return Err(Error::failed("stepped before init"));
        };
        let script = &*self.script;
        let mut completion = None;
        for event in events {
            match event {
                Event::Completion { tag, result } => {
                    if matches!(run.wait, Wait::Cmd(t) if t == tag) {
                        completion = Some(result);
                    }
                }
                Event::Message { from, data } => {
                    if let Err(e) = run.mailbox.push(&run.lua, &data, from) {
                        return Err(script.mailbox_error(&e, run.mailbox.len()));
                    }
                }
                Event::Cancel => return Err(Error::Cancelled),
            }
        }
        let sandbox = &script.sandbox;
        let value_limit = sandbox.value_limit();
        let lua = &run.lua;
        let conv = |e: ValueError| Error::failed(format!("{}: {e}", script.name));
        let mut args: MultiValue = match std::mem::replace(&mut run.wait, Wait::Recv) {
            Wait::Start(input) => MultiValue::from_iter([input.to_lua(lua).map_err(conv)?]),
            Wait::Cmd(tag) => match completion {
                None => {
                    run.wait = Wait::Cmd(tag);
                    out.set_status(Status::Yield);
                    return Ok(());
                }
                Some(Ok(v)) => MultiValue::from_iter([
                    mlua::Value::Boolean(true),
                    v.to_lua(lua).map_err(conv)?,
                ]),
                Some(Err(e)) => MultiValue::from_iter([
                    mlua::Value::Boolean(false),
                    mlua::Value::String(
                        lua.create_string(e.to_string())
                            .map_err(|e| Error::failed(e.to_string()))?,
                    ),
                ]),
            },
            Wait::Recv => match run
                .mailbox
                .pop()
                .map_err(|e| script.error(None, Some(&e)))?
            {
                None => {
                    out.set_status(Status::Idle);
                    return Ok(());
                }
                Some(received) => received,
            },
        };
        run.guard.begin_step();
        loop {
            let resumed = run.thread.resume::<MultiValue>(args);
            // A doomed guard ends the process whatever the script did with
            // the error (caught it, returned, yielded).
            if let Some(d) = run.guard.doom() {
                return Err(script.error(Some(d), resumed.as_ref().err()));
            }
            let yielded = resumed.map_err(|e| script.error(None, Some(&e)))?;
            if run.thread.status() != ThreadStatus::Resumable {
                let v = yielded.into_iter().next().unwrap_or(mlua::Value::Nil);
                let v = Value::from_lua_limited(&v, value_limit)
                    .map_err(|e| Error::failed(format!("{}: return: {e}", script.name)))?;
                out.set_status(Status::Done(v));
                return Ok(());
            }
            let mut y = yielded.into_iter();
            // The kind is compared in place, without copying it out.
            let kind = match y.next() {
                Some(mlua::Value::String(s)) => s,
                other => {
                    return Err(Error::failed(format!(
                        "{}: coroutine.yield({other:?}) outside yield_cmd/receive/send",
                        script.name
                    )));
                }
            };
            match &*kind.as_bytes() {
                b"cmd" => {
                    // The name counts against the value limit with the
                    // argument: both are copied out.
                    let name = match y.next() {
                        Some(v @ mlua::Value::String(_)) => v,
                        _ => {
                            args = err_args(lua, "yield_cmd: the command name must be a string")?;
                            continue;
                        }
                    };
                    let a = y.next().unwrap_or(mlua::Value::Nil);
                    let mut budget = Budget::new(value_limit);
                    let cmd = Value::from_lua_at(&name, 0, &mut budget).and_then(|name| {
                        Ok((
                            String::try_from(name)?,
                            Value::from_lua_at(&a, 0, &mut budget)?,
                        ))
                    });
                    match cmd {
                        Ok((name, a)) => {
                            run.next_tag += 1;
                            run.wait = Wait::Cmd(run.next_tag);
                            out.push_yield(run.next_tag, LuaCommand { name, args: a });
                            out.set_status(Status::Yield);
                            return Ok(());
                        }
                        Err(e) => args = err_args(lua, &format!("yield_cmd: {e}"))?,
                    }
                }
                b"recv" => match run
                    .mailbox
                    .pop()
                    .map_err(|e| script.error(None, Some(&e)))?
                {
                    None => {
                        run.wait = Wait::Recv;
                        out.set_status(Status::Idle);
                        return Ok(());
                    }
                    Some(received) => args = received,
                },
                b"send" => {
                    let to = y.next().unwrap_or(mlua::Value::Nil);
                    let v = y.next().unwrap_or(mlua::Value::Nil);
                    let sent = Value::from_lua_limited(&to, value_limit)
                        .and_then(Pid::try_from)
                        .and_then(|to| {
                            // Looked at before the value is converted: a
                            // refused send copies nothing. The scheduler's
                            // handle is borrowed from the context, not
                            // cloned.
                            if let Some(limit) = sandbox.send_queue_limit()
                                && let Some(handle) = ctx
                                    .reach()
                                    .as_any()
                                    .and_then(|a| a.downcast_ref::<Handle<P>>())
                                && let Some(queued) = handle.queued(to)
                                && queued >= limit
                            {
                                return Err(ValueError(format!(
                                    "process {to} has {queued} events queued, at the sandbox's send queue limit of {limit}"
                                )));
                            }
                            Ok(to)
                        })
                        .and_then(|to| Value::from_lua_limited(&v, value_limit).map(|v| (to, v)))
                        .and_then(|(to, v)| {
                            ctx.send(to, v)
                                .map_err(|e| ValueError(format!("send to {to}: {e}")))
                        });
                    args = match sent {
                        Ok(()) => MultiValue::from_iter([mlua::Value::Boolean(true)]),
                        Err(e) => err_args(lua, &format!("send: {e}"))?,
                    };
                }
                other => {
                    return Err(Error::failed(format!(
                        "{}: coroutine.yield({:?}) outside yield_cmd/receive/send",
                        script.name,
                        String::from_utf8_lossy(other)
                    )));
                }
            }
        }
    }
}

/// Puts the loaders of the sandbox's modules into the registry table
/// `require` reads.
fn install_modules(lua: &Lua, sandbox: &Sandbox) -> mlua::Result<()> {
    let loaders = lua.create_table()?;
    for (name, module) in sandbox.modules() {
        let loader = match &module.0 {
            ModuleKind::Lua { chunk, bytecode } => {
                let (chunk, bytecode) = (chunk.clone(), Arc::clone(bytecode));
                // Bytecode `Module::lua` compiled from source.
                lua.create_function(move |lua, name: mlua::Value| {
                    lua.load(&bytecode[..])
                        .set_mode(ChunkMode::Binary)
                        .set_name(chunk.as_str())
                        .call::<mlua::Value>(name)
                })?
            }
            ModuleKind::Rust(build) => {
                let build = Arc::clone(build);
                lua.create_function(move |lua, _: mlua::Value| build(lua))?
            }
        };
        loaders.raw_set(name.as_str(), loader)?;
    }
    let key = guard::MODULES.to_str().unwrap_or("stepsched.modules");
    lua.set_named_registry_value(key, loaders)
}

fn err_args(lua: &Lua, msg: &str) -> Result<MultiValue, Error> {
    let s = lua
        .create_string(msg)
        .map_err(|e| Error::failed(e.to_string()))?;
    Ok(MultiValue::from_iter([
        mlua::Value::Boolean(false),
        mlua::Value::String(s),
    ]))
}

impl Process for LuaProcess {
    type Input = Value;
    type Message = Value;
    type Response = Value;
    type Command = LuaCommand;
    type Output = Value;

    fn init(&mut self, ctx: &Context<'_, Self>, method: &str, input: Value) -> Result<(), Error> {
        self.init_in(ctx, method, input)
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, Value, Value>,
        out: &mut StepOutput<LuaCommand, Value>,
    ) -> Result<(), Error> {
        self.step_in(ctx, events, out)
    }
}

static TIMER_THREADS: AtomicUsize = AtomicUsize::new(0);
static TIMER_THREADS_RUNNING: AtomicUsize = AtomicUsize::new(0);

/// How many timer threads [`host_handlers`] has started in this program
/// (one per scheduler it was called for).
pub fn timer_threads_started() -> usize {
    // Relaxed: a statistic; nothing is published through it.
    TIMER_THREADS.load(Ordering::Relaxed)
}

/// How many of those timer threads are still running (each stops when its
/// scheduler shuts down).
pub fn timer_threads_running() -> usize {
    // Acquire: pairs with the Release decrement at the end of the thread,
    // which `Timer::stop` joins before it returns.
    TIMER_THREADS_RUNNING.load(Ordering::Acquire)
}

type Job = Box<dyn FnOnce() + Send>;

struct Entry {
    at: Instant,
    seq: u64,
    job: Job,
}
impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // A max-heap: the earliest deadline is the greatest.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
struct TimerState {
    heap: BinaryHeap<Entry>,
    seq: u64,
    stopped: bool,
}

/// One thread that runs jobs at their deadlines (a binary heap and a
/// condvar). [`Timer::stop`] (at the scheduler's shutdown, or when the last
/// `Timer` drops) stops the thread and drops every pending job without
/// running it.
struct Timer {
    shared: Arc<(Mutex<TimerState>, Condvar)>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
}

impl Timer {
    fn start() -> std::io::Result<Self> {
        let shared = Arc::new((Mutex::new(TimerState::default()), Condvar::new()));
        let inner = Arc::clone(&shared);
        // Relaxed: a statistic (see `timer_threads_started`).
        TIMER_THREADS.fetch_add(1, Ordering::Relaxed);
        // Counted before the thread starts, so a `stop` racing the start
        // never reads a count the thread's end has not yet added to.
        // Relaxed: only the decrement publishes (see `timer_threads_running`).
        TIMER_THREADS_RUNNING.fetch_add(1, Ordering::Relaxed);
        let thread = thread::Builder::new()
            .name("stepsched-lua-timer".into())
            .spawn(move || {
                timer_loop(&inner);
                // Release: see `timer_threads_running`.
                TIMER_THREADS_RUNNING.fetch_sub(1, Ordering::Release);
            })
            .inspect_err(|_| {
                // Relaxed: no thread ran; nothing to publish.
                TIMER_THREADS_RUNNING.fetch_sub(1, Ordering::Relaxed);
            })?;
        Ok(Timer {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Runs `job` after `delay`; once the timer is stopped, drops it at once
    /// (a dropped completer completes its yield with an error).
    fn after(&self, delay: Duration, job: Job) {
        let (lock, cv) = &*self.shared;
        let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
        if s.stopped {
            drop(s);
            drop(job);
            return;
        }
        s.seq += 1;
        let seq = s.seq;
        s.heap.push(Entry {
            at: Instant::now() + delay,
            seq,
            job,
        });
        cv.notify_one();
    }

    /// Stops the thread and waits for it (unless called on it), then drops
    /// the pending jobs. Idempotent.
    fn stop(&self) {
        let (lock, cv) = &*self.shared;
        let pending = {
            let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
            s.stopped = true;
            std::mem::take(&mut s.heap)
        };
        cv.notify_one();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread
            && t.thread().id() != thread::current().id()
        {
            let _ = t.join();
        }
        // Dropped outside the lock: a dropped completer completes its
        // yield with an error.
        drop(pending);
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn timer_loop(shared: &(Mutex<TimerState>, Condvar)) {
    let (lock, cv) = shared;
    let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if s.stopped {
            return;
        }
        let now = Instant::now();
        match s.heap.peek().map(|e| e.at) {
            Some(at) if at <= now => {
                let Some(e) = s.heap.pop() else { continue };
                drop(s);
                (e.job)();
                s = lock.lock().unwrap_or_else(|p| p.into_inner());
            }
            Some(at) => {
                s = cv
                    .wait_timeout(s, at - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            None => s = cv.wait(s).unwrap_or_else(|p| p.into_inner()),
        }
    }
}

/// The default limit of the store behind `kv_put`: 64 MiB of keys and
/// values (see [`KvStore`]).
pub const DEFAULT_STORE_LIMIT: usize = 64 << 20;

/// The shared key-value store behind `kv_get` and `kv_put`: a map from
/// strings to values, bounded in bytes. An entry counts its key's length
/// plus its value's [`Value::size`]; a put that would make the entries
/// count more than the limit is refused and changes nothing (replacing a
/// key counts the difference). Clones share the store.
#[derive(Clone, Debug)]
pub struct KvStore {
    inner: Arc<Mutex<Kv>>,
    limit: Option<usize>,
}

#[derive(Debug, Default)]
struct Kv {
    map: HashMap<String, Value>,
    bytes: usize,
}

fn entry_size(key: &str, value: &Value) -> usize {
    key.len().saturating_add(value.size())
}

impl KvStore {
    /// An empty store of at most `limit` bytes (`None`: no limit).
    pub fn new(limit: Option<usize>) -> Self {
        KvStore {
            inner: Arc::default(),
            limit,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kv> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.lock().map.get(key).cloned()
    }

    /// Stores `value` under `key` (removes the key if `value` is
    /// [`Value::Nil`]) and returns the value it replaced.
    ///
    /// # Errors
    ///
    /// [`Error::Failed`], naming the limit, if the store would then count
    /// more than its limit; the store is left as it was.
    pub fn put(&self, key: String, value: Value) -> Result<Option<Value>, Error> {
        let mut kv = self.lock();
        let old = kv.map.get(&key).map_or(0, |v| entry_size(&key, v));
        if value == Value::Nil {
            kv.bytes -= old;
            return Ok(kv.map.remove(&key));
        }
        let new = entry_size(&key, &value);
        let bytes = (kv.bytes - old).saturating_add(new);
        if let Some(limit) = self.limit
            && bytes > limit
        {
            return Err(Error::failed(format!(
                "kv_put: the store would hold {bytes} bytes, more than its limit of {limit} bytes"
            )));
        }
        kv.bytes = bytes;
        Ok(kv.map.insert(key, value))
    }

    /// How many bytes the entries count (see the type's docs).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The store's limit in bytes (`None`: none).
    pub fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// How many keys are stored.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Registers the handlers every Lua host needs on `builder`, and returns it
/// with the key-value store they share:
///
/// - `sleep` (argument: milliseconds) completes with `nil` after that
///   long, from one timer thread shared by every process of the scheduler.
///   The thread stops when the scheduler shuts down (or drops); a sleep
///   still pending then, or asked for after, is dropped, so its yield
///   completes with an error.
/// - `kv_put` (argument `{key, value}`) stores a value (a `nil` value
///   removes the key) and completes with the previous one (or `nil`), or
///   with an error naming the limit if the store would then hold more
///   than [`DEFAULT_STORE_LIMIT`] bytes (see [`KvStore`]); `kv_get`
///   (argument: key) completes with the stored value or `nil`.
///
/// [`host_handlers_with_store_limit`] sets another limit.
pub fn host_handlers<P>(builder: Builder<P>) -> std::io::Result<(Builder<P>, KvStore)>
where
    P: Process<Command = LuaCommand, Response = Value> + Send + 'static,
    P::Message: Send + 'static,
    P::Output: Send + 'static,
{
    host_handlers_with_store_limit(builder, Some(DEFAULT_STORE_LIMIT))
}

/// [`host_handlers`] with a store of at most `limit` bytes (`None`: no
/// limit, so scripts can grow the host as they like through `kv_put`).
pub fn host_handlers_with_store_limit<P>(
    builder: Builder<P>,
    limit: Option<usize>,
) -> std::io::Result<(Builder<P>, KvStore)>
where
    P: Process<Command = LuaCommand, Response = Value> + Send + 'static,
    P::Message: Send + 'static,
    P::Output: Send + 'static,
{
    let timer = Arc::new(Timer::start()?);
    let stopper = Arc::clone(&timer);
    let kv = KvStore::new(limit);
    let (get, put) = (kv.clone(), kv.clone());
    let builder = builder
        .handler("sleep", move |cmd: LuaCommand, done: Completer<P>| {
            let ms = match cmd.args {
                Value::Int(ms) if ms >= 0 => ms as u64,
                Value::Num(ms) if ms >= 0.0 => ms as u64,
                other => {
                    done.complete(Err(Error::failed(format!(
                        "sleep: expected milliseconds, got {other:?}"
                    ))));
                    return;
                }
            };
            timer.after(
                Duration::from_millis(ms),
                Box::new(move || {
                    done.complete(Ok(Value::Nil));
                }),
            );
        })
        .handler("kv_get", move |cmd: LuaCommand, done: Completer<P>| {
            let r = match cmd.args {
                Value::Str(k) => Ok(get.get(&k).unwrap_or(Value::Nil)),
                other => Err(Error::failed(format!(
                    "kv_get: expected a key, got {other:?}"
                ))),
            };
            done.complete(r);
        })
        .handler("kv_put", move |cmd: LuaCommand, done: Completer<P>| {
            let r = match kv_pair(cmd.args) {
                Some((k, v)) => put.put(k, v).map(|old| old.unwrap_or(Value::Nil)),
                None => Err(Error::failed("kv_put: expected {key, value}")),
            };
            done.complete(r);
        })
        // The timer thread ends with the scheduler's shutdown, not with
        // the last handle.
        .on_shutdown(move || stopper.stop());
    Ok((builder, kv))
}

fn kv_pair(args: Value) -> Option<(String, Value)> {
    let Value::Table(pairs) = args else {
        return None;
    };
    let mut key = None;
    let mut value = Value::Nil;
    for (k, v) in pairs {
        match k {
            Value::Int(1) => key = String::try_from(v).ok(),
            Value::Int(2) => value = v,
            _ => {}
        }
    }
    Some((key?, value))
}
