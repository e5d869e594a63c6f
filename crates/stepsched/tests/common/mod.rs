//! Shared test fixtures: a process whose step is a closure, a probe that
//! counts calls and catches overlapping steps, a tiny `block_on`, and
//! waiting helpers whose time limits only turn a hang into a failure.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use stepsched::{
    Command, Context, Error, Event, JoinHandle, Pid, Process, SchedProcess, StepOutput,
};

/// How long a test waits before it declares a hang. Never reached by a
/// passing test; only bounds a failing one.
pub const HANG: Duration = Duration::from_secs(20);

/// A command: the handler name and an argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    pub name: String,
    pub arg: i64,
}

impl Command for Cmd {
    fn name(&self) -> &str {
        &self.name
    }
}

pub fn cmd(name: &str, arg: i64) -> Cmd {
    Cmd {
        name: name.to_string(),
        arg,
    }
}

/// What a [`Probe`] counts, under its lock.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub inits: usize,
    pub steps: usize,
    pub closes: usize,
}

/// Counts the calls into one process (or a group), and catches two steps
/// of one process running at once.
#[derive(Debug, Default)]
pub struct Probe {
    counts: Mutex<Counts>,
    changed: Condvar,
    in_step: AtomicBool,
    overlaps: AtomicUsize,
}

impl Probe {
    pub fn new() -> Arc<Probe> {
        Arc::new(Probe::default())
    }

    pub fn counts(&self) -> Counts {
        *self.counts.lock().unwrap()
    }

    pub fn closes(&self) -> usize {
        self.counts().closes
    }

    pub fn steps(&self) -> usize {
        self.counts().steps
    }

    pub fn overlaps(&self) -> usize {
        self.overlaps.load(Ordering::SeqCst)
    }

    fn bump(&self, f: impl FnOnce(&mut Counts)) {
        f(&mut self.counts.lock().unwrap());
        self.changed.notify_all();
    }

    /// Waits until `pred` holds for the counts; panics after [`HANG`].
    pub fn wait(&self, what: &str, pred: impl Fn(&Counts) -> bool) -> Counts {
        let until = Instant::now() + HANG;
        let mut counts = self.counts.lock().unwrap();
        while !pred(&counts) {
            let now = Instant::now();
            assert!(now < until, "hung waiting for {what}: {:?}", *counts);
            counts = self.changed.wait_timeout(counts, until - now).unwrap().0;
        }
        *counts
    }

    pub fn wait_closed(&self, n: usize) {
        self.wait("close", |c| c.closes >= n);
    }

    pub fn wait_steps(&self, n: usize) {
        self.wait("steps", |c| c.steps >= n);
    }

    fn enter_step(&self) {
        if self.in_step.swap(true, Ordering::SeqCst) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave_step(&self) {
        self.in_step.store(false, Ordering::SeqCst);
        self.bump(|c| c.steps += 1);
    }
}

pub type StepFn = Box<
    dyn FnMut(
            Vec<Event<i64>>,
            &mut StepOutput<Cmd, i64>,
            &mut Context<'_, FnProc>,
        ) -> Result<(), Error>
        + Send,
>;

/// A process whose step is a closure. Entry points: `main` and `alt` start
/// it, `fail` fails init, `panic` panics in init, anything else is
/// unknown.
pub struct FnProc {
    probe: Arc<Probe>,
    step: StepFn,
}

impl FnProc {
    pub fn new(
        probe: &Arc<Probe>,
        step: impl FnMut(
            Vec<Event<i64>>,
            &mut StepOutput<Cmd, i64>,
            &mut Context<'_, FnProc>,
        ) -> Result<(), Error>
        + Send
        + 'static,
    ) -> Self {
        FnProc {
            probe: probe.clone(),
            step: Box::new(step),
        }
    }
}

impl Process for FnProc {
    type Input = i64;
    type Message = i64;
    type Response = i64;
    type Command = Cmd;
    type Output = i64;

    fn init(&mut self, _: &Context<'_, Self>, method: &str, _input: i64) -> Result<(), Error> {
        self.probe.bump(|c| c.inits += 1);
        match method {
            "main" | "alt" => Ok(()),
            "fail" => Err(Error::failed("init refused")),
            "panic" => panic!("init exploded"),
            other => Err(Error::UnknownMethod(other.to_string())),
        }
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: stepsched::Events<'_, i64>,
        out: &mut StepOutput<Cmd, i64>,
    ) -> Result<(), Error> {
        self.probe.enter_step();
        // Leaves the step even if the closure panics.
        struct Leave<'a>(&'a Probe);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.leave_step();
            }
        }
        let _leave = Leave(&self.probe);
        let events: Vec<_> = events.collect();
        (self.step)(events, out, cx)
    }

    fn close(&mut self) {
        self.probe.bump(|c| c.closes += 1);
    }
}

/// Joins on another thread; panics if the process has not completed
/// within [`HANG`].
pub fn join<P: SchedProcess>(handle: JoinHandle<P>) -> Result<P::Output, Error>
where
    P::Output: Send,
{
    let pid = handle.pid();
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(handle.join());
    });
    rx.recv_timeout(HANG)
        .unwrap_or_else(|_| panic!("process {pid} never completed"))
}

