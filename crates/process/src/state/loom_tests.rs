//! Loom models of the state cell's races, run with
//! `RUSTFLAGS="--cfg stepsched_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p stepsched-process --features loom --lib -- loom`.
//!
//! Each model puts a process in the state a race starts from and runs the
//! racing parties as loom threads following the protocol of the
//! [module documentation](super). Whoever must put the process in a run
//! queue (a waker that wins `Queue`, a worker told `Requeue`) runs it at
//! once on its own thread, as the worker that pops it would: start, drain,
//! step, leave Running. So each run happens after the transition that
//! queued it only through the orderings of the cell and the run queue (which
//! orders its push before its pop, like program order here), never because
//! the model joined the threads first.
//!
//! The event queue is a model of `stepsched-mpsc` that synchronizes exactly
//! as it does (`loom_tests/queue.rs`): a push ends with a Release store of
//! its slot's state, and the consumer reads slot states with Acquire
//! *loads*, so a drain that the cell does not order after a push may miss
//! the event. The process body, the consumer's queue index, the event
//! values, the output a worker publishes and the reason a forcer records
//! are loom cells: an access that no transition orders after the previous
//! owner's is reported as a data race ("Causality violation").
//!
//! What the models check:
//!
//! * **not stepped twice at once**, and each owner sees its predecessor's
//!   writes: the body is a loom cell that every step and `close` write;
//! * **stranded** — at quiescence the process is Ready or Running (queued
//!   or owned by nobody), or Blocked/Idle with events pending, which no one
//!   is obliged to run (a lost completion or message);
//! * **lost** / **duplicated** — every pushed event is stepped exactly once;
//!   a queued process always starts (a second run-queue entry finds it not
//!   Ready); a forced process is closed exactly once;
//! * **stale flag** — every `Requeue` out of a park is owed to a wake that
//!   set the flag during that run, so no run steps an empty batch because
//!   of a flag left from before its start;
//! * **publication** — whoever closes a forced process sees the forcer's
//!   reason, and whoever sees Complete sees what the worker published.
//!
//! The models: (1) completions racing `finish_dispatch`; (2) two wakers of
//! an Idle process; (3) a message arriving between "step returned Idle" and
//! `park_idle`, with and without an event the owner pushes itself; (4) a
//! message racing the `try_start` of a Ready process; (5) `force_complete`
//! racing the worker's park, complete or reschedule; (6) an observer of
//! `complete`. Control variants break the protocol on purpose (a
//! load-then-store where a CAS belongs, a CAS whose failure is taken as
//! success, a wake that skips its write, an own push without wake, a
//! re-check of the queue after parking, a flag kept across `try_start`) and
//! expect the matching failure.
//! The orderings are checked by weakening them (`xtask/mutants/process.txt`).

mod queue;

use loom::cell::UnsafeCell;

use super::*;
use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{AtomicUsize, Ordering};
use crate::primitive::thread;
use queue::{CAPACITY, EventQueue};

/// The id of the event the worker pushes itself (model 3).
const OWN_EVENT: usize = 2;

/// What a step returns, as far as the cell is concerned.
#[derive(Clone, Copy)]
enum Status {
    Idle,
    Yield,
    Continue,
    Done,
}

/// The process: only its current owner may touch it.
struct Body {
    /// How many times each event id was stepped.
    stepped: [usize; CAPACITY],
    closed: bool,
}

struct World {
    cell: StateCell,
    events: EventQueue,
    body: UnsafeCell<Body>,
    /// Written by the forcer before `force_complete`; read by whoever closes
    /// the forced process (the scheduler's termination reason).
    reason: UnsafeCell<usize>,
    /// Written by the worker before `complete` (model 6).
    output: UnsafeCell<usize>,
    /// What every step after the first returns.
    then: Status,
    /// How many times the process was closed.
    closed: AtomicUsize,
    /// Wakes that answered `Notified` (set the flag).
    notified: AtomicUsize,
    /// Parks that answered `Requeue` (found the flag).
    flag_requeues: AtomicUsize,
}

