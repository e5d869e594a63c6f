//! The memory scenario: idle processes, counted by the counting global
//! allocator the benchmarks use (`stepsched_benches::CountingAlloc`; not
//! RSS, which earlier scenarios' heap growth would hide), each within a
//! per-process bound, checked in every run.

use std::time::Duration;

use stepsched::{Builder, Context, Error, Events, Process, Scheduler, Status, StepOutput};

use stepsched_benches::CountingAlloc;

use crate::Opts;
use crate::report::{Outcome, progress};

/// The most an idle process may cost, in bytes: its slot, state cell and
/// run-queue entry, with room for allocator rounding (a tokio task with an
/// unbounded channel costs 1 056).
pub(crate) const MAX_IDLE_BYTES: usize = 1024;

/// A process that idles until cancelled.
struct Idle;

impl Process for Idle {
    type Input = ();
    type Message = ();
    type Response = ();
    type Command = String;
    type Output = ();

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _cx: &mut Context<'_, Self>,
        events: Events<'_, ()>,
        out: &mut StepOutput<String, ()>,
    ) -> Result<(), Error> {
        for e in events {
            if e.is_cancel() {
                return Err(Error::Cancelled);
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

/// `--processes` idle processes (at least 20 000): the bytes they hold,
/// each under [`MAX_IDLE_BYTES`]; then every one ends Cancelled at
/// shutdown.
pub(crate) fn run(opts: &Opts) -> Result<Outcome, String> {
    let n = opts.processes.max(20_000);
    let scheduler: Scheduler<Idle> = Builder::new()
        .workers(opts.workers)
        .build()
        .map_err(|e| format!("build: {e}"))?;
    let mut joins = Vec::with_capacity(n);
    // Counting stops after every process has parked idle, which the
    // scheduler's stats below order before the read.
    let before = CountingAlloc::start();
    for i in 0..n {
        let pid = scheduler.allocate_pid();
        joins.push(
            scheduler
                .submit(pid, Idle, "idle", ())
                .map_err(|e| format!("submit idle: {e}"))?,
        );
        if i % 1024 == 0 {
            progress(i as u64);
        }
    }
    // Every process parked idle: its first step ran and nothing of it is
    // in flight.
    while scheduler.stats().idle < n {
        std::thread::yield_now();
    }
    let bytes = CountingAlloc::live().wrapping_sub(before);
    CountingAlloc::stop();
    // The process handles are the caller's, not the processes'.
    let handles = joins.capacity() * size_of::<stepsched::JoinHandle<Idle>>();
    let per = bytes.saturating_sub(handles) / n;
    progress(n as u64);
    println!(
        "memory: {} idle processes hold {} bytes, {per} bytes per process (bound {MAX_IDLE_BYTES})",
        crate::report::count(n as u64),
        crate::report::count(bytes.saturating_sub(handles) as u64)
    );
    let report = scheduler
        .shutdown(Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    for j in joins {
        if !matches!(j.join(), Err(Error::Cancelled)) {
            return Err("an idle process did not end Cancelled".into());
        }
    }
    if report.forced != 0 {
        return Err(format!("{} idle processes ignored cancel", report.forced));
    }
    if per > MAX_IDLE_BYTES {
        return Err(format!(
            "an idle process costs {per} bytes, over the {MAX_IDLE_BYTES}-byte bound"
        ));
    }
    Ok(Outcome {
        checked: "idle bytes per process within bound; every one cancelled at shutdown",
        count: n as u64,
        unit: "processes",
    })
}
