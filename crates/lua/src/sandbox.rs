//! What a script may reach and how much it may take: [`Sandbox`], the
//! libraries a host may add ([`Lib`]) and the modules it may provide
//! ([`Module`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use mlua::Lua;
use stepsched::Error;

/// The default memory limit of a Lua process: 64 MiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 64 << 20;

/// The default time budget of one step of a Lua process: one second.
pub const DEFAULT_STEP_TIME: Duration = Duration::from_secs(1);

/// The default value limit: a value leaving a script (`send`,
/// `yield_cmd`, `return`) may count at most 1 MiB (see
/// [`Sandbox::with_value_limit`]).
pub const DEFAULT_VALUE_LIMIT: usize = 1 << 20;

/// The default send queue limit: `send` refuses to add to a process that
/// has 10 000 events waiting (see [`Sandbox::with_send_queue_limit`]).
pub const DEFAULT_SEND_QUEUE_LIMIT: usize = 10_000;

/// A part of Lua's standard library that reaches outside the script's own
/// state, which a host may add to a [`Sandbox`] with [`Sandbox::allow`].
///
/// None of them is in the default sandbox. The CPU budget cannot stop a
/// call that blocks inside one of them (`io.read` on a terminal,
/// `os.execute` of a long command).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lib {
    /// `print` and `warn`: write to the host's standard output and error.
    Print,
    /// The whole `os` library: `os.execute` runs commands, `os.exit` ends
    /// the host with every process in it, `os.getenv` reads its
    /// environment, `os.remove`, `os.rename` and `os.tmpname` change its
    /// files, `os.setlocale` changes the locale of every thread.
    Os,
    /// The `io` library: reads and writes any file the host can, and runs
    /// commands with `io.popen`.
    Io,
}

impl Lib {
    fn bit(self) -> u8 {
        match self {
            Lib::Print => 1,
            Lib::Os => 2,
            Lib::Io => 4,
        }
    }
}

type RustLoader = dyn Fn(&Lua) -> mlua::Result<mlua::Value> + Send + Sync;

/// A module the host provides, which a script gets with `require(name)`:
/// Lua source compiled once, or a Rust function that builds the value.
/// See [`Sandbox::with_module`].
#[derive(Clone)]
pub struct Module(pub(crate) ModuleKind);

#[derive(Clone)]
pub(crate) enum ModuleKind {
    /// Bytecode compiled by [`Module::lua`] from source (never from
    /// bytecode the host was handed), and the chunk name.
    Lua {
        chunk: String,
        bytecode: Arc<[u8]>,
    },
    Rust(Arc<RustLoader>),
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            ModuleKind::Lua { chunk, .. } => f.debug_tuple("Module::Lua").field(chunk).finish(),
            ModuleKind::Rust(_) => f.write_str("Module::Rust"),
        }
    }
}

impl Module {
    /// A module written in Lua: `source` is compiled once here (a syntax
    /// error is returned as [`Error::Failed`] naming `name` and the line),
    /// and run in the sandbox of each process on its first `require`. What
    /// it returns is the module (`true` if it returns nothing).
    pub fn lua(name: &str, source: &str) -> Result<Self, Error> {
        let (chunk, bytecode) = crate::compile(name, source)?;
        Ok(Module(ModuleKind::Lua {
            chunk,
            bytecode: bytecode.into(),
        }))
    }

    /// A module built by Rust: `build` is called in each process on its
    /// first `require` and returns the module's value (a table of
    /// functions made with [`Lua::create_function`], usually).
    ///
    /// Functions it gives the script run as host code: the sandbox's CPU
    /// budget is looked at before and after each Lua call, not inside the
    /// Rust function, and a Rust function that calls back into Lua and
    /// drops the error can hide a cancellation from the script's `pcall`s
    /// until its next library call.
    pub fn rust<F>(build: F) -> Self
    where
        F: Fn(&Lua) -> mlua::Result<mlua::Value> + Send + Sync + 'static,
    {
        Module(ModuleKind::Rust(Arc::new(build)))
    }
}

/// What a script sees and the limits it runs under. The default is the
/// safe one; [`Sandbox::allow`] and [`Sandbox::with_module`] widen it.
///
/// By default a script sees Lua's base functions except `dofile`,
/// `loadfile`, `print` and `warn`, with `load` restricted to text chunks and
/// `setmetatable` refusing `__gc` finalizers; the `coroutine`, `string`
/// (without `string.dump`), `table`, `math` and `utf8` libraries;
/// `os.time`, `os.clock` and `os.date`; `require` of the host's modules
/// only; and the crate's `yield_cmd`, `receive`, `send` and `self`. No
/// `io`, no rest of `os`, no `package`, no `debug`.
///
/// Limits, per process: [`DEFAULT_MEMORY_LIMIT`] of Lua memory,
/// [`DEFAULT_STEP_TIME`] per step, [`DEFAULT_VALUE_LIMIT`] per value that
/// leaves the script and [`DEFAULT_SEND_QUEUE_LIMIT`] events in the queue
/// of a process it sends to.
///
/// ```
/// use std::time::Duration;
/// use stepsched_lua::{Lib, Module, Sandbox, Script};
///
/// let sandbox = Sandbox::new()
///     .allow(Lib::Print)
///     .with_module("greet", Module::lua("greet.lua", "return { hi = function(n) return 'hi ' .. n end }").unwrap())
///     .with_memory_limit(Some(8 << 20))
///     .with_step_time(Some(Duration::from_millis(100)));
/// let script = Script::with_sandbox(
///     "main.lua",
///     "function main(n) return require('greet').hi(n) end",
///     sandbox,
/// )
/// .unwrap();
/// assert_eq!(script.sandbox().memory_limit(), Some(8 << 20));
/// ```
#[derive(Clone, Debug)]
pub struct Sandbox {
    libs: u8,
    modules: Vec<(String, Module)>,
    memory_limit: Option<usize>,
    step_time: Option<Duration>,
    value_limit: Option<usize>,
    send_queue_limit: Option<usize>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox {
            libs: 0,
            modules: Vec::new(),
            memory_limit: Some(DEFAULT_MEMORY_LIMIT),
            step_time: Some(DEFAULT_STEP_TIME),
            value_limit: Some(DEFAULT_VALUE_LIMIT),
            send_queue_limit: Some(DEFAULT_SEND_QUEUE_LIMIT),
        }
    }
}