impl World {
    fn in_state(state: State, then: Status) -> Arc<Self> {
        Arc::new(Self {
            cell: StateCell::from_state(state),
            events: EventQueue::new(),
            body: UnsafeCell::new(Body {
                stepped: [0; CAPACITY],
                closed: false,
            }),
            reason: UnsafeCell::new(0),
            output: UnsafeCell::new(0),
            then,
            closed: AtomicUsize::new(0),
            notified: AtomicUsize::new(0),
            flag_requeues: AtomicUsize::new(0),
        })
    }

    /// A producer: push event `id`, wake, and run the process if this wake
    /// won (the run queue's pop is modelled by running it here).
    fn produce(&self, id: usize, p: Protocol) {
        self.events.push(id);
        self.wake(p);
    }

    fn wake(&self, p: Protocol) {
        match (p.wake)(&self.cell) {
            Wake::Queue => self.run(p),
            Wake::Notified => {
                // Relaxed: a counter read after every thread is joined.
                self.notified.fetch_add(1, Ordering::Relaxed);
            }
            Wake::AlreadyReady | Wake::Complete => {}
        }
    }

    /// A worker pops the process from a run queue and runs it.
    fn run(&self, p: Protocol) {
        match (p.try_start)(&self.cell) {
            Start::Started => {
                self.step(true);
                self.leave(self.then, p);
            }
            // Force-completed while queued: the forcer closed it.
            Start::Terminated => {}
            Start::Invalid(s) => panic!("duplicated: a queued process was {s:?}"),
        }
    }

    /// The owner steps the process: drains its queue (with `drain`) and
    /// records the batch in the body.
    fn step(&self, drain: bool) {
        let mut batch = Vec::new();
        if drain {
            self.events.drain(&mut batch);
        }
        // SAFETY: only the owner steps; loom reports an owner whose access is
        // not ordered after the previous one's.
        self.body.with_mut(|b| {
            // SAFETY: as above.
            let b = unsafe { &mut *b };
            assert!(!b.closed, "duplicated: stepped after close");
            for id in batch {
                b.stepped[id] += 1;
            }
        });
    }

    /// The owner leaves Running after a step that returned `status`.
    fn leave(&self, status: Status, p: Protocol) {
        match status {
            Status::Done => match self.cell.complete() {
                Finish::Completed => self.close(false),
                Finish::Terminated => self.close(true),
                Finish::Invalid(s) => panic!("complete from {s:?}"),
            },
            Status::Continue => match self.cell.reschedule() {
                Park::Requeue => self.run(p),
                park => self.after_park(park, p),
            },
            Status::Idle => self.after_park((p.park_idle)(&self.cell), p),
            Status::Yield => self.after_park((p.finish_dispatch)(&self.cell), p),
        }
    }

    /// The worker after a park (`park_idle` or `finish_dispatch`).
    fn after_park(&self, park: Park, p: Protocol) {
        match park {
            Park::Requeue => {
                // Relaxed: a counter read after every thread is joined.
                self.flag_requeues.fetch_add(1, Ordering::Relaxed);
                self.run(p);
            }
            Park::Parked => {
                // Control only: the process is no longer ours, and neither is
                // the consumer's side of its queue.
                if p.recheck_after_park && self.events.has_events() {
                    self.wake(p);
                }
            }
            Park::Terminated => self.close(true),
            Park::Invalid(s) => panic!("park from {s:?}"),
        }
    }

    /// The owner closes the process; `forced`: it learned that a forcer
    /// ended it, and reads the forcer's reason.
    fn close(&self, forced: bool) {
        // Relaxed: a counter read after every thread is joined.
        self.closed.fetch_add(1, Ordering::Relaxed);
        if forced {
            // SAFETY: written once by the forcer before its transition; loom
            // reports the read if no transition orders it after the write.
            let reason = self.reason.with(|r| unsafe { *r });
            assert_eq!(reason, 1, "the forcer's reason is not visible");
        }
        // SAFETY: the closer owns the body; loom reports it otherwise.
        self.body.with_mut(|b| unsafe { (*b).closed = true });
    }

