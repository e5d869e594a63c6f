//! Tests of the state cell: every transition from every state, a proptest
//! simulating several actors that follow the scheduler protocol step by
//! step, and a concurrent test racing wakers against a worker loop.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;
use crate::primitive::channel;
use crate::primitive::sync::atomic::{AtomicUsize, Ordering};
use crate::primitive::sync::{Arc, Barrier, Mutex};
use crate::primitive::thread;

const R: State = State::of(READY);
const RUN: State = State::of(RUNNING);
const RUN_N: State = State(RUNNING | NOTIFIED);
const B: State = State::of(BLOCKED);
const I: State = State::of(IDLE);
const C: State = State::of(COMPLETE);
const ALL: [State; 6] = [R, RUN, RUN_N, B, I, C];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    TryStart,
    ParkIdle,
    ParkBlocked,
    FinishDispatch,
    Reschedule,
    Complete,
    ForceComplete,
    Wake,
}

const OPS: [Op; 8] = [
    Op::TryStart,
    Op::ParkIdle,
    Op::ParkBlocked,
    Op::FinishDispatch,
    Op::Reschedule,
    Op::Complete,
    Op::ForceComplete,
    Op::Wake,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Start(Start),
    Park(Park),
    Finish(Finish),
    Force(ForceComplete),
    Wake(Wake),
}

fn apply(cell: &StateCell, op: Op) -> Outcome {
    match op {
        Op::TryStart => Outcome::Start(cell.try_start()),
        Op::ParkIdle => Outcome::Park(cell.park_idle()),
        Op::ParkBlocked => Outcome::Park(cell.park_blocked()),
        Op::FinishDispatch => Outcome::Park(cell.finish_dispatch()),
        Op::Reschedule => Outcome::Park(cell.reschedule()),
        Op::Complete => Outcome::Finish(cell.complete()),
        Op::ForceComplete => Outcome::Force(cell.force_complete()),
        Op::Wake => Outcome::Wake(cell.wake()),
    }
}

/// The transition table of the module documentation, written out case by
/// case: the outcome and the state after.
fn expected(op: Op, s: State) -> (Outcome, State) {
    use Outcome as O;
    let invalid_park = (O::Park(Park::Invalid(s)), s);
    match (op, s) {
        (Op::TryStart, R) => (O::Start(Start::Started), RUN),
        (Op::TryStart, C) => (O::Start(Start::Terminated), C),
        (Op::TryStart, _) => (O::Start(Start::Invalid(s)), s),

        (Op::ParkIdle, RUN) => (O::Park(Park::Parked), I),
        (Op::ParkBlocked | Op::FinishDispatch, RUN) => (O::Park(Park::Parked), B),
        (Op::ParkIdle | Op::ParkBlocked | Op::FinishDispatch, RUN_N) => (O::Park(Park::Requeue), R),
        (Op::Reschedule, RUN | RUN_N) => (O::Park(Park::Requeue), R),
        (Op::ParkIdle | Op::ParkBlocked | Op::FinishDispatch | Op::Reschedule, C) => {
            (O::Park(Park::Terminated), C)
        }
        (Op::ParkIdle | Op::ParkBlocked | Op::FinishDispatch | Op::Reschedule, _) => invalid_park,

        (Op::Complete, RUN | RUN_N) => (O::Finish(Finish::Completed), C),
        (Op::Complete, C) => (O::Finish(Finish::Terminated), C),
        (Op::Complete, _) => (O::Finish(Finish::Invalid(s)), s),

        (Op::ForceComplete, C) => (O::Force(ForceComplete::AlreadyComplete), C),
        (Op::ForceComplete, _) => (O::Force(ForceComplete::Won { previous: s }), C),

        (Op::Wake, B | I) => (O::Wake(Wake::Queue), R),
        (Op::Wake, RUN | RUN_N) => (O::Wake(Wake::Notified), RUN_N),
        (Op::Wake, R) => (O::Wake(Wake::AlreadyReady), R),
        (Op::Wake, C) => (O::Wake(Wake::Complete), C),
        (Op::Wake, _) => unreachable!("{s:?} is not a valid state"),
    }
}

