//! `cargo xtask mutants`: the mutation ledger.
//!
//! `xtask/mutants/*.txt` lists one-line mutations of the critical orderings,
//! compare-and-swaps, fences and re-checks of the lock-free code, each with
//! the checks (loom models, tests) that must catch it. This task:
//!
//! 1. parses every list (a malformed block is an error naming `file:line`);
//! 2. mirrors the workspace sources (the files git tracks or would track)
//!    into one scratch copy, `target/mutants/src`, and builds there with
//!    shared target directories (`target/mutants/target/{plain,loom}`), so
//!    dependencies build once and the real tree is never touched;
//! 3. runs every distinct check once on the unmutated copy (the baseline):
//!    all must pass, or a mutation "caught" by an already failing check would
//!    prove nothing;
//! 4. per mutation, replaces the `find` text (which must occur exactly once)
//!    by the `replace` text in the scratch file, runs the mutation's checks in
//!    order until one fails (caught) or all pass (missed), and restores the
//!    file. A check that runs past its time limit (the larger of
//!    `--timeout` and three times its baseline time, so a model that is
//!    merely slow on a loaded machine is not mistaken for a hang) has its
//!    whole process group killed and counts as caught "by timeout", shown as
//!    such;
//! 5. prints the table and, with `--write-doc`, writes `docs/mutants.md`.
//!
//! It fails if any mutation is missed or does not build.

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::{bench_report, cargo, root};

/// LOOM_MAX_PREEMPTIONS under `--ci` (and when nothing else says).
const CI_PREEMPTIONS: &str = "2";
/// LOOM_MAX_PREEMPTIONS of the full ledger, run by hand.
const FULL_PREEMPTIONS: &str = "3";
/// Seconds a check may run on a mutation at least (after the dependencies
/// are built); a check may also take three times its baseline time.
const DEFAULT_TIMEOUT: u64 = 600;
/// A mutated check may run this many times its baseline time.
const SLOWDOWN: u32 = 3;
/// The baseline runs under the timeout with `--ci` (its slowest check takes
/// about 70 s at 2 preemptions, so a hung test fails the run in minutes, not
/// in half an hour), and under `SLOWDOWN` times the timeout otherwise (3
/// preemptions take longer): a hang guard only.
/// Ledger files come in layer order; others follow alphabetically.
const LAYERS: &[&str] = &["deque", "mpsc", "process", "pool", "relay", "stepsched"];

/// One way to check a mutation, as written in a ledger file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Check {
    /// `loom <package> [filter]`: the package's `loom_tests` unit tests and
    /// its `tests/loom.rs`, under `--cfg stepsched_loom`.
    Loom {
        package: String,
        filter: Option<String>,
    },
    /// `test <package> [--test <name>] [filter]`: an ordinary `cargo test`.
    Test {
        package: String,
        test: Option<String>,
        filter: Option<String>,
    },
}

impl Check {
    fn package(&self) -> &str {
        match self {
            Check::Loom { package, .. } | Check::Test { package, .. } => package,
        }
    }

    /// The same check without its name filter (what it builds).
    fn unfiltered(&self) -> Check {
        match self {
            Check::Loom { package, .. } => Check::Loom {
                package: package.clone(),
                filter: None,
            },
            Check::Test { package, test, .. } => Check::Test {
                package: package.clone(),
                test: test.clone(),
                filter: None,
            },
        }
    }

    fn parse(value: &str) -> Result<Check, String> {
        let words: Vec<&str> = value.split_whitespace().collect();
        match words.as_slice() {
            ["loom", package] => Ok(Check::Loom {
                package: package.to_string(),
                filter: None,
            }),
            ["loom", package, filter] => Ok(Check::Loom {
                package: package.to_string(),
                filter: Some(filter.to_string()),
            }),
            ["test", package, rest @ ..] => {
                let (test, rest) = match rest {
                    ["--test", name, rest @ ..] => (Some(name.to_string()), rest),
                    ["--test"] => return Err("`--test` needs a target name".into()),
                    _ => (None, rest),
                };
                let filter = match rest {
                    [] => None,
                    [filter] => Some(filter.to_string()),
                    _ => return Err(format!("too many words in check `{value}`")),
                };
                Ok(Check::Test {
                    package: package.to_string(),
                    test,
                    filter,
                })
            }
            _ => Err(format!(
                "unknown check `{value}` (forms: `loom <package> [filter]`, \
                 `test <package> [--test <name>] [filter]`)"
            )),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Loom { package, filter } => {
                write!(f, "loom {package}")?;
                if let Some(filter) = filter {
                    write!(f, " {filter}")?;
                }
            }
            Check::Test {
                package,
                test,
                filter,
            } => {
                write!(f, "test {package}")?;
                if let Some(test) = test {
                    write!(f, " --test {test}")?;
                }
                if let Some(filter) = filter {
                    write!(f, " {filter}")?;
                }
            }
        }
        Ok(())
    }
}

/// One block of a ledger file.
#[derive(Debug)]
struct Mutant {
    name: String,
    why: String,
    file: String,
    find: String,
    replace: String,
    checks: Vec<Check>,
    /// `finding <reason>`: no check can catch this mutation, and why. A
    /// finding is kept in the list (it names a real ordering that no model
    /// sees) and reported, not counted as a failure.
    finding: Option<String>,
    /// `xtask/mutants/<file>.txt:<line>` of the block's first line.
    origin: String,
}