    /// The checks at quiescence (every thread joined); `pushed` lists the
    /// event ids pushed.
    fn check(&self, pushed: &[usize]) {
        let s = self.cell.load();
        assert!(s.is_valid(), "corrupt word {s:?}");
        assert!(
            !s.is_ready() && !s.is_running(),
            "stranded: {s:?} at quiescence, queued or owned by nobody"
        );
        assert!(
            !(s.is_parked() && self.events.has_events()),
            "stranded: {s:?} with events pending, nobody obliged to run it"
        );
        // SAFETY: every thread is joined.
        let stepped = self.body.with(|b| unsafe { (*b).stepped });
        for &id in pushed {
            match stepped[id] {
                1 => {}
                0 => panic!("lost: event {id} never stepped (ended {s:?})"),
                n => panic!("duplicated: event {id} stepped {n} times"),
            }
        }
        // Relaxed (both): every thread is joined.
        let requeues = self.flag_requeues.load(Ordering::Relaxed);
        let notified = self.notified.load(Ordering::Relaxed);
        assert!(
            requeues <= notified,
            "stale flag: {requeues} requeues by the flag, {notified} wakes set it"
        );
    }
}

/// The transitions a model uses; the controls swap in broken ones.
#[derive(Clone, Copy)]
struct Protocol {
    try_start: fn(&StateCell) -> Start,
    wake: fn(&StateCell) -> Wake,
    park_idle: fn(&StateCell) -> Park,
    finish_dispatch: fn(&StateCell) -> Park,
    force_complete: fn(&StateCell) -> ForceComplete,
    /// Whether the worker wakes after pushing an event of its own.
    own_push_wakes: bool,
    /// Control: the worker looks at the queue after `Parked` and wakes.
    recheck_after_park: bool,
}

const CORRECT: Protocol = Protocol {
    try_start: StateCell::try_start,
    wake: StateCell::wake,
    park_idle: StateCell::park_idle,
    finish_dispatch: StateCell::finish_dispatch,
    force_complete: StateCell::force_complete,
    own_push_wakes: true,
    recheck_after_park: false,
};

// ---- broken transitions, for the control variants ---------------------------
//
// "Load-then-store" is written as a load followed by a blind `swap`: the
// same lost update as a plain store, but an RMW, so loom orders it correctly
// against the other RMWs on the word (tokio-rs/loom#254, #389). The
// orderings are those of the real transitions; the controls fail because
// of the missing compare, not the orderings.

/// `finish_dispatch` as load-then-store: a wakeup flag set between the load
/// and the store is overwritten.
fn finish_dispatch_load_store(cell: &StateCell) -> Park {
    let s = cell.load();
    let (next, park) = if s.is_notified() {
        (READY, Park::Requeue)
    } else {
        (BLOCKED, Park::Parked)
    };
    // AcqRel: as in the real transition.
    cell.word.swap(next, Ordering::AcqRel);
    park
}

/// `finish_dispatch` that gives up when its CAS fails — the reference's bug:
/// a wakeup flag that flips under the CAS strands the process in Running.
fn finish_dispatch_give_up(cell: &StateCell) -> Park {
    let s = cell.load();
    let (next, park) = if s.is_notified() {
        (READY, Park::Requeue)
    } else {
        (BLOCKED, Park::Parked)
    };
    // AcqRel/Acquire as in the real transition; only the retry is missing.
    match cell
        .word
        .compare_exchange(s.0, next, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => park,
        Err(_) => Park::Parked,
    }
}

/// `park_idle` as load-then-store.
fn park_idle_load_store(cell: &StateCell) -> Park {
    let s = cell.load();
    let (next, park) = if s.is_notified() {
        (READY, Park::Requeue)
    } else {
        (IDLE, Park::Parked)
    };
    // AcqRel: as in the real transition.
    cell.word.swap(next, Ordering::AcqRel);
    park
}

/// `wake` as load-then-store: two wakers can both see Idle and both win.
fn wake_load_store(cell: &StateCell) -> Wake {
    let s = cell.load();
    if s.is_parked() {
        // AcqRel: as in the real transition.
        cell.word.swap(READY, Ordering::AcqRel);
        Wake::Queue
    } else if s.is_running() {
        // AcqRel: as in the real transition.
        cell.word.fetch_or(NOTIFIED, Ordering::AcqRel);
        Wake::Notified
    } else if s.is_ready() {
        Wake::AlreadyReady
    } else {
        Wake::Complete
    }
}