/// Polls a future to completion on this thread.
pub fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = TaskContext::from_waker(&waker);
    let mut future = pin!(future);
    let until = Instant::now() + HANG;
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        assert!(
            Instant::now() < until,
            "block_on: the future never resolved"
        );
        // A spurious or early unpark only costs another poll.
        thread::park_timeout(Duration::from_millis(100));
    }
}

/// A per-key ledger of how many times each key was seen.
#[derive(Debug, Default)]
pub struct Ledger<K> {
    seen: Mutex<HashMap<K, usize>>,
    changed: Condvar,
}

impl<K: std::hash::Hash + Eq + Clone + std::fmt::Debug> Ledger<K> {
    pub fn new() -> Arc<Self> {
        Arc::new(Ledger {
            seen: Mutex::new(HashMap::new()),
            changed: Condvar::new(),
        })
    }

    pub fn record(&self, key: K) {
        *self.seen.lock().unwrap().entry(key).or_insert(0) += 1;
        self.changed.notify_all();
    }

    pub fn count(&self, key: &K) -> usize {
        self.seen.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    pub fn total(&self) -> usize {
        self.seen.lock().unwrap().values().sum()
    }

    pub fn snapshot(&self) -> HashMap<K, usize> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until the ledger holds `n` entries in total.
    pub fn wait_total(&self, n: usize) {
        let until = Instant::now() + HANG;
        let mut seen = self.seen.lock().unwrap();
        while seen.values().sum::<usize>() < n {
            let now = Instant::now();
            assert!(now < until, "hung waiting for {n} ledger entries");
            seen = self.changed.wait_timeout(seen, until - now).unwrap().0;
        }
    }

    /// Asserts every key in `keys` was seen exactly once and nothing else.
    pub fn assert_exactly_once(&self, keys: impl IntoIterator<Item = K>) {
        let seen = self.snapshot();
        let mut expected = 0;
        for k in keys {
            expected += 1;
            assert_eq!(
                seen.get(&k).copied(),
                Some(1),
                "key {k:?} not seen exactly once"
            );
        }
        assert_eq!(
            seen.len(),
            expected,
            "unexpected keys in the ledger: {seen:?}"
        );
    }
}

/// A process that waits (Idle) until a message or a cancel, and finishes
/// with the message, or with `Cancelled` on cancel.
pub fn idle_until_message(probe: &Arc<Probe>) -> FnProc {
    FnProc::new(probe, |events, out, _| {
        for e in events {
            match e {
                Event::Message { data: m, .. } => {
                    out.set_status(stepsched::Status::Done(m));
                    return Ok(());
                }
                Event::Cancel => return Err(Error::Cancelled),
                Event::Completion { .. } => {}
            }
        }
        out.set_status(stepsched::Status::Idle);
        Ok(())
    })
}

/// A process that finishes at its first step with `value`.
pub fn done_at_once(probe: &Arc<Probe>, value: i64) -> FnProc {
    FnProc::new(probe, move |_, out, _| {
        out.set_status(stepsched::Status::Done(value));
        Ok(())
    })
}

pub type Sched = stepsched::Scheduler<FnProc>;
pub type Builder = stepsched::Builder<FnProc>;

pub fn pid(n: u64) -> Pid {
    Pid::new(7, n)
}

/// What a [`yielder`] saw: each completion's tag and result, in order.
pub type Seen = Vec<(u64, Result<i64, String>)>;

/// A process that yields `cmds` (tag, command) at its first step, then
/// waits until every tag has completed, sends what it saw to `report`, and
/// finishes with the sum of the successful results. A completion for a
/// tag it never yielded, or a second one for a tag, fails it.
pub fn yielder(
    probe: &Arc<Probe>,
    cmds: Vec<(u64, Cmd)>,
    report: std::sync::mpsc::Sender<Seen>,
) -> FnProc {
    let mut pending: Option<Vec<u64>> = None;
    let mut seen = Seen::new();
    let mut cmds = Some(cmds);
    FnProc::new(probe, move |events, out, _| {
        if let Some(cmds) = cmds.take() {
            pending = Some(cmds.iter().map(|(t, _)| *t).collect());
            for (tag, c) in cmds {
                out.push_yield(tag, c);
            }
        }
        let waiting = pending.as_mut().unwrap();
        for e in events {
            match e {
                Event::Completion { tag, result } => {
                    let Some(i) = waiting.iter().position(|t| *t == tag) else {
                        return Err(Error::failed(format!("unexpected completion {tag}")));
                    };
                    waiting.swap_remove(i);
                    seen.push((tag, result.map_err(|e| e.to_string())));
                }
                Event::Cancel => return Err(Error::Cancelled),
                Event::Message { .. } => {}
            }
        }
        if waiting.is_empty() {
            let sum = seen.iter().filter_map(|(_, r)| r.as_ref().ok()).sum();
            let _ = report.send(std::mem::take(&mut seen));
            out.set_status(stepsched::Status::Done(sum));
        } else {
            out.set_status(stepsched::Status::Yield);
        }
        Ok(())
    })
}
