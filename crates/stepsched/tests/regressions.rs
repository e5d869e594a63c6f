//! Regression tests for promises the scheduler broke: a waiting process
//! re-stepped with an empty batch for a stale wakeup flag; yields written
//! with `Idle` or `Continue` dropped; a step that sets no status spinning;
//! `terminate` not cancelling the process's `CancelToken`; a step (or a
//! dispatch) after `terminate` returned `Ok`; panics in `Drop` leaving a
//! process half-finished; a `Done` process published as `Cancelled` by
//! shutdown; and the submit-vs-shutdown handshake.
//!
//! Every test is deterministic: threads meet on channels and barriers. The
//! only time limits ([`GUARD`]) turn a hang into a failure; a passing test
//! never reaches them.
#![cfg(not(stepsched_loom))]

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use stepsched::{
    Completer, Context, Error, Event, Handle, JoinHandle, Pid, Process, SchedProcess, Scheduler,
    Status, StepOutput, SubmitError, TerminateError,
};

/// How long a test waits before it declares a hang (only bounds a failing
/// test).
const GUARD: Duration = Duration::from_secs(10);

/// Joins on another thread; `None` if the process has not completed within
/// `within`.
fn join_within<P: SchedProcess>(
    handle: JoinHandle<P>,
    within: Duration,
) -> Option<Result<P::Output, Error>>
where
    P::Output: Send,
{
    let (tx, rx) = channel();
    thread::spawn(move || {
        let _ = tx.send(handle.join());
    });
    rx.recv_timeout(within).ok()
}

/// Receives, or fails the test after [`GUARD`].
fn recv<T>(rx: &Receiver<T>, what: &str) -> T {
    rx.recv_timeout(GUARD)
        .unwrap_or_else(|_| panic!("hung waiting for {what}"))
}

/// Submits a process that only signals at its first step and finishes, and
/// waits for that signal. On a one-worker scheduler, whose worker runs its
/// own deque before the global queue, this returns once the worker has run
/// everything it had queued locally: a process that parked without being
/// requeued is parked for good (until an event).
fn flush_worker(s: &Sched, n: u64) {
    let rx = submit_marker(s, n);
    recv(&rx, "the marker process");
}

/// Submits the marker process of [`flush_worker`]; the receiver gets its
/// signal.
fn submit_marker(s: &Sched, n: u64) -> Receiver<()> {
    let (tx, rx) = channel();
    let probe = Probe::new();
    let marker = FnProc::new(&probe, move |_, out, _| {
        let _ = tx.send(());
        out.set_status(Status::Done(0));
        Ok(())
    });
    s.submit(pid(n), marker, "main", 0).unwrap();
    rx
}

// ---------------------------------------------------------------------------
// A waiting process is never re-stepped for a stale wakeup flag.
// ---------------------------------------------------------------------------

/// What the handlers of [`stale_flag_scheduler`] hand to the test.
struct StaleFlagChannels {
    /// `ext` completers, each with the sender that lets its handler return.
    ext: Receiver<(Completer<FnProc>, Sender<()>)>,
    /// `hold` completers (their handlers have returned).
    hold: Receiver<Completer<FnProc>>,
}

/// One worker. `now` completes at once with its argument; `ext` hands its
/// completer to the test and returns only when the test says so (so the
/// test completes it while the dispatch is still running); `hold` hands its
/// completer to the test and returns.
fn stale_flag_scheduler() -> (Sched, StaleFlagChannels) {
    let (ext_tx, ext) = channel();
    let (hold_tx, hold) = channel();
    let ext_tx = Mutex::new(ext_tx);
    let hold_tx = Mutex::new(hold_tx);
    let s = Builder::new()
        .workers(1)
        .handler("now", |c: Cmd, done: Completer<FnProc>| {
            let _ = done.complete(Ok(c.arg));
        })
        .handler("ext", move |_: Cmd, done: Completer<FnProc>| {
            let (go_tx, go) = channel::<()>();
            ext_tx.lock().unwrap().send((done, go_tx)).unwrap();
            let _ = go.recv_timeout(GUARD);
        })
        .handler("hold", move |_: Cmd, done: Completer<FnProc>| {
            hold_tx.lock().unwrap().send(done).unwrap();
        })
        .build()
        .unwrap();
    (s, StaleFlagChannels { ext, hold })
}

/// How the process of [`stale_flag_process`] waits once both completions of
/// its first step are in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    /// `Idle` until a message.
    Idle,
    /// One more yield (`hold`), `Yield` until it completes.
    Yield,
}

/// Step 0 yields `now` and `ext`; while they are not both in it returns
/// `Yield`; then it waits as `then` says and finishes with the sum of what
/// it received. `log` gets the number of events of each step.
fn stale_flag_process(probe: &Arc<Probe>, then: Then, log: Arc<Mutex<Vec<usize>>>) -> FnProc {
    let mut first = true;
    let mut completions = 0;
    let mut held = false;
    let mut sum = 0;
    FnProc::new(probe, move |events, out, _| {
        log.lock().unwrap().push(events.len());
        if first {
            first = false;
            out.push_yield(1, cmd("now", 10));
            out.push_yield(2, cmd("ext", 20));
            out.set_status(Status::Yield);
            return Ok(());
        }
        let mut message = false;
        for e in events {
            match e {
                Event::Completion { tag, result } => {
                    sum += result.map_err(|e| Error::failed(format!("tag {tag}: {e}")))?;
                    completions += 1;
                    if tag == 3 {
                        out.set_status(Status::Done(sum));
                        return Ok(());
                    }
                }
                Event::Message { data: m, .. } => {
                    sum += m;
                    message = true;
                }
                Event::Cancel => return Err(Error::Cancelled),
            }
        }
        if completions < 2 {
            out.set_status(Status::Yield);
        } else if then == Then::Idle {
            if message {
                out.set_status(Status::Done(sum));
            } else {
                out.set_status(Status::Idle);
            }
        } else if !held {
            held = true;
            out.push_yield(3, cmd("hold", 0));
            out.set_status(Status::Yield);
        } else {
            out.set_status(Status::Yield);
        }
        Ok(())
    })
}

/// The steps after the first that received no event (none may exist: the
/// process never returns `Continue`).
fn empty_restepped(log: &[usize]) -> Vec<usize> {
    log.iter()
        .enumerate()
        .skip(1)
        .filter(|(_, n)| **n == 0)
        .map(|(i, _)| i)
        .collect()
}

