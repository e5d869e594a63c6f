//! A loom model of the whole scheduler, through its public API.
//!
//! One process on a two-worker pool (loom threads, atomics and locks all
//! the way down: the pool's queues and parking, the event queue, the state
//! cell). The process yields one command, whose handler completes it from
//! another thread, while a third thread sends the process a message. The
//! process finishes once it has seen both events. Checked in every
//! interleaving loom explores:
//!
//! * no two steps of the process overlap (an "in step" flag);
//! * the process ends exactly once, with the result that proves it saw the
//!   completion and the message (nothing lost), and `close` runs once;
//! * nothing hangs: a lost wake-up would leave the joining thread and the
//!   workers blocked, which loom reports as a deadlock.
//!
//! In these two models the event queue is made with the process (loom
//! would need hours for the whole model with the lazy creation's extra
//! interleavings; `a_refused_send_means_the_result_stands`, a smaller
//! model, runs both ways); `first_events_race_to_create_the_queue` checks that
//! creation race on its own: one worker and two senders whose messages
//! are the process's first events, through the loom-visible once-cell that
//! normal builds replace with std's `OnceLock`.
//!
//! # What the models see, what they cannot, and what covers that
//!
//! * **Reference counts.** A slot is held through `SlotArc`, which is
//!   loom's `Arc` under loom: every reference a run, a parked process, a
//!   waker, a forcer or a completer takes or releases is seen, and a
//!   reference released twice ("Arc is already released", or a lookup of
//!   one already gone) or never ("Arc leaked") fails the model. A read of
//!   the slot after the transition that hands it to another thread (a
//!   park) races with its release, which loom reports through a cell the
//!   slot's drop writes (`Slot::pid`). The core and the handlers stay in
//!   std's `Arc` (loom's cannot hold the `dyn` handlers); the core outlives
//!   every run (see `Builder::build`).
//! * **The process body.** It sits in a plain `UnsafeCell`, so loom cannot
//!   flag two threads touching it. Its exclusivity comes from the state
//!   cell, whose models in `stepsched-process` hold the body, the events and
//!   the forcer's reason in loom cells; here the `in_step` probe checks that
//!   steps never overlap.
//! * **The lazy event queue** in the whole model: covered by
//!   `first_events_race_to_create_the_queue` (see above).
//! * **The routing table.** Its shard locks are std's, not loom's, so routes
//!   are outside the model. Register, lookup and compare-before-delete are
//!   checked by the relay crate's ledger tests
//!   (`send_register_unregister_ledger`, `compare_before_delete_under_reuse`)
//!   and, through the scheduler, by `a_reused_pid_is_never_touched_by_its_old_process`
//!   and `a_stale_completer_never_reaches_a_new_process_with_the_same_pid`.
//! * **Shutdown and time.** Deadlines are wall-clock time, which loom does
//!   not model. The submit-versus-shutdown handshake is checked by the
//!   deterministic `submit_registering_after_the_shutdown_sweeps_still_completes`
//!   (it fails without the `forcing` check in `submit`) and the racing
//!   submits in `tests/shutdown.rs`; the Dekker between a publishing worker
//!   and shutdown's wait is in this model (its process publishes while the
//!   scheduler is dropped), and the mutation ledger removes its fence.
//!
//! A whole scheduler is a large model, so these run with one preemption
//! (the race model takes a few minutes; the protocols it composes are
//! model-checked at higher bounds in their own crates). `cargo xtask loom`
//! runs them, or
//! `RUSTFLAGS="--cfg stepsched_loom" cargo test --release -p stepsched --features loom --test loom`.
#![cfg(stepsched_loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::thread;
use std::sync::Arc;

use stepsched::{Completer, Context, Error, Events, Process, Scheduler, Status, StepOutput};

struct Probe {
    in_step: AtomicBool,
    overlaps: AtomicUsize,
    closes: AtomicUsize,
}

impl Probe {
    fn new() -> Arc<Self> {
        Arc::new(Probe {
            in_step: AtomicBool::new(false),
            overlaps: AtomicUsize::new(0),
            closes: AtomicUsize::new(0),
        })
    }
}

struct Proc {
    probe: Arc<Probe>,
    yielded: bool,
    completion: u64,
    message: u64,
    /// Messages to see before finishing, and seen so far.
    needed: u32,
    seen: u32,
}

