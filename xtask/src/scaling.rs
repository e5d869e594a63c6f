//! `cargo xtask bench scaling`: runs the scaling benchmark
//! (`benches/examples/scaling.rs`) and, with `--write-doc`, writes what it
//! printed into the section "Scaling by worker count, N CPUs" of
//! `docs/benchmarks.md`, N being the CPU count the example printed: one
//! section per machine size, so a run on this machine keeps the table
//! measured on a larger one.
//!
//! The example prints its tables as Markdown on standard output (progress
//! goes to standard error); the section is that output under a short
//! header that says when, on what and by which command it was measured.
//! The section runs from its heading to the next `## ` heading or the end
//! of the document; everything else in the document is kept.
//!
//! `--write-doc --from FILE --measured WHEN` writes the section from a
//! saved output instead of running the example: for a run on another
//! machine (the binary built here, run there, its standard output kept).
//! `WHEN` says when it ran, since the saved output does not.

use std::fs;

use crate::bench_report::utc;
use crate::{cargo, root, run_capturing};

const HEADING: &str = "## Scaling by worker count";

/// Where the printed lines came from.
enum Source {
    /// This run, started and ended at these times.
    Here(jiff::Timestamp, jiff::Timestamp),
    /// A saved output, measured at the given time (free text).
    Saved(String),
}

/// Runs the example with `args` (less `--write-doc`, `--from` and
/// `--measured`, which are ours).
pub(crate) fn scaling(args: &[String]) -> Result<(), String> {
    let mut write_doc = false;
    let mut from = None;
    let mut measured = None;
    let mut pass: Vec<&String> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--write-doc" => write_doc = true,
            "--from" => from = Some(it.next().ok_or("--from needs a file")?),
            "--measured" => measured = Some(it.next().ok_or("--measured needs a time")?),
            _ => pass.push(arg),
        }
    }
    if write_doc && pass.iter().any(|a| *a == "--ours-only") {
        return Err("--write-doc: not with --ours-only (the section compares with tokio)".into());
    }
    let command = format!("cargo xtask bench scaling {}", args.join(" "));
    let command = command.trim_end();
    let (printed, source) = match (from, measured) {
        (Some(file), Some(when)) => {
            if !write_doc || !pass.is_empty() {
                return Err("--from: with --write-doc and --measured alone".into());
            }
            let text = fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
            let lines = text.lines().map(str::to_owned).collect();
            (lines, Source::Saved(when.clone()))
        }
        (None, None) => {
            let mut cmd = cargo();
            cmd.args([
                "run",
                "--release",
                "-p",
                "stepsched-benches",
                "--example",
                "scaling",
                "--",
            ])
            .args(&pass);
            let started = jiff::Timestamp::now();
            let printed = run_capturing(&mut cmd, "")?;
            (printed, Source::Here(started, jiff::Timestamp::now()))
        }
        _ => return Err("--from and --measured go together".into()),
    };
    if !write_doc {
        return Ok(());
    }
    // The section is a table against tokio: an output without tokio's
    // side has no place there.
    if printed.iter().any(|l| l.contains("--ours-only")) {
        return Err("--write-doc: not from a run with --ours-only".into());
    }
    let doc = root().join("docs/benchmarks.md");
    let heading = heading(&printed);
    let section = render(&heading, &printed, command, &source);
    let old = fs::read_to_string(&doc).map_err(|e| format!("{}: {e}", doc.display()))?;
    let new = replace_section(&old, &heading, &section);
    fs::write(&doc, new).map_err(|e| format!("{}: {e}", doc.display()))?;
    println!(
        "wrote the section \"{}\" of {}",
        &heading[3..],
        doc.display()
    );
    Ok(())
}

/// The section's heading: [`HEADING`] and the CPU count of the example's
/// `Machine: N CPUs` line.
fn heading(printed: &[String]) -> String {
    let cpus = printed.iter().find_map(|l| {
        let rest = l.strip_prefix("Machine: ")?;
        let (n, _) = rest.split_once(" CPUs")?;
        n.parse::<usize>().ok()
    });
    match cpus {
        Some(n) => format!("{HEADING}, {n} CPUs"),
        None => HEADING.to_string(),
    }
}

fn render(heading: &str, printed: &[String], command: &str, source: &Source) -> String {
    let how = match source {
        Source::Here(started, ended) => format!(
            "Written by `{command}`, measured {} (the run took {} s).",
            utc(*started),
            ended.duration_since(*started).as_secs(),
        ),
        Source::Saved(when) => format!(
            "Measured {when} on the machine named below, by the example's binary \
             built with `cargo build --release -p stepsched-benches --example scaling` \
             on the development machine and run there with the arguments its output \
             names; `cargo xtask bench scaling --write-doc --from <saved output> \
             --measured <when>` copied what it printed."
        ),
    };
    let mut md = format!(
        "{heading}\n\n\
         <!-- generated by `cargo xtask bench scaling --write-doc`; do not edit -->\n\n\
         {how} The workloads of the criterion \
         scheduler bench, the Savina actor workloads (fork-join throughput and create, \
         thread ring, chameneos, big) and a compute-heavy fork-join, each at every \
         worker count against tokio's multi-thread runtime with as many worker \
         threads, in the same run (`benches/examples/scaling.rs` describes each \
         workload and its tokio side). Each cell is the median of the timed trials \
         of a fresh scheduler or runtime, after one warm-up trial. The counters are \
         the scheduler's `Stats` (summed `WorkerStats`) over the timed trials, \
         divided by the operations of those trials: counts, not times, so they can \
         be read on a machine with fewer cores than workers, where the times \
         cannot.\n\n",
    );
    for line in printed {
        md.push_str(line);
        md.push('\n');
    }
    md
}

