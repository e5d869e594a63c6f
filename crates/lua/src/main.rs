//! `stepsched-lua run script.lua [--method main] [--processes N] [--workers W]`:
//! runs N processes of a script on a scheduler with the host handlers
//! (`sleep`, `kv_get`, `kv_put`), prints each result and a summary.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use stepsched::Builder;
use stepsched_lua::{LuaProcess, Script, Value, host_handlers};

const USAGE: &str =
    "usage: stepsched-lua run script.lua [--method main] [--processes N] [--workers W]";

struct Args {
    script: String,
    method: String,
    processes: usize,
    workers: usize,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    if args.next().as_deref() != Some("run") {
        return Err(USAGE.into());
    }
    let mut a = Args {
        script: String::new(),
        method: "main".into(),
        processes: 1,
        workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value\n{USAGE}"));
        let number = |name: &str, v: String| {
            v.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("{name}: expected a positive number, got {v:?}"))
        };
        match arg.as_str() {
            "--method" => a.method = value("--method")?,
            "--processes" => a.processes = number("--processes", value("--processes")?)?,
            "--workers" => a.workers = number("--workers", value("--workers")?)?,
            s if s.starts_with("--") => return Err(format!("unknown option {s}\n{USAGE}")),
            s if a.script.is_empty() => a.script = s.to_string(),
            s => return Err(format!("unexpected argument {s:?}\n{USAGE}")),
        }
    }
    if a.script.is_empty() {
        return Err(USAGE.into());
    }
    Ok(a)
}

fn run(a: &Args) -> Result<bool, String> {
    let source =
        std::fs::read_to_string(&a.script).map_err(|e| format!("cannot read {}: {e}", a.script))?;
    let script = Script::new(a.script.clone(), &source).map_err(|e| e.to_string())?;
    let (builder, _kv) = host_handlers(Builder::<LuaProcess>::new().workers(a.workers))
        .map_err(|e| format!("cannot start the timer thread: {e}"))?;
    let s = builder
        .build()
        .map_err(|e| format!("cannot start the workers: {e}"))?;
    let start = Instant::now();
    let mut handles = Vec::with_capacity(a.processes);
    for i in 0..a.processes {
        let input = Value::Int(i as i64);
        let h = s
            .submit(
                s.allocate_pid(),
                LuaProcess::new(script.clone()),
                &a.method,
                input,
            )
            .map_err(|e| format!("{}: {e}", a.script))?;
        handles.push(h);
    }
    let mut failed = 0;
    for h in handles {
        let pid = h.pid();
        match h.join() {
            Ok(v) => println!("{pid} ok {v:?}"),
            Err(e) => {
                failed += 1;
                println!("{pid} error {e}");
            }
        }
    }
    let elapsed = start.elapsed();
    let stats = s.stats();
    s.shutdown(Duration::from_secs(5))
        .expect("not on one of the scheduler's workers");
    println!(
        "processes: {} ({} failed), steps: {}, messages: {}, time: {:.3} ms",
        a.processes,
        failed,
        stats.steps,
        stats.messages,
        elapsed.as_secs_f64() * 1e3
    );
    Ok(failed == 0)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("stepsched-lua: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("stepsched-lua: {e}");
            ExitCode::FAILURE
        }
    }
}