impl Proc {
    /// A process that has `yielded` (or not), whose sums of completions
    /// and messages start at `completion` and `message`, and that finishes
    /// once it has seen `needed` messages.
    fn new(probe: &Arc<Probe>, yielded: bool, completion: u64, message: u64, needed: u32) -> Self {
        Proc {
            probe: probe.clone(),
            yielded,
            completion,
            message,
            needed,
            seen: 0,
        }
    }
}

impl Process for Proc {
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
        if self.probe.in_step.swap(true, SeqCst) {
            self.probe.overlaps.fetch_add(1, SeqCst);
        }
        for event in events {
            match event.kind() {
                stepsched::EventKind::Completion => {
                    self.completion += event.into_data().unwrap_or(0)
                }
                stepsched::EventKind::Message => {
                    self.seen += 1;
                    self.message += event.into_data().unwrap_or(0)
                }
                stepsched::EventKind::Cancel => {}
            }
        }
        if !self.yielded {
            self.yielded = true;
            out.push_yield(1, "work".to_string());
            out.set_status(Status::Yield);
        } else if self.completion == 0 {
            out.set_status(Status::Yield);
        } else if self.seen < self.needed {
            out.set_status(Status::Idle);
        } else {
            out.set_status(Status::Done(self.completion * 100 + self.message));
        }
        self.probe.in_step.store(false, SeqCst);
        Ok(())
    }

    fn close(&mut self) {
        self.probe.closes.fetch_add(1, SeqCst);
    }
}

#[test]
fn completion_from_another_thread_and_a_message_race_the_workers() {
    // Five threads over a whole scheduler: one preemption keeps the model
    // to a few minutes.
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(1);
    model.check(|| {
        stepsched::eager_event_queues(true);
        let probe = Probe::new();
        let scheduler = Scheduler::<Proc>::builder()
            .workers(2)
            .handler("work", |_cmd: String, done: Completer<Proc>| {
                thread::spawn(move || {
                    done.complete(Ok(7));
                });
            })
            .build()
            .unwrap();
        let pid = scheduler.allocate_pid();
        let process = Proc::new(&probe, false, 0, 0, 1);
        let join = scheduler.submit(pid, process, "run", ()).unwrap();
        let handle = scheduler.handle();
        let sender = thread::spawn(move || handle.send(pid, 3).is_ok());
        assert!(
            sender.join().unwrap(),
            "the process is live until it has the message"
        );
        assert_eq!(
            join.join().unwrap(),
            703,
            "a completion or the message was lost"
        );
        drop(scheduler);
        assert_eq!(probe.overlaps.load(SeqCst), 0, "two steps overlapped");
        assert_eq!(probe.closes.load(SeqCst), 1, "close must run exactly once");
    });
}

#[test]
fn one_step_process_completes() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(1);
    model.check(|| {
        stepsched::eager_event_queues(true);
        let probe = Probe::new();
        let scheduler = Scheduler::<Proc>::builder().workers(2).build().unwrap();
        let pid = scheduler.allocate_pid();
        let process = Proc::new(&probe, true, 1, 1, 0);
        let join = scheduler.submit(pid, process, "run", ()).unwrap();
        assert_eq!(join.join().unwrap(), 101);
        drop(scheduler);
        assert_eq!(probe.closes.load(SeqCst), 1);
    });
}

/// Two senders' messages are the first events of an idle process: both
/// race to create its event queue (lazily, as in normal builds) while the
/// one worker may be stepping or parking it. Both messages arrive, once.
#[test]
fn first_events_race_to_create_the_queue() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(1);
    model.check(|| {
        stepsched::eager_event_queues(false);
        let probe = Probe::new();
        let scheduler = Scheduler::<Proc>::builder().workers(1).build().unwrap();
        let pid = scheduler.allocate_pid();
        // Already yielded and completed: it waits (Idle) for two messages.
        let process = Proc::new(&probe, true, 1, 0, 2);
        let join = scheduler.submit(pid, process, "run", ()).unwrap();
        let senders: Vec<_> = [10u64, 20]
            .into_iter()
            .map(|m| {
                let handle = scheduler.handle();
                thread::spawn(move || handle.send(pid, m).is_ok())
            })
            .collect();
        for sender in senders {
            assert!(
                sender.join().unwrap(),
                "the process is live until it has both"
            );
        }
        assert_eq!(join.join().unwrap(), 130, "a first message was lost");
        drop(scheduler);
        assert_eq!(probe.overlaps.load(SeqCst), 0, "two steps overlapped");
        assert_eq!(probe.closes.load(SeqCst), 1, "close must run exactly once");
    });
}

