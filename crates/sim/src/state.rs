//! The simulator's state: live processes, their queued events, timers,
//! results, and what the simulator, its join handles and its completers
//! share.

use std::cell::{Cell, OnceCell, RefCell};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use stepsched_process::{CancelToken, Error, Event, Pid, Process, Tag};

use crate::builder::{FactoryFn, HandlerFn};
use crate::net::NetState;
use crate::outbox::SimOutbox;
use crate::rng::{SimRng, Streams};
use crate::{DurableStore, Faults, Network, ShutdownReport};

/// Where a queued event came from, for the per-sender order.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A message from outside any process.
    Host,
    /// A message from this process.
    Process(Pid),
    /// A completion (each its own origin).
    Completion(u64),
    /// The cancel event of a shutdown.
    Cancel,
}

/// A completion waiting for its virtual time: to which process (PID and
/// serial), which yield, what.
pub(crate) type Timed<P> = (Pid, u64, Tag, Result<<P as Process>::Response, Error>);

/// A process's timer waiting for its virtual time: to which process (PID
/// and serial), its number, the message it delivers.
pub(crate) type Alarm<P> = (Pid, u64, u64, <P as Process>::Message);

/// Clones a message of `P` (for the network's duplicates).
pub(crate) type CloneFn<P> = fn(&<P as Process>::Message) -> <P as Process>::Message;

/// The event type of `P`.
pub(crate) type Ev<P> = Event<<P as Process>::Message, <P as Process>::Response>;

/// Where the result of one process waits for its [`JoinHandle`] or for
/// [`Sim::take_result`].
pub(crate) enum Outcome<O> {
    Pending,
    Done(Result<O, Error>),
    Taken,
}

/// The result cell of one process, shared by its entry, the results map
/// and its join handle.
pub(crate) type ResultCell<P> = Rc<RefCell<Outcome<<P as Process>::Output>>>;

/// One live process.
pub(crate) struct Entry<P: Process> {
    /// `None` while it is being stepped (or initialized by an upgrade).
    pub(crate) process: Option<P>,
    /// Which process this is among all that had its PID: a completer of an
    /// earlier one must not reach it.
    pub(crate) serial: u64,
    /// Its cancel token, behind an `Rc`: a step's context borrows it
    /// through a clone of the `Rc` (no atomic count, as a clone of the
    /// token would take).
    pub(crate) cancel: Rc<CancelToken>,
    pub(crate) pending: Vec<(Origin, Ev<P>)>,
    pub(crate) result: ResultCell<P>,
    /// In the ready list.
    pub(crate) queued: bool,
    /// Being stepped now.
    pub(crate) running: bool,
    /// Terminated while being stepped: the step's end closes it.
    pub(crate) terminated: bool,
    /// Its random streams: its schedule, its faults, its own numbers.
    pub(crate) streams: Streams,
    /// Its name, if started by [`Sim::submit_named`](crate::Sim::submit_named).
    pub(crate) name: Option<Rc<str>>,
    /// Whether the faults of a process are aimed at it
    /// ([`Faults::only_process`]).
    pub(crate) aimed: bool,
}

/// A process started by name: how to restart it after a crash, and
/// whether it is down now.
pub(crate) struct Named<P: Process> {
    /// Its name: its factory's, its store's.
    pub(crate) name: Rc<str>,
    /// The method and a maker of the input of its `init`, at each start.
    pub(crate) method: String,
    pub(crate) input: Box<dyn Fn() -> P::Input>,
    /// Its result cell, kept across restarts: its join handle follows it.
    pub(crate) result: ResultCell<P>,
    /// Crashed, and not restarted yet.
    pub(crate) down: bool,
    /// How many times it crashed: a restart timer restarts only the crash
    /// it was set for.
    pub(crate) crashes: u64,
}

/// A runnable process in the ready queue: its key, then its PID (node,
/// number), the order it steps in. Three words, no padding: a push and the
/// heap's read of it right after stay cheap.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ready(pub(crate) u64, u64, u64);

impl Ready {
    pub(crate) fn new(key: u64, pid: Pid) -> Self {
        Ready(key, u64::from(pid.node()), pid.number())
    }

    pub(crate) fn pid(self) -> Pid {
        // The node came from a u32.
        Pid::new(self.1 as u32, self.2)
    }
}

