//! The sandbox: each way out of the Lua state is refused with an error
//! naming it and changes nothing outside the process; what a host adds
//! (libraries, modules) is there and nothing more.

use std::path::PathBuf;
use std::sync::Arc;

use stepsched::{Builder, Completer, Error, Scheduler};
use stepsched_lua::{Lib, LuaCommand, LuaProcess, Module, Sandbox, Script, Value, host_handlers};

mod common;
use common::done;

fn lua_only() -> Scheduler<LuaProcess> {
    let (b, _kv) = host_handlers(Builder::new().workers(2)).unwrap();
    b.handler("fail", |_: LuaCommand, done: Completer<LuaProcess>| {
        done.complete(Err(Error::failed("the handler said no")));
    })
    .build()
    .unwrap()
}

/// A directory of this test's own, empty.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "stepsched-lua-sandbox-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `main(input)` of `src` in `sandbox` to its end.
fn run_in(
    s: &Scheduler<LuaProcess>,
    sandbox: Sandbox,
    src: &str,
    input: Value,
) -> Result<Value, Error> {
    let script = Script::with_sandbox("escape.lua", src, sandbox).unwrap();
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(script), "main", input)
        .unwrap();
    done(h)
}

fn run(s: &Scheduler<LuaProcess>, src: &str, input: Value) -> Result<Value, Error> {
    run_in(s, Sandbox::default(), src, input)
}

/// The process failed with a message containing each of `words`.
fn refused(r: Result<Value, Error>, words: &[&str]) {
    let e = r.expect_err("the escape was refused").to_string();
    for w in words {
        assert!(e.contains(w), "{w:?} not in {e:?}");
    }
}

/// The scheduler still runs Lua processes to their end.
fn host_still_runs(s: &Scheduler<LuaProcess>) {
    assert_eq!(
        run(s, "function main() return 6 * 7 end", Value::Nil),
        Ok(Value::Int(42))
    );
}

#[test]
fn os_execute_is_refused_and_runs_nothing() {
    let s = lua_only();
    let dir = scratch("execute");
    let marker = dir.join("ran");
    let r = run(
        &s,
        "function main(path) return os.execute('touch ' .. path) end",
        Value::from(marker.to_str().unwrap()),
    );
    refused(r, &["escape.lua:1:", "'execute'"]);
    assert!(!marker.exists(), "os.execute ran a command");
    host_still_runs(&s);
}

#[test]
fn io_open_is_refused_for_reading_and_writing() {
    let s = lua_only();
    let dir = scratch("io-open");
    let file = dir.join("written");
    let r = run(
        &s,
        "function main(path) local f = io.open(path, 'w') f:write('x') f:close() end",
        Value::from(file.to_str().unwrap()),
    );
    refused(r, &["escape.lua:1:", "'io'"]);
    assert!(!file.exists(), "io.open wrote a file");
    let r = run(
        &s,
        "function main() return io.open('/etc/hostname'):read('a') end",
        Value::Nil,
    );
    refused(r, &["'io'"]);
    host_still_runs(&s);
}

#[test]
fn io_popen_is_refused() {
    let s = lua_only();
    let dir = scratch("popen");
    let marker = dir.join("ran");
    let r = run(
        &s,
        "function main(path) return io.popen('touch ' .. path):read('a') end",
        Value::from(marker.to_str().unwrap()),
    );
    refused(r, &["'io'"]);
    assert!(!marker.exists(), "io.popen ran a command");
    host_still_runs(&s);
}

#[test]
fn os_exit_is_refused_and_the_host_goes_on() {
    let s = lua_only();
    // Before the sandbox, this ended the test binary with exit code 3.
    let r = run(&s, "function main() os.exit(3) end", Value::Nil);
    refused(r, &["'exit'"]);
    host_still_runs(&s);
}

#[test]
fn os_getenv_is_refused() {
    let s = lua_only();
    let r = run(
        &s,
        "function main() return os.getenv('PATH') end",
        Value::Nil,
    );
    refused(r, &["'getenv'"]);
    // What the default `os` keeps: the clock and the date.
    let r = run(
        &s,
        "function main() return type(os.time()) .. type(os.clock()) .. type(os.date('!%Y')) end",
        Value::Nil,
    );
    assert_eq!(r, Ok(Value::from("numbernumberstring")));
    host_still_runs(&s);
}

