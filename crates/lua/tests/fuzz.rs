//! Property: a script of random calls (the sandbox's library, and the
//! names it leaves out) with random arguments never panics the host and
//! never reaches outside: the process ends with its value or a process
//! error, no file appears, and the scheduler runs the next process.
//!
//! Strings stay short, so that each case runs fast (tests/pattern.rs
//! checks that a crafted pattern on a long subject is stopped).

use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;
use stepsched::{Builder, Error, Scheduler};
use stepsched_lua::{LuaProcess, Sandbox, Script, Value, host_handlers};

mod common;
use common::done;

/// What a script may call.
const ALLOWED: &[&str] = &[
    "assert",
    "collectgarbage",
    "error",
    "getmetatable",
    "ipairs",
    "load",
    "next",
    "pairs",
    "pcall",
    "rawequal",
    "rawget",
    "rawlen",
    "rawset",
    "select",
    "setmetatable",
    "tonumber",
    "tostring",
    "type",
    "xpcall",
    "require",
    "coroutine.close",
    "coroutine.create",
    "coroutine.isyieldable",
    "coroutine.resume",
    "coroutine.running",
    "coroutine.status",
    "coroutine.wrap",
    "string.byte",
    "string.char",
    "string.find",
    "string.format",
    "string.gmatch",
    "string.gsub",
    "string.len",
    "string.lower",
    "string.match",
    "string.pack",
    "string.packsize",
    "string.rep",
    "string.reverse",
    "string.sub",
    "string.unpack",
    "string.upper",
    "table.concat",
    "table.insert",
    "table.move",
    "table.pack",
    "table.remove",
    "table.sort",
    "table.unpack",
    "math.abs",
    "math.floor",
    "math.fmod",
    "math.max",
    "math.random",
    "math.tointeger",
    "math.ult",
    "utf8.char",
    "utf8.codepoint",
    "utf8.len",
    "utf8.offset",
    "os.time",
    "os.clock",
    "os.date",
];

/// What the sandbox leaves out: each must fail inside the pcall.
const REFUSED: &[&str] = &[
    "os.execute",
    "os.exit",
    "os.getenv",
    "os.remove",
    "os.rename",
    "os.tmpname",
    "io.open",
    "io.popen",
    "io.write",
    "dofile",
    "loadfile",
    "string.dump",
    "debug.getinfo",
    "debug.sethook",
    "package.loadlib",
    "print",
    "warn",
];

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stepsched-lua-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A Lua expression for an argument; `dir` is the scratch directory.
fn arg(dir: String) -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("nil".to_string()),
        1 => any::<i64>().prop_map(|i| format!("({i})")),
        1 => (-3i64..40).prop_map(|i| i.to_string()),
        1 => Just("(1 << 40)".to_string()),
        1 => Just("math.maxinteger".to_string()),
        1 => any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("({f:e})")),
        1 => "[a-z%.()\\[\\]*+?^$-]{0,8}".prop_map(|s| format!("{s:?}")),
        3 => Just(format!("{:?}", format!("{dir}/f"))),
        3 => Just(format!("{:?}", format!("touch {dir}/g"))),
        2 => Just("\"w\"".to_string()),
        1 => Just("\"\\27Lua\"".to_string()),
        1 => Just("\"return 1\"".to_string()),
        1 => Just("{}".to_string()),
        1 => Just("{3, 1, 2}".to_string()),
        1 => Just("setmetatable({}, {__len = function() return 1 << 40 end})".to_string()),
        1 => Just("function() return 1 end".to_string()),
        1 => Just("function() while true do end end".to_string()),
    ]
}

fn call(dir: String) -> impl Strategy<Value = String> {
    (
        prop_oneof![
            3 => prop::sample::select(ALLOWED),
            1 => prop::sample::select(REFUSED),
        ],
        prop::collection::vec(arg(dir), 0..4),
    )
        .prop_map(|(f, args)| format!("  pcall(function() return {f}({}) end)\n", args.join(", ")))
}

fn scheduler() -> Scheduler<LuaProcess> {
    let (b, _kv) = host_handlers(Builder::new().workers(1)).unwrap();
    b.build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_scripts_neither_panic_nor_escape(calls in prop::collection::vec(call(scratch_dir()), 1..10)) {
        let dir = PathBuf::from(scratch_dir());
        // Empty at the start of each case, so a file names the case that
        // made it (and shrinking finds the call).
        for entry in std::fs::read_dir(&dir).unwrap() {
            let _ = std::fs::remove_file(entry.unwrap().path());
        }
        let s = scheduler();
        let src = format!("function main()\n{}  return 'done'\nend", calls.concat());
        // A short step budget: a generated endless loop ends the process
        // quickly (with an error, which is allowed).
        let sandbox = Sandbox::new().with_step_time(Some(Duration::from_millis(100)));
        let script = Script::with_sandbox("fuzz.lua", &src, sandbox).unwrap();
        let h = s
            .submit(s.allocate_pid(), LuaProcess::new(script), "main", Value::Nil)
            .unwrap();
        match done(h) {
            Ok(v) => prop_assert_eq!(v, Value::from("done")),
            Err(e) => prop_assert!(
                matches!(e, Error::Failed(_)),
                "{e:?} from\n{src}"
            ),
        }
        prop_assert!(
            std::fs::read_dir(&dir).unwrap().next().is_none(),
            "a file appeared in {dir:?} from\n{src}"
        );
        let seven = Script::new("seven.lua", "function main() return 7 end").unwrap();
        let h = s
            .submit(s.allocate_pid(), LuaProcess::new(seven), "main", Value::Nil)
            .unwrap();
        prop_assert_eq!(done(h), Ok(Value::Int(7)));
        prop_assert!(s.shutdown(common::HANG).unwrap().workers_joined);
    }
}

/// The scratch directory of this run, made once.
fn scratch_dir() -> String {
    static DIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIR.get_or_init(|| scratch().to_string_lossy().into_owned())
        .clone()
}
