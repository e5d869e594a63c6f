//! What a run shows while it goes and at its end: one progress bar per
//! scenario (plain lines when stderr is not a terminal, so CI logs stay
//! clean), then one summary table for every scenario.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Items done so far by the running scenario (set by the scenario, read by
/// the ticker).
static DONE: AtomicU64 = AtomicU64::new(0);

/// Records that the running scenario has done `n` items in all so far.
pub(crate) fn progress(n: u64) {
    // Relaxed: a figure for display; nothing is published through it.
    DONE.store(n, Ordering::Relaxed);
}

/// What a scenario checked and how much it did, for the summary.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// The invariants checked, in a few words.
    pub(crate) checked: &'static str,
    /// How many `unit`s the scenario went through.
    pub(crate) count: u64,
    /// What `count` counts ("items", "messages", "steps", ...).
    pub(crate) unit: &'static str,
}

/// One row of the summary.
pub(crate) struct Row {
    pub(crate) scenario: &'static str,
    pub(crate) result: Result<Outcome, String>,
    pub(crate) wall: Duration,
    /// Peak resident set of the scenario, in KiB (`None` where the
    /// platform does not tell).
    pub(crate) peak_kib: Option<u64>,
}

/// Durations, everywhere in the output: seconds with one decimal.
pub(crate) fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// A count with thin grouping: `1 234 567`.
pub(crate) fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// Shows the progress of one scenario until dropped.
pub(crate) struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts showing `scenario`'s progress against its time budget.
    pub(crate) fn start(scenario: &'static str, unit: &'static str, budget: Duration) -> Ticker {
        progress(0);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let tenths = (budget.as_millis() / 100).max(1) as u64;
            let bar = std::io::stderr().is_terminal().then(|| {
                let bar = ProgressBar::new(tenths);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix:>10} [{bar:30}] {elapsed:>3} (budget {len_s}) {msg}",
                    )
                    .expect("a valid template")
                    .with_key(
                        "len_s",
                        move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                            let _ = write!(w, "{:.0} s", tenths as f64 / 10.0);
                        },
                    )
                    .progress_chars("=> "),
                );
                bar.set_prefix(scenario);
                bar
            });
            let mut last_line = start;
            // Relaxed: a stop flag; the joining thread waits for us anyway.
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let elapsed = start.elapsed();
                let done = DONE.load(Ordering::Relaxed);
                let rate = done as f64 / elapsed.as_secs_f64().max(1e-3);
                let msg = format!("{} {unit}, {}/s", count(done), count(rate as u64));
                match &bar {
                    Some(bar) => {
                        bar.set_position(((elapsed.as_millis() / 100) as u64).min(tenths));
                        bar.set_message(msg);
                    }
                    None if last_line.elapsed() >= Duration::from_secs(2) => {
                        last_line = Instant::now();
                        eprintln!(
                            "{scenario:>10}: {} of {} budget, {msg}",
                            secs(elapsed),
                            secs(budget)
                        );
                    }
                    None => {}
                }
            }
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
        });
        Ticker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        // Relaxed: see the loop above.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Resets the peak resident set (Linux: `/proc/self/clear_refs`), so the
/// next [`peak_kib`] is the peak since now; `false` where unsupported.
pub(crate) fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The peak resident set in KiB since the last [`reset_peak`], from
/// `/proc/self/status`.
pub(crate) fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// The summary table, in Markdown.
pub(crate) fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | checked | done | throughput | wall | peak RSS | result |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let peak = r
            .peak_kib
            .map_or("n/a".to_string(), |k| format!("{} MiB", k / 1024));
        let (checked, done, rate, result) = match &r.result {
            Ok(o) => (
                o.checked.to_string(),
                format!("{} {}", count(o.count), o.unit),
                format!(
                    "{} {}/s",
                    count((o.count as f64 / r.wall.as_secs_f64().max(1e-3)) as u64),
                    o.unit
                ),
                "ok".to_string(),
            ),
            Err(e) => ("-".into(), "-".into(), "-".into(), format!("FAILED: {e}")),
        };
        out.push_str(&format!(
            "| {} | {checked} | {done} | {rate} | {} | {peak} | {result} |\n",
            r.scenario,
            secs(r.wall)
        ));
    }
    out
}

/// The summary as one JSON document.
pub(crate) fn json(rows: &[Row], seed: u64, rerun: &str) -> String {
    let scenarios: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let mut v = serde_json::json!({
                "scenario": r.scenario,
                "wall_seconds": r.wall.as_secs_f64(),
                "peak_rss_kib": r.peak_kib,
                "ok": r.result.is_ok(),
            });
            match &r.result {
                Ok(o) => {
                    v["checked"] = o.checked.into();
                    v["count"] = o.count.into();
                    v["unit"] = o.unit.into();
                }
                Err(e) => v["error"] = e.as_str().into(),
            }
            v
        })
        .collect();
    serde_json::json!({
        "ok": rows.iter().all(|r| r.result.is_ok()),
        "seed": seed,
        "rerun": rerun,
        "scenarios": scenarios,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_group_by_thousands() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1 000");
        assert_eq!(count(1_234_567), "1 234 567");
    }

    #[test]
    fn the_table_has_a_row_per_scenario_and_names_a_failure() {
        let rows = [
            Row {
                scenario: "deque",
                result: Ok(Outcome {
                    checked: "each item once",
                    count: 2000,
                    unit: "items",
                }),
                wall: Duration::from_secs(2),
                peak_kib: Some(4096),
            },
            Row {
                scenario: "mpsc",
                result: Err("item 3 twice".into()),
                wall: Duration::from_millis(500),
                peak_kib: None,
            },
        ];
        let t = table(&rows);
        assert!(
            t.contains(
                "| deque | each item once | 2 000 items | 1 000 items/s | 2.0 s | 4 MiB | ok |"
            ),
            "{t}"
        );
        assert!(
            t.contains("| mpsc | - | - | - | 0.5 s | n/a | FAILED: item 3 twice |"),
            "{t}"
        );
        let j: serde_json::Value = serde_json::from_str(&json(&rows, 7, "x")).unwrap();
        assert_eq!(j["ok"], false);
        assert_eq!(j["scenarios"][1]["error"], "item 3 twice");
        assert_eq!(j["scenarios"][0]["count"], 2000);
    }
}
