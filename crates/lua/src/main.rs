//! `stepsched-lua run script.lua [options]`: runs N processes of a script
//! on a scheduler with the host handlers (`sleep`, `kv_get`, `kv_put`), in
//! the default sandbox unless widened, prints each result and a summary.
//! The exit code is 0 when every process succeeded, 1 otherwise (a failure,
//! or processes still running at `--timeout`, terminated), 2 for bad
//! arguments.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use stepsched::{Builder, JoinHandle};
use stepsched_lua::{Lib, LuaProcess, Sandbox, Script, Value, host_handlers};

const USAGE: &str =
    "usage: stepsched-lua run script.lua [--method main] [--processes N] [--workers W]
    [--timeout SECONDS] [--step-ms MS] [--memory-mib MIB] [--allow print|os|io]...

  --timeout SECONDS  end the whole run then: processes still running are terminated,
                     reported, and the exit code is 1 (default: no timeout)
  --step-ms MS       time budget of one step of a process, 0 for none (default: 1000)
  --memory-mib MIB   memory limit of each process, 0 for none (default: 64)
  --allow LIB        let scripts use print (print, warn), os (the whole os library)
                     or io (files and commands); repeatable";

struct Args {
    script: String,
    method: String,
    processes: usize,
    workers: usize,
    timeout: Option<Duration>,
    sandbox: Sandbox,
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
        timeout: None,
        sandbox: Sandbox::new(),
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value\n{USAGE}"));
        let number = |name: &str, v: String| {
            v.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("{name}: expected a positive number, got {v:?}"))
        };
        let count = |name: &str, v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{name}: expected a number, got {v:?}"))
        };
        match arg.as_str() {
            "--method" => a.method = value("--method")?,
            "--processes" => a.processes = number("--processes", value("--processes")?)?,
            "--workers" => a.workers = number("--workers", value("--workers")?)?,
            "--timeout" => {
                let v = value("--timeout")?;
                let secs = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .ok_or(format!(
                        "--timeout: expected a positive number of seconds, got {v:?}"
                    ))?;
                a.timeout = Some(Duration::from_secs_f64(secs));
            }
            "--step-ms" => {
                let ms = count("--step-ms", value("--step-ms")?)?;
                let budget = (ms > 0).then(|| Duration::from_millis(ms));
                a.sandbox = a.sandbox.with_step_time(budget);
            }
            "--memory-mib" => {
                let mib = count("--memory-mib", value("--memory-mib")?)?;
                let bytes = usize::try_from(mib)
                    .ok()
                    .and_then(|m| m.checked_mul(1 << 20))
                    .ok_or(format!("--memory-mib: {mib} is too large"))?;
                a.sandbox = a.sandbox.with_memory_limit((bytes > 0).then_some(bytes));
            }
            "--allow" => {
                let lib = match value("--allow")?.as_str() {
                    "print" => Lib::Print,
                    "os" => Lib::Os,
                    "io" => Lib::Io,
                    other => {
                        return Err(format!(
                            "--allow: expected print, os or io, got {other:?}\n{USAGE}"
                        ));
                    }
                };
                a.sandbox = a.sandbox.allow(lib);
            }
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

/// How long a process terminated at the timeout may take to stop: its
/// step ends at its next check, well within this unless it is inside one
/// long call into a host function.
const STOP_GRACE: Duration = Duration::from_secs(5);

fn run(a: &Args) -> Result<bool, String> {
    let source =
        std::fs::read_to_string(&a.script).map_err(|e| format!("cannot read {}: {e}", a.script))?;
    let script = Script::with_sandbox(a.script.clone(), &source, a.sandbox.clone())
        .map_err(|e| e.to_string())?;
    let (builder, _kv) = host_handlers(Builder::<LuaProcess>::new().workers(a.workers))
        .map_err(|e| format!("cannot start the timer thread: {e}"))?;
    let s = builder
        .build()
        .map_err(|e| format!("cannot start the workers: {e}"))?;
    let start = Instant::now();
    let deadline = a.timeout.map(|t| start + t);
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
    let mut late: Vec<JoinHandle<LuaProcess>> = Vec::new();
    let report = |pid, r: Result<Value, stepsched::Error>, failed: &mut usize| match r {
        Ok(v) => println!("{pid} ok {v:?}"),
        Err(e) => {
            *failed += 1;
            println!("{pid} error {e}");
        }
    };
    for h in handles {
        let pid = h.pid();
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        match left {
            None => report(pid, h.join(), &mut failed),
            Some(left) => match h.join_timeout(left) {
                Ok(r) => report(pid, r, &mut failed),
                Err(h) => late.push(h),
            },
        }
    }
    // Past the timeout: terminate what still runs, then report it.
    let timed_out = late.len();
    for h in &late {
        let _ = s.terminate(h.pid());
    }
    let mut stuck = 0;
    for h in late {
        let pid = h.pid();
        match h.join_timeout(STOP_GRACE) {
            Ok(Err(stepsched::Error::Terminated)) => {
                println!(
                    "{pid} timeout: terminated after {:?}",
                    a.timeout.unwrap_or_default()
                );
            }
            Ok(r) => report(pid, r, &mut failed),
            Err(_) => {
                stuck += 1;
                println!("{pid} timeout: did not stop within {STOP_GRACE:?}");
            }
        }
    }
    let elapsed = start.elapsed();
    let stats = s.stats();
    s.shutdown(Duration::from_secs(5))
        .expect("not on one of the scheduler's workers");
    println!(
        "processes: {} ({} failed, {} timed out), steps: {}, messages: {}, time: {:.3} ms",
        a.processes,
        failed,
        timed_out,
        stats.steps,
        stats.messages,
        elapsed.as_secs_f64() * 1e3
    );
    if timed_out > 0 {
        eprintln!(
            "stepsched-lua: timeout after {:?}: {timed_out} processes terminated{}",
            a.timeout.unwrap_or_default(),
            if stuck > 0 {
                format!(", {stuck} of them still running")
            } else {
                String::new()
            }
        );
    }
    Ok(failed == 0 && timed_out == 0)
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

#[cfg(test)]
mod tests {
    use super::*;
    use stepsched_lua::{DEFAULT_MEMORY_LIMIT, DEFAULT_STEP_TIME};

    #[test]
    fn the_usage_names_the_sandbox_defaults() {
        let step = format!("(default: {})", DEFAULT_STEP_TIME.as_millis());
        let memory = format!("(default: {})", DEFAULT_MEMORY_LIMIT >> 20);
        assert!(USAGE.contains(&step) && USAGE.contains(&memory), "{USAGE}");
    }

    fn args(s: &str) -> Result<Args, String> {
        parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn the_defaults_are_the_sandbox_defaults() {
        let a = args("run x.lua").unwrap();
        assert_eq!(a.timeout, None);
        assert_eq!(a.sandbox.step_time(), Some(DEFAULT_STEP_TIME));
        assert_eq!(a.sandbox.memory_limit(), Some(DEFAULT_MEMORY_LIMIT));
        assert!(!a.sandbox.allows(Lib::Print));
    }

    #[test]
    fn limits_and_libraries_are_parsed() {
        let a = args("run x.lua --timeout 1.5 --step-ms 0 --memory-mib 8 --allow print --allow os")
            .unwrap();
        assert_eq!(a.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(a.sandbox.step_time(), None);
        assert_eq!(a.sandbox.memory_limit(), Some(8 << 20));
        assert!(a.sandbox.allows(Lib::Print) && a.sandbox.allows(Lib::Os));
        assert!(!a.sandbox.allows(Lib::Io));
        for bad in [
            "run x.lua --timeout 0",
            "run x.lua --timeout -1",
            "run x.lua --step-ms x",
            "run x.lua --allow debug",
        ] {
            assert!(args(bad).is_err(), "{bad}");
        }
    }
}