/// `old` with its section replaced by `section`, or with `section`
/// appended when it has none.
fn replace_section(old: &str, heading: &str, section: &str) -> String {
    let at_line_start = |i: usize| i == 0 || old.as_bytes()[i - 1] == b'\n';
    let start = old
        .match_indices(heading)
        .map(|(i, _)| i)
        .find(|&i| at_line_start(i) && old[i + heading.len()..].starts_with(['\n', '\r']));
    match start {
        Some(begin) => {
            let after = begin + heading.len();
            let end = old[after..]
                .find("\n## ")
                .map_or(old.len(), |i| after + i + 1);
            let rest = &old[end..];
            let sep = if rest.is_empty() { "" } else { "\n" };
            let section = section.trim_end_matches('\n');
            format!("{}{section}\n{sep}{rest}", &old[..begin])
        }
        None => format!("{}\n\n{section}", old.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECTION: &str = "## Scaling by worker count\n\nnew\n";

    #[test]
    fn refuses_to_write_a_run_without_tokio() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let err = scaling(&args(&["--write-doc", "--ours-only"])).unwrap_err();
        assert!(err.contains("--ours-only"), "{err}");
        let saved = std::env::temp_dir().join("xtask-scaling-ours-only.txt");
        fs::write(&saved, "Command: `scaling --workers 2 --ours-only`\n").unwrap();
        let from = saved.to_str().unwrap();
        let err =
            scaling(&args(&["--write-doc", "--from", from, "--measured", "now"])).unwrap_err();
        assert!(err.contains("--ours-only"), "{err}");
        fs::remove_file(&saved).unwrap();
    }

    #[test]
    fn appends_when_absent() {
        let doc = "# Benchmarks\n\n## Other\n\ntext\n";
        assert_eq!(
            replace_section(doc, HEADING, SECTION),
            "# Benchmarks\n\n## Other\n\ntext\n\n## Scaling by worker count\n\nnew\n"
        );
    }

    #[test]
    fn replaces_at_the_end() {
        let doc = "# B\n\n## Scaling by worker count\n\nold\n### sub\nold\n";
        assert_eq!(
            replace_section(doc, HEADING, SECTION),
            "# B\n\n## Scaling by worker count\n\nnew\n"
        );
    }

    #[test]
    fn replaces_before_a_later_section() {
        let doc = "# B\n\n## Scaling by worker count\n\nold\n\n## Next\n\nkept\n";
        assert_eq!(
            replace_section(doc, HEADING, SECTION),
            "# B\n\n## Scaling by worker count\n\nnew\n\n## Next\n\nkept\n"
        );
    }

    #[test]
    fn ignores_a_mention_in_text() {
        let doc = "# B\n\nsee ## Scaling by worker count below\n";
        assert_eq!(
            replace_section(doc, HEADING, SECTION),
            "# B\n\nsee ## Scaling by worker count below\n\n## Scaling by worker count\n\nnew\n"
        );
    }

    #[test]
    fn the_heading_names_the_cpu_count() {
        let printed = [
            "Command: x".to_string(),
            "Machine: 16 CPUs (`n`), X.".to_string(),
        ];
        assert_eq!(heading(&printed), "## Scaling by worker count, 16 CPUs");
        assert_eq!(heading(&["no machine line".to_string()]), HEADING);
    }

    #[test]
    fn a_run_keeps_the_section_of_another_machine_size() {
        let doc = "# B\n\n## Scaling by worker count, 2 CPUs\n\ntwo\n\n\
                   ## Scaling by worker count, 16 CPUs\n\nold\n";
        let cases = [
            (
                "## Scaling by worker count, 16 CPUs",
                "# B\n\n## Scaling by worker count, 2 CPUs\n\ntwo\n\n\
                 ## Scaling by worker count, 16 CPUs\n\nnew\n",
            ),
            (
                "## Scaling by worker count, 2 CPUs",
                "# B\n\n## Scaling by worker count, 2 CPUs\n\nnew\n\n\
                 ## Scaling by worker count, 16 CPUs\n\nold\n",
            ),
        ];
        for (heading, expected) in cases {
            let section = format!("{heading}\n\nnew\n");
            assert_eq!(replace_section(doc, heading, &section), expected);
        }
    }
}