#[test]
fn every_transition_from_every_state() {
    let mut checked = 0;
    for s in ALL {
        for op in OPS {
            let cell = StateCell::from_state(s);
            let got = apply(&cell, op);
            let after = cell.load();
            let (want, want_after) = expected(op, s);
            assert_eq!(got, want, "{op:?} from {s:?}");
            assert_eq!(after, want_after, "{op:?} from {s:?}");
            assert!(after.is_valid(), "{op:?} from {s:?} left {after:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, 48);
}

#[test]
fn illegal_transitions_leave_the_word_untouched() {
    for s in [R, B, I] {
        for op in [
            Op::ParkIdle,
            Op::ParkBlocked,
            Op::FinishDispatch,
            Op::Reschedule,
        ] {
            let cell = StateCell::from_state(s);
            assert_eq!(apply(&cell, op), Outcome::Park(Park::Invalid(s)));
            assert_eq!(cell.word.load(Ordering::Relaxed), s.0);
        }
        let cell = StateCell::from_state(s);
        assert_eq!(cell.complete(), Finish::Invalid(s));
        assert_eq!(cell.load(), s);
    }
    for s in [RUN, RUN_N, B, I] {
        let cell = StateCell::from_state(s);
        assert_eq!(cell.try_start(), Start::Invalid(s));
        assert_eq!(cell.load(), s);
    }
}

/// Pitfall 4 of the reference: a wakeup flag surviving into the next run
/// made that run's park re-queue the process for an empty step.
#[test]
fn no_wakeup_flag_survives_into_the_next_run() {
    for exit in [
        Op::ParkIdle,
        Op::ParkBlocked,
        Op::FinishDispatch,
        Op::Reschedule,
    ] {
        let cell = StateCell::new();
        assert_eq!(cell.try_start(), Start::Started);
        assert_eq!(cell.wake(), Wake::Notified);
        assert_eq!(cell.wake(), Wake::Notified);
        assert_eq!(apply(&cell, exit), Outcome::Park(Park::Requeue), "{exit:?}");
        assert!(!cell.load().is_notified(), "{exit:?}");
        assert_eq!(cell.try_start(), Start::Started);
        assert_eq!(cell.load(), RUN);
        assert_eq!(
            cell.park_idle(),
            Park::Parked,
            "stale flag after {exit:?} re-queued the process"
        );
    }
}

#[test]
fn wake_while_ready_rewrites_without_changing() {
    let cell = StateCell::new();
    for _ in 0..3 {
        assert_eq!(cell.wake(), Wake::AlreadyReady);
        assert_eq!(cell.load(), R);
    }
}

#[test]
fn force_complete_assigns_close_to_exactly_one_party() {
    // Not running: the forcer closes; the worker that pops it drops it.
    for s in [R, B, I] {
        let cell = StateCell::from_state(s);
        let f = cell.force_complete();
        assert!(f.must_close(), "{s:?}");
        assert_eq!(cell.try_start(), Start::Terminated);
    }
    // Running: the worker learns it at its next transition and closes.
    for s in [RUN, RUN_N] {
        let cell = StateCell::from_state(s);
        assert!(!cell.force_complete().must_close());
        assert_eq!(cell.park_idle(), Park::Terminated);
        let cell = StateCell::from_state(s);
        let _ = cell.force_complete();
        assert_eq!(cell.complete(), Finish::Terminated);
    }
    // Complete: nobody wins.
    let cell = StateCell::from_state(C);
    assert!(!cell.force_complete().must_close());
}

#[test]
fn result_helpers() {
    assert!(Park::Requeue.must_queue());
    assert!(!Park::Parked.must_queue());
    assert!(Wake::Queue.must_queue());
    for w in [Wake::Notified, Wake::AlreadyReady, Wake::Complete] {
        assert!(!w.must_queue());
    }
    assert!(I.is_parked() && B.is_parked() && !RUN.is_parked());
    assert_eq!(
        [R, RUN, B, I, C].map(State::phase),
        [
            Phase::Ready,
            Phase::Running,
            Phase::Blocked,
            Phase::Idle,
            Phase::Complete
        ]
    );
}

#[test]
fn invalid_words_are_recognised() {
    assert!(ALL.iter().all(|s| s.is_valid()));
    for raw in [
        5,
        6,
        7,
        READY | NOTIFIED,
        IDLE | NOTIFIED,
        COMPLETE | NOTIFIED,
        0x10,
    ] {
        assert!(!State(raw).is_valid(), "{raw:#x}");
    }
    assert_eq!(format!("{:?}", State(0x10)), "State(0x10)");
    assert_eq!(
        format!("{:?}", StateCell::new()),
        "StateCell { state: State { phase: Ready, notified: false } }"
    );
}

/// A step-by-step simulation of one process driven by several actors that
/// follow the scheduler protocol, each action one atomic operation, in any
/// interleaving. Checks after every action that the word is valid, that the
/// process is in a run queue (or owed to one) exactly when it is Ready, and
/// that at most one worker owns it; at quiescence, that no event is stranded,
/// lost or stepped twice and that the process is closed exactly once if it
/// completed.
mod simulation {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Sender {
        Free,
        Pushed,
        MustQueue,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Worker {
        Free,
        /// Owns the process, events not drained yet.
        Started,
        /// Owns the process, stepped; about to leave Running.
        Stepped,
        /// Parked it; about to re-check the event queue.
        Recheck,
        MustQueue,
    }

    struct Sim {
        cell: StateCell,
        events: VecDeque<u32>,
        run_queue: usize,
        next_id: u32,
        stepped: Vec<u32>,
        closes: u32,
        senders: Vec<Sender>,
        workers: Vec<Worker>,
        forced: bool,
    }

    impl Sim {
        fn new(senders: usize, workers: usize) -> Self {
            Self {
                cell: StateCell::new(),
                events: VecDeque::new(),
                run_queue: 1, // submitted: Ready and queued
                next_id: 0,
                stepped: Vec::new(),
                closes: 0,
                senders: vec![Sender::Free; senders],
                workers: vec![Worker::Free; workers],
                forced: false,
            }
        }

        fn push(&mut self) {
            self.events.push_back(self.next_id);
            self.next_id += 1;
        }

        fn close(&mut self) {
            self.closes += 1;
        }

        /// One action of sender `i`. Returns whether it did anything.
        fn sender(&mut self, i: usize) -> bool {
            self.senders[i] = match self.senders[i] {
                Sender::Free => {
                    self.push();
                    Sender::Pushed
                }
                Sender::Pushed => match self.cell.wake() {
                    Wake::Queue => Sender::MustQueue,
                    Wake::Notified | Wake::AlreadyReady | Wake::Complete => Sender::Free,
                },
                Sender::MustQueue => {
                    self.run_queue += 1;
                    Sender::Free
                }
            };
            true
        }

        /// One action of worker `i`; `choice` picks the step's status and
        /// whether the owner pushes an event of its own (no wake).
        fn worker(&mut self, i: usize, choice: u8) -> bool {
            self.workers[i] = match self.workers[i] {
                Worker::Free => {
                    if self.run_queue == 0 {
                        return false;
                    }
                    self.run_queue -= 1;
                    match self.cell.try_start() {
                        Start::Started => Worker::Started,
                        Start::Terminated => Worker::Free,
                        Start::Invalid(s) => panic!("duplicated: popped while {s:?}"),
                    }
                }
                Worker::Started => {
                    self.stepped.extend(self.events.drain(..));
                    Worker::Stepped
                }
                Worker::Stepped => {
                    if choice & 0b100 != 0 {
                        // A handler completing inline during dispatch, or a
                        // self-send: pushed by the owner, without wake.
                        self.push();
                    }
                    let park = match choice % 4 {
                        0 => {
                            match self.cell.complete() {
                                Finish::Completed | Finish::Terminated => self.close(),
                                Finish::Invalid(s) => panic!("complete from {s:?}"),
                            }
                            self.workers[i] = Worker::Free;
                            return true;
                        }
                        1 => self.cell.reschedule(),
                        2 => self.cell.park_idle(),
                        _ => self.cell.finish_dispatch(),
                    };
                    match park {
                        Park::Requeue => Worker::MustQueue,
                        Park::Parked => Worker::Recheck,
                        Park::Terminated => {
                            self.close();
                            Worker::Free
                        }
                        Park::Invalid(s) => panic!("park from {s:?}"),
                    }
                }
                Worker::Recheck => {
                    if !self.events.is_empty() && self.cell.wake() == Wake::Queue {
                        Worker::MustQueue
                    } else {
                        Worker::Free
                    }
                }
                Worker::MustQueue => {
                    self.run_queue += 1;
                    Worker::Free
                }
            };
            true
        }

        fn terminator(&mut self) -> bool {
            if self.forced {
                return false;
            }
            self.forced = true;
            if self.cell.force_complete().must_close() {
                self.close();
            }
            true
        }

        fn check(&self) {
            let s = self.cell.load();
            assert!(s.is_valid(), "corrupt word {s:?}");
            let owed = self
                .senders
                .iter()
                .filter(|&&a| a == Sender::MustQueue)
                .count()
                + self
                    .workers
                    .iter()
                    .filter(|&&a| a == Worker::MustQueue)
                    .count();
            let entries = self.run_queue + owed;
            if s.is_ready() {
                assert_eq!(entries, 1, "Ready with {entries} queue entries");
            } else if !s.is_complete() {
                // A Complete process may still sit in a queue: the worker
                // that pops it drops it.
                assert_eq!(
                    entries, 0,
                    "duplicated: {entries} queue entries while {s:?}"
                );
            }
            let owners = self
                .workers
                .iter()
                .filter(|&&a| matches!(a, Worker::Started | Worker::Stepped))
                .count();
            assert!(owners <= 1, "{owners} workers own the process");
            if s.is_running() {
                assert_eq!(owners, 1, "Running without an owner");
            }
            assert!(self.closes <= 1, "closed {} times", self.closes);
        }

        /// Lets every actor finish what it started, with steps that go Idle,
        /// until nothing moves.
        fn quiesce(&mut self) {
            loop {
                let mut moved = false;
                for i in 0..self.senders.len() {
                    if self.senders[i] != Sender::Free {
                        moved |= self.sender(i);
                        self.check();
                    }
                }
                for i in 0..self.workers.len() {
                    moved |= self.worker(i, 2);
                    self.check();
                }
                if !moved {
                    return;
                }
            }
        }

        fn check_quiescent(&self) {
            let s = self.cell.load();
            let mut seen = self.stepped.clone();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), self.stepped.len(), "an event was stepped twice");
            if s.is_complete() {
                assert_eq!(self.closes, 1, "completed but closed {} times", self.closes);
            } else {
                assert!(
                    s.is_parked(),
                    "stranded: {s:?} at quiescence with {} queue entries",
                    self.run_queue
                );
                assert!(
                    self.events.is_empty(),
                    "lost: events {:?} pending while {s:?} and nobody obliged to queue it",
                    self.events
                );
                assert_eq!(self.stepped.len() as u32, self.next_id, "lost events");
                assert_eq!(self.closes, 0);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn protocol_actors_keep_the_word_valid_and_lose_nothing(
            actions in proptest::collection::vec((0u8..5, any::<u8>()), 0..200),
            terminate in any::<bool>(),
        ) {
            // Two senders, two workers, one terminator (when enabled).
            let mut sim = Sim::new(2, 2);
            for (actor, choice) in actions {
                match actor {
                    0 | 1 => { sim.sender(usize::from(actor)); }
                    2 | 3 => { sim.worker(usize::from(actor - 2), choice); }
                    _ if terminate && choice < 8 => { sim.terminator(); }
                    _ => {}
                }
                sim.check();
            }
            sim.quiesce();
            sim.check_quiescent();
        }

        /// Arbitrary calls, legal or not, in any order: each answers what the
        /// table says and the word stays valid.
        #[test]
        fn arbitrary_calls_follow_the_table(ops in proptest::collection::vec(0usize..8, 0..100)) {
            let cell = StateCell::new();
            for op in ops {
                let op = OPS[op];
                let before = cell.load();
                let got = apply(&cell, op);
                let (want, after) = expected(op, before);
                prop_assert_eq!(got, want);
                prop_assert_eq!(cell.load(), after);
                prop_assert!(cell.load().is_valid());
            }
        }
    }

    /// The simulation catches a broken protocol: a worker that skips the
    /// re-check after parking strands an event it pushed itself.
    #[test]
    fn simulation_catches_a_skipped_recheck() {
        let mut sim = Sim::new(0, 1);
        assert!(sim.worker(0, 0)); // try_start
        assert!(sim.worker(0, 0)); // drain
        assert!(sim.worker(0, 0b110)); // owner pushes, park_idle -> Parked
        assert_eq!(sim.workers[0], Worker::Recheck);
        sim.workers[0] = Worker::Free; // skip the re-check
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sim.quiesce();
            sim.check_quiescent();
        }));
        let msg = caught.expect_err("stranded event not caught");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.starts_with("lost:"), "{msg}");
    }
}

