//! Observability: the phase counts of `Handle::stats` at quiescent points,
//! its `Display`, and the tracing events a process's life produces, seen
//! through a capturing subscriber.
//!
//! Every test is deterministic: threads meet on channels, and a test waits
//! for a state the scheduler must reach (a process parked, a worker asleep)
//! by polling for it. The only time limit ([`GUARD`]) turns a hang into a
//! failure; a passing test never reaches it.
#![cfg(not(stepsched_loom))]

use std::fmt::Debug;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use stepsched::{
    Completer, Context, Error, Events, Handle, Pid, Process, Scheduler, Stats, Status, StepOutput,
};
use tracing::field::{Field, Visit};
use tracing::{Event as TraceEvent, Subscriber};
use tracing_subscriber::layer::{Context as LayerContext, Layer, SubscriberExt};

/// How long a test waits before it declares a hang (only bounds a failing
/// test).
const GUARD: Duration = Duration::from_secs(20);

/// Polls `f` until it returns `Some`; panics with `what` and the last
/// value seen after [`GUARD`].
fn wait_for<T: Debug>(what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let start = Instant::now();
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) if start.elapsed() > GUARD => panic!("never saw {what}; last: {last}"),
            Err(_) => thread::yield_now(),
        }
    }
}

/// Polls the stats until `check` accepts them (counters written by other
/// threads become visible eventually, not at once).
fn wait_stats<P: stepsched::SchedProcess>(
    handle: &Handle<P>,
    what: &str,
    check: impl Fn(&Stats) -> bool,
) -> Stats {
    wait_for(what, || {
        let s = handle.stats();
        if check(&s) {
            Ok(s)
        } else {
            Err(format!("{s}"))
        }
    })
}

/// Items run by all workers.
fn items_run(s: &Stats) -> u64 {
    s.workers.iter().map(|w| w.items_run).sum()
}

// ---------------------------------------------------------------------------
// A process that waits as it is told.

/// First step: yields `ask` with tag 7 if `ask`, else goes Idle. A
/// completion makes it Idle; a message finishes it with the message.
struct Waiter {
    ask: bool,
}

impl Process for Waiter {
    type Input = ();
    type Message = u64;
    type Response = u64;
    type Command = String;
    type Output = u64;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _cx: &mut Context<'_, Self>,
        events: Events<'_, u64>,
        out: &mut StepOutput<String, u64>,
    ) -> Result<(), Error> {
        let mut completed = false;
        for event in events {
            match event.tag() {
                Some(_) => completed = true,
                None => {
                    if let Some(v) = event.into_data() {
                        out.set_status(Status::Done(v));
                        return Ok(());
                    }
                }
            }
        }
        if self.ask && !completed {
            self.ask = false;
            out.push_yield(7, "ask".to_string());
            out.set_status(Status::Yield);
        } else {
            out.set_status(Status::Idle);
        }
        Ok(())
    }
}

/// A scheduler whose `ask` handler hands each completer to `completers`.
fn waiters(workers: usize, completers: Sender<Completer<Waiter>>) -> Scheduler<Waiter> {
    named_waiters(workers, completers).0
}

/// As [`waiters`], with the name prefix of its worker threads (worker `i`
/// is `{prefix}-{i}`), distinct per scheduler.
fn named_waiters(
    workers: usize,
    completers: Sender<Completer<Waiter>>,
) -> (Scheduler<Waiter>, String) {
    let completers = Mutex::new(completers);
    let node = unique();
    let prefix = format!("obs-{node}");
    let s = Scheduler::<Waiter>::builder()
        .workers(workers)
        .node(node)
        .thread_name(prefix.clone())
        .handler("ask", move |_: String, done: Completer<Waiter>| {
            completers.lock().unwrap().send(done).unwrap();
        })
        .build()
        .unwrap();
    (s, prefix)
}

/// A number no other scheduler of this binary has: its node (so PIDs, and
/// the events that name them, differ between tests) and its thread names.
fn unique() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

// ---------------------------------------------------------------------------
// Stats