/// The inline re-step path: step 0 yields two commands, one completed at
/// once by its handler and one completed by another thread while the
/// dispatch still runs (which sets the wakeup flag); the next step receives
/// both and returns `Idle`. Promise: a process is never re-stepped with an
/// empty batch for a stale wakeup flag — its next step is the one the
/// message wakes.
#[test]
fn inline_restep_then_idle_is_not_restepped_with_no_events() {
    let (s, chans) = stale_flag_scheduler();
    let probe = Probe::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let h = s
        .submit(
            pid(1),
            stale_flag_process(&probe, Then::Idle, log.clone()),
            "main",
            0,
        )
        .unwrap();
    let (ext, go) = recv(&chans.ext, "the ext handler");
    // Queued behind whatever the worker requeues locally for the target.
    let marker = submit_marker(&s, 2);
    assert!(ext.complete(Ok(20)), "the target is live");
    go.send(()).unwrap();
    recv(&marker, "the marker process");
    s.send(pid(1), 5).unwrap();
    let r = join_within(h, GUARD);
    assert!(matches!(r, Some(Ok(35))), "the process ended with {r:?}");
    let log = log.lock().unwrap().clone();
    assert_eq!(
        empty_restepped(&log),
        Vec::<usize>::new(),
        "steps re-run with no event (events per step: {log:?})"
    );
    assert_eq!(probe.overlaps(), 0);
}

/// The queued path: as above, but the step that receives both completions
/// yields once more and returns `Yield`; the stale flag sends the process
/// through the run queue. Promise: it is not stepped again until that
/// yield completes (no step with an empty batch).
#[test]
fn inline_restep_then_yield_is_not_restepped_with_no_events() {
    let (s, chans) = stale_flag_scheduler();
    let probe = Probe::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let h = s
        .submit(
            pid(1),
            stale_flag_process(&probe, Then::Yield, log.clone()),
            "main",
            0,
        )
        .unwrap();
    let (ext, go) = recv(&chans.ext, "the ext handler");
    let marker = submit_marker(&s, 2);
    assert!(ext.complete(Ok(20)), "the target is live");
    go.send(()).unwrap();
    let hold = recv(&chans.hold, "the hold handler");
    recv(&marker, "the marker process");
    assert!(hold.complete(Ok(100)), "the target is live");
    let r = join_within(h, GUARD);
    assert!(matches!(r, Some(Ok(130))), "the process ended with {r:?}");
    let log = log.lock().unwrap().clone();
    assert_eq!(
        empty_restepped(&log),
        Vec::<usize>::new(),
        "steps re-run with no event (events per step: {log:?})"
    );
    assert_eq!(probe.overlaps(), 0);
}

// ---------------------------------------------------------------------------
// Yields are dispatched whatever the status says (except `Done`).
// ---------------------------------------------------------------------------

/// The status a matrix process writes next to its yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Idle,
    Continue,
    Yield,
    Done,
}

/// The argument of yield `tag` of matrix combination `combo`.
fn matrix_arg(combo: i64, tag: u64) -> i64 {
    combo * 100 + tag as i64
}

/// What a handler of [`matrix_scheduler`] completes `arg` with.
fn matrix_value(arg: i64) -> i64 {
    arg * 10 + 1
}

/// Two workers; `now` completes at once, `thread` on a helper thread. Both
/// record each call's argument in `calls`.
fn matrix_scheduler(calls: &Arc<Ledger<i64>>) -> Sched {
    let (tx, rx) = channel::<(i64, Completer<FnProc>)>();
    thread::spawn(move || {
        for (arg, done) in rx {
            let _ = done.complete(Ok(matrix_value(arg)));
        }
    });
    let tx = Mutex::new(tx);
    let now_calls = calls.clone();
    let thread_calls = calls.clone();
    Builder::new()
        .workers(2)
        .handler("now", move |c: Cmd, done: Completer<FnProc>| {
            now_calls.record(c.arg);
            let _ = done.complete(Ok(matrix_value(c.arg)));
        })
        .handler("thread", move |c: Cmd, done: Completer<FnProc>| {
            thread_calls.record(c.arg);
            tx.lock().unwrap().send((c.arg, done)).unwrap();
        })
        .build()
        .unwrap()
}

/// Step 0 writes `n` yields to `handler` with status `kind` (`Done(1000 +
/// combo)` for `Done`) and signals `started`. Later steps collect the
/// completions (each tag once, with the right value) and finish with their
/// sum once all are in — for `Idle` and `Yield` also only once a message
/// came (so that zero yields still wait).
fn matrix_process(
    probe: &Arc<Probe>,
    kind: Kind,
    n: u64,
    combo: i64,
    handler: &'static str,
    started: Sender<()>,
) -> FnProc {
    let mut first = true;
    let mut got = Vec::new();
    let mut sum = 0;
    let mut message = false;
    FnProc::new(probe, move |events, out, _| {
        if first {
            first = false;
            for tag in 0..n {
                out.push_yield(tag, cmd(handler, matrix_arg(combo, tag)));
            }
            out.set_status(match kind {
                Kind::Idle => Status::Idle,
                Kind::Continue => Status::Continue,
                Kind::Yield => Status::Yield,
                Kind::Done => Status::Done(1000 + combo),
            });
            let _ = started.send(());
            return Ok(());
        }
        if kind == Kind::Done {
            return Err(Error::failed("stepped after Done"));
        }
        for e in events {
            match e {
                Event::Completion { tag, result } => {
                    if tag >= n || got.contains(&tag) {
                        return Err(Error::failed(format!("unexpected completion {tag}")));
                    }
                    got.push(tag);
                    match result {
                        Ok(v) if v == matrix_value(matrix_arg(combo, tag)) => sum += v,
                        other => {
                            return Err(Error::failed(format!("completion {tag}: {other:?}")));
                        }
                    }
                }
                Event::Message { .. } => message = true,
                Event::Cancel => return Err(Error::Cancelled),
            }
        }
        let all = got.len() as u64 == n;
        out.set_status(match kind {
            Kind::Continue if all => Status::Done(sum),
            Kind::Continue => Status::Continue,
            _ if all && message => Status::Done(sum),
            Kind::Idle => Status::Idle,
            _ => Status::Yield,
        });
        Ok(())
    })
}