/// How a check ended.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// Every test it ran passed; `tests` is how many ran.
    Passed { tests: usize },
    /// A test failed (named if the harness said which) or the binary died.
    Failed { detail: String },
    /// It ran past the timeout and was killed.
    TimedOut,
    /// The code did not compile.
    BuildFailed,
}

/// What became of one mutation.
#[derive(Debug)]
enum Verdict {
    Caught {
        by: String,
    },
    CaughtByTimeout {
        by: String,
    },
    Missed,
    /// Missed, as its `finding` line says it must be.
    Finding,
    DoesNotBuild {
        by: String,
    },
}

struct Row<'a> {
    mutant: &'a Mutant,
    verdict: Verdict,
    secs: f64,
}

struct Options {
    preemptions: String,
    ci: bool,
    write_doc: bool,
    timeout: Duration,
    scratch: PathBuf,
    filters: Vec<String>,
}

/// `cargo xtask mutants [--preemptions N] [--ci] [--write-doc]
/// [--timeout S] [--scratch DIR] [name-filter..]`.
pub(crate) fn mutants(args: &[String]) -> Result<(), String> {
    let started = Instant::now();
    let opts = parse_args(args)?;
    let root = root();
    let mut ledger = read_ledger(&root.join("xtask/mutants"))?;
    // The whole ledger against the working tree first, whatever the
    // filters: a run on a few names must refuse a stale `find` elsewhere
    // as the full run would.
    let tree_packages = packages(&root)?;
    for m in &ledger {
        validate(m, &root, &tree_packages)?;
    }
    if !opts.filters.is_empty() {
        ledger.retain(|m| opts.filters.iter().any(|f| m.name.contains(f.as_str())));
    }
    if ledger.is_empty() {
        return Err("no mutation matches (the list is xtask/mutants/*.txt)".into());
    }

    fs::create_dir_all(&opts.scratch).map_err(|e| format!("{}: {e}", opts.scratch.display()))?;
    let _lock = Lock::take(&opts.scratch.join("lock"))?;
    let src = opts.scratch.join("src");
    let copied = mirror(&root, &src)?;
    println!(
        "mutants: {} mutation(s); scratch copy {} ({copied} file(s) refreshed); \
         LOOM_MAX_PREEMPTIONS={}; time limit per check max({} s, {SLOWDOWN} x baseline)",
        ledger.len(),
        src.display(),
        opts.preemptions,
        opts.timeout.as_secs()
    );
    let packages = packages(&src)?;
    for m in &ledger {
        validate(m, &src, &packages)?;
    }
    let logs = opts.scratch.join("logs");
    let _ = fs::remove_dir_all(&logs);
    fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let runner = Runner {
        src: src.clone(),
        target: opts.scratch.join("target"),
        logs,
        preemptions: opts.preemptions.clone(),
        packages,
    };

    // Baseline: every distinct check, on the unmutated copy.
    let mut distinct: Vec<&Check> = Vec::new();
    for check in ledger.iter().flat_map(|m| &m.checks) {
        if !distinct.contains(&check) {
            distinct.push(check);
        }
    }
    println!("\n== build ==");
    let mut built = BTreeSet::new();
    for check in &distinct {
        let whole = check.unfiltered();
        if built.insert(whole.to_string()) {
            runner.build(&whole)?;
        }
    }
    println!(
        "\n== baseline: {} check(s) on the unmutated copy ==",
        distinct.len()
    );
    let mut baseline = Vec::new();
    for (i, check) in distinct.iter().enumerate() {
        let t = Instant::now();
        let limit = if opts.ci {
            opts.timeout
        } else {
            opts.timeout * SLOWDOWN
        };
        let outcome = runner.check(check, &format!("baseline-{i:02}"), limit)?;
        let secs = t.elapsed().as_secs_f64();
        match outcome {
            Outcome::Passed { tests } if tests > 0 => {
                println!("  ok   {check}  ({tests} test(s), {secs:.1} s)");
                baseline.push(((*check).clone(), tests, secs));
            }
            Outcome::Passed { .. } => {
                return Err(format!(
                    "check `{check}` runs no test (a filter that matches nothing?); \
                     see {}",
                    runner.logs.display()
                ));
            }
            other => {
                return Err(format!(
                    "baseline: `{check}` does not pass on the unmutated code ({}); \
                     its log is in {}",
                    describe(&other),
                    runner.logs.display()
                ));
            }
        }
    }

    println!("\n== mutations ==");
    let mut rows = Vec::new();
    for (i, m) in ledger.iter().enumerate() {
        println!("-- {} ({})", m.name, m.origin);
        let t = Instant::now();
        let verdict = {
            let _applied = Applied::apply(&src.join(&m.file), &m.find, &m.replace)?;
            let mut verdict = Verdict::Missed;
            for (j, check) in m.checks.iter().enumerate() {
                let base = baseline
                    .iter()
                    .find(|(c, _, _)| c == check)
                    .map_or(0.0, |(_, _, secs)| *secs);
                let limit = opts
                    .timeout
                    .max(Duration::from_secs_f64(base * f64::from(SLOWDOWN)));
                let outcome = runner.check(check, &format!("m{i:03}-{j}"), limit)?;
                println!("   {check}: {}", describe(&outcome));
                match outcome {
                    Outcome::Passed { .. } => continue,
                    Outcome::Failed { detail } => {
                        verdict = Verdict::Caught {
                            by: caught_by(check, &detail),
                        };
                    }
                    Outcome::TimedOut => {
                        verdict = Verdict::CaughtByTimeout {
                            by: check.to_string(),
                        };
                    }
                    Outcome::BuildFailed => {
                        verdict = Verdict::DoesNotBuild {
                            by: check.to_string(),
                        };
                    }
                }
                break;
            }
            match (verdict, &m.finding) {
                (Verdict::Missed, Some(_)) => Verdict::Finding,
                (verdict, _) => verdict,
            }
        };
        let secs = t.elapsed().as_secs_f64();
        println!("   => {} ({secs:.1} s)", verdict_text(&verdict));
        rows.push(Row {
            mutant: m,
            verdict,
            secs,
        });
    }

    let total = started.elapsed().as_secs_f64();
    print_table(&rows, total);
    if opts.write_doc {
        let doc = root.join("docs/mutants.md");
        let text = render_doc(&rows, &baseline, &opts, total);
        fs::write(&doc, text).map_err(|e| format!("{}: {e}", doc.display()))?;
        println!("wrote {}", doc.display());
    }
    let missed: Vec<&str> = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Missed))
        .map(|r| r.mutant.name.as_str())
        .collect();
    let broken: Vec<&str> = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::DoesNotBuild { .. }))
        .map(|r| r.mutant.name.as_str())
        .collect();
    let mut errors = Vec::new();
    if !missed.is_empty() {
        errors.push(format!("missed: {}", missed.join(", ")));
    }
    if !broken.is_empty() {
        errors.push(format!(
            "mutation does not build (fix its ledger entry): {}",
            broken.join(", ")
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut preemptions = None;
    let mut ci = false;
    let mut write_doc = false;
    let mut timeout = DEFAULT_TIMEOUT;
    let mut scratch = None;
    let mut filters = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--preemptions" => {
                let n = it.next().ok_or("--preemptions needs a number")?;
                n.parse::<u32>()
                    .map_err(|_| format!("--preemptions: `{n}` is not a number"))?;
                preemptions = Some(n.clone());
            }
            "--ci" => ci = true,
            "--write-doc" => write_doc = true,
            "--timeout" => {
                let s = it.next().ok_or("--timeout needs seconds")?;
                timeout = s
                    .parse()
                    .map_err(|_| format!("--timeout: `{s}` is not a number of seconds"))?;
            }
            "--scratch" => {
                scratch = Some(PathBuf::from(
                    it.next().ok_or("--scratch needs a directory")?,
                ));
            }
            flag if flag.starts_with("--") => {
                return Err(format!("mutants: unknown flag `{flag}`"));
            }
            name => filters.push(name.to_string()),
        }
    }
    if write_doc && !filters.is_empty() {
        return Err("--write-doc writes the whole ledger: drop the name filters".into());
    }
    let preemptions = preemptions
        .or_else(|| std::env::var("LOOM_MAX_PREEMPTIONS").ok())
        .unwrap_or_else(|| if ci { CI_PREEMPTIONS } else { FULL_PREEMPTIONS }.to_string());
    let scratch = scratch
        .map(|s| if s.is_absolute() { s } else { root().join(s) })
        .unwrap_or_else(|| root().join("target/mutants"));
    Ok(Options {
        preemptions,
        ci,
        write_doc,
        timeout: Duration::from_secs(timeout),
        scratch,
        filters,
    })
}