#[test]
fn idle_processes_are_counted_idle_until_they_finish() {
    const N: usize = 50;
    let (tx, _rx) = channel();
    let s = waiters(2, tx);
    let pids: Vec<Pid> = (0..N).map(|_| s.allocate_pid()).collect();
    let joins: Vec<_> = pids
        .iter()
        .map(|&pid| s.submit(pid, Waiter { ask: false }, "run", ()).unwrap())
        .collect();
    // Each process runs once (one pool item each), then waits: once every
    // run has returned, all of them are Idle.
    wait_stats(&s, "every first run returned", |st| {
        items_run(st) == N as u64
    });
    let st = wait_stats(&s, "N idle", |st| st.idle == N);
    assert_eq!(
        (st.ready, st.running, st.blocked, st.live),
        (0, 0, 0, N),
        "{st}"
    );
    assert_eq!(st.submitted, N as u64);

    // A terminate from this thread counts on this thread's line: seen at once.
    s.terminate(pids[0]).unwrap();
    let st = s.stats();
    assert_eq!(st.idle, N - 1, "{st}");

    for &pid in &pids[1..] {
        s.send(pid, 1).unwrap();
    }
    let mut joins = joins.into_iter();
    assert!(matches!(
        joins.next().unwrap().join(),
        Err(Error::Terminated)
    ));
    for join in joins {
        assert_eq!(join.join().unwrap(), 1);
    }
    // Every count was bumped before the result `join` returned was stored.
    let st = s.stats();
    assert_eq!(
        (st.ready, st.running, st.blocked, st.idle, st.live),
        (0, 0, 0, 0, 0),
        "{st}"
    );
    assert_eq!((st.completed, st.failed), (N as u64 - 1, 1), "{st}");
}

#[test]
fn processes_waiting_for_completions_are_counted_blocked() {
    const N: usize = 20;
    let (tx, rx) = channel();
    let s = waiters(2, tx);
    let joins: Vec<_> = (0..N)
        .map(|_| {
            s.submit(s.allocate_pid(), Waiter { ask: true }, "run", ())
                .unwrap()
        })
        .collect();
    let completers: Vec<_> = (0..N).map(|_| rx.recv().unwrap()).collect();
    wait_stats(&s, "every first run returned", |st| {
        items_run(st) == N as u64
    });
    let st = wait_stats(&s, "N blocked", |st| st.blocked == N);
    assert_eq!((st.ready, st.running, st.idle), (0, 0, 0), "{st}");

    // Completed from this thread: each wakes Blocked → Ready, steps, and
    // goes Idle.
    for done in completers {
        assert!(done.complete(Ok(0)));
    }
    wait_stats(&s, "every second run returned", |st| {
        items_run(st) == 2 * N as u64
    });
    let st = wait_stats(&s, "N idle", |st| st.idle == N);
    assert_eq!((st.ready, st.running, st.blocked), (0, 0, 0), "{st}");

    for join in &joins {
        s.send(join.pid(), 3).unwrap();
    }
    for join in joins {
        assert_eq!(join.join().unwrap(), 3);
    }
    let st = s.stats();
    assert_eq!(
        (st.ready, st.running, st.blocked, st.idle),
        (0, 0, 0, 0),
        "{st}"
    );
    assert_eq!(st.completed, N as u64);
}

/// Signals on its first step, then holds its worker until released.
struct Holder {
    entered: Sender<()>,
    release: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
}

impl Process for Holder {
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
        _: Events<'_, ()>,
        out: &mut StepOutput<String, ()>,
    ) -> Result<(), Error> {
        let _ = self.entered.send(());
        let _ = self.release.lock().unwrap().recv();
        out.set_status(Status::Done(()));
        Ok(())
    }
}

#[test]
fn queued_processes_are_ready_and_the_stepped_one_running() {
    const K: usize = 10;
    let s = Scheduler::<Holder>::builder()
        .workers(1)
        .node(unique())
        .build()
        .unwrap();
    let (entered, on_entered) = channel();
    let (release, released) = channel();
    let released = Arc::new(Mutex::new(released));
    let holder = |entered: &Sender<()>| Holder {
        entered: entered.clone(),
        release: released.clone(),
    };
    let first = s
        .submit(s.allocate_pid(), holder(&entered), "run", ())
        .unwrap();
    on_entered.recv().unwrap();
    // The only worker is inside the first step: the others stay queued.
    let rest: Vec<_> = (0..K)
        .map(|_| {
            s.submit(s.allocate_pid(), holder(&entered), "run", ())
                .unwrap()
        })
        .collect();
    let st = s.stats();
    assert_eq!(
        (st.ready, st.running, st.blocked, st.idle),
        (K, 1, 0, 0),
        "{st}"
    );
    assert_eq!(st.live, K + 1);
    for _ in 0..=K {
        release.send(()).unwrap();
    }
    first.join().unwrap();
    for join in rest {
        join.join().unwrap();
    }
    let st = s.stats();
    assert_eq!((st.ready, st.running, st.live), (0, 0, 0), "{st}");
    assert_eq!(st.completed, K as u64 + 1);
}