/// Runs `kind` × {0, 1, 2, 3 yields} × {completed at once, completed on
/// another thread} on one scheduler and asserts each combination: every
/// yield reaches its handler once and its completion arrives in a later
/// step (the process finishes with their sum) — or, for `Done`, no handler
/// is called, the process is not stepped again and its result is its own.
fn run_matrix(kind: Kind) {
    let calls = Ledger::new();
    let s = matrix_scheduler(&calls);
    let mut runs = Vec::new();
    for (m, handler) in ["now", "thread"].into_iter().enumerate() {
        for n in 0..=3u64 {
            let combo = (m as i64) * 4 + n as i64 + 1;
            let probe = Probe::new();
            let (started_tx, started) = channel();
            let p = matrix_process(&probe, kind, n, combo, handler, started_tx);
            let pid = pid(combo as u64);
            let h = s.submit(pid, p, "main", 0).unwrap();
            runs.push((handler, n, combo, pid, probe, started, h));
        }
    }
    let until = Instant::now() + GUARD;
    let left = || {
        until
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(500))
    };
    let mut failures = Vec::new();
    for (handler, n, combo, pid, probe, started, h) in runs {
        let label = format!("{kind:?} with {n} yield(s) to `{handler}`");
        if started.recv_timeout(left()).is_err() {
            failures.push(format!("{label}: never stepped"));
            continue;
        }
        // Wakes the `Idle` and `Yield` processes once their completions are in.
        let _ = s.send(pid, 0);
        let expected = if kind == Kind::Done {
            1000 + combo
        } else {
            (0..n).map(|t| matrix_value(matrix_arg(combo, t))).sum()
        };
        let handler_calls: Vec<usize> =
            (0..n).map(|t| calls.count(&matrix_arg(combo, t))).collect();
        match join_within(h, left()) {
            None => failures.push(format!(
                "{label}: never completed (handler calls per yield: {handler_calls:?})"
            )),
            Some(Ok(v)) if v == expected => {}
            Some(other) => {
                failures.push(format!("{label}: ended with {other:?}, not Ok({expected})"))
            }
        }
        let want = usize::from(kind != Kind::Done);
        let handler_calls: Vec<usize> =
            (0..n).map(|t| calls.count(&matrix_arg(combo, t))).collect();
        if handler_calls.iter().any(|c| *c != want) {
            failures.push(format!(
                "{label}: handler calls per yield {handler_calls:?}, expected {want} each"
            ));
        }
        if kind == Kind::Done && probe.steps() != 1 {
            failures.push(format!("{label}: stepped {} times", probe.steps()));
        }
        if probe.overlaps() != 0 {
            failures.push(format!("{label}: overlapping steps"));
        }
    }
    assert!(
        failures.is_empty(),
        "yields written with Status::{kind:?}:\n  {}",
        failures.join("\n  ")
    );
}

/// `Idle` + yields: the yields are dispatched and the process waits for
/// their completions (and messages); zero yields just waits for a message.
#[test]
fn idle_with_yields_dispatches_them() {
    run_matrix(Kind::Idle);
}

/// `Continue` + yields: the yields are dispatched, the process is stepped
/// again at once, and the completions arrive as events of later steps.
#[test]
fn continue_with_yields_dispatches_them() {
    run_matrix(Kind::Continue);
}

/// `Yield` + yields (the ordinary case, and `Yield` with none, which waits
/// for a message): every yield is dispatched once.
#[test]
fn yield_with_yields_dispatches_them() {
    run_matrix(Kind::Yield);
}

/// `Done` + yields: the yields are not dispatched (no handler is called),
/// the process is not stepped again and completes with its own result.
#[test]
fn done_with_yields_does_not_dispatch_them() {
    run_matrix(Kind::Done);
}

// ---------------------------------------------------------------------------
// A step that sets no status fails its process instead of spinning.
// ---------------------------------------------------------------------------

/// A first step that sets no status ends its process with an error (not a
/// cancel or terminate), and is not stepped again.
#[test]
fn a_first_step_without_status_fails_the_process() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let mut calls = 0;
    let p = FnProc::new(&probe, move |_, out, _| {
        calls += 1;
        if calls > 1 {
            // Only reached if the forgotten status was taken for Continue.
            out.set_status(Status::Done(-1));
        }
        Ok(())
    });
    let h = s.submit(pid(1), p, "main", 0).unwrap();
    let r = join_within(h, GUARD);
    assert!(
        matches!(&r, Some(Err(e)) if !e.is_stopped()),
        "a step that set no status must end its process with an error; got {r:?} after {} step(s)",
        probe.steps()
    );
    assert_eq!(probe.steps(), 1, "the step ran more than once");
    assert_eq!(probe.closes(), 1);
}

/// The same for a later step: the process waits (`Idle`), a message wakes
/// it, that step sets no status — the process fails, after two steps.
#[test]
fn a_later_step_without_status_fails_the_process() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let (started_tx, started) = channel();
    let mut calls = 0;
    let p = FnProc::new(&probe, move |_, out, _| {
        calls += 1;
        match calls {
            1 => {
                out.set_status(Status::Idle);
                let _ = started_tx.send(());
            }
            2 => {}
            _ => out.set_status(Status::Done(-1)),
        }
        Ok(())
    });
    let h = s.submit(pid(1), p, "main", 0).unwrap();
    recv(&started, "the first step");
    s.send(pid(1), 1).unwrap();
    let r = join_within(h, GUARD);
    assert!(
        matches!(&r, Some(Err(e)) if !e.is_stopped()),
        "a step that set no status must end its process with an error; got {r:?} after {} step(s)",
        probe.steps()
    );
    assert_eq!(probe.steps(), 2, "the status-less step ran more than once");
    assert_eq!(probe.closes(), 1);
}

// ---------------------------------------------------------------------------
// Terminate cancels the process's CancelToken at once.
// ---------------------------------------------------------------------------

