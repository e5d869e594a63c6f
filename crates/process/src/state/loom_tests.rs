//! Loom models of the state cell's races, run with
//! `RUSTFLAGS="--cfg stepsched_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p stepsched-process --lib`.
//!
//! Each model puts a process in the state a race starts from, runs the
//! racing parties as loom threads following the protocol of the
//! [module documentation](super), and at quiescence checks three failure
//! predicates:
//!
//! * **stranded** — the process is Ready, Running, Blocked or Idle with
//!   pending events, is in no run queue, and nobody is obliged to queue it;
//!   or it is Ready and in no queue;
//! * **duplicated** — the process was put in run queues twice, or is in one
//!   while not Ready;
//! * **lost** — an event was never stepped (the run the process is queued
//!   for is simulated at the end), or was stepped twice.
//!
//! The models: (1) completions racing `finish_dispatch`; (2) two wakers of
//! an Idle process; (3) a message arriving between "step returned Idle" and
//! `park_idle`, with and without an event the owner pushed itself; (4) a
//! message racing the `try_start` of a Ready process; (5) `force_complete`
//! racing the worker's park or complete (the predicates there are about
//! `close`: never closed is stranded, closed twice is duplicated).
//!
//! Each model also runs against a control variant that breaks the protocol
//! on purpose (a load-then-store where a CAS belongs, a CAS whose failure is
//! taken as success, a wake that skips its write, a skipped or blind
//! re-check); the control test expects the model to panic with the matching
//! predicate. The load-then-store controls of models 1 and 3 run without the
//! re-check after `Parked`: with it, the broken park is rescued (its blind
//! write is modelled as a `swap`, see below, which reads the flagged value and
//! so synchronizes with the waker; the re-check then finds the event), and
//! the re-check would hide which transition is at fault. Models 1 and 3 also pass without the re-check,
//! which shows that the wakeup flag alone protects events whose producers
//! call `wake`.
//!
//! The event queue is modelled as one flag per event id: the producer sets
//! it with a Release RMW, `has_events` reads with Acquire loads, the drain
//! takes with an AcqRel swap — the weakest orderings a real MPSC queue
//! gives, so the models do not borrow synchronization from the queue.

use super::*;
use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::primitive::thread;

/// Event ids a model may push; id 2 is the worker's own (pushed without wake).
const MAX_EVENTS: usize = 3;
const OWN_EVENT: usize = 2;

struct Queue {
    slots: [AtomicBool; MAX_EVENTS],
}

impl Queue {
    fn new() -> Self {
        Self {
            slots: [(); MAX_EVENTS].map(|()| AtomicBool::new(false)),
        }
    }

    fn push(&self, id: usize) {
        // Release: pairs with the Acquire loads of `has_events` and `drain`.
        // An RMW rather than a store, as in a real queue's push (and because
        // loom mis-orders a plain store racing an RMW, tokio-rs/loom#254).
        self.slots[id].fetch_or(true, Ordering::Release);
    }

    fn has_events(&self) -> bool {
        // Acquire: pairs with the Release store in `push`.
        self.slots.iter().any(|s| s.load(Ordering::Acquire))
    }