/// Reads every `*.txt` in `dir`, in layer order.
fn read_ledger(dir: &Path) -> Result<Vec<Mutant>, String> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    let rank = |p: &PathBuf| {
        let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned());
        let layer = stem
            .as_deref()
            .and_then(|s| LAYERS.iter().position(|l| *l == s))
            .unwrap_or(LAYERS.len());
        (layer, stem)
    };
    files.sort_by_key(rank);
    let mut all: Vec<Mutant> = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let shown = format!(
            "xtask/mutants/{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        for m in parse_ledger(&text, &shown)? {
            if let Some(other) = all.iter().find(|o| o.name == m.name) {
                return Err(format!(
                    "{}: mutant `{}` is already listed at {}",
                    m.origin, m.name, other.origin
                ));
            }
            all.push(m);
        }
    }
    Ok(all)
}

/// Parses one ledger file; `shown` names it in errors.
fn parse_ledger(text: &str, shown: &str) -> Result<Vec<Mutant>, String> {
    #[derive(Default)]
    struct Block {
        line: usize,
        name: String,
        why: Option<String>,
        file: Option<String>,
        find: Option<String>,
        replace: Option<String>,
        finding: Option<String>,
        checks: Vec<Check>,
    }
    fn finish(b: Block, shown: &str) -> Result<Mutant, String> {
        let origin = format!("{shown}:{}", b.line);
        let missing = |key: &str| format!("{origin}: mutant `{}` has no `{key}` line", b.name);
        let why = b.why.clone().ok_or_else(|| missing("why"))?;
        let file = b.file.clone().ok_or_else(|| missing("file"))?;
        let find = b.find.clone().ok_or_else(|| missing("find"))?;
        let replace = b.replace.clone().ok_or_else(|| missing("replace"))?;
        if b.checks.is_empty() {
            return Err(missing("check"));
        }
        if find == replace {
            return Err(format!("{origin}: `find` and `replace` are the same"));
        }
        Ok(Mutant {
            name: b.name,
            why,
            file,
            find,
            replace,
            checks: b.checks,
            finding: b.finding,
            origin,
        })
    }
    let mut out = Vec::new();
    let mut block: Option<Block> = None;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let at = format!("{shown}:{line_no}");
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let (key, value) = match line.find(char::is_whitespace) {
            Some(k) => (&line[..k], line[k..].trim_start()),
            None => (line, ""),
        };
        if value.is_empty() && key != "replace" {
            return Err(format!("{at}: `{key}` has no value (expected `key value`)"));
        }
        let value = value.to_string();
        if key == "mutant" {
            if let Some(b) = block.take() {
                out.push(finish(b, shown)?);
            }
            if value.contains(char::is_whitespace) {
                return Err(format!("{at}: a mutant name is one word, not `{value}`"));
            }
            block = Some(Block {
                line: line_no,
                name: value,
                ..Block::default()
            });
            continue;
        }
        let Some(b) = block.as_mut() else {
            return Err(format!(
                "{at}: `{key}` before the first `mutant` line (each block starts with `mutant <name>`)"
            ));
        };
        let slot = match key {
            "why" => &mut b.why,
            "file" => &mut b.file,
            "find" => &mut b.find,
            "replace" => &mut b.replace,
            "finding" => &mut b.finding,
            "check" => {
                let check = Check::parse(&value).map_err(|e| format!("{at}: {e}"))?;
                b.checks.push(check);
                continue;
            }
            other => {
                return Err(format!(
                    "{at}: unknown key `{other}` (keys: mutant, why, file, find, replace, check, finding)"
                ));
            }
        };
        if slot.is_some() {
            return Err(format!("{at}: second `{key}` line in mutant `{}`", b.name));
        }
        *slot = Some(match key {
            "find" | "replace" => value.replace("\\n", "\n"),
            _ => value,
        });
    }
    if let Some(b) = block.take() {
        out.push(finish(b, shown)?);
    }
    Ok(out)
}

