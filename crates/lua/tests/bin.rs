//! The `stepsched-lua` binary: a successful run, a missing file, a syntax error.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stepsched-lua"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
        out.contains("processes: 4 (0 failed)") && out.contains("messages: 4"),
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