/// A running step that polls its `CancelToken` learns it was terminated:
/// the token reads cancelled as soon as `terminate` returns `Ok`.
#[test]
fn terminate_cancels_the_token_of_a_running_step() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let (token_tx, token_rx) = channel();
    let abort = Arc::new(AtomicBool::new(false));
    let saw_cancel = Arc::new(AtomicBool::new(false));
    let (abort2, saw2) = (abort.clone(), saw_cancel.clone());
    let p = FnProc::new(&probe, move |_, out, ctx| {
        let token = ctx.cancel_token().clone();
        token_tx.send(token.clone()).unwrap();
        // Spins on the token; `abort` and the guard only end a failing test.
        let until = Instant::now() + GUARD;
        while !token.is_cancelled() && !abort2.load(Ordering::SeqCst) && Instant::now() < until {
            thread::yield_now();
        }
        saw2.store(token.is_cancelled(), Ordering::SeqCst);
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(pid(1), p, "main", 0).unwrap();
    let token = recv(&token_rx, "the step");
    assert!(!token.is_cancelled());
    assert_eq!(s.terminate(pid(1)), Ok(()));
    let cancelled = token.is_cancelled();
    abort.store(true, Ordering::SeqCst);
    let r = join_within(h, GUARD);
    assert!(
        cancelled,
        "terminate returned Ok but the running process's CancelToken is not cancelled"
    );
    assert!(
        saw_cancel.load(Ordering::SeqCst),
        "the step never saw its token cancelled"
    );
    assert!(matches!(r, Some(Err(Error::Terminated))), "got {r:?}");
}

/// The token of an `Idle` process (the one its `init` got) reads cancelled
/// right after `terminate` returns `Ok`.
#[test]
fn terminate_cancels_the_token_of_an_idle_process() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let (token_tx, token_rx) = channel();
    let p = FnProc::new(&probe, move |_, out, ctx| {
        let _ = token_tx.send(ctx.cancel_token().clone());
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(pid(1), p, "main", 0).unwrap();
    let token = recv(&token_rx, "the step");
    flush_worker(&s, 2);
    assert!(!token.is_cancelled());
    assert_eq!(s.terminate(pid(1)), Ok(()));
    assert!(
        token.is_cancelled(),
        "terminate returned Ok but the idle process's CancelToken is not cancelled"
    );
    let r = join_within(h, GUARD);
    assert!(matches!(r, Some(Err(Error::Terminated))), "got {r:?}");
}

// ---------------------------------------------------------------------------
// After terminate returns Ok, no step begins and no yield is dispatched.
// ---------------------------------------------------------------------------

/// What the processes and handlers of the terminate tests record.
#[derive(Default)]
struct AfterTerminate {
    /// Set once a `terminate` of the process returned `Ok`.
    ok: AtomicBool,
    /// Steps that began after that.
    steps: AtomicUsize,
    /// Handler calls for the process after that.
    yields: AtomicUsize,
    /// What the in-scheduler `terminate` returned.
    result: Mutex<Option<Result<(), TerminateError>>>,
}

impl AfterTerminate {
    fn note_terminate(&self, r: Result<(), TerminateError>) {
        if r.is_ok() {
            self.ok.store(true, Ordering::SeqCst);
        }
        *self.result.lock().unwrap() = Some(r);
    }

    fn note_step(&self) {
        if self.ok.load(Ordering::SeqCst) {
            self.steps.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn note_yield(&self) {
        if self.ok.load(Ordering::SeqCst) {
            self.yields.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn assert_nothing_after(&self) {
        assert_eq!(
            *self.result.lock().unwrap(),
            Some(Ok(())),
            "the terminate under test did not return Ok"
        );
        assert_eq!(
            self.steps.load(Ordering::SeqCst),
            0,
            "a step began after terminate returned Ok"
        );
        assert_eq!(
            self.yields.load(Ordering::SeqCst),
            0,
            "a yield reached its handler after terminate returned Ok"
        );
    }
}

/// A step running when `terminate` returns `Ok` finishes, but its yields are
/// not dispatched (and the process is not stepped again).
#[test]
fn yields_of_a_step_running_at_terminate_are_not_dispatched() {
    let rec = Arc::new(AfterTerminate::default());
    let rec_h = rec.clone();
    let s = Builder::new()
        .workers(1)
        .handler("record", move |_: Cmd, done: Completer<FnProc>| {
            rec_h.note_yield();
            let _ = done.complete(Ok(1));
        })
        .build()
        .unwrap();
    let probe = Probe::new();
    let (entered_tx, entered) = channel();
    let (go_tx, go) = channel::<()>();
    let rec_p = rec.clone();
    let p = FnProc::new(&probe, move |_, out, _| {
        rec_p.note_step();
        let _ = entered_tx.send(());
        let _ = go.recv_timeout(GUARD);
        out.push_yield(1, cmd("record", 0));
        out.set_status(Status::Yield);
        Ok(())
    });
    let h = s.submit(pid(1), p, "main", 0).unwrap();
    recv(&entered, "the step");
    rec.note_terminate(s.terminate(pid(1)));
    go_tx.send(()).unwrap();
    let r = join_within(h, GUARD);
    assert!(matches!(r, Some(Err(Error::Terminated))), "got {r:?}");
    rec.assert_nothing_after();
    assert_eq!(probe.closes(), 1);
}

/// A handler that terminates its own process (then completes at once, which
/// would drive the inline re-step loop): once `terminate` returned `Ok`, the
/// rest of that dispatch reaches no handler and no step begins.
#[test]
fn terminate_from_a_handler_stops_the_dispatch_and_the_inline_restep() {
    let rec = Arc::new(AfterTerminate::default());
    let handle: Arc<OnceLock<Handle<FnProc>>> = Arc::new(OnceLock::new());
    let (rec_k, rec_r, handle_k) = (rec.clone(), rec.clone(), handle.clone());
    let s = Builder::new()
        .workers(1)
        .handler("kill", move |c: Cmd, done: Completer<FnProc>| {
            let target = pid(c.arg as u64);
            rec_k.note_terminate(handle_k.get().unwrap().terminate(target));
            let _ = done.complete(Ok(0));
        })
        .handler("record", move |_: Cmd, done: Completer<FnProc>| {
            rec_r.note_yield();
            let _ = done.complete(Ok(1));
        })
        .build()
        .unwrap();
    handle.set(s.handle()).unwrap();
    let probe = Probe::new();
    let rec_p = rec.clone();
    let mut first = true;
    let p = FnProc::new(&probe, move |_, out, _| {
        rec_p.note_step();
        if first {
            first = false;
            out.push_yield(1, cmd("kill", 1));
            out.push_yield(2, cmd("record", 0));
        } else {
            out.push_yield(3, cmd("record", 0));
        }
        out.set_status(Status::Yield);
        Ok(())
    });
    let h = s.submit(pid(1), p, "main", 0).unwrap();
    let r = join_within(h, GUARD);
    assert!(matches!(r, Some(Err(Error::Terminated))), "got {r:?}");
    rec.assert_nothing_after();
    assert_eq!(probe.counts().steps, 1);
    assert_eq!(probe.closes(), 1);
}

/// A deterministic hook into the worker between its checks and the call to
/// `step`: the scheduler opens a `step` trace span there. A global tracing
/// subscriber calls the hook registered for the span's `pid` field.
mod step_span {
    use std::sync::{Arc, Mutex, Once};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::subscriber::Interest;
    use tracing::{Event, Metadata, Subscriber};

    type Hook = Arc<dyn Fn() + Send + Sync>;

    static HOOKS: Mutex<Vec<(String, Hook)>> = Mutex::new(Vec::new());

    struct StepSpans;

    fn is_step(m: &Metadata<'_>) -> bool {
        m.is_span() && m.name() == "step"
    }

    struct PidField(Option<String>);

    impl Visit for PidField {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "pid" {
                self.0 = Some(format!("{value:?}"));
            }
        }
    }

    impl Subscriber for StepSpans {
        fn register_callsite(&self, m: &'static Metadata<'static>) -> Interest {
            if is_step(m) {
                Interest::always()
            } else {
                Interest::never()
            }
        }

        fn enabled(&self, m: &Metadata<'_>) -> bool {
            is_step(m)
        }

        fn new_span(&self, attrs: &Attributes<'_>) -> Id {
            let mut pid = PidField(None);
            attrs.record(&mut pid);
            if let Some(pid) = pid.0 {
                let hook = HOOKS
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(p, _)| *p == pid)
                    .map(|(_, h)| h.clone());
                if let Some(hook) = hook {
                    hook();
                }
            }
            Id::from_u64(1)
        }

        fn record(&self, _: &Id, _: &Record<'_>) {}

        fn record_follows_from(&self, _: &Id, _: &Id) {}

        fn event(&self, _: &Event<'_>) {}

        fn enter(&self, _: &Id) {}

        fn exit(&self, _: &Id) {}
    }

    /// Calls `hook` on the worker each time a `step` span opens for `pid`,
    /// until [`clear`].
    pub(super) fn set(pid: stepsched::Pid, hook: impl Fn() + Send + Sync + 'static) {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            tracing::subscriber::set_global_default(StepSpans)
                .expect("no other global subscriber in this test binary");
        });
        HOOKS
            .lock()
            .unwrap()
            .push((pid.to_string(), Arc::new(hook)));
    }

    pub(super) fn clear(pid: stepsched::Pid) {
        let pid = pid.to_string();
        HOOKS.lock().unwrap().retain(|(p, _)| *p != pid);
    }
}

/// Terminates the process from inside its `nth` step span (on the worker,
/// after the worker's checks, before `step` is called), and asserts that no
/// step began and no yield was dispatched after `terminate` returned `Ok`.
/// Its first step yields `now`, which completes at once and so drives the
/// inline re-step loop; every step yields `record`.
fn terminate_in_step_window(node: u32, nth: usize) {
    let target = Pid::new(node, 1);
    let rec = Arc::new(AfterTerminate::default());
    let rec_r = rec.clone();
    let s = Builder::new()
        .workers(1)
        .handler("now", |c: Cmd, done: Completer<FnProc>| {
            let _ = done.complete(Ok(c.arg));
        })
        .handler("record", move |_: Cmd, done: Completer<FnProc>| {
            rec_r.note_yield();
            let _ = done.complete(Ok(1));
        })
        .build()
        .unwrap();
    let spans = AtomicUsize::new(0);
    let handle = s.handle();
    let rec_s = rec.clone();
    step_span::set(target, move || {
        if spans.fetch_add(1, Ordering::SeqCst) + 1 == nth {
            rec_s.note_terminate(handle.terminate(target));
        }
    });
    let probe = Probe::new();
    let rec_p = rec.clone();
    let mut first = true;
    let p = FnProc::new(&probe, move |_, out, _| {
        rec_p.note_step();
        if first {
            first = false;
            out.push_yield(1, cmd("now", 0));
        } else {
            out.push_yield(2, cmd("record", 0));
        }
        out.set_status(Status::Yield);
        Ok(())
    });
    let h = s.submit(target, p, "main", 0).unwrap();
    let r = join_within(h, GUARD);
    step_span::clear(target);
    assert!(
        rec.result.lock().unwrap().is_some(),
        "the `step` span hook never fired (step {nth} of {target} was never reached)"
    );
    assert!(matches!(r, Some(Err(Error::Terminated))), "got {r:?}");
    rec.assert_nothing_after();
    assert_eq!(probe.closes(), 1);
}

/// The inline re-step loop: a terminate landing after the loop's Complete
/// check and before the next `step` call gets no step and no dispatch.
///
/// Uses the worker's `step` trace span as the hook into that window: a fix
/// must refuse the step after the span is opened (or open it earlier).
#[test]
fn no_step_after_terminate_in_the_inline_restep_window() {
    terminate_in_step_window(4201, 2);
}

/// The same window on a run from the queue (after `try_start`, before the
/// first `step` call).
#[test]
fn no_step_after_terminate_in_the_first_step_window() {
    terminate_in_step_window(4202, 1);
}

// ---------------------------------------------------------------------------
// Panics in close, in Drop of the process and of event payloads.
// ---------------------------------------------------------------------------

/// A payload whose `Drop` panics when armed (never during an unwind, which
/// would abort the test binary).
#[derive(Debug)]
struct Boom {
    armed: bool,
}

impl Boom {
    fn inert() -> Self {
        Boom { armed: false }
    }

    fn armed() -> Self {
        Boom { armed: true }
    }
}

impl Drop for Boom {
    fn drop(&mut self) {
        if self.armed && !thread::panicking() {
            panic!("an event payload's Drop panicked");
        }
    }
}

type CustomStep =
    Box<dyn FnMut(Vec<Event<Boom>>, &mut StepOutput<Cmd, i64>) -> Result<(), Error> + Send>;

/// A process whose `init`, `step` and `close` are closures, whose payload is
/// [`Boom`], and whose `Drop` may panic.
struct Custom {
    init: Option<Box<dyn FnOnce() + Send>>,
    step: CustomStep,
    close: Option<Box<dyn FnOnce() + Send>>,
    drop_panics: bool,
}

impl Custom {
    fn new(
        step: impl FnMut(Vec<Event<Boom>>, &mut StepOutput<Cmd, i64>) -> Result<(), Error>
        + Send
        + 'static,
    ) -> Self {
        Custom {
            init: None,
            step: Box::new(step),
            close: None,
            drop_panics: false,
        }
    }

    fn done(value: i64) -> Self {
        Custom::new(move |_, out| {
            out.set_status(Status::Done(value));
            Ok(())
        })
    }

    fn on_init(mut self, f: impl FnOnce() + Send + 'static) -> Self {
        self.init = Some(Box::new(f));
        self
    }

    fn on_close(mut self, f: impl FnOnce() + Send + 'static) -> Self {
        self.close = Some(Box::new(f));
        self
    }

    fn panicking_drop(mut self) -> Self {
        self.drop_panics = true;
        self
    }
}

impl Process for Custom {
    type Input = ();
    type Message = Boom;
    type Response = Boom;
    type Command = Cmd;
    type Output = i64;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        if let Some(f) = self.init.take() {
            f();
        }
        Ok(())
    }

    fn step(
        &mut self,
        _cx: &mut Context<'_, Self>,
        events: stepsched::Events<'_, Boom>,
        out: &mut StepOutput<Cmd, i64>,
    ) -> Result<(), Error> {
        (self.step)(events.collect(), out)
    }

    fn close(&mut self) {
        if let Some(f) = self.close.take() {
            f();
        }
    }
}

impl Drop for Custom {
    fn drop(&mut self) {
        if self.drop_panics && !thread::panicking() {
            panic!("the process's Drop panicked");
        }
    }
}

type CustomSched = Scheduler<Custom>;

/// A scheduler of [`Custom`] processes with a process limit.
fn custom_scheduler(workers: usize, max: usize) -> CustomSched {
    CustomSched::builder()
        .workers(workers)
        .max_processes(max)
        .build()
        .unwrap()
}

/// Asserts that the ended process `pid` left nothing behind: its route is
/// removed, its place under the limit released (no process is live, and a
/// new one is accepted and run), and shutdown finds nothing to force.
fn assert_fully_ended(s: &CustomSched, pid: Pid) {
    assert!(
        !s.contains(pid),
        "the PID of the ended process still routes"
    );
    match s.send(pid, Boom::inert()) {
        Err(_) => {}
        Ok(()) => panic!("a message to the ended process was accepted"),
    }
    assert_eq!(s.stats().live, 0, "the ended process still holds its place");
    let next = s
        .submit(s.allocate_pid(), Custom::done(1), "main", ())
        .expect("the place of the ended process was not released");
    let r = join_within(next, GUARD);
    assert!(
        matches!(r, Some(Ok(1))),
        "the next process did not run: {r:?}"
    );
    let report = s.shutdown(GUARD).unwrap();
    assert_eq!(
        (report.cancelled, report.forced),
        (0, 0),
        "shutdown found a live process"
    );
}

/// A process whose `Drop` panics after its step returned `Done(7)`: its
/// result `Ok(7)` is published, its route removed, its place released.
#[test]
fn process_drop_panic_after_done_still_publishes() {
    let s = custom_scheduler(1, 1);
    let target = pid(1);
    let h = s
        .submit(target, Custom::done(7).panicking_drop(), "main", ())
        .unwrap();
    let r = join_within(h, GUARD);
    assert!(
        matches!(r, Some(Ok(7))),
        "a process whose Drop panicked after Done(7) ended with {r:?} (None: never published)"
    );
    assert_fully_ended(&s, target);
}

/// A process whose `Drop` panics, terminated while `Idle` (closed by the
/// terminating thread): `terminate` returns `Ok` without panicking, and the
/// result `Terminated` is published with the route and the place freed.
#[test]
fn process_drop_panic_on_terminate_still_publishes() {
    let s = custom_scheduler(1, 2);
    let target = pid(1);
    let (started_tx, started) = channel();
    let p = Custom::new(move |_, out| {
        let _ = started_tx.send(());
        out.set_status(Status::Idle);
        Ok(())
    })
    .panicking_drop();
    let h = s.submit(target, p, "main", ()).unwrap();
    recv(&started, "the first step");
    // Let the worker park it: a second process runs after it.
    let marker = s.submit(pid(2), Custom::done(0), "main", ()).unwrap();
    assert!(matches!(join_within(marker, GUARD), Some(Ok(0))));
    let t = catch_unwind(AssertUnwindSafe(|| s.terminate(target)));
    match t {
        Err(_) => panic!("terminate let the process's Drop panic escape to its caller"),
        Ok(r) => assert_eq!(r, Ok(())),
    }
    let r = join_within(h, GUARD);
    assert!(matches!(r, Some(Err(Error::Terminated))), "got {r:?}");
    assert_fully_ended(&s, target);
}

/// A process whose `close` panics after its step returned `Done(7)`: the
/// panic does not change the result (`Ok(7)`), and the process is fully
/// ended.
#[test]
fn close_panic_after_done_keeps_the_result() {
    let s = custom_scheduler(1, 1);
    let target = pid(1);
    let p = Custom::done(7).on_close(|| panic!("close panicked"));
    let h = s.submit(target, p, "main", ()).unwrap();
    let r = join_within(h, GUARD);
    assert!(matches!(r, Some(Ok(7))), "got {r:?}");
    assert_fully_ended(&s, target);
}

/// A message whose payload's `Drop` panics is still queued when the process
/// finishes with `Done(7)` (it arrived during the last step): the queued
/// events are dropped, and the result `Ok(7)` is still published with the
/// route and the place freed.
#[test]
fn payload_drop_panic_at_done_still_publishes() {
    let s = custom_scheduler(1, 1);
    let target = pid(1);
    let (entered_tx, entered) = channel();
    let (go_tx, go) = channel::<()>();
    let p = Custom::new(move |_, out| {
        let _ = entered_tx.send(());
        let _ = go.recv_timeout(GUARD);
        out.set_status(Status::Done(7));
        Ok(())
    });
    let h = s.submit(target, p, "main", ()).unwrap();
    recv(&entered, "the step");
    s.send(target, Boom::armed()).unwrap();
    go_tx.send(()).unwrap();
    let r = join_within(h, GUARD);
    assert!(
        matches!(r, Some(Ok(7))),
        "a process with a panicking payload queued at Done(7) ended with {r:?} (None: never published)"
    );
    assert_fully_ended(&s, target);
}

/// A queued (not yet started) process holding a message whose payload's
/// `Drop` panics is terminated, so the terminating thread closes it:
/// `terminate` returns `Ok` without panicking and the process is fully
/// ended with `Terminated`.
#[test]
fn payload_drop_panic_on_terminate_still_publishes() {
    let s = custom_scheduler(1, 2);
    let target = pid(1);
    let (started_tx, started) = channel();
    let p = Custom::new(move |_, out| {
        let _ = started_tx.send(());
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(target, p, "main", ()).unwrap();
    recv(&started, "the target's first step");
    // Occupy the one worker, so the target stays queued once woken.
    let (busy_tx, busy) = channel();
    let (free_tx, free) = channel::<()>();
    let blocker = Custom::new(move |_, out| {
        let _ = busy_tx.send(());
        let _ = free.recv_timeout(GUARD);
        out.set_status(Status::Done(0));
        Ok(())
    });
    let b = s.submit(pid(2), blocker, "main", ()).unwrap();
    recv(&busy, "the blocker's step");
    s.send(target, Boom::armed()).unwrap();
    let t = catch_unwind(AssertUnwindSafe(|| s.terminate(target)));
    free_tx.send(()).unwrap();
    match t {
        Err(_) => panic!("terminate let an event payload's Drop panic escape to its caller"),
        Ok(r) => assert_eq!(r, Ok(())),
    }
    assert!(matches!(join_within(b, GUARD), Some(Ok(0))));
    let r = join_within(h, GUARD);
    assert!(matches!(r, Some(Err(Error::Terminated))), "got {r:?}");
    assert_fully_ended(&s, target);
}

// ---------------------------------------------------------------------------
// A Done process still in close at shutdown keeps its own result.
// ---------------------------------------------------------------------------

/// A process whose step returned `Done(5)` is still inside a slow `close`
/// when shutdown (deadline zero) sweeps and returns: it is not counted as
/// forced, and once `close` returns its result is `Ok(5)`, not `Cancelled`.
#[test]
fn done_process_in_slow_close_keeps_its_result_at_shutdown() {
    let s = custom_scheduler(1, usize::MAX);
    let (in_close_tx, in_close) = channel();
    let (release_tx, release) = channel::<()>();
    let p = Custom::done(5).on_close(move || {
        let _ = in_close_tx.send(());
        let _ = release.recv_timeout(GUARD);
    });
    let h = s.submit(pid(1), p, "main", ()).unwrap();
    recv(&in_close, "close");
    let (report_tx, report_rx) = channel();
    let report = thread::scope(|scope| {
        let s = &s;
        scope.spawn(move || {
            let _ = report_tx.send(s.shutdown(Duration::ZERO).unwrap());
        });
        // Shutdown has swept and returned before close is released.
        let report = report_rx.recv_timeout(GUARD);
        let _ = release_tx.send(());
        report
    });
    let report = report.expect("shutdown hung while a process was in close");
    let r = join_within(h, GUARD);
    assert!(
        matches!(r, Some(Ok(5))),
        "a process whose step returned Done(5) ended with {r:?}"
    );
    assert_eq!(report.forced, 0, "a Done process was counted as forced");
}

// ---------------------------------------------------------------------------
// The submit-vs-shutdown handshake.
// ---------------------------------------------------------------------------

/// A submit made on a worker (from a handler) passes the `stopping` check,
/// then its `init` blocks until shutdown (deadline zero) has swept and
/// returned; it registers after every sweep. Promise: such a submit either
/// fails with `Stopping` or its process completes (here: `Cancelled`) and
/// leaves no route behind — it is never left queued on a stopping worker.
#[test]
fn submit_registering_after_the_shutdown_sweeps_still_completes() {
    let late = pid(2);
    let (in_init_tx, in_init) = channel();
    let (go_tx, go) = channel::<()>();
    // Ignores everything, cancel included: only a forcer ends it.
    let stubborn = Custom::new(|_, out| {
        out.set_status(Status::Idle);
        Ok(())
    })
    .on_init(move || {
        let _ = in_init_tx.send(());
        let _ = go.recv_timeout(GUARD);
    });
    let pending = Mutex::new(Some(stubborn));
    let handle: Arc<OnceLock<Handle<Custom>>> = Arc::new(OnceLock::new());
    let handle_h = handle.clone();
    let (result_tx, result) = channel();
    let result_tx = Mutex::new(result_tx);
    let s = CustomSched::builder()
        .workers(1)
        .handler("spawn", move |_: Cmd, done: Completer<Custom>| {
            if let Some(p) = pending.lock().unwrap().take() {
                let r = handle_h.get().unwrap().submit(late, p, "main", ());
                let _ = result_tx.lock().unwrap().send(r);
            }
            let _ = done.complete(Ok(Boom::inert()));
        })
        .build()
        .unwrap();
    handle.set(s.handle()).unwrap();
    let mut first = true;
    let spawner = Custom::new(move |events, out| {
        if first {
            first = false;
            out.push_yield(1, cmd("spawn", 0));
            out.set_status(Status::Yield);
        } else if events.iter().any(|e| e.is_cancel()) {
            return Err(Error::Cancelled);
        } else {
            out.set_status(Status::Idle);
        }
        Ok(())
    });
    let _spawner = s.submit(pid(1), spawner, "main", ()).unwrap();
    recv(&in_init, "the late process's init");
    // Returns although the worker is inside the late submit.
    let report = s.shutdown(Duration::ZERO).unwrap();
    go_tx.send(()).unwrap();
    match recv(&result, "the late submit") {
        Err(SubmitError::Stopping(_)) => {}
        Err(e) => panic!("the late submit failed with {e:?}"),
        Ok(h) => {
            let r = join_within(h, GUARD);
            assert!(
                matches!(r, Some(Err(Error::Cancelled))),
                "a process accepted by a submit racing shutdown ended with {r:?} \
                 (None: never completed); shutdown reported {report:?}"
            );
        }
    }
    assert!(!s.contains(late), "the late process still routes");
}

// ---------------------------------------------------------------------------
// The yields of a step that ends its process are dropped as it ends.
// ---------------------------------------------------------------------------

/// A command that holds a reference to a shared counter, and may panic when
/// dropped (never during an unwind).
struct Held {
    /// Held only for the reference count it keeps.
    _alive: Arc<()>,
    panics: bool,
}

impl stepsched::Command for Held {
    fn name(&self) -> &str {
        "never-dispatched"
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.panics && !thread::panicking() {
            panic!("a command's Drop panicked");
        }
    }
}

/// How a [`Leaver`]'s one step ends, after pushing its yields.
#[derive(Clone, Copy)]
enum LeaveBy {
    Done,
    Failing,
    Panicking,
}

/// A process whose one step pushes two yields and then ends the process,
/// so that neither is dispatched.
struct Leaver {
    alive: Arc<()>,
    by: LeaveBy,
    drop_panics: bool,
}

impl Process for Leaver {
    type Input = ();
    type Message = ();
    type Response = ();
    type Command = Held;
    type Output = i64;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _: &mut Context<'_, Self>,
        _: stepsched::Events<'_, ()>,
        out: &mut StepOutput<Held, i64>,
    ) -> Result<(), Error> {
        for tag in 0..2 {
            let held = Held {
                _alive: Arc::clone(&self.alive),
                panics: self.drop_panics,
            };
            out.push_yield(tag, held);
        }
        match self.by {
            LeaveBy::Done => {
                out.set_status(Status::Done(7));
                Ok(())
            }
            LeaveBy::Failing => Err(Error::Failed("the step failed".into())),
            LeaveBy::Panicking => panic!("the step panicked"),
        }
    }
}

/// A step that ends its process (`Done`, an error, a panic) leaves yields
/// that are never dispatched. They are dropped as the process ends, before
/// its result is published: not later, by whatever the worker does next (a
/// worker's steps share one output buffer).
#[test]
fn the_yields_of_a_step_that_ends_its_process_are_dropped_before_its_result() {
    let s = Scheduler::<Leaver>::builder().workers(1).build().unwrap();
    for by in [LeaveBy::Done, LeaveBy::Failing, LeaveBy::Panicking] {
        let alive = Arc::new(());
        let leaver = Leaver {
            alive: Arc::clone(&alive),
            by,
            drop_panics: false,
        };
        let h = s.submit(s.allocate_pid(), leaver, "main", ()).unwrap();
        let r = join_within(h, GUARD);
        assert!(r.is_some(), "the process never ended");
        assert_eq!(
            Arc::strong_count(&alive),
            1,
            "a command was still alive when the result was published"
        );
    }
    s.shutdown(GUARD).unwrap();
}

/// The yields left by a step that finished with `Done(7)` panic when
/// dropped: the result is still `Ok(7)`, and the worker goes on stepping
/// other processes.
#[test]
fn a_panicking_drop_of_an_undispatched_yield_keeps_the_result() {
    let s = Scheduler::<Leaver>::builder().workers(1).build().unwrap();
    let leaver = |drop_panics| Leaver {
        alive: Arc::new(()),
        by: LeaveBy::Done,
        drop_panics,
    };
    let h = s
        .submit(s.allocate_pid(), leaver(true), "main", ())
        .unwrap();
    let r = join_within(h, GUARD);
    assert!(matches!(r, Some(Ok(7))), "got {r:?}");
    let next = s
        .submit(s.allocate_pid(), leaver(false), "main", ())
        .unwrap();
    let r = join_within(next, GUARD);
    assert!(matches!(r, Some(Ok(7))), "the next process got {r:?}");
    s.shutdown(GUARD).unwrap();
}

// ---------------------------------------------------------------------------
// A command whose `name` or `Drop` panics during the dispatch.
// ---------------------------------------------------------------------------

/// A command that may panic in `name` or in `Drop` (never while unwinding).
struct Risky {
    name: &'static str,
    name_panics: bool,
    drop_panics: bool,
}

impl stepsched::Command for Risky {
    fn name(&self) -> &str {
        if self.name_panics {
            panic!("a command's name panicked");
        }
        self.name
    }
}

impl Drop for Risky {
    fn drop(&mut self) {
        if self.drop_panics && !thread::panicking() {
            panic!("a command's Drop panicked");
        }
    }
}

/// First step: yields its commands (tags 1, 2, …) and waits for their
/// completions; once it has them all, finishes with the number that were
/// errors.
struct Dispatcher {
    commands: Vec<Risky>,
    left: usize,
    errors: i64,
}

impl Dispatcher {
    fn new(commands: Vec<Risky>) -> Self {
        let left = commands.len();
        Dispatcher {
            commands,
            left,
            errors: 0,
        }
    }
}

impl Process for Dispatcher {
    type Input = ();
    type Message = ();
    type Response = ();
    type Command = Risky;
    type Output = i64;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _: &mut Context<'_, Self>,
        events: stepsched::Events<'_, ()>,
        out: &mut StepOutput<Risky, i64>,
    ) -> Result<(), Error> {
        for (tag, command) in self.commands.drain(..).enumerate() {
            out.push_yield(tag as u64 + 1, command);
        }
        for event in events {
            if let Event::Completion { result, .. } = event {
                self.left -= 1;
                self.errors += i64::from(result.is_err());
            }
        }
        out.set_status(if self.left == 0 {
            Status::Done(self.errors)
        } else {
            Status::Yield
        });
        Ok(())
    }
}

fn risky(name: &'static str, name_panics: bool, drop_panics: bool) -> Risky {
    Risky {
        name,
        name_panics,
        drop_panics,
    }
}

/// An unknown command whose `Drop` panics, and a command whose `name`
/// panics: each tag is completed with an error and the process goes on to
/// finish, where the panics used to unwind out of the worker's run and
/// leave the process Running for ever.
#[test]
fn a_command_panicking_in_name_or_drop_completes_its_tag_with_an_error() {
    let s = Scheduler::<Dispatcher>::builder()
        .workers(1)
        .handler("ok", |c: Risky, done: Completer<Dispatcher>| {
            drop(c);
            let _ = done.complete(Ok(()));
        })
        .build()
        .unwrap();
    let p = Dispatcher::new(vec![
        risky("unknown", false, true),
        risky("ok", true, false),
        risky("ok", false, false),
    ]);
    let h = s.submit(s.allocate_pid(), p, "main", ()).unwrap();
    let r = join_within(h, GUARD);
    assert!(
        matches!(r, Some(Ok(2))),
        "expected two error completions, got {r:?} (None: the process never finished)"
    );
    s.shutdown(GUARD).unwrap();
}

/// A handler terminates the process during its dispatch; the yields not
/// yet dispatched are dropped, and one's `Drop` panics: the process is
/// still closed and its result `Terminated` published.
#[test]
fn a_panicking_drop_of_a_yield_a_terminate_left_undispatched() {
    let handle: Arc<OnceLock<Handle<Dispatcher>>> = Arc::new(OnceLock::new());
    let handle_k = handle.clone();
    let s = Scheduler::<Dispatcher>::builder()
        .workers(1)
        .handler("kill", move |c: Risky, done: Completer<Dispatcher>| {
            drop(c);
            let me = done.pid();
            assert_eq!(handle_k.get().unwrap().terminate(me), Ok(()));
            let _ = done.complete(Ok(()));
        })
        .build()
        .unwrap();
    handle.set(s.handle()).unwrap();
    let p = Dispatcher::new(vec![
        risky("kill", false, false),
        risky("unknown", false, true),
        risky("unknown", false, false),
    ]);
    let h = s.submit(s.allocate_pid(), p, "main", ()).unwrap();
    let r = join_within(h, GUARD);
    assert!(
        matches!(r, Some(Err(Error::Terminated))),
        "got {r:?} (None: the process never finished)"
    );
    s.shutdown(GUARD).unwrap();
}