/// The workspace's packages: (name, directory relative to the root).
fn packages(src: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    for parent in ["crates"] {
        if let Ok(entries) = fs::read_dir(src.join(parent)) {
            dirs.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
        }
    }
    for top in ["stress", "benches", "xtask"] {
        dirs.push(src.join(top));
    }
    for dir in dirs {
        let Ok(toml) = fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let mut in_package = false;
        for line in toml.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_package = line == "[package]";
            } else if in_package && line.starts_with("name") {
                if let Some(name) = line.split('"').nth(1) {
                    let rel = dir.strip_prefix(src).unwrap_or(&dir).to_path_buf();
                    out.push((name.to_string(), rel));
                }
                break;
            }
        }
    }
    if out.is_empty() {
        return Err(format!("no packages found under {}", src.display()));
    }
    Ok(out)
}

/// Checks that a mutation can be applied and names known packages.
fn validate(m: &Mutant, src: &Path, packages: &[(String, PathBuf)]) -> Result<(), String> {
    let path = src.join(&m.file);
    let text =
        fs::read_to_string(&path).map_err(|e| format!("{}: file `{}`: {e}", m.origin, m.file))?;
    let n = text.matches(m.find.as_str()).count();
    if n != 1 {
        return Err(format!(
            "{}: `find` of mutant `{}` occurs {n} times in {} (it must occur exactly once)",
            m.origin, m.name, m.file
        ));
    }
    for check in &m.checks {
        if !packages.iter().any(|(p, _)| p == check.package()) {
            return Err(format!(
                "{}: check `{check}`: no package `{}` in the workspace",
                m.origin,
                check.package()
            ));
        }
    }
    Ok(())
}