/// A process whose first step returns `Done`, while another thread sends
/// to it and then terminates it. Whatever the interleaving, the answers
/// agree: a send refused as to a finished process is never followed by a
/// `terminate` that succeeds, and the joiner gets the step's result unless
/// `terminate` succeeded.
/// (The worker seals the queue before its transition to Complete; a
/// forcer that sealed after it used to win the state cell in between and
/// replace the result by `Terminated`.)
#[test]
fn a_refused_send_means_the_result_stands() {
    // One worker: two preemptions (the worker runs ahead of the submitter,
    // then stops between its seal and its transition) are needed to reach
    // the window, and the model stays to seconds. Both shapes of the
    // inbox: no queue yet (the send is refused by the seal bit alone) and
    // a queue made with the process (the bit on the queue's word, which
    // the worker's first drain has also tagged as taken). At this bound
    // loom reaches the window in the first shape only; the second checks
    // that the tagged word refuses the same way.
    for eager in [false, true] {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(2);
        model.check(move || {
            stepsched::eager_event_queues(eager);
            let probe = Probe::new();
            let scheduler = Scheduler::<Proc>::builder().workers(1).build().unwrap();
            let pid = scheduler.allocate_pid();
            // Already yielded and completed, needs no message: done at its
            // first step, with 100 plus whatever message that step took.
            let process = Proc::new(&probe, true, 1, 0, 0);
            let join = scheduler.submit(pid, process, "run", ()).unwrap();
            let handle = scheduler.handle();
            let other = thread::spawn(move || {
                let refused = handle.send(pid, 5).is_err();
                (refused, handle.terminate(pid))
            });
            let (refused, terminated) = other.join().unwrap();
            let result = join.join();
            if refused {
                assert!(
                    terminated.is_err(),
                    "a send was refused as to a finished process, then terminate succeeded"
                );
            }
            match terminated {
                Ok(()) => assert_eq!(result, Err(Error::Terminated)),
                Err(_) => assert!(
                    matches!(result, Ok(100 | 105)),
                    "the step's result was replaced: {result:?}"
                ),
            }
            drop(scheduler);
            assert_eq!(probe.closes.load(SeqCst), 1, "close must run exactly once");
        });
    }
}

/// Yields `left` commands one step after another, then finishes with the
/// sum of their completions.
struct Chain {
    left: u32,
    sum: u64,
}

impl Process for Chain {
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
        self.sum += events.filter_map(|e| e.into_data()).sum::<u64>();
        if self.left == 0 {
            out.set_status(Status::Done(self.sum));
        } else {
            self.left -= 1;
            out.push_yield(u64::from(self.left), "now".to_string());
            out.set_status(Status::Yield);
        }
        Ok(())
    }
}

/// Handlers that complete at once, on the dispatching worker: each
/// completer's reference to the slot is lent back to the run as a spare
/// and taken by the next yield's completer, and the run releases what is
/// left when it ends. The slot's `Arc` is loom's, so a reference released
/// twice (a spare taken without being counted out) or never (a spare not
/// released) fails the model, while a sender races the run and a second
/// worker may take the process.
#[test]
fn inline_completions_lend_spare_references() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(1);
    model.check(|| {
        stepsched::eager_event_queues(true);
        let scheduler = Scheduler::<Chain>::builder()
            .workers(1)
            .handler("now", |_cmd: String, done: Completer<Chain>| {
                done.complete(Ok(10));
            })
            .build()
            .unwrap();
        let pid = scheduler.allocate_pid();
        let join = scheduler
            .submit(pid, Chain { left: 3, sum: 0 }, "run", ())
            .unwrap();
        let handle = scheduler.handle();
        let sender = thread::spawn(move || handle.send(pid, 1).is_ok());
        let sent = sender.join().unwrap();
        let sum = join.join().unwrap();
        assert!(sum == 30 || (sent && sum == 31), "{sum}");
        drop(scheduler);
    });
}