impl Sandbox {
    /// The default sandbox (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a library that reaches outside the script's state (see
    /// [`Lib`] for what each one lets a script do).
    #[must_use]
    pub fn allow(mut self, lib: Lib) -> Self {
        self.libs |= lib.bit();
        self
    }

    /// Whether `lib` was added with [`allow`](Self::allow).
    pub fn allows(&self, lib: Lib) -> bool {
        self.libs & lib.bit() != 0
    }

    /// Provides `module` to scripts as `require(name)` (replacing an
    /// earlier module of that name). Each process loads it on its first
    /// `require` and keeps it for the next ones; a name the host did not
    /// provide is an error naming it.
    #[must_use]
    pub fn with_module(mut self, name: impl Into<String>, module: Module) -> Self {
        let name = name.into();
        self.modules.retain(|(n, _)| *n != name);
        self.modules.push((name, module));
        self
    }

    /// The modules provided, by name.
    pub(crate) fn modules(&self) -> &[(String, Module)] {
        &self.modules
    }

    /// Sets how many bytes the Lua state of each process may hold (its
    /// standard library, the script, every value it makes); `None` for no
    /// limit. An allocation past it fails with Lua's memory error, which
    /// the script may catch with `pcall`; uncaught, the process fails with
    /// an error naming the limit.
    #[must_use]
    pub fn with_memory_limit(mut self, bytes: Option<usize>) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// The memory limit of each process, in bytes (`None`: none).
    pub fn memory_limit(&self) -> Option<usize> {
        self.memory_limit
    }

    /// Sets how long one step may run Lua code (wall-clock time, so a busy
    /// machine counts against it); `None` for no budget. It is looked at
    /// every [`HOOK_INSTRUCTIONS`](crate::HOOK_INSTRUCTIONS) instructions
    /// and every few calls into the standard library; past it the process
    /// fails with an error naming the budget, which `pcall` cannot catch.
    #[must_use]
    pub fn with_step_time(mut self, budget: Option<Duration>) -> Self {
        self.step_time = budget;
        self
    }

    /// The time budget of each step (`None`: none).
    pub fn step_time(&self) -> Option<Duration> {
        self.step_time
    }

    /// Sets how many bytes a value leaving the script may count: the
    /// argument of `send` and of `yield_cmd`, and the value the script
    /// returns. These are copied out of the Lua state into the host (a
    /// process's queue, a handler, the result), outside the memory limit.
    /// A value counts its strings' bytes plus
    /// [`VALUE_OVERHEAD`](crate::VALUE_OVERHEAD) bytes for each value in it
    /// (each key and each value of a table, the table itself), as
    /// [`Value::from_lua_limited`](crate::Value::from_lua_limited) counts
    /// it while it converts, stopping at the limit. Past it, `send` and
    /// `yield_cmd` raise an error at the script's line (which `pcall` can
    /// catch) naming the limit, and a returned value fails the process with
    /// that error. `None` for no limit.
    #[must_use]
    pub fn with_value_limit(mut self, bytes: Option<usize>) -> Self {
        self.value_limit = bytes;
        self
    }

    /// The value limit, in bytes (`None`: none).
    pub fn value_limit(&self) -> Option<usize> {
        self.value_limit
    }

    /// Sets how many events may wait in the queue of a process before
    /// `send` refuses to add one: a `send` to a process that has `limit`
    /// events or more queued (messages, completions) raises an error at
    /// the script's line naming the receiver and the limit, which `pcall`
    /// can catch, instead of growing the receiver's queue in the host.
    /// The count is a snapshot ([`Handle::queued`](stepsched::Handle::queued)),
    /// so processes sending at once may each add one past it. Looked at
    /// only on `stepsched`'s scheduler, and for processes of its own node
    /// (a message to another node goes to the link, which has flow control
    /// of its own). A Lua receiver moves its queued messages into its own
    /// state when it is stepped, where they count against its memory
    /// limit. `None` for no limit.
    #[must_use]
    pub fn with_send_queue_limit(mut self, events: Option<usize>) -> Self {
        self.send_queue_limit = events;
        self
    }

    /// The send queue limit, in events (`None`: none).
    pub fn send_queue_limit(&self) -> Option<usize> {
        self.send_queue_limit
    }
}