/// A shutdown that has begun.
pub(crate) struct Stopping {
    /// The virtual time at which the processes still live are forced.
    pub(crate) deadline: Duration,
    pub(crate) report: ShutdownReport,
    /// Every process has ended.
    pub(crate) finished: bool,
}

/// The simulator's mutable state, borrowed only between calls into
/// process or handler code, never across them.
pub(crate) struct Inner<P: Process> {
    /// The terminate fault's stream.
    pub(crate) terminate_rng: SimRng,
    /// The shutdown fault's stream.
    pub(crate) shutdown_rng: SimRng,
    /// The ready key of the step being taken (or last taken): a process
    /// made ready now gets a key after it.
    pub(crate) clock: u64,
    pub(crate) now: Duration,
    pub(crate) timer_seq: u64,
    pub(crate) completion_seq: u64,
    pub(crate) next_number: u64,
    pub(crate) next_serial: u64,
    pub(crate) live: BTreeMap<Pid, Entry<P>>,
    /// The runnable processes by key: the smallest steps next (see
    /// [`Streams::key`]).
    pub(crate) ready: BinaryHeap<Reverse<Ready>>,
    /// The entry of the process being stepped, left at the top of `ready`
    /// while it runs: if it is made ready again, its new key replaces it
    /// there (one sift instead of a pop and a push); else it is popped
    /// when the step ends ([`Inner::settle`]).
    pub(crate) current: Option<Ready>,
    pub(crate) timers: BinaryHeap<Reverse<(Duration, u64)>>,
    pub(crate) timed: HashMap<u64, Timed<P>>,
    /// The processes' own timers ([`ContextExt::after`](https://docs.rs/stepsched)),
    /// by their sequence number in `timers`: to whom (PID, serial), which
    /// timer (its number in the trace), what.
    pub(crate) alarms: HashMap<u64, Alarm<P>>,
    /// How many process timers were set (their numbers in the trace).
    pub(crate) alarm_count: u64,
    /// The result cell of the latest process of each PID submitted here,
    /// and how many processes were submitted under it.
    pub(crate) results: BTreeMap<Pid, (ResultCell<P>, u64)>,
    /// The streams of processes being initialized (not yet live), for
    /// their `init`'s random numbers; the innermost last.
    pub(crate) initializing: Vec<(Pid, Streams)>,
    /// The trace, a line each, each ending in a newline.
    pub(crate) trace: String,
    /// The line of the step being taken (a buffer reused by every step).
    pub(crate) line: String,
    pub(crate) steps: u64,
    /// The events of the step being taken (a buffer reused by every step).
    pub(crate) batch: Vec<Ev<P>>,
    pub(crate) shutdown: Option<Stopping>,
    /// The network: its links, the messages in flight, the partitions.
    pub(crate) net: NetState<P::Message>,
    /// The processes started by name, by PID (while they have not ended).
    pub(crate) named: BTreeMap<Pid, Named<P>>,
    /// The durable stores, by name; `None` while a step has it out
    /// ([`SimContextExt::with_store`](crate::SimContextExt::with_store)).
    pub(crate) stores: BTreeMap<Rc<str>, Option<DurableStore>>,
    /// The restarts waiting for their virtual time, by their sequence
    /// number in `timers`: which process, after which crash.
    pub(crate) restarts: HashMap<u64, (Pid, u64)>,
}

impl<P: Process> Inner<P> {
    /// Whether `pid` was handed out or ran here: refusals for it are
    /// `Closed`, not `UnknownPid`.
    pub(crate) fn known(&self, pid: Pid) -> bool {
        self.results.contains_key(&pid) || (pid.node() == 0 && pid.number() < self.next_number)
    }

    pub(crate) fn make_ready(&mut self, pid: Pid) {
        if let Some(e) = self.live.get_mut(&pid)
            && !e.queued
            && !e.running
        {
            e.queued = true;
            let key = e.streams.key(self.clock);
            self.enqueue(Ready::new(key, pid));
        }
    }

    /// Adds `ready` to the ready queue: in the place of the entry of the
    /// step being taken if it is that process's.
    #[inline]
    fn enqueue(&mut self, ready: Ready) {
        match self.current {
            Some(current) if current.pid() == ready.pid() => self.replace(current, ready),
            _ => self.ready.push(Reverse(ready)),
        }
    }