/// `messages` counts messages, not events: a completion queued from
/// another thread, drained alone, is not one, and a message is.
#[test]
fn a_completion_drained_alone_is_not_counted_as_a_message() {
    let (tx, rx) = channel();
    let s = waiters(1, tx);
    let join = s
        .submit(s.allocate_pid(), Waiter { ask: true }, "run", ())
        .unwrap();
    let done = rx.recv().unwrap();
    // From this thread, not the dispatching one: the completion goes
    // through the process's queue, and its step takes it alone.
    assert!(done.complete(Ok(5)));
    let st = wait_stats(&s, "the process idle after its completion", |st| {
        st.idle == 1
    });
    assert_eq!(
        st.messages, 0,
        "a completion was counted as a message: {st}"
    );
    s.send(join.pid(), 9).unwrap();
    assert_eq!(join.join().unwrap(), 9);
    assert_eq!(s.stats().messages, 1);
}

#[test]
fn display_is_one_line_and_alternate_adds_a_line_per_worker() {
    let (tx, _rx) = channel();
    let s = waiters(2, tx);
    let join = s
        .submit(s.allocate_pid(), Waiter { ask: false }, "run", ())
        .unwrap();
    s.send(join.pid(), 9).unwrap();
    assert_eq!(join.join().unwrap(), 9);
    let st = s.stats();
    let line = st.to_string();
    assert!(!line.contains('\n'), "{line}");
    assert!(
        line.starts_with("live 0 (ready 0, running 0, blocked 0, idle 0); submitted 1, completed 1, failed 0, steps "),
        "{line}"
    );
    // The one message the process received, counted when its step got it.
    assert_eq!(st.messages, 1, "{line}");
    assert!(line.contains(", messages 1; 2 workers: run "), "{line}");
    let long = format!("{st:#}");
    assert_eq!(long.lines().count(), 3, "{long}");
    assert!(
        long.lines().nth(2).unwrap().starts_with("  worker 1: run "),
        "{long}"
    );
}

// ---------------------------------------------------------------------------
// Tracing

/// One captured event: its target, level, thread name and fields (the
/// message under `message`), in the order the subscriber saw them.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
struct Captured {
    target: String,
    level: tracing::Level,
    thread: String,
    fields: Vec<(String, String)>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn message(&self) -> &str {
        self.field("message").unwrap_or("")
    }
}

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0
            .push((field.name().to_string(), format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_string(), value.to_string()));
    }
}

/// Records every event into [`captured`].
struct Capture;

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &TraceEvent<'_>, _: LayerContext<'_, S>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        let meta = event.metadata();
        captured().lock().unwrap().push(Captured {
            target: meta.target().to_string(),
            level: *meta.level(),
            thread: thread::current().name().unwrap_or("").to_string(),
            fields,
        });
    }
}

fn captured() -> &'static Mutex<Vec<Captured>> {
    static CAPTURED: OnceLock<Mutex<Vec<Captured>>> = OnceLock::new();
    CAPTURED.get_or_init(|| Mutex::new(Vec::new()))
}

/// Installs the capturing subscriber for the whole test binary (the
/// workers' events are only seen by a global one), at trace level.
fn capture() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let subscriber = tracing_subscriber::registry()
            .with(Capture)
            .with(tracing_subscriber::filter::LevelFilter::TRACE);
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
}

/// The captured events about `pid`, in order.
fn events_of(pid: Pid) -> Vec<Captured> {
    let pid = pid.to_string();
    captured()
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.field("pid") == Some(pid.as_str()))
        .cloned()
        .collect()
}

/// Waits until an event about `pid` with `message` and the field `key =
/// value` has been captured `times` times.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
fn wait_event(pid: Pid, message: &str, key: &str, value: &str, times: usize) {
    wait_for(&format!("{message} {key}={value} of {pid}"), || {
        let n = events_of(pid)
            .iter()
            .filter(|e| e.message() == message && e.field(key) == Some(value))
            .count();
        if n >= times {
            Ok(())
        } else {
            Err(format!("{n} so far"))
        }
    });
}

#[cfg(feature = "tracing")]
#[test]
fn a_process_life_is_traced_with_pid_tag_and_command() {
    capture();
    let (tx, rx) = channel();
    let s = waiters(2, tx);
    let pid = s.allocate_pid();
    let join = s.submit(pid, Waiter { ask: true }, "run", ()).unwrap();
    // The handler got the yield; wait until the process has parked Blocked,
    // so that the completion below wakes it (rather than finding it running).
    let done = rx.recv().unwrap();
    wait_event(pid, "process parked", "phase", "blocked", 1);
    assert!(done.complete(Ok(5)));
    wait_event(pid, "process parked", "phase", "idle", 1);
    s.send(pid, 11).unwrap();
    assert_eq!(join.join().unwrap(), 11);

    let events = events_of(pid);
    let expected: &[(&str, &[(&str, &str)])] = &[
        ("yield dispatched", &[("tag", "7"), ("command", "ask")]),
        ("process parked", &[("phase", "blocked")]),
        ("process woken", &[("from", "blocked")]),
        ("completion delivered", &[("tag", "7"), ("ok", "true")]),
        ("process parked", &[("phase", "idle")]),
        ("process woken", &[("from", "idle")]),
        ("message delivered", &[]),
        ("process complete", &[("ok", "true")]),
    ];
    // In this order (other events may come between).
    let mut rest = events.iter();
    for (message, fields) in expected {
        let found = rest.find(|e| {
            e.message() == *message && fields.iter().all(|(k, v)| e.field(k) == Some(*v))
        });
        assert!(
            found.is_some(),
            "no `{message}` {fields:?} in order; events of {pid}: {events:#?}"
        );
        let found = found.unwrap();
        assert!(found.target.starts_with("stepsched"), "{found:?}");
        assert!(found.level <= tracing::Level::DEBUG, "{found:?}");
    }
    // The step span's trace events are there too.
    assert!(
        events.iter().any(|e| e.message() == "step returned"
            && e.field("status") == Some("yield")
            && e.field("yields") == Some("1")
            && e.level == tracing::Level::TRACE),
        "{events:#?}"
    );
}