#[test]
fn dofile_and_loadfile_are_refused() {
    let s = lua_only();
    let dir = scratch("dofile");
    let file = dir.join("m.lua");
    std::fs::write(&file, "return 42").unwrap();
    let path = Value::from(file.to_str().unwrap());
    refused(
        run(&s, "function main(p) return dofile(p) end", path.clone()),
        &["'dofile'"],
    );
    refused(
        run(&s, "function main(p) return loadfile(p)() end", path),
        &["'loadfile'"],
    );
    host_still_runs(&s);
}

#[test]
fn require_does_not_load_files() {
    let s = lua_only();
    let dir = scratch("require");
    std::fs::write(dir.join("m.lua"), "return 42").unwrap();
    let r = run(
        &s,
        r#"
        function main(dir)
          if package then package.path = dir .. "/?.lua" end
          return require("m")
        end
        "#,
        Value::from(dir.to_str().unwrap()),
    );
    refused(r, &["module 'm' not found", "cannot load files"]);
    let r = run(&s, "function main() return package.path end", Value::Nil);
    refused(r, &["'package'"]);
    host_still_runs(&s);
}

/// `return 42`, compiled to Lua 5.4 bytecode, as a Lua string literal.
fn bytecode_literal() -> String {
    let lua = mlua::Lua::new();
    let bytes = lua.load("return 42").into_function().unwrap().dump(false);
    bytes.iter().map(|b| format!("\\{b}")).collect()
}

#[test]
fn load_refuses_bytecode() {
    let s = lua_only();
    let bc = bytecode_literal();
    for call in ["load(bc)", "load(bc, 'x', 'b')", "load(bc, 'x', 'bt', {})"] {
        let src = format!(
            "function main() local bc = \"{bc}\" local f, err = {call} assert(f, err) return f() end"
        );
        refused(run(&s, &src, Value::Nil), &["binary chunk"]);
    }
    refused(
        run(
            &s,
            "function main() return string.dump(main) end",
            Value::Nil,
        ),
        &["'dump'"],
    );
    // Text chunks still load, with or without an environment.
    let r = run(
        &s,
        "function main() return load('return 1 + x', 'c', 'b', {x = 1})() + load('return 40')() end",
        Value::Nil,
    );
    assert_eq!(r, Ok(Value::Int(42)));
    host_still_runs(&s);
}

#[test]
fn debug_is_refused() {
    let s = lua_only();
    refused(
        run(
            &s,
            "function main() return debug.getinfo(1).currentline end",
            Value::Nil,
        ),
        &["'debug'"],
    );
    host_still_runs(&s);
}

#[test]
fn print_and_warn_are_absent_by_default_and_allowed_on_request() {
    let s = lua_only();
    refused(
        run(&s, "function main() print('x') end", Value::Nil),
        &["'print'"],
    );
    let r = run_in(
        &s,
        Sandbox::new().allow(Lib::Print),
        "function main() return type(print) .. type(warn) .. type(io) end",
        Value::Nil,
    );
    assert_eq!(r, Ok(Value::from("functionfunctionnil")));
}

#[test]
fn the_os_and_io_libraries_come_only_when_allowed() {
    let s = lua_only();
    let probe = "function main() return type(os.getenv) .. type(io) end";
    assert_eq!(
        run_in(&s, Sandbox::new().allow(Lib::Os), probe, Value::Nil),
        Ok(Value::from("functionnil"))
    );
    assert_eq!(
        run_in(&s, Sandbox::new().allow(Lib::Io), probe, Value::Nil),
        Ok(Value::from("niltable"))
    );
}

#[test]
fn a_finalizer_is_refused() {
    let s = lua_only();
    refused(
        run(
            &s,
            "function main() setmetatable({}, {__gc = function() while true do end end}) end",
            Value::Nil,
        ),
        &["__gc"],
    );
    // Other metatables are as in Lua.
    let r = run(
        &s,
        "function main() return setmetatable({}, {__index = function(_, k) return k * 2 end})[21] end",
        Value::Nil,
    );
    assert_eq!(r, Ok(Value::Int(42)));
}

