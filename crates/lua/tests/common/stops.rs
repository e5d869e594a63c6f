//! Stopping a script that never yields, shared by the CPU-budget tests
//! (`cpu.rs`: loops) and the pattern tests (`pattern.rs`: single long
//! calls): each case runs in a process of a one-worker scheduler, tells
//! the test through a Rust module (`probe`) that it has started, and is
//! then stopped by `terminate`, by shutdown or by the step budget.

use std::sync::Mutex;
use std::sync::mpsc::{Sender, channel};
use std::time::Duration;

use stepsched::{Builder, Error, Scheduler};
use stepsched_lua::{LuaProcess, Module, Sandbox, Script, Value};

use super::{HANG, done};

/// `require('probe').ready()` sends on `ready`.
pub(crate) fn probe(ready: Sender<()>) -> Module {
    let ready = Mutex::new(ready);
    Module::rust(move |lua| {
        let tx = ready.lock().unwrap().clone();
        let t = lua.create_table()?;
        t.set(
            "ready",
            lua.create_function(move |_, ()| {
                let _ = tx.send(());
                Ok(())
            })?,
        )?;
        Ok(mlua::Value::Table(t))
    })
}

/// A scheduler of one worker: a case that holds it shows at once.
pub(crate) fn one_worker() -> Scheduler<LuaProcess> {
    Builder::new().workers(1).build().unwrap()
}

/// Starts `body` in a process of `s` under `sandbox`, as the chunk
/// `chunk`, and returns once it has started.
pub(crate) fn start(
    s: &Scheduler<LuaProcess>,
    sandbox: Sandbox,
    chunk: &str,
    body: &str,
) -> (stepsched::Pid, stepsched::JoinHandle<LuaProcess>) {
    let (tx, rx) = channel();
    let sandbox = sandbox.with_module("probe", probe(tx));
    let src = format!("function main() require('probe').ready() {body} end");
    let script = Script::with_sandbox(chunk, &src, sandbox).unwrap();
    let pid = s.allocate_pid();
    let h = s
        .submit(pid, LuaProcess::new(script), "main", Value::Nil)
        .unwrap();
    rx.recv_timeout(HANG).expect("the script started");
    (pid, h)
}

/// No step budget: only the stop under test ends the case.
pub(crate) fn unbudgeted() -> Sandbox {
    Sandbox::new().with_step_time(None)
}

/// A process that returns 7 runs to its end on `s`: the worker is free.
pub(crate) fn seven_runs(s: &Scheduler<LuaProcess>) {
    let seven = Script::new("seven.lua", "function main() return 7 end").unwrap();
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(seven), "main", Value::Nil)
        .unwrap();
    assert_eq!(done(h), Ok(Value::Int(7)));
}

/// `terminate` ends each case (`Terminated`), frees its worker, and the
/// scheduler then shuts down with every worker joined.
pub(crate) fn terminate_stops(cases: &[(&str, &str)], chunk: &str) {
    for (name, body) in cases {
        let s = one_worker();
        let (pid, h) = start(&s, unbudgeted(), chunk, body);
        s.terminate(pid).unwrap();
        assert_eq!(done(h), Err(Error::Terminated), "{name}");
        seven_runs(&s);
        let report = s.shutdown(HANG).unwrap();
        assert!(report.workers_joined, "{name}: {report:?}");
    }
}

/// Shutdown ends each case (`Cancelled`, not forced) with every worker
/// joined.
pub(crate) fn shutdown_stops(cases: &[(&str, &str)], chunk: &str) {
    for (name, body) in cases {
        let s = one_worker();
        let (_, h) = start(&s, unbudgeted(), chunk, body);
        let report = s.shutdown(HANG).unwrap();
        assert!(report.workers_joined, "{name}: {report:?}");
        assert_eq!(report.forced, 0, "{name}: {report:?}");
        assert_eq!(done(h), Err(Error::Cancelled), "{name}");
    }
}

/// A 20 ms step budget ends each case with an error naming the chunk and
/// the budget, and frees its worker.
pub(crate) fn budget_stops(cases: &[(&str, &str)], chunk: &str) {
    for (name, body) in cases {
        let s = one_worker();
        let sandbox = Sandbox::new().with_step_time(Some(Duration::from_millis(20)));
        let (_, h) = start(&s, sandbox, chunk, body);
        let e = done(h).unwrap_err().to_string();
        assert!(
            e.contains(chunk) && e.contains("time budget of 20ms"),
            "{name}: {e}"
        );
        seven_runs(&s);
    }
}