    fn drain(&self, stepped: &[AtomicUsize; MAX_EVENTS]) {
        for (slot, count) in self.slots.iter().zip(stepped) {
            // AcqRel: the swap takes the event at most once (RMW) and
            // synchronizes with the Release store in `push`.
            if slot.swap(false, Ordering::AcqRel) {
                // Relaxed: a ledger read after every thread is joined.
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

struct World {
    cell: StateCell,
    events: Queue,
    /// How many times the process was put in a run queue.
    queued: AtomicUsize,
    /// How many times each event id was stepped.
    stepped: [AtomicUsize; MAX_EVENTS],
    /// How many times the process was closed.
    closed: AtomicUsize,
}

impl World {
    fn in_state(state: State) -> Arc<Self> {
        Arc::new(Self {
            cell: StateCell::from_state(state),
            events: Queue::new(),
            queued: AtomicUsize::new(0),
            stepped: [(); MAX_EVENTS].map(|()| AtomicUsize::new(0)),
            closed: AtomicUsize::new(0),
        })
    }

    fn enqueue(&self) {
        // Relaxed: a counter read after every thread is joined.
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    fn close(&self) {
        // Relaxed: a counter read after every thread is joined.
        self.closed.fetch_add(1, Ordering::Relaxed);
    }

    /// A producer: push event `id`, wake, queue the process if this wake won.
    fn produce(&self, id: usize, p: Protocol) {
        self.events.push(id);
        if (p.wake)(&self.cell) == Wake::Queue {
            self.enqueue();
        }
    }

    /// The worker after leaving Running with `park`.
    fn after_park(&self, park: Park, p: Protocol) {
        match park {
            Park::Requeue => self.enqueue(),
            Park::Parked => match p.recheck {
                Recheck::Wake => {
                    if self.events.has_events() && self.cell.wake() == Wake::Queue {
                        self.enqueue();
                    }
                }
                Recheck::Skip => {}
                Recheck::Blind => {
                    if self.events.has_events() {
                        // AcqRel: as in the real transition; what is broken is
                        // the blind write, see `Recheck::Blind`.
                        self.cell.word.swap(READY, Ordering::AcqRel);
                        self.enqueue();
                    }
                }
            },
            Park::Terminated => self.close(),
            Park::Invalid(s) => panic!("park from {s:?}"),
        }
    }

    /// The checks at quiescence; `pushed` lists the event ids pushed.
    fn check(&self, pushed: &[usize]) {
        // Relaxed (here and below): every thread is joined.
        let queued = self.queued.load(Ordering::Relaxed);
        let s = self.cell.load();
        assert!(s.is_valid(), "corrupt word {s:?}");
        assert!(
            queued <= 1,
            "duplicated: the process was queued {queued} times"
        );
        if s.is_ready() {
            assert!(queued == 1, "stranded: Ready but in no run queue");
        } else {
            assert!(queued == 0, "duplicated: in a run queue while {s:?}");
        }
        let pending = self.events.has_events();
        if pending {
            assert!(
                queued == 1,
                "stranded: {s:?} with pending events, in no run queue, nobody obliged to queue it"
            );
        }
        // The run the process is queued for: it starts and drains.
        if queued == 1 {
            assert_eq!(
                self.cell.try_start(),
                Start::Started,
                "duplicated: cannot start"
            );
            self.events.drain(&self.stepped);
        }
        for &id in pushed {
            match self.stepped[id].load(Ordering::Relaxed) {
                1 => {}
                0 => panic!(
                    "lost: event {id} never stepped (ended {s:?}, queued {queued}, pending {pending})"
                ),
                n => panic!("duplicated: event {id} stepped {n} times"),
            }
        }
    }
}

/// How the worker re-checks the event queue after `Parked`.
#[derive(Clone, Copy)]
enum Recheck {
    /// The protocol: if events are pending, `wake`, and queue on `Queue`.
    Wake,
    /// Control: no re-check.
    Skip,
    /// Control: if events are pending, store Ready and queue, without the
    /// CAS that lets exactly one waker win.
    Blind,
}

/// The transitions a model uses; the controls swap in broken ones.
#[derive(Clone, Copy)]
struct Protocol {
    wake: fn(&StateCell) -> Wake,
    park_idle: fn(&StateCell) -> Park,
    finish_dispatch: fn(&StateCell) -> Park,
    force_complete: fn(&StateCell) -> ForceComplete,
    recheck: Recheck,
}

const CORRECT: Protocol = Protocol {
    wake: StateCell::wake,
    park_idle: StateCell::park_idle,
    finish_dispatch: StateCell::finish_dispatch,
    force_complete: StateCell::force_complete,
    recheck: Recheck::Wake,
};

/// The protocol without the re-check after `Parked`: enough for events whose
/// producers call `wake`.
const WITHOUT_RECHECK: Protocol = Protocol {
    recheck: Recheck::Skip,
    ..CORRECT
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

/// `finish_dispatch` that gives up when its CAS fails — the reference's bug
/// (pitfall 3): a wakeup flag that flips under the CAS strands the process
/// in Running.
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
        // AcqRel: like the real transition.
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
/// with `predicate`.
fn expect_caught(predicate: &str, model: impl Fn() + Sync + Send + 'static) {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loom::model(model)));
    let payload = caught.expect_err("the control variant was not caught");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default();
    assert!(
        msg.starts_with(predicate),
        "caught for the wrong reason: expected `{predicate}`, got `{msg}`"
    );
}

// ---- model 1: completions racing finish_dispatch -----------------------------

/// The worker has dispatched the step's yields and calls `finish_dispatch`
/// while `completers` handlers complete them from other threads. Exactly one
/// of {a completer, the worker} queues the process, never both, never
/// neither, and the next run steps every completion.
fn completion_races_finish_dispatch(p: Protocol, completers: usize) {
    let w = World::in_state(State::of(RUNNING));
    let handles: Vec<_> = (0..completers)
        .map(|id| {
            let w = Arc::clone(&w);
            thread::spawn(move || w.produce(id, p))
        })
        .collect();
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

/// The wakeup flag alone closes this race: without the re-check (which
/// only matters for events pushed without `wake`), nothing is lost.
#[test]
fn model_completion_races_finish_dispatch_without_recheck() {
    loom::model(|| completion_races_finish_dispatch(WITHOUT_RECHECK, 1));
}

/// With the re-check the load-then-store is rescued (the worker's write is
/// an RMW that reads the flagged value and so sees the completion), so the
/// control drops the re-check to isolate the transition.
#[test]
fn control_finish_dispatch_load_then_store_is_caught() {
    let p = Protocol {
        finish_dispatch: finish_dispatch_load_store,
        ..WITHOUT_RECHECK
    };
    expect_caught("stranded", move || completion_races_finish_dispatch(p, 1));
}

#[test]
fn control_finish_dispatch_giving_up_on_a_failed_cas_is_caught() {
    let p = Protocol {
        finish_dispatch: finish_dispatch_give_up,
        ..CORRECT
    };
    expect_caught("stranded", move || completion_races_finish_dispatch(p, 1));
}

// ---- model 2: two wakers of an Idle process ----------------------------------

/// Two senders push a message each and wake an Idle process: exactly one
/// wins `Queue`.
fn two_wakers_of_an_idle_process(p: Protocol) {
    let w = World::in_state(State::of(IDLE));
    let wins = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..2)
        .map(|id| {
            let (w, wins) = (Arc::clone(&w), Arc::clone(&wins));
            thread::spawn(move || {
                w.events.push(id);
                if (p.wake)(&w.cell) == Wake::Queue {
                    // Relaxed: read after the join.
                    wins.fetch_add(1, Ordering::Relaxed);
                    w.enqueue();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // Relaxed: the threads are joined.
    match wins.load(Ordering::Relaxed) {
        1 => {}
        0 => panic!("stranded: no waker won"),
        n => panic!("duplicated: {n} wakers won"),
    }
    w.check(&[0, 1]);
}

#[test]
fn model_two_wakers_of_an_idle_process() {
    loom::model(|| two_wakers_of_an_idle_process(CORRECT));
}

#[test]
fn control_wake_load_then_store_is_caught() {
    let p = Protocol {
        wake: wake_load_store,
        ..CORRECT
    };
    expect_caught("duplicated", move || two_wakers_of_an_idle_process(p));
}

// ---- model 3: a message between "step returned Idle" and park_idle ----------

/// The worker drains, steps (the step returns Idle; with `own_event` the
/// owner also pushes an event of its own, without wake), parks Idle and
/// re-checks the queue; with `sender`, a message is pushed and woken
/// concurrently — before the drain, during the step, or after the park.
fn message_between_idle_and_park(p: Protocol, sender: bool, own_event: bool) {
    let w = World::in_state(State::of(RUNNING));
    let handle = sender.then(|| {
        let w = Arc::clone(&w);
        thread::spawn(move || w.produce(0, p))
    });
    w.events.drain(&w.stepped);
    if own_event {
        w.events.push(OWN_EVENT);
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
fn model_message_between_idle_and_park_without_recheck() {
    loom::model(|| message_between_idle_and_park(WITHOUT_RECHECK, true, false));
}

/// Without the re-check, as in `control_finish_dispatch_load_then_store_is_caught`.
#[test]
fn control_park_idle_load_then_store_is_caught() {
    let p = Protocol {
        park_idle: park_idle_load_store,
        ..WITHOUT_RECHECK
    };
    expect_caught("stranded", move || {
        message_between_idle_and_park(p, true, false)
    });
}

#[test]
fn control_skipped_recheck_is_caught() {
    expect_caught("stranded", || {
        message_between_idle_and_park(WITHOUT_RECHECK, false, true);
    });
}

#[test]
fn control_blind_recheck_is_caught() {
    let p = Protocol {
        recheck: Recheck::Blind,
        ..CORRECT
    };
    expect_caught("duplicated", move || {
        message_between_idle_and_park(p, true, false)
    });
}

// ---- model 4: a message racing the start of a Ready process ----------------

/// The process is Ready (queued); a sender pushes a message and wakes while
/// the worker starts it, drains, steps (Idle) and parks. Either the run sees
/// the message or the process ends up queued again.
fn message_races_start(p: Protocol) {
    let w = World::in_state(State::of(READY));
    let sender = {
        let w = Arc::clone(&w);
        thread::spawn(move || w.produce(0, p))
    };
    assert_eq!(w.cell.try_start(), Start::Started);
    w.events.drain(&w.stepped);
    w.after_park((p.park_idle)(&w.cell), p);
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
    expect_caught("stranded", move || message_races_start(p));
}

// ---- model 5: force_complete racing the worker --------------------------------

/// A terminator force-completes the process while its worker parks it Idle
/// (with a message racing in) or completes it: the process is closed exactly
/// once, by the party the protocol names.
fn terminate_races_worker(p: Protocol, worker_completes: bool) {
    let w = World::in_state(State::of(RUNNING));
    let terminator = {
        let w = Arc::clone(&w);
        thread::spawn(move || {
            if (p.force_complete)(&w.cell).must_close() {
                w.close();
            }
        })
    };
    if worker_completes {
        match w.cell.complete() {
            Finish::Completed | Finish::Terminated => w.close(),
            Finish::Invalid(s) => panic!("complete from {s:?}"),
        }
    } else {
        w.after_park((p.park_idle)(&w.cell), p);
    }
    terminator.join().unwrap();
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
    loom::model(|| terminate_races_worker(CORRECT, false));
}

#[test]
fn model_terminate_races_complete() {
    loom::model(|| terminate_races_worker(CORRECT, true));
}

#[test]
fn control_force_complete_load_then_store_is_caught() {
    let p = Protocol {
        force_complete: force_complete_load_store,
        ..CORRECT
    };
    expect_caught("stranded", move || terminate_races_worker(p, false));
}