/// Senders race `wake` against one worker loop that follows the protocol
/// (with steps that go Idle, Yield or Continue, and events the owner pushes
/// itself). Every event id must be stepped exactly once, every queue entry
/// must start exactly one run, and at the end the process must be parked
/// with an empty queue. No timing: the worker stops when the senders are
/// joined and the run queue is empty.
#[test]
fn concurrent_wakers_against_a_worker_loop() {
    const SENDERS: usize = 4;
    const PER_SENDER: usize = 2_000;
    const OWN_BASE: usize = SENDERS * PER_SENDER;

    enum Entry {
        Run,
        Stop,
    }

    struct Shared {
        cell: StateCell,
        events: Mutex<Vec<usize>>,
        sender_wins: AtomicUsize,
    }

    let shared = Arc::new(Shared {
        cell: StateCell::new(),
        events: Mutex::new(Vec::new()),
        sender_wins: AtomicUsize::new(0),
    });
    // The process starts Idle, as after a first step.
    assert_eq!(shared.cell.try_start(), Start::Started);
    assert_eq!(shared.cell.park_idle(), Park::Parked);

    let (tx, rx) = channel::channel::<Entry>();
    let barrier = Arc::new(Barrier::new(SENDERS + 1));

    let worker = {
        let shared = Arc::clone(&shared);
        let tx = tx.clone();
        let barrier = Arc::clone(&barrier);
        thread::spawn(move || {
            barrier.wait();
            let mut stepped = vec![0u32; OWN_BASE];
            let mut own_stepped = Vec::new();
            let (mut queued, mut started, mut runs) = (0usize, 0usize, 0usize);
            let mut next_own = OWN_BASE;
            let mut stopping = false;
            let mut batch = Vec::new();
            loop {
                let entry = if stopping {
                    match rx.try_recv() {
                        Ok(e) => e,
                        Err(_) => break,
                    }
                } else {
                    rx.recv().expect("the test holds a sender")
                };
                match entry {
                    Entry::Stop => {
                        stopping = true;
                        continue;
                    }
                    Entry::Run => {}
                }
                match shared.cell.try_start() {
                    Start::Started => started += 1,
                    other => panic!("queue entry for a process that could not start: {other:?}"),
                }
                runs += 1;
                batch.extend(shared.events.lock().unwrap().drain(..));
                for id in batch.drain(..) {
                    if id < OWN_BASE {
                        stepped[id] += 1;
                    } else {
                        own_stepped.push(id);
                    }
                }
                if runs % 7 == 0 {
                    // An inline completion: the owner pushes without wake.
                    shared.events.lock().unwrap().push(next_own);
                    next_own += 1;
                }
                let park = match runs % 3 {
                    0 => shared.cell.park_idle(),
                    1 => shared.cell.finish_dispatch(),
                    _ => shared.cell.reschedule(),
                };
                let requeue = match park {
                    Park::Requeue => true,
                    Park::Parked => {
                        let pending = !shared.events.lock().unwrap().is_empty();
                        pending && shared.cell.wake() == Wake::Queue
                    }
                    other => panic!("unexpected {other:?}"),
                };
                if requeue {
                    queued += 1;
                    tx.send(Entry::Run).unwrap();
                }
            }
            (stepped, own_stepped, next_own - OWN_BASE, queued, started)
        })
    };

    thread::scope(|scope| {
        for s in 0..SENDERS {
            let shared = &shared;
            let tx = tx.clone();
            let barrier = &barrier;
            scope.spawn(move || {
                barrier.wait();
                for k in 0..PER_SENDER {
                    shared.events.lock().unwrap().push(s * PER_SENDER + k);
                    if shared.cell.wake() == Wake::Queue {
                        // Relaxed: a counter read after the threads are joined.
                        shared.sender_wins.fetch_add(1, Ordering::Relaxed);
                        tx.send(Entry::Run).unwrap();
                    }
                }
            });
        }
    });
    tx.send(Entry::Stop).unwrap();
    let (stepped, mut own_stepped, own_pushed, worker_queued, started) = worker.join().unwrap();

    for (id, &n) in stepped.iter().enumerate() {
        assert_eq!(n, 1, "event {id} stepped {n} times");
    }
    own_stepped.sort_unstable();
    assert_eq!(
        own_stepped,
        (OWN_BASE..OWN_BASE + own_pushed).collect::<Vec<_>>()
    );
    // Relaxed: the senders are joined.
    let sender_wins = shared.sender_wins.load(Ordering::Relaxed);
    assert!(sender_wins >= 1);
    assert_eq!(
        started,
        sender_wins + worker_queued,
        "each winning wake must start exactly one run"
    );
    let end = shared.cell.load();
    assert!(end.is_parked(), "stranded: {end:?} at the end");
    assert!(
        shared.events.lock().unwrap().is_empty(),
        "lost: events left"
    );
}
