//! The `stepsched-lua` binary: a successful run, a missing file, a syntax
//! error, the default step budget, `--timeout` and `--allow`.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::HANG;

/// Runs the binary; a run still going after [`HANG`] is killed and fails
/// the test (a hang guard, not a timing assumption).
fn run(args: &[&str]) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stepsched-lua"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("stepsched-lua {args:?} did not end within {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.success(), out, err)
}

fn script(name: &str) -> String {
    format!("{}/tests/scripts/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn runs_n_processes_and_prints_a_summary() {
    let (ok, out, err) = run(&[
        "run",
        &script("hello.lua"),
        "--processes",
        "4",
        "--workers",
        "2",
    ]);
    assert!(ok, "{out}{err}");
    for i in 0..4 {
        assert!(out.contains(&format!("ok Int({})", i * 2)), "{out}");
    }
    assert!(
        out.contains("processes: 4 (0 failed, 0 timed out)") && out.contains("messages: 4"),
        "{out}"
    );
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let (ok, out, err) = run(&["run", "no/such/script.lua"]);
    assert!(!ok, "{out}");
    assert!(err.contains("cannot read no/such/script.lua"), "{err}");
}

#[test]
fn a_syntax_error_names_the_script_and_line() {
    let path = script("syntax_error.lua");
    let (ok, out, err) = run(&["run", &path]);
    assert!(!ok, "{out}");
    // Lua keeps the last 60 bytes of a long chunk name ("...ts/syntax_error.lua"),
    // so the file name and line are what every path shows.
    assert!(err.contains("syntax_error.lua:3:"), "{err}");
}

#[test]
fn an_unknown_method_is_a_clear_error() {
    let (ok, _, err) = run(&["run", &script("hello.lua"), "--method", "nope"]);
    assert!(!ok);
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn the_default_step_budget_stops_a_script_that_never_yields() {
    let (ok, out, err) = run(&["run", &script("spin.lua"), "--workers", "1"]);
    assert!(!ok, "{out}{err}");
    assert!(
        out.contains("error") && out.contains("spin.lua: a step ran past its time budget of 1s"),
        "{out}{err}"
    );
    assert!(
        out.contains("processes: 1 (1 failed, 0 timed out)"),
        "{out}"
    );
}

#[test]
fn timeout_terminates_what_still_runs_and_fails_the_run() {
    let (ok, out, err) = run(&[
        "run",
        &script("forever.lua"),
        "--processes",
        "3",
        "--workers",
        "2",
        "--timeout",
        "0.2",
    ]);
    assert!(!ok, "{out}{err}");
    assert_eq!(
        out.matches("timeout: terminated after 200ms").count(),
        3,
        "{out}"
    );
    assert!(
        out.contains("processes: 3 (0 failed, 3 timed out)"),
        "{out}"
    );
    assert!(
        err.contains("timeout after 200ms: 3 processes terminated"),
        "{err}"
    );
}

#[test]
fn a_run_that_ends_in_time_is_not_a_timeout() {
    let (ok, out, err) = run(&["run", &script("hello.lua"), "--timeout", "600"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("processes: 1 (0 failed, 0 timed out)"),
        "{out}"
    );
}

#[test]
fn print_needs_allow_print() {
    let (ok, out, _) = run(&["run", &script("prints.lua")]);
    assert!(!ok);
    assert!(out.contains("'print'"), "{out}");
    let (ok, out, err) = run(&["run", &script("prints.lua"), "--allow", "print"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("hello from 0"), "{out}");
}

#[test]
fn a_bad_option_value_is_a_usage_error() {
    let (ok, _, err) = run(&["run", &script("hello.lua"), "--allow", "debug"]);
    assert!(!ok);
    assert!(err.contains("expected print, os or io"), "{err}");
}