/// `wake` that skips the write when it sees Ready (a tempting fast path):
/// its load is not ordered against the worker's `try_start`, so it may see a
/// stale Ready while the worker has already drained without the event.
fn wake_without_write_when_ready(cell: &StateCell) -> Wake {
    if cell.load().is_ready() {
        return Wake::AlreadyReady;
    }
    cell.wake()
}

/// `wake` that sets the flag on a Ready process too ("events arrived since
/// the last drain"), for the stale-flag control.
fn wake_flagging_ready(cell: &StateCell) -> Wake {
    // AcqRel: as in the real transition.
    match cell
        .word
        .compare_exchange(READY, READY | NOTIFIED, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => Wake::AlreadyReady,
        Err(_) => cell.wake(),
    }
}

/// `try_start` that keeps a flag set before the start.
fn try_start_keeping_the_flag(cell: &StateCell) -> Start {
    loop {
        let s = cell.load();
        if !s.is_ready() {
            return cell.try_start();
        }
        let next = RUNNING | (s.0 & NOTIFIED);
        // AcqRel/Acquire: as in the real transition.
        if cell
            .word
            .compare_exchange(s.0, next, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Start::Started;
        }
    }
}

/// `force_complete` as load-then-store: it can overwrite a park and leave
/// the close to nobody.
fn force_complete_load_store(cell: &StateCell) -> ForceComplete {
    let s = cell.load();
    if s.is_complete() {
        return ForceComplete::AlreadyComplete;
    }
    // AcqRel: as in the real transition.
    cell.word.swap(COMPLETE, Ordering::AcqRel);
    ForceComplete::Won { previous: s }
}

/// Runs `model` under loom, expecting it to panic with a message that starts
/// with one of `predicates`.
fn expect_caught(predicates: &[&str], model: impl Fn() + Sync + Send + 'static) {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loom::model(model)));
    let payload = caught.expect_err("the control variant was not caught");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default();
    assert!(
        predicates.iter().any(|p| msg.starts_with(p)),
        "caught for the wrong reason: expected one of {predicates:?}, got `{msg}`"
    );
}

/// loom's report of an access no happens-before orders.
const DATA_RACE: &str = "Causality violation";

// ---- model 1: completions racing finish_dispatch -----------------------------

/// The worker has stepped (the step yielded) and dispatched the yields, and
/// calls `finish_dispatch` while `completers` handlers complete them from
/// other threads. Every completion is stepped exactly once, by runs that
/// never overlap.
fn completion_races_finish_dispatch(p: Protocol, completers: usize) {
    let w = World::in_state(State::of(RUNNING), Status::Yield);
    let handles: Vec<_> = (0..completers)
        .map(|id| {
            let w = Arc::clone(&w);
            thread::spawn(move || w.produce(id, p))
        })
        .collect();
    // The dispatch goes on after the first yield is handed out: the worker
    // still writes the body (the step's output) before `finish_dispatch`.
    w.step(false);
    w.after_park((p.finish_dispatch)(&w.cell), p);
    for h in handles {
        h.join().unwrap();
    }
    let pushed: Vec<usize> = (0..completers).collect();
    w.check(&pushed);
}

#[test]
fn model_completion_races_finish_dispatch() {
    loom::model(|| completion_races_finish_dispatch(CORRECT, 1));
}

#[test]
fn model_two_completions_race_finish_dispatch() {
    loom::model(|| completion_races_finish_dispatch(CORRECT, 2));
}

#[test]
fn control_finish_dispatch_load_then_store_is_caught() {
    let p = Protocol {
        finish_dispatch: finish_dispatch_load_store,
        ..CORRECT
    };
    expect_caught(&["stranded"], move || {
        completion_races_finish_dispatch(p, 1)
    });
}

#[test]
fn control_finish_dispatch_giving_up_on_a_failed_cas_is_caught() {
    let p = Protocol {
        finish_dispatch: finish_dispatch_give_up,
        ..CORRECT
    };
    expect_caught(&["stranded"], move || {
        completion_races_finish_dispatch(p, 1)
    });
}