    /// Puts `ready` in the place of `current`, the entry of the step being
    /// taken.
    #[inline(never)]
    fn replace(&mut self, current: Ready, ready: Ready) {
        self.current = None;
        if let Some(mut top) = self.ready.peek_mut()
            && top.0 == current
        {
            // Sifted down to its place when `top` drops.
            *top = Reverse(ready);
            return;
        }
        self.ready.retain(|Reverse(r)| *r != current);
        self.ready.push(Reverse(ready));
    }

    /// Ends a step: the stepped process's entry leaves the ready queue,
    /// unless it was made ready again.
    #[inline(never)]
    pub(crate) fn settle(&mut self) {
        if let Some(current) = self.current.take() {
            match self.ready.peek() {
                Some(Reverse(top)) if *top == current => {
                    self.ready.pop();
                }
                _ => self.ready.retain(|Reverse(r)| *r != current),
            }
        }
    }

    pub(crate) fn push_event(
        &mut self,
        pid: Pid,
        origin: Origin,
        event: Ev<P>,
    ) -> Result<(), Ev<P>> {
        match self.live.get_mut(&pid) {
            Some(e) if !e.terminated => {
                e.pending.push((origin, event));
                if !e.queued && !e.running {
                    e.queued = true;
                    let key = e.streams.key(self.clock);
                    self.enqueue(Ready::new(key, pid));
                }
                Ok(())
            }
            _ => Err(event),
        }
    }

    /// Whether `pid` is live as the process numbered `serial`, not
    /// terminated.
    pub(crate) fn reachable(&self, pid: Pid, serial: u64) -> bool {
        self.live
            .get(&pid)
            .is_some_and(|e| e.serial == serial && !e.terminated)
    }

    /// Whether `pid` is a named process that crashed and waits for its
    /// restart.
    pub(crate) fn down(&self, pid: Pid) -> bool {
        self.named.get(&pid).is_some_and(|n| n.down)
    }

    /// Whether a shutdown has begun.
    pub(crate) fn stopping(&self) -> bool {
        self.shutdown.is_some()
    }

    /// A shutdown that has begun and not finished.
    pub(crate) fn shutting_down(&self) -> Option<&Stopping> {
        self.shutdown.as_ref().filter(|s| !s.finished)
    }

    /// Appends `line` to the trace.
    pub(crate) fn push_line(&mut self, line: &str) {
        self.trace.push_str(line);
        self.trace.push('\n');
    }
}

/// What the simulator, its join handles and its completers share.
pub(crate) struct Shared<P: Process> {
    pub(crate) seed: u64,
    /// The faults (all off once healed: [`Sim::heal`](crate::Sim::heal)).
    pub(crate) faults: Cell<Faults>,
    /// The network, if on (its faults off once healed).
    pub(crate) network: Cell<Option<Network>>,
    /// Clones a message, for the network's duplicates (set with the
    /// network).
    pub(crate) clone_message: Cell<Option<CloneFn<P>>>,
    pub(crate) max_steps: u64,
    pub(crate) tracing: bool,
    pub(crate) handlers: HashMap<String, HandlerFn<P>>,
    pub(crate) factories: HashMap<String, FactoryFn<P>>,
    /// A run (or join, or shutdown) is in progress: another must not start
    /// from inside it.
    pub(crate) driving: Cell<bool>,
    /// Where addresses send (made at the first address; see `outbox.rs`).
    pub(crate) outbox: OnceCell<Arc<SimOutbox<P::Message>>>,
    pub(crate) inner: RefCell<Inner<P>>,
}

/// Runs `f`, turning a panic into an error.
pub(crate) fn caught<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => Err(Error::from_panic(&*panic)),
    }
}

/// Closes `process` and drops it, ignoring a panic in either.
pub(crate) fn close<P: Process>(mut process: P) {
    let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
    quietly_drop(process);
}

/// Closes a process that is kept (its value is handed back afterwards).
pub(crate) fn close_ref<P: Process>(process: &mut P) {
    let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
}

/// Drops `value`, ignoring a panic in its `Drop`.
pub(crate) fn quietly_drop<T>(value: T) {
    let _ = catch_unwind(AssertUnwindSafe(move || drop(value)));
}