#[test]
fn host_modules_are_required_once_per_process() {
    let s = lua_only();
    let counter = Module::lua(
        "counter.lua",
        "local n = 0 return { bump = function() n = n + 1 return n end }",
    )
    .unwrap();
    let answer = Module::rust(|lua| {
        let t = lua.create_table()?;
        t.set("get", lua.create_function(|_, ()| Ok(42))?)?;
        Ok(mlua::Value::Table(t))
    });
    let sandbox = Sandbox::new()
        .with_module("counter", counter)
        .with_module("answer", answer);
    let src = r#"
        function main()
          require("counter").bump()
          local n = require("counter").bump()
          return n * 100 + require("answer").get()
        end
    "#;
    // Each process gets the module afresh: both count to 2.
    for _ in 0..2 {
        assert_eq!(
            run_in(&s, sandbox.clone(), src, Value::Nil),
            Ok(Value::Int(242))
        );
    }
    refused(
        run_in(
            &s,
            sandbox,
            "function main() return require('nope') end",
            Value::Nil,
        ),
        &["module 'nope' not found"],
    );
}

#[test]
fn a_module_with_a_syntax_error_is_refused_at_once() {
    let e = Module::lua("broken.lua", "return {")
        .unwrap_err()
        .to_string();
    assert!(e.contains("broken.lua:"), "{e}");
}

#[test]
fn errors_keep_the_script_line_through_tail_calls() {
    let s = lua_only();
    for (body, line) in [
        ("\n  return yield_cmd('fail')\n", 2),
        ("\n  local r = yield_cmd('fail')\n  return r\n", 2),
        ("\n\n  return send('not a pid', 1)\n", 3),
    ] {
        let src = format!("function main(){body}end");
        let e = run(&s, &src, Value::Nil).unwrap_err().to_string();
        assert!(e.contains(&format!("escape.lua:{line}:")), "{e}");
    }
}

#[test]
fn the_sandbox_is_shared_by_the_script() {
    let sb = Sandbox::new()
        .with_memory_limit(Some(1 << 20))
        .with_step_time(None);
    let script: Arc<Script> = Script::with_sandbox("x.lua", "", sb).unwrap();
    assert_eq!(script.sandbox().memory_limit(), Some(1 << 20));
    assert_eq!(script.sandbox().step_time(), None);
    let d = Sandbox::default();
    assert_eq!(d.memory_limit(), Some(stepsched_lua::DEFAULT_MEMORY_LIMIT));
    assert_eq!(d.step_time(), Some(stepsched_lua::DEFAULT_STEP_TIME));
    assert!(!d.allows(Lib::Print) && !d.allows(Lib::Os) && !d.allows(Lib::Io));
}

#[test]
fn the_guarded_library_behaves_as_lua_s_own() {
    let s = lua_only();
    let src = r#"
        function main()
          local out = {}
          -- coroutine.wrap: yields pass values, an error closes the
          -- coroutine's to-be-closed variables and names the line.
          local gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end)
          out[#out+1] = gen() + gen() + gen()
          local closed = false
          local bad = coroutine.wrap(function()
            local x <close> = setmetatable({}, {__close = function() closed = true end})
            error("inner")
          end)
          local ok, e = pcall(bad)
          out[#out+1] = tostring(not ok and closed) .. " " .. e
          -- xpcall: the handler gets the error and its result is returned.
          out[#out+1] = select(2, xpcall(function() error("x", 0) end, function(m) return m .. "!" end))
          -- string.rep, table.move, table.insert and table.remove as usual.
          local t = table.move({1, 2, 3}, 1, 3, 1, {})
          table.insert(t, 1, 0)
          out[#out+1] = string.rep("ab", 2, "-") .. table.concat(t, ",") .. table.remove(t)
          return table.concat(out, "|")
        end
    "#;
    assert_eq!(
        run(&s, src, Value::Nil),
        Ok(Value::from("6|true escape.lua:11: inner|x!|ab-ab0,1,2,33"))
    );
}

#[test]
fn loops_a_script_could_make_endless_in_one_c_call_are_refused() {
    let s = lua_only();
    for (call, what) in [
        ("table.move({}, 1, 1 << 40, 1)", "table.move"),
        (
            "table.insert(setmetatable({}, {__len = function() return 1 << 40 end}), 1, 0)",
            "table.insert",
        ),
        (
            "table.remove(setmetatable({}, {__len = function() return 1 << 40 end}), 1)",
            "table.remove",
        ),
    ] {
        let src = format!("function main() {call} end");
        refused(run(&s, &src, Value::Nil), &[what, "2^24"]);
    }
    // The empty string repeated any number of times is the empty string.
    assert_eq!(
        run(
            &s,
            "function main() return string.rep('', 1 << 40) .. '.' end",
            Value::Nil
        ),
        Ok(Value::from("."))
    );
}