#[cfg(feature = "tracing")]
#[test]
fn an_unknown_command_and_a_terminate_are_traced() {
    capture();
    struct Lost;
    impl Process for Lost {
        type Input = ();
        type Message = u64;
        type Response = u64;
        type Command = String;
        type Output = u64;
        fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
            Ok(())
        }
        fn step(
            &mut self,
            _cx: &mut Context<'_, Self>,
            _: Events<'_, u64>,
            out: &mut StepOutput<String, u64>,
        ) -> Result<(), Error> {
            out.push_yield(3, "nowhere".to_string());
            out.set_status(Status::Idle);
            Ok(())
        }
    }
    let s = Scheduler::<Lost>::builder()
        .workers(1)
        .node(unique())
        .build()
        .unwrap();
    let pid = s.allocate_pid();
    let join = s.submit(pid, Lost, "run", ()).unwrap();
    wait_event(
        pid,
        "no handler for the command: completing the yield with an error",
        "command",
        "nowhere",
        1,
    );
    s.terminate(pid).unwrap();
    assert!(matches!(join.join(), Err(Error::Terminated)));
    let events = events_of(pid);
    assert!(
        events
            .iter()
            .any(|e| e.message() == "process forced to complete"
                && e.field("reason") == Some("terminated")),
        "{events:#?}"
    );
}

#[cfg(feature = "tracing")]
#[test]
fn an_idle_worker_traces_its_park_and_wake() {
    capture();
    let (tx, _rx) = channel();
    let (s, prefix) = named_waiters(1, tx);
    let thread = format!("{prefix}-0");
    let pid = s.allocate_pid();
    let join = s.submit(pid, Waiter { ask: false }, "run", ()).unwrap();
    wait_event(pid, "process parked", "phase", "idle", 1);
    // With its only process idle, the worker runs out of work and blocks.
    wait_stats(&s, "the worker blocked", |st| st.workers[0].parks >= 1);
    let worker_events = |message: &str| {
        captured()
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.thread == thread && e.message() == message)
            .cloned()
            .collect::<Vec<_>>()
    };
    let parking = worker_events("worker parking");
    assert!(!parking.is_empty(), "no park of {thread}");
    assert_eq!(parking[0].field("worker"), Some("0"));
    assert!(
        parking[0].target.starts_with("stepsched_pool"),
        "{:?}",
        parking[0]
    );
    s.send(pid, 1).unwrap();
    assert_eq!(join.join().unwrap(), 1);
    let woken = worker_events("worker unparked");
    assert!(
        woken.iter().any(|e| e.field("outcome") == Some("woken")),
        "{woken:#?}"
    );
}

/// Without the `tracing` feature the crates emit nothing: a process taken
/// through every phase, a worker parking and waking, an unknown command and
/// a terminate leave the capturing subscriber empty.
#[cfg(not(feature = "tracing"))]
#[test]
fn without_the_tracing_feature_nothing_is_emitted() {
    capture();
    let (tx, rx) = channel();
    let s = waiters(2, tx);
    let pid = s.allocate_pid();
    let join = s.submit(pid, Waiter { ask: true }, "run", ()).unwrap();
    let done = rx.recv().unwrap();
    wait_stats(&s, "the process blocked", |st| st.blocked == 1);
    assert!(done.complete(Ok(5)));
    wait_stats(&s, "the process idle", |st| st.idle == 1);
    s.send(pid, 11).unwrap();
    assert_eq!(join.join().unwrap(), 11);
    let other = s.allocate_pid();
    let join = s.submit(other, Waiter { ask: false }, "run", ()).unwrap();
    s.terminate(other).unwrap();
    assert!(join.join().is_err());
    drop(s);
    let seen = captured().lock().unwrap().len();
    assert_eq!(seen, 0, "events captured without the feature");
}
