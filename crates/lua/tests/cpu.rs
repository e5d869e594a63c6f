//! The CPU budget: loops that never yield, including ones that catch
//! errors with `pcall` and ones made of long library calls, are stopped
//! by terminate, by shutdown (reported as `Cancelled`, with every worker
//! joined) and by the step's time budget.
//!
//! Each script tells the test it is running through a Rust module,
//! `probe`, so the stop is asked for while the loop's step runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stepsched::Error;
use stepsched_lua::{LuaProcess, Module, Sandbox, Script, Value};

mod common;
use common::stops::{budget_stops, one_worker, shutdown_stops, terminate_stops, unbudgeted};
use common::{HANG, done};

/// The loops, by name: each runs until something stops it.
const LOOPS: [(&str, &str); 10] = [
    ("plain", "while true do end"),
    (
        "pcall",
        "while true do pcall(function() while true do end end) end",
    ),
    (
        "xpcall with a looping handler",
        "while true do xpcall(function() while true do end end, function() while true do end end) end",
    ),
    (
        "coroutine.resume",
        "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
    ),
    (
        "a looping __close in the loop's own coroutine",
        "local x <close> = setmetatable({}, {__close = function() while true do end end}) while true do end",
    ),
    (
        "a looping __close under pcall",
        "while true do pcall(function() local x <close> = setmetatable({}, {__close = function() while true do end end}) while true do end end) end",
    ),
    (
        "a looping __close in a wrapped coroutine",
        "while true do pcall(coroutine.wrap(function() local x <close> = setmetatable({}, {__close = function() while true do end end}) while true do end end)) end",
    ),
    (
        "string.rep",
        "while true do local s = string.rep('x', 1 << 20) end",
    ),
    (
        "pcall of string.rep",
        "while true do pcall(string.rep, 'x', 1 << 20) end",
    ),
    (
        "string.rep of the empty string",
        "while true do local s = string.rep('', 1 << 40) end",
    ),
];

#[test]
fn terminate_stops_every_loop() {
    terminate_stops(&LOOPS, "loop.lua");
}

#[test]
fn shutdown_stops_every_loop_and_reports_it_cancelled() {
    shutdown_stops(&LOOPS, "loop.lua");
}

#[test]
fn the_step_budget_stops_every_loop() {
    budget_stops(&LOOPS, "loop.lua");
}

#[test]
fn the_step_budget_holds_for_the_top_level_code_too() {
    let s = one_worker();
    let sandbox = Sandbox::new().with_step_time(Some(Duration::from_millis(20)));
    let script = Script::with_sandbox("top.lua", "while true do end", sandbox).unwrap();
    match s.submit(
        s.allocate_pid(),
        LuaProcess::new(script),
        "main",
        Value::Nil,
    ) {
        Err(stepsched::SubmitError::Init(e)) => {
            assert!(e.to_string().contains("time budget"), "{e}")
        }
        other => panic!("expected an init error, got {:?}", other.map(|h| h.pid())),
    }
}

/// The probe for the next test: `ready()` tells the test, `wait()` blocks
/// until the test lets it go, `finished()` records that the script got
/// past its library calls.
fn gate(ready: Sender<()>, go: Receiver<()>, finished: Arc<AtomicBool>) -> Module {
    let ready = Mutex::new(ready);
    let go = Arc::new(Mutex::new(go));
    Module::rust(move |lua| {
        let tx = ready.lock().unwrap().clone();
        let go = Arc::clone(&go);
        let finished = Arc::clone(&finished);
        let t = lua.create_table()?;
        t.set(
            "ready",
            lua.create_function(move |_, ()| {
                let _ = tx.send(());
                Ok(())
            })?,
        )?;
        t.set(
            "wait",
            lua.create_function(move |_, ()| {
                let _ = go.lock().unwrap().recv_timeout(HANG);
                Ok(())
            })?,
        )?;
        t.set(
            "finished",
            lua.create_function(move |_, ()| {
                finished.store(true, Ordering::SeqCst);
                Ok(())
            })?,
        )?;
        Ok(mlua::Value::Table(t))
    })
}

#[test]
fn a_library_call_after_terminate_raises_whatever_the_instruction_count() {
    // The script is terminated while it waits inside `wait()` (host code),
    // then makes five library calls in a few dozen instructions, far fewer
    // than the count hook's HOOK_INSTRUCTIONS: only a check on the calls
    // themselves stops it before `finished()`.
    let s = one_worker();
    let (ready_tx, ready_rx) = channel();
    let (go_tx, go_rx) = channel();
    let finished = Arc::new(AtomicBool::new(false));
    let sandbox = unbudgeted().with_module("gate", gate(ready_tx, go_rx, Arc::clone(&finished)));
    let src = r#"
        function main()
          local g = require("gate")
          g.ready()
          g.wait()
          for i = 1, 5 do local s = string.rep("x", 10) end
          g.finished()
        end
    "#;
    let script = Script::with_sandbox("calls.lua", src, sandbox).unwrap();
    let pid = s.allocate_pid();
    let h = s
        .submit(pid, LuaProcess::new(script), "main", Value::Nil)
        .unwrap();
    ready_rx.recv_timeout(HANG).expect("the script started");
    s.terminate(pid).unwrap();
    go_tx.send(()).unwrap();
    assert_eq!(done(h), Err(Error::Terminated));
    assert!(
        !finished.load(Ordering::SeqCst),
        "the script ran on past library calls after it was terminated"
    );
}