// ---- model 2: two wakers of an Idle process ----------------------------------

/// Two senders push a message each and wake an Idle process: one of them
/// runs it, and the other's message is stepped by that run or by a run of
/// its own once the first has parked again — never by two runs at once.
fn two_wakers_of_an_idle_process(p: Protocol) {
    let w = World::in_state(State::of(IDLE), Status::Idle);
    let handles: Vec<_> = (0..2)
        .map(|id| {
            let w = Arc::clone(&w);
            thread::spawn(move || w.produce(id, p))
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    w.check(&[0, 1]);
}

#[test]
fn model_two_wakers_of_an_idle_process() {
    loom::model(|| two_wakers_of_an_idle_process(CORRECT));
}

/// Both wakers see Idle and both run the process: the second start finds it
/// Running (or parked again), the two steps overlap, or a blind write undoes
/// a park and leaves a message behind.
#[test]
fn control_wake_load_then_store_is_caught() {
    let p = Protocol {
        wake: wake_load_store,
        ..CORRECT
    };
    expect_caught(&["duplicated", DATA_RACE, "stranded"], move || {
        two_wakers_of_an_idle_process(p)
    });
}

// ---- model 3: a message between "step returned Idle" and park_idle ----------

/// The worker drains, steps (the step returns Idle; with `own_event` the
/// owner also pushes an event of its own), parks Idle; with `sender`, a
/// message is pushed and woken concurrently — before the drain, during the
/// step, or after the park.
fn message_between_idle_and_park(p: Protocol, sender: bool, own_event: bool) {
    let w = World::in_state(State::of(RUNNING), Status::Idle);
    let handle = sender.then(|| {
        let w = Arc::clone(&w);
        thread::spawn(move || w.produce(0, p))
    });
    w.step(true);
    if own_event {
        w.events.push(OWN_EVENT);
        if p.own_push_wakes {
            w.wake(p);
        }
    }
    w.after_park((p.park_idle)(&w.cell), p);
    if let Some(h) = handle {
        h.join().unwrap();
    }
    let mut pushed = Vec::new();
    if sender {
        pushed.push(0);
    }
    if own_event {
        pushed.push(OWN_EVENT);
    }
    w.check(&pushed);
}

#[test]
fn model_message_between_idle_and_park() {
    loom::model(|| message_between_idle_and_park(CORRECT, true, false));
}

#[test]
fn model_message_and_own_event_between_idle_and_park() {
    loom::model(|| message_between_idle_and_park(CORRECT, true, true));
}

#[test]
fn model_own_event_before_park() {
    loom::model(|| message_between_idle_and_park(CORRECT, false, true));
}

#[test]
fn control_park_idle_load_then_store_is_caught() {
    let p = Protocol {
        park_idle: park_idle_load_store,
        ..CORRECT
    };
    expect_caught(&["stranded"], move || {
        message_between_idle_and_park(p, true, false)
    });
}

/// An event the owner pushes without waking is seen by nobody.
#[test]
fn control_own_push_without_wake_is_caught() {
    let p = Protocol {
        own_push_wakes: false,
        ..CORRECT
    };
    expect_caught(&["stranded"], move || {
        message_between_idle_and_park(p, false, true)
    });
}

/// Why the protocol has no re-check of the queue after `Parked`: the
/// consumer's side of the queue already belongs to the next owner, whose
/// drain races the parker's look.
#[test]
fn control_recheck_after_park_is_caught() {
    let p = Protocol {
        own_push_wakes: false,
        recheck_after_park: true,
        ..CORRECT
    };
    expect_caught(&[DATA_RACE], move || {
        message_between_idle_and_park(p, true, true)
    });
}

// ---- model 4: a message racing the start of a Ready process ----------------

/// The process is Ready (queued); a sender pushes a message and wakes while
/// a worker pops it, starts it, drains, steps (Idle) and parks. Either the
/// run sees the message or the process runs again.
fn message_races_start(p: Protocol) {
    let w = World::in_state(State::of(READY), Status::Idle);
    let sender = {
        let w = Arc::clone(&w);
        thread::spawn(move || w.produce(0, p))
    };
    w.run(p);
    sender.join().unwrap();
    w.check(&[0]);
}

#[test]
fn model_message_races_start() {
    loom::model(|| message_races_start(CORRECT));
}

/// Why `wake` writes even when the process is already Ready.
#[test]
fn control_wake_skipping_the_write_when_ready_is_caught() {
    let p = Protocol {
        wake: wake_without_write_when_ready,
        ..CORRECT
    };
    expect_caught(&["stranded"], move || message_races_start(p));
}

/// A flag set before the start survives it: the run drains the event, and
/// the park then requeues the process for a run with an empty batch.
#[test]
fn control_stale_flag_is_caught() {
    let p = Protocol {
        try_start: try_start_keeping_the_flag,
        wake: wake_flagging_ready,
        ..CORRECT
    };
    expect_caught(&["stale flag"], move || message_races_start(p));
}

// ---- model 5: force_complete racing the worker --------------------------------

/// A terminator records its reason and force-completes the process while
/// its worker steps it and then parks it Idle (with a message racing in),
/// completes it, or reschedules it: the process is closed exactly once, by
/// the party the protocol names, which sees the reason (if forced) and the
/// body its last owner left.
fn terminate_races_worker(p: Protocol, status: Status) {
    let w = World::in_state(State::of(RUNNING), Status::Idle);
    let terminator = {
        let w = Arc::clone(&w);
        thread::spawn(move || {
            // SAFETY: the terminator is the only writer, before its transition.
            w.reason.with_mut(|r| unsafe { *r = 1 });
            if (p.force_complete)(&w.cell).must_close() {
                w.close(true);
            }
        })
    };
    let sender = matches!(status, Status::Idle).then(|| {
        let w = Arc::clone(&w);
        thread::spawn(move || w.produce(0, p))
    });
    w.step(true);
    w.leave(status, p);
    terminator.join().unwrap();
    if let Some(h) = sender {
        h.join().unwrap();
    }
    let s = w.cell.load();
    assert!(s.is_complete(), "stranded: {s:?} after a terminate");
    // Relaxed: the threads are joined.
    match w.closed.load(Ordering::Relaxed) {
        1 => {}
        0 => panic!("stranded: never closed"),
        n => panic!("duplicated: closed {n} times"),
    }
}

#[test]
fn model_terminate_races_park() {
    loom::model(|| terminate_races_worker(CORRECT, Status::Idle));
}

#[test]
fn model_terminate_races_complete() {
    loom::model(|| terminate_races_worker(CORRECT, Status::Done));
}

#[test]
fn model_terminate_races_reschedule() {
    loom::model(|| terminate_races_worker(CORRECT, Status::Continue));
}

#[test]
fn control_force_complete_load_then_store_is_caught() {
    let p = Protocol {
        force_complete: force_complete_load_store,
        ..CORRECT
    };
    expect_caught(&["stranded", "duplicated"], move || {
        terminate_races_worker(p, Status::Idle)
    });
}

// ---- model 6: what complete publishes ----------------------------------------

/// The worker writes its output and completes the process; an observer
/// that sees Complete (by `load`, or by a `wake` that answers `Complete`)
/// reads the output.
fn observer_of_complete() {
    let w = World::in_state(State::of(RUNNING), Status::Idle);
    let observer = {
        let w = Arc::clone(&w);
        thread::spawn(move || {
            let seen = w.cell.load().is_complete() || w.cell.wake() == Wake::Complete;
            if seen {
                // SAFETY: written once before `complete`; loom reports the
                // read if the observation does not order it after the write.
                let output = w.output.with(|o| unsafe { *o });
                assert_eq!(output, 7, "lost: Complete seen without the output");
            }
        })
    };
    // SAFETY: the worker owns the process until `complete`.
    w.output.with_mut(|o| unsafe { *o = 7 });
    assert_eq!(w.cell.complete(), Finish::Completed);
    observer.join().unwrap();
}

#[test]
fn model_observer_of_complete() {
    loom::model(observer_of_complete);
}