/// Mirrors the files git tracks (or would track: untracked, not ignored)
/// from `root` into `dst`, rewriting only what differs (so cargo's
/// freshness checks see unchanged files as unchanged) and deleting the rest.
/// Returns how many files were written.
fn mirror(root: &Path, dst: &Path) -> Result<usize, String> {
    let out = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .map_err(|e| format!("cannot run git ls-files: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git ls-files failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut keep = BTreeSet::new();
    let mut written = 0;
    for rel in out.stdout.split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let rel = PathBuf::from(String::from_utf8_lossy(rel).into_owned());
        let from = root.join(&rel);
        // Deleted but still tracked, or not a plain file: skip.
        let Ok(bytes) = fs::read(&from) else { continue };
        let to = dst.join(&rel);
        if fs::read(&to).ok().as_deref() != Some(bytes.as_slice()) {
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            fs::write(&to, &bytes).map_err(|e| format!("{}: {e}", to.display()))?;
            written += 1;
        }
        keep.insert(rel);
    }
    prune(dst, dst, &keep)?;
    Ok(written)
}

fn prune(base: &Path, dir: &Path, keep: &BTreeSet<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let rel = path.strip_prefix(base).unwrap_or(&path).to_path_buf();
        if path.is_dir() {
            prune(base, &path, keep)?;
            if fs::read_dir(&path)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false)
            {
                let _ = fs::remove_dir(&path);
            }
        } else if !keep.contains(&rel) {
            fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// A mutation applied to a scratch file; dropping it restores the file.
struct Applied {
    path: PathBuf,
    original: String,
}

impl Applied {
    fn apply(path: &Path, find: &str, replace: &str) -> Result<Applied, String> {
        let original = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mutated = original.replacen(find, replace, 1);
        fs::write(path, mutated).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Applied {
            path: path.to_path_buf(),
            original,
        })
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        if let Err(e) = fs::write(&self.path, &self.original) {
            eprintln!(
                "mutants: cannot restore {} ({e}); the next run re-mirrors it",
                self.path.display()
            );
        }
    }
}

/// The scratch directory's lock: one run at a time per scratch copy.
struct Lock(PathBuf);

impl Lock {
    fn take(path: &Path) -> Result<Lock, String> {
        for _ in 0..2 {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
            {
                Ok(mut f) => {
                    let _ = write!(f, "{}", std::process::id());
                    return Ok(Lock(path.to_path_buf()));
                }
                Err(_) => {
                    let pid = fs::read_to_string(path).unwrap_or_default();
                    let pid = pid.trim();
                    if !pid.is_empty() && Path::new("/proc").join(pid).exists() {
                        return Err(format!(
                            "another `cargo xtask mutants` (pid {pid}) is using {}; \
                             wait for it or pass --scratch <dir>",
                            path.parent().unwrap_or(path).display()
                        ));
                    }
                    // Left behind by a run that was killed.
                    let _ = fs::remove_file(path);
                }
            }
        }
        Err(format!("cannot take the lock {}", path.display()))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Runs checks in the scratch copy.
struct Runner {
    src: PathBuf,
    target: PathBuf,
    logs: PathBuf,
    preemptions: String,
    packages: Vec<(String, PathBuf)>,
}

impl Runner {
    fn cargo(&self, loom: bool) -> Command {
        let mut cmd = cargo();
        cmd.current_dir(&self.src);
        if loom {
            // Incremental and without debug info: the scratch build only
            // needs to rebuild the mutated crate quickly. Debug assertions
            // on, as in `cargo xtask loom`.
            cmd.env("RUSTFLAGS", "--cfg stepsched_loom")
                .env("LOOM_MAX_PREEMPTIONS", &self.preemptions)
                .env("CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS", "true")
                .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
                .env("CARGO_PROFILE_RELEASE_INCREMENTAL", "true")
                .env("CARGO_TARGET_DIR", self.target.join("loom"));
        } else {
            cmd.env("CARGO_TARGET_DIR", self.target.join("plain"));
        }
        cmd
    }

    fn dir(&self, package: &str) -> Option<PathBuf> {
        self.packages
            .iter()
            .find(|(p, _)| p == package)
            .map(|(_, dir)| self.src.join(dir))
    }

    fn has_loom_test(&self, package: &str) -> bool {
        self.dir(package)
            .is_some_and(|dir| dir.join("tests/loom.rs").exists())
    }

    /// Whether `tests/loom.rs` may hold a test the check's filter selects:
    /// every `::`-separated piece of the filter is part of an identifier
    /// (a module or function of the file), so it must occur in its text.
    /// Saves building a binary that would run nothing.
    fn loom_test_may_match(&self, check: &Check) -> bool {
        let Check::Loom {
            package,
            filter: Some(filter),
        } = check
        else {
            return true;
        };
        let Some(text) = self
            .dir(package)
            .and_then(|dir| fs::read_to_string(dir.join("tests/loom.rs")).ok())
        else {
            return true;
        };
        filter.split("::").all(|piece| text.contains(piece))
    }

    /// As [`Runner::loom_test_may_match`], for the library's unit tests,
    /// whose module names are spread over the files of `src/`.
    fn lib_may_match(&self, check: &Check) -> bool {
        fn texts(dir: &Path, out: &mut String) {
            for entry in fs::read_dir(dir)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
            {
                let path = entry.path();
                if path.is_dir() {
                    texts(&path, out);
                } else if path.extension().is_some_and(|x| x == "rs") {
                    out.push_str(&fs::read_to_string(&path).unwrap_or_default());
                }
            }
        }
        let Check::Loom {
            package,
            filter: Some(filter),
        } = check
        else {
            return true;
        };
        let Some(dir) = self.dir(package) else {
            return true;
        };
        let mut text = String::new();
        texts(&dir.join("src"), &mut text);
        filter.split("::").all(|piece| text.contains(piece))
    }

    /// Whether the library has loom unit tests (a `loom_tests` module).
    fn has_lib_loom(&self, package: &str) -> bool {
        fn any_mentions(dir: &Path) -> bool {
            let Ok(entries) = fs::read_dir(dir) else {
                return false;
            };
            entries.filter_map(Result::ok).any(|e| {
                let path = e.path();
                if path.is_dir() {
                    any_mentions(&path)
                } else {
                    path.extension().is_some_and(|x| x == "rs")
                        && fs::read_to_string(&path).is_ok_and(|t| t.contains("mod loom_tests"))
                }
            })
        }
        self.dir(package)
            .is_some_and(|dir| any_mentions(&dir.join("src")))
    }

    /// The cargo invocations of a check (each a `cargo test` command line
    /// without the part after `--`).
    fn commands(&self, check: &Check) -> Vec<Command> {
        match check {
            Check::Loom { package, .. } => {
                let mut out = Vec::new();
                if self.has_lib_loom(package) && self.lib_may_match(check) {
                    let mut lib = self.cargo(true);
                    lib.args([
                        "test",
                        "--release",
                        "-p",
                        package,
                        "--features",
                        "loom",
                        "--lib",
                    ]);
                    out.push(lib);
                }
                if self.has_loom_test(package) && self.loom_test_may_match(check) {
                    let mut it = self.cargo(true);
                    it.args([
                        "test",
                        "--release",
                        "-p",
                        package,
                        "--features",
                        "loom",
                        "--test",
                        "loom",
                    ]);
                    out.push(it);
                }
                out
            }
            Check::Test { package, test, .. } => {
                let mut cmd = self.cargo(false);
                cmd.args(["test", "-p", package]);
                if let Some(test) = test {
                    cmd.args(["--test", test]);
                }
                vec![cmd]
            }
        }
    }

    /// Builds what a check runs, without a timeout, so that the baseline's
    /// timings and the timeout measure the tests, not the dependencies.
    fn build(&self, check: &Check) -> Result<(), String> {
        for mut cmd in self.commands(check) {
            cmd.arg("--no-run");
            crate::run(&mut cmd)?;
        }
        Ok(())
    }

    /// Runs one check, for at most `limit`; `tag` names its log files.
    fn check(&self, check: &Check, tag: &str, limit: Duration) -> Result<Outcome, String> {
        let deadline = Instant::now() + limit;
        let mut tests = 0;
        for (k, mut cmd) in self.commands(check).into_iter().enumerate() {
            let log = self.logs.join(format!("{tag}.{k}.log"));
            let is_lib_loom =
                matches!(check, Check::Loom { .. }) && cmd.get_args().any(|a| a == "--lib");
            if is_lib_loom {
                // The library's loom models are the unit tests with `loom`
                // in their path; the filter narrows them further.
                let Check::Loom { filter, .. } = check else {
                    unreachable!()
                };
                let mut list = self.cargo(true);
                list.args([
                    "test",
                    "--release",
                    "-p",
                    check.package(),
                    "--features",
                    "loom",
                    "--lib",
                ]);
                list.args(["--", "--list", "--format", "terse"]);
                let list_log = self.logs.join(format!("{tag}.list.log"));
                let (status, text) = match run_timed(&mut list, &list_log, deadline)? {
                    Some(done) => done,
                    None => return Ok(Outcome::TimedOut),
                };
                if !status.success() {
                    return Ok(failure(&text, status));
                }
                let names: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_suffix(": test"))
                    .filter(|n| n.contains("loom"))
                    .filter(|n| filter.as_deref().is_none_or(|f| n.contains(f)))
                    .collect();
                if names.is_empty() {
                    continue;
                }
                cmd.arg("--").arg("--exact").args(&names);
            } else {
                let filter = match check {
                    Check::Loom { filter, .. } | Check::Test { filter, .. } => filter,
                };
                if let Some(filter) = filter {
                    cmd.args(["--", filter]);
                }
            }
            let (status, text) = match run_timed(&mut cmd, &log, deadline)? {
                Some(done) => done,
                None => return Ok(Outcome::TimedOut),
            };
            if !status.success() {
                return Ok(failure(&text, status));
            }
            tests += passed_tests(&text);
        }
        Ok(Outcome::Passed { tests })
    }
}

/// Runs `cmd` in its own process group with output to `log`, killing the
/// whole group at `deadline`. Returns the exit status and the log's text,
/// or `None` if it ran out of time.
fn run_timed(
    cmd: &mut Command,
    log: &Path,
    deadline: Instant,
) -> Result<Option<(ExitStatus, String)>, String> {
    let line = command_line(cmd);
    println!("   $ {line}");
    let mut file = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let _ = writeln!(file, "$ {line}");
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run `{line}`: {e}"))?;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            // The whole group: cargo and the test binary it started.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = fs::read_to_string(log).unwrap_or_default();
    Ok(status.map(|s| (s, text)))
}

fn command_line(cmd: &Command) -> String {
    let envs: String = cmd
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={} ", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!("{envs}cargo {}", args.join(" "))
}

/// Classifies an unsuccessful `cargo test` from its output.
fn failure(text: &str, status: ExitStatus) -> Outcome {
    if text.contains("error: could not compile") {
        return Outcome::BuildFailed;
    }
    let failed: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("test ")?.strip_suffix(" ... FAILED"))
        .collect();
    // A panic that cannot unwind aborts the binary before it reports.
    let aborted = text.lines().find_map(|l| {
        let name = l.strip_prefix("thread '")?.split('\'').next()?;
        (l.contains("panicked") && name != "main").then_some(name)
    });
    let detail = match (failed.as_slice(), aborted) {
        ([], Some(name)) => format!("{name} (aborted)"),
        ([], None) => format!("test binary {status}"),
        ([one], _) => one.to_string(),
        ([first, rest @ ..], _) => format!("{first} (+{} more)", rest.len()),
    };
    Outcome::Failed { detail }
}

/// Sums the `N passed` of every `test result:` line.
fn passed_tests(text: &str) -> usize {
    text.lines()
        .filter_map(|l| l.strip_prefix("test result: ok. "))
        .filter_map(|l| l.split(' ').next()?.parse::<usize>().ok())
        .sum()
}

/// The check, and the failing test unless the check's filter names it.
fn caught_by(check: &Check, detail: &str) -> String {
    let (test, aborted) = match detail.strip_suffix(" (aborted)") {
        Some(test) => (test, " (aborted)"),
        None => (detail, ""),
    };
    let filter = match check {
        Check::Loom { filter, .. } | Check::Test { filter, .. } => filter.as_deref(),
    };
    let named = filter.is_some_and(|f| test == f || test.ends_with(&format!("::{f}")));
    if named {
        format!("{check}{aborted}")
    } else {
        format!("{check}: {detail}")
    }
}

fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Passed { tests } => format!("passed ({tests} test(s))"),
        Outcome::Failed { detail } => format!("FAILED: {detail}"),
        Outcome::TimedOut => "timed out (killed)".into(),
        Outcome::BuildFailed => "does not build".into(),
    }
}

fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Caught { by } => format!("caught by {by}"),
        Verdict::CaughtByTimeout { by } => format!("caught by timeout: {by}"),
        Verdict::Missed => "MISSED".into(),
        Verdict::Finding => "missed: a finding (no check can catch it)".into(),
        Verdict::DoesNotBuild { by } => format!("DOES NOT BUILD ({by})"),
    }
}

fn caught_cell(v: &Verdict) -> String {
    match v {
        Verdict::Caught { by } => by.clone(),
        Verdict::CaughtByTimeout { by } => format!("timeout ({by})"),
        Verdict::Missed => "**MISSED**".into(),
        Verdict::Finding => "*missed: finding* (see below)".into(),
        Verdict::DoesNotBuild { by } => format!("**does not build** ({by})"),
    }
}

fn summary(rows: &[Row<'_>]) -> String {
    let count = |f: fn(&Verdict) -> bool| rows.iter().filter(|r| f(&r.verdict)).count();
    let caught = count(|v| matches!(v, Verdict::Caught { .. }));
    let timeout = count(|v| matches!(v, Verdict::CaughtByTimeout { .. }));
    let missed = count(|v| matches!(v, Verdict::Missed));
    let findings = count(|v| matches!(v, Verdict::Finding));
    let broken = count(|v| matches!(v, Verdict::DoesNotBuild { .. }));
    let mut s = format!(
        "{} mutation(s): {} caught by a failing check, {timeout} by timeout, {missed} missed, \
         {findings} finding(s) no check can catch",
        rows.len(),
        caught
    );
    if broken > 0 {
        s.push_str(&format!(", {broken} do not build"));
    }
    s
}

fn print_table(rows: &[Row<'_>], total: f64) {
    let width = rows
        .iter()
        .map(|r| r.mutant.name.len())
        .max()
        .unwrap_or(8)
        .max(8);
    println!(
        "\n{:<width$}  {:>7}  caught by / why",
        "mutation", "seconds"
    );
    for r in rows {
        println!(
            "{:<width$}  {:>7.1}  {}\n{:<width$}           why: {}",
            r.mutant.name,
            r.secs,
            verdict_text(&r.verdict),
            "",
            r.mutant.why
        );
    }
    println!("\n{}; total {total:.0} s", summary(rows));
}

/// Escapes text for a markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn render_doc(
    rows: &[Row<'_>],
    baseline: &[(Check, usize, f64)],
    opts: &Options,
    total: f64,
) -> String {
    let now = jiff::Timestamp::now();
    let mut command = String::from("cargo xtask mutants");
    if opts.ci {
        command.push_str(" --ci");
    }
    command.push_str(&format!(" --preemptions {}", opts.preemptions));
    if opts.timeout.as_secs() != DEFAULT_TIMEOUT {
        command.push_str(&format!(" --timeout {}", opts.timeout.as_secs()));
    }
    command.push_str(" --write-doc");
    let mut md = String::new();
    md.push_str("# Mutation ledger\n\n");
    md.push_str(&format!(
        "Generated {} by `{command}` (loom models at `LOOM_MAX_PREEMPTIONS={}`; \
         a check on a mutation may run for the larger of {} s and {SLOWDOWN} times its \
         baseline time). Do not edit: the list is `xtask/mutants/*.txt` and this file \
         is written by the command.\n\n",
        bench_report::utc(now),
        opts.preemptions,
        opts.timeout.as_secs()
    ));
    md.push_str(
        "Each row is a one-line mutation of a critical ordering, compare-and-swap, \
         fence or re-check. The command applies it to a scratch copy of the workspace \
         (`target/mutants/src`), runs the checks listed for it in order until one fails, \
         and restores the file. Every listed mutation must be caught; one that no check \
         catches is reported as missed and fails the command, unless its ledger entry \
         records a *finding*: an ordering that is needed but that no model or test can \
         observe, with the reason, listed at the end of this page. *Caught by* names the \
         first failing check and, where the test harness names it, the failing test; \
         *aborted* means the test binary aborted (a loom model that finds a deadlock or a \
         race panics inside a model thread, which cannot unwind); *timeout* means the \
         check ran past the time limit and was killed. Seconds include rebuilding the \
         mutated crate.\n\n",
    );
    md.push_str(&format!(
        "{}; the run took {total:.0} s.\n\n",
        summary(rows)
    ));
    md.push_str("| mutation | file | why it matters | caught by | seconds |\n");
    md.push_str("|---|---|---|---|---|\n");
    for r in rows {
        md.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {:.1} |\n",
            r.mutant.name,
            r.mutant.file,
            cell(&r.mutant.why),
            cell(&caught_cell(&r.verdict)),
            r.secs
        ));
    }
    let findings: Vec<&Row<'_>> = rows.iter().filter(|r| r.mutant.finding.is_some()).collect();
    if !findings.is_empty() {
        md.push_str("\n## Findings\n\nMutations that no check can catch, kept in the list because the code they break is real. Each says why no model or test observes it.\n\n");
        for r in findings {
            let status = if matches!(r.verdict, Verdict::Finding) {
                "missed, as expected"
            } else {
                "caught after all: drop its `finding` line"
            };
            md.push_str(&format!(
                "- `{}` ({status}): {}\n",
                r.mutant.name,
                cell(r.mutant.finding.as_deref().unwrap_or_default())
            ));
        }
    }
    md.push_str("\n## Baseline\n\nEvery check, once on the unmutated copy (all must pass before any mutation runs).\n\n");
    md.push_str("| check | tests | seconds |\n|---|---|---|\n");
    for (check, tests, secs) in baseline {
        md.push_str(&format!("| `{check}` | {tests} | {secs:.1} |\n"));
    }
    md.push_str("\n## The mutations\n");
    for r in rows {
        md.push_str(&format!(
            "\n### `{}`\n\n{} (`{}`, {})\n\n```diff\n",
            r.mutant.name, r.mutant.why, r.mutant.file, r.mutant.origin
        ));
        for l in r.mutant.find.lines() {
            md.push_str(&format!("- {l}\n"));
        }
        for l in r.mutant.replace.lines() {
            md.push_str(&format!("+ {l}\n"));
        }
        md.push_str("```\n\nChecks: ");
        let checks: Vec<String> = r.mutant.checks.iter().map(|c| format!("`{c}`")).collect();
        md.push_str(&checks.join(", "));
        md.push('\n');
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_is_parsed_and_optional() {
        let text = "mutant a/b\nwhy w\nfile f\nfind x\nreplace y\ncheck loom p\n\
                    finding loom does not model it\n\nmutant a/c\nwhy w\nfile f\n\
                    find x\nreplace y\ncheck loom p\n";
        let ms = parse_ledger(text, "t.txt").unwrap();
        assert_eq!(ms[0].finding.as_deref(), Some("loom does not model it"));
        assert_eq!(ms[1].finding, None);
    }

    #[test]
    fn parses_a_block_with_padded_keys_and_newlines() {
        let text = "# comment\n\nmutant  a/b\nwhy     because\nfile    x.rs\n\
                    find    one\\ntwo\nreplace three\ncheck   loom stepsched-mpsc model\n\
                    check   test stepsched-mpsc --test basic close\n";
        let ms = parse_ledger(text, "t.txt").unwrap();
        assert_eq!(ms.len(), 1);
        assert_eq!(ms[0].name, "a/b");
        assert_eq!(ms[0].find, "one\ntwo");
        assert_eq!(ms[0].origin, "t.txt:3");
        assert_eq!(
            ms[0].checks[1].to_string(),
            "test stepsched-mpsc --test basic close"
        );
    }

    #[test]
    fn malformed_blocks_name_their_line() {
        let missing = "mutant a\nwhy w\nfile f\nfind x\ncheck loom p\n";
        assert!(
            parse_ledger(missing, "t.txt")
                .unwrap_err()
                .starts_with("t.txt:1:")
        );
        let unknown = "mutant a\nwhy w\nfile f\nfind x\nreplace y\ncheck fuzz p\n";
        assert!(
            parse_ledger(unknown, "t.txt")
                .unwrap_err()
                .starts_with("t.txt:6:")
        );
        let orphan = "why w\n";
        assert!(
            parse_ledger(orphan, "t.txt")
                .unwrap_err()
                .starts_with("t.txt:1:")
        );
    }

    #[test]
    fn counts_passed_tests_and_names_failures() {
        let ok = "test result: ok. 3 passed; 0 failed\ntest result: ok. 2 passed; 0 failed\n";
        assert_eq!(passed_tests(ok), 5);
        let status = Command::new("false").status().unwrap();
        let failed = "test a::b ... FAILED\ntest result: FAILED. 0 passed; 1 failed\n";
        assert_eq!(
            failure(failed, status),
            Outcome::Failed {
                detail: "a::b".into()
            }
        );
        assert_eq!(
            failure("error: could not compile `x`", status),
            Outcome::BuildFailed
        );
    }
}
