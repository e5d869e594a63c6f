//! The process state cell: the lifecycle of one process and its wakeup flag
//! in a single atomic word, changed only by compare-and-swap loops.
//!
//! The design follows tokio's task state (`tokio/src/runtime/task/state.rs`):
//! one packed word with named bits, a `Copy` snapshot ([`State`]), and one
//! method per transition that returns a `#[must_use]` enum telling the
//! caller what to do next. The lifecycle: Ready → Running →
//! Blocked / Idle / Complete, Blocked / Idle → Ready; the wakeup flag closes
//! the race between a completion and the worker that still runs the process.
//!
//! # The word
//!
//! | bits | meaning |
//! |------|---------|
//! | 0–2  | phase: `READY` 0, `RUNNING` 1, `BLOCKED` 2, `IDLE` 3, `COMPLETE` 4 |
//! | 3    | `NOTIFIED`, the wakeup flag: events arrived while `RUNNING` |
//! | rest | zero |
//!
//! `NOTIFIED` is only ever set together with `RUNNING`: every transition out
//! of `RUNNING` consumes it, and every transition into `RUNNING` starts with
//! it clear.
//!
//! # Transitions
//!
//! Every change is one successful `compare_exchange` of the whole word,
//! computed from the value the CAS last read. A CAS that fails — for
//! instance because a waker just set `NOTIFIED` — recomputes the transition
//! from the value it found and tries again; it never gives up on a stale
//! view (the reference implementation dropped the transition there and
//! stranded the process).
//!
//! | operation | from | to | result |
//! |-----------|------|----|--------|
//! | [`try_start`](StateCell::try_start) | Ready | Running | `Started` |
//! | | Complete | — | `Terminated` |
//! | [`park_idle`](StateCell::park_idle) | Running | Idle | `Parked` |
//! | [`park_blocked`](StateCell::park_blocked), [`finish_dispatch`](StateCell::finish_dispatch) | Running | Blocked | `Parked` |
//! | park_\*, finish_dispatch, [`reschedule`](StateCell::reschedule) | Running + NOTIFIED | Ready | `Requeue` |
//! | [`reschedule`](StateCell::reschedule) | Running | Ready | `Requeue` |
//! | park_\*, finish_dispatch, reschedule, [`complete`](StateCell::complete) | Complete | — | `Terminated` |
//! | [`complete`](StateCell::complete) | Running (± NOTIFIED) | Complete | `Completed` |
//! | [`force_complete`](StateCell::force_complete) | any but Complete | Complete | `Won { previous }` |
//! | | Complete | — | `AlreadyComplete` |
//! | [`wake`](StateCell::wake) | Blocked, Idle | Ready | `Queue` |
//! | | Running (± NOTIFIED) | Running + NOTIFIED | `Notified` |
//! | | Ready | Ready (rewritten) | `AlreadyReady` |
//! | | Complete | — | `Complete` |
//!
//! Any other combination is a caller bug: the method returns `Invalid(state)`
//! and leaves the word untouched.
//!
//! # Why no completion or message is lost, and none runs the process twice
//!
//! *One queue entry per Ready.* Every transition into Ready is a CAS whose
//! single winner receives `Queue` or `Requeue` and must put the process in a
//! run queue; every other caller receives something else. So a Ready process
//! is in exactly one run queue (or about to be, by the winner), and a process
//! in no queue is not Ready. A process leaves the queue only through
//! `try_start`, which only one worker can win, so at most one worker runs it.
//!
//! *Every wake is an RMW on the word.* A producer pushes its event *before*
//! calling `wake`, and `wake` on an unfinished process always ends in a
//! successful CAS, even when the state stays the same (Ready, or Running
//! with the flag already set). All writes to the word are AcqRel
//! read-modify-writes, so the word's modification order totally orders the
//! wakes and the worker's transitions, and each later transition *happens
//! after* each earlier one. Then for the
//! state the waker's CAS saw:
//!
//! * Blocked or Idle — the waker won and queues the process; the next run's
//!   `try_start` comes after the wake, so the drain that follows sees the
//!   event.
//! * Running — the flag is set; the owner's next transition out of Running
//!   is a CAS that cannot succeed on a value older than the flag (it would
//!   fail and re-read), so it sees the flag and answers `Requeue`; the next
//!   run drains the event. This is *notify while running*.
//! * Ready — the process is queued and has not started; its `try_start`
//!   comes after this wake in the modification order, so its drain sees the
//!   event.
//! * Complete — the process takes no more events.
//!
//! The queue itself need not order anything: a push that ends with a
//! Release store and a drain that reads with Acquire loads (as
//! `stepsched-mpsc` does) suffice, because the push comes before the
//! producer's Release `wake` and the drain after the owner's Acquire
//! `try_start` (or, for a flag, after the `try_start` of the run that
//! `Requeue` starts, which reads a value of the wake's release sequence).
//!
//! *No stale flag.* `try_start` starts with the flag clear: the drain that
//! follows every successful `try_start` already sees every event whose wake
//! came before it, so a flag from before the start would only re-step the
//! process with an empty batch.
//!
//! # The protocol a scheduler follows
//!
//! ```text
//! producer (handler completing a yield, sender of a message, and the
//! worker itself when it pushes an event for the process it runs):
//!     push the event into the process's event queue
//!     if state.wake() == Queue { put the process in a run queue }
//!
//! worker, holding a process it popped from a run queue:
//!     match state.try_start() {
//!         Started => {}
//!         Terminated => drop it   // force-completed while queued; the forcer closes it
//!     }
//!     drain the event queue, step
//!     let park = match status {
//!         Done | error => { state.complete(); close; report; return }
//!         Continue     => state.reschedule(),
//!         Idle         => state.park_idle(),
//!         Yield        => { dispatch the yields; state.finish_dispatch() }
//!     };
//!     match park {
//!         Requeue    => put the process in a run queue,
//!         Terminated => close; report Terminated,
//!         Parked     => {}   // the process, and its queue's consumer side, are no longer ours
//!     }
//! ```
//!
//! Every push is followed by a `wake`, the worker's own included (a
//! process sending to itself): while Running that wake only sets the flag,
//! and the park answers `Requeue`. A worker that wants to spare that RMW
//! must keep such events out of the queue (a scheduler can hand completions
//! made inline during dispatch to the next step directly, without the queue
//! or a wake), or look at the queue *before* it leaves Running and
//! reschedule instead of parking. It may not look *after* `Parked`: by then
//! a waker may have queued the process and another worker be draining the
//! queue, and a look at the queue is a read of the consumer's side
//! (`Receiver::has_events` reads the consumer's position, which the drain
//! moves), a data race.
//!
//! A worker that drained an *empty* batch after a wake (the event it was
//! woken for was already taken by an earlier run) may park again instead of
//! stepping; the cell is indifferent.
//!
//! ## Termination and `close`
//!
//! [`force_complete`](StateCell::force_complete) (terminate, or a shutdown
//! deadline) moves any unfinished state to Complete; exactly one caller wins.
//! `close` is then owed by exactly one party: the forcer, when the previous
//! state was not Running (no worker holds the process and none can start it,
//! so the forcer has it to itself — [`ForceComplete::must_close`]); otherwise
//! the worker still running it, whose next transition reports `Terminated`.
//!
//! ## Bits left out
//!
//! There is no QUEUED bit: "in a run queue" is exactly "Ready", as argued
//! above. There is no CANCELLED bit: cancellation reaches a process as an
//! [`Event::cancel`](crate::Event::cancel) (which wakes it like any event)
//! and through its [`CancelToken`](crate::CancelToken), while termination is
//! the Complete phase itself. A second channel in the word would only add
//! states to check.
//!
//! # Memory ordering
//!
//! Every write is `compare_exchange_weak(AcqRel, Acquire)`; each transition
//! names its success ordering and says which half it needs. Release makes
//! what the caller did before the transition (the events a waker pushed, the
//! process state a worker left behind) visible to whoever performs a later
//! transition; Acquire makes the new owner see them. Because the word is only
//! written by read-modify-writes, release sequences chain through every
//! transition, which is what the argument above relies on. Loads that end a
//! call without a write are Acquire, so a caller that sees Complete also
//! sees what the completing worker published, and a worker told `Terminated`
//! sees what the forcer did first.
//!
//! The loom models in `src/state/loom_tests.rs` check the races above, each
//! with a control variant that breaks the protocol and is caught. Their
//! event queue synchronizes as `stepsched-mpsc` does and lends the cell no
//! ordering, and the process body, the events and what a forcer or a
//! completing worker publishes are loom cells, so that every ordering the
//! argument needs is needed by a model: weakening any one of them to Relaxed
//! makes a model fail (`xtask/mutants/process.txt`). The halves a transition
//! does not need (Release for `try_start`; Acquire for the parks,
//! `reschedule`, `complete` and `wake`) are kept so that every write is
//! AcqRel and the contract stays one sentence; no model needs them.

use std::fmt;

use crate::primitive::sync::atomic::{self, AtomicUsize, Ordering};

const PHASE_MASK: usize = 0b0111;
const READY: usize = 0;
const RUNNING: usize = 1;
const BLOCKED: usize = 2;
const IDLE: usize = 3;
const COMPLETE: usize = 4;
/// The wakeup flag: events arrived while the process was Running.
const NOTIFIED: usize = 0b1000;

/// The lifecycle phase of a process, without the wakeup flag.
///
/// ```
/// use stepsched_process::{Phase, StateCell};
///
/// assert_eq!(StateCell::new().load().phase(), Phase::Ready);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// In a run queue (or about to be), waiting for a worker.
    Ready,
    /// A worker is running a step (or dispatching its yields).
    Running,
    /// Waiting for the completion of a yield.
    Blocked,
    /// Waiting for a message.
    Idle,
    /// Finished (done, failed or terminated); final.
    Complete,
}

/// A snapshot of a [`StateCell`]: the [`Phase`] and the wakeup flag.
///
/// ```
/// use stepsched_process::{Phase, StateCell};
///
/// let cell = StateCell::new();
/// let _ = cell.try_start();
/// let _ = cell.wake(); // while Running: sets the wakeup flag
/// let s = cell.load();
/// assert_eq!(s.phase(), Phase::Running);
/// assert!(s.is_running() && s.is_notified());
/// assert_eq!(format!("{s:?}"), "State { phase: Running, notified: true }");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct State(usize);

impl State {
    const fn of(phase: usize) -> Self {
        Self(phase)
    }

    /// The lifecycle phase.
    ///
    /// ```
    /// use stepsched_process::{Phase, StateCell};
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.force_complete();
    /// assert_eq!(cell.load().phase(), Phase::Complete);
    /// ```
    pub fn phase(self) -> Phase {
        match self.0 & PHASE_MASK {
            READY => Phase::Ready,
            RUNNING => Phase::Running,
            BLOCKED => Phase::Blocked,
            IDLE => Phase::Idle,
            COMPLETE => Phase::Complete,
            _ => unreachable!("corrupt process state word {:#x}", self.0),
        }
    }

    /// Whether the wakeup flag is set (events arrived while Running).
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// assert!(!StateCell::new().load().is_notified());
    /// ```
    pub fn is_notified(self) -> bool {
        self.0 & NOTIFIED != 0
    }

    /// Whether the phase is [`Phase::Ready`].
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// assert!(StateCell::new().load().is_ready());
    /// ```
    pub fn is_ready(self) -> bool {
        self.0 & PHASE_MASK == READY
    }

    /// Whether the phase is [`Phase::Running`].
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// assert!(cell.load().is_running());
    /// ```
    pub fn is_running(self) -> bool {
        self.0 & PHASE_MASK == RUNNING
    }

    /// Whether the phase is [`Phase::Blocked`].
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// let _ = cell.park_blocked();
    /// assert!(cell.load().is_blocked());
    /// ```
    pub fn is_blocked(self) -> bool {
        self.0 & PHASE_MASK == BLOCKED
    }

    /// Whether the phase is [`Phase::Idle`].
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// let _ = cell.park_idle();
    /// assert!(cell.load().is_idle());
    /// ```
    pub fn is_idle(self) -> bool {
        self.0 & PHASE_MASK == IDLE
    }

    /// Whether the phase is [`Phase::Complete`].
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// assert!(!StateCell::new().load().is_complete());
    /// ```
    #[inline]
    pub fn is_complete(self) -> bool {
        self.0 & PHASE_MASK == COMPLETE
    }

    /// Whether the process waits for an event: Blocked or Idle.
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// let _ = cell.park_idle();
    /// assert!(cell.load().is_parked());
    /// ```
    pub fn is_parked(self) -> bool {
        self.is_blocked() || self.is_idle()
    }

    /// Whether the word obeys the layout: a known phase, no stray bits, the
    /// flag only with Running.
    pub(crate) fn is_valid(self) -> bool {
        let phase = self.0 & PHASE_MASK;
        self.0 & !(PHASE_MASK | NOTIFIED) == 0
            && phase <= COMPLETE
            && (!self.is_notified() || phase == RUNNING)
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.is_valid() {
            return write!(f, "State({:#x})", self.0);
        }
        f.debug_struct("State")
            .field("phase", &self.phase())
            .field("notified", &self.is_notified())
            .finish()
    }
}

/// What the caller of [`StateCell::try_start`] does next.
#[must_use = "a started process must be run, a terminated one dropped"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Ready → Running: the caller now owns the process; drain its events
    /// and step it.
    Started,
    /// The process was force-completed while queued: drop this queue entry,
    /// do not run it (the forcer closes it).
    Terminated,
    /// The process was not Ready (a caller bug, such as a duplicate queue
    /// entry); the word is unchanged.
    Invalid(State),
}

/// What the owner does after leaving Running by [`StateCell::park_idle`],
/// [`StateCell::park_blocked`], [`StateCell::finish_dispatch`] or
/// [`StateCell::reschedule`].
#[must_use = "a requeued process must be put in a run queue"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Park {
    /// Running → Blocked/Idle. The caller no longer owns the process, nor
    /// the consumer side of its event queue: a waker may already have
    /// queued it and another worker be draining it.
    Parked,
    /// → Ready: the caller must put the process in a run queue (the wakeup
    /// flag was set, or the caller asked to reschedule).
    Requeue,
    /// The process was force-completed while running: the caller closes it
    /// and reports it terminated.
    Terminated,
    /// The process was not Running (a caller bug); the word is unchanged.
    Invalid(State),
}

impl Park {
    /// Whether the caller must put the process in a run queue.
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// assert!(cell.reschedule().must_queue());
    /// ```
    pub fn must_queue(self) -> bool {
        self == Self::Requeue
    }
}

/// What the caller of [`StateCell::wake`] does next.
#[must_use = "the waker that wins must put the process in a run queue"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Blocked/Idle → Ready: this caller won and must put the process in a
    /// run queue.
    Queue,
    /// The process is Running; the wakeup flag is set and its owner will
    /// re-queue it when it leaves Running.
    Notified,
    /// The process is already Ready (queued); its next run sees the event.
    AlreadyReady,
    /// The process is Complete; the event will never be stepped.
    Complete,
}

impl Wake {
    /// Whether the caller must put the process in a run queue.
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// let cell = StateCell::new();
    /// assert!(!cell.wake().must_queue()); // already Ready
    /// ```
    pub fn must_queue(self) -> bool {
        self == Self::Queue
    }
}

/// What the caller of [`StateCell::complete`] does next.
#[must_use = "the caller of complete must close the process"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Running → Complete: close the process and report its result.
    Completed,
    /// The process was force-completed while running: close it and report
    /// it terminated.
    Terminated,
    /// The process was not Running (a caller bug); the word is unchanged.
    Invalid(State),
}

/// The outcome of [`StateCell::force_complete`].
#[must_use = "the winner may owe the process its close"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForceComplete {
    /// This call moved the process to Complete from `previous`.
    Won {
        /// The state the process was in.
        previous: State,
    },
    /// The process was already Complete; nothing changed.
    AlreadyComplete,
}

impl ForceComplete {
    /// Whether this caller must close the process: it won, and no worker was
    /// running the process (a worker that was reports `Terminated` at its
    /// next transition and closes it).
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// let queued = StateCell::new();
    /// assert!(queued.force_complete().must_close());
    ///
    /// let running = StateCell::new();
    /// let _ = running.try_start();
    /// assert!(!running.force_complete().must_close());
    /// ```
    pub fn must_close(self) -> bool {
        matches!(self, Self::Won { previous } if !previous.is_running())
    }
}

/// The atomic state of one process; see the [module documentation](self)
/// for the protocol.
///
/// A new cell is Ready (a submitted process is queued at once). The cell is
/// one word; a scheduler that keeps many cells in an array may pad them
/// (`crossbeam_utils::CachePadded`) against false sharing.
///
/// ```
/// use stepsched_process::{Park, Start, StateCell, Wake};
///
/// let cell = StateCell::new();
/// assert_eq!(cell.try_start(), Start::Started);
///
/// // A completion arrives while the worker still runs the process...
/// assert_eq!(cell.wake(), Wake::Notified);
/// // ...so after dispatching, the worker re-queues instead of blocking.
/// assert_eq!(cell.finish_dispatch(), Park::Requeue);
///
/// // Next run: no flag survives, the process blocks, a completion wakes it.
/// assert_eq!(cell.try_start(), Start::Started);
/// assert_eq!(cell.finish_dispatch(), Park::Parked);
/// assert_eq!(cell.wake(), Wake::Queue);
/// assert_eq!(cell.wake(), Wake::AlreadyReady);
/// ```
pub struct StateCell {
    word: AtomicUsize,
}

/// What a transition function decides on one snapshot: write `next` (or
/// nothing) and return the result.
type Decision<R> = (Option<State>, R);

impl StateCell {
    /// A cell in the Ready phase.
    ///
    /// ```
    /// use stepsched_process::StateCell;
    ///
    /// assert!(StateCell::new().load().is_ready());
    /// ```
    pub fn new() -> Self {
        Self::from_state(State::of(READY))
    }

    pub(crate) fn from_state(state: State) -> Self {
        Self {
            word: AtomicUsize::new(state.0),
        }
    }

    /// A snapshot of the state. It may be stale by the time it is looked at;
    /// decisions are taken by the transition methods, not on snapshots.
    ///
    /// ```
    /// use stepsched_process::{Phase, StateCell};
    ///
    /// assert_eq!(StateCell::new().load().phase(), Phase::Ready);
    /// ```
    #[inline]
    pub fn load(&self) -> State {
        // Acquire: a caller that sees Complete also sees what the completing
        // worker wrote before its Release transition.
        State(self.word.load(Ordering::Acquire))
    }

    /// Ready → Running: claims the process for this worker. Starts with the
    /// wakeup flag clear.
    ///
    /// ```
    /// use stepsched_process::{Start, StateCell};
    ///
    /// let cell = StateCell::new();
    /// assert_eq!(cell.try_start(), Start::Started);
    /// assert!(matches!(cell.try_start(), Start::Invalid(s) if s.is_running()));
    /// ```
    #[inline]
    pub fn try_start(&self) -> Start {
        // Acquire (needed): the new owner sees the body its last owner left
        // and every event whose wake came before this start (a wake that
        // found Ready synchronizes with nothing else). Release: not needed
        // (nobody acts on Running), kept so every write is AcqRel.
        self.transition(Ordering::AcqRel, |s| match s.0 & PHASE_MASK {
            READY => (Some(State::of(RUNNING)), Start::Started),
            COMPLETE => (None, Start::Terminated),
            _ => (None, Start::Invalid(s)),
        })
    }

    /// Running → Idle, after a step that returned
    /// [`Status::Idle`](crate::Status::Idle) — or → Ready with
    /// [`Park::Requeue`] if the wakeup flag is set.
    ///
    /// ```
    /// use stepsched_process::{Park, StateCell};
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// assert_eq!(cell.park_idle(), Park::Parked);
    /// assert!(cell.load().is_idle());
    /// ```
    #[inline]
    pub fn park_idle(&self) -> Park {
        // Release (needed): whoever next owns the process (a waker's run, or
        // a forcer that finds it Idle) sees the body this step left.
        // Acquire: not needed (on Requeue the next `try_start` acquires the
        // waker's release sequence), kept so every write is AcqRel.
        self.park(IDLE, Ordering::AcqRel)
    }

    /// Running → Blocked, after a step that returned
    /// [`Status::Yield`](crate::Status::Yield) — or → Ready with
    /// [`Park::Requeue`] if the wakeup flag is set.
    ///
    /// ```
    /// use stepsched_process::{Park, StateCell};
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// let _ = cell.wake(); // a completion while Running
    /// assert_eq!(cell.park_blocked(), Park::Requeue);
    /// assert!(cell.load().is_ready());
    /// ```
    #[inline]
    pub fn park_blocked(&self) -> Park {
        // Release (needed): whoever next owns the process (a completer's
        // run, or a forcer that finds it Blocked) sees the body this step
        // left. Acquire: not needed (on Requeue the next `try_start`
        // acquires the completer's release sequence), kept: all AcqRel.
        self.park(BLOCKED, Ordering::AcqRel)
    }

    /// Another name for [`park_blocked`](Self::park_blocked), called once
    /// the step's yields are handed to their handlers: atomically, the
    /// wakeup flag set → Ready ([`Park::Requeue`]), else → Blocked.
    ///
    /// ```
    /// use stepsched_process::{Park, StateCell};
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// assert_eq!(cell.finish_dispatch(), Park::Parked);
    /// assert!(cell.load().is_blocked());
    /// ```
    #[inline]
    pub fn finish_dispatch(&self) -> Park {
        self.park_blocked()
    }

    /// Running → Ready, after a step that returned
    /// [`Status::Continue`](crate::Status::Continue): the process wants to
    /// run again, so this always answers [`Park::Requeue`] (unless it was
    /// terminated). Clears the wakeup flag: the next run drains every event.
    ///
    /// ```
    /// use stepsched_process::{Park, StateCell};
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// assert_eq!(cell.reschedule(), Park::Requeue);
    /// assert!(cell.load().is_ready());
    /// ```
    #[inline]
    pub fn reschedule(&self) -> Park {
        // Release (needed): a forcer that finds the process Ready owns it
        // and sees the body this step left (the run queue publishes it to
        // the next worker). Acquire: not needed, kept so all are AcqRel.
        self.transition(Ordering::AcqRel, |s| match s.0 & PHASE_MASK {
            RUNNING => (Some(State::of(READY)), Park::Requeue),
            COMPLETE => (None, Park::Terminated),
            _ => (None, Park::Invalid(s)),
        })
    }

    #[inline]
    fn park(&self, parked: usize, success: atomic::Ordering) -> Park {
        self.transition(success, |s| match s.0 & PHASE_MASK {
            RUNNING if s.is_notified() => (Some(State::of(READY)), Park::Requeue),
            RUNNING => (Some(State::of(parked)), Park::Parked),
            COMPLETE => (None, Park::Terminated),
            _ => (None, Park::Invalid(s)),
        })
    }

    /// Running → Complete, after a step that returned
    /// [`Status::Done`](crate::Status::Done) or failed. Pending events are
    /// abandoned.
    ///
    /// ```
    /// use stepsched_process::{Finish, StateCell};
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// assert_eq!(cell.complete(), Finish::Completed);
    /// assert!(cell.load().is_complete());
    /// ```
    pub fn complete(&self) -> Finish {
        // Release (needed): a caller that sees Complete (`load`, `wake`,
        // `force_complete`) sees what the worker did before. Acquire: not
        // needed (the worker owns the body already), kept: all AcqRel.
        self.transition(Ordering::AcqRel, |s| match s.0 & PHASE_MASK {
            RUNNING => (Some(State::of(COMPLETE)), Finish::Completed),
            COMPLETE => (None, Finish::Terminated),
            _ => (None, Finish::Invalid(s)),
        })
    }

    /// Any phase but Complete → Complete, for terminate and the shutdown
    /// deadline. Exactly one concurrent caller (or the worker's
    /// [`complete`](Self::complete)) wins; see [`ForceComplete::must_close`]
    /// for who closes the process.
    ///
    /// ```
    /// use stepsched_process::{ForceComplete, Start, StateCell};
    ///
    /// let cell = StateCell::new();
    /// let won = cell.force_complete();
    /// assert!(matches!(won, ForceComplete::Won { previous } if previous.is_ready()));
    /// assert_eq!(cell.force_complete(), ForceComplete::AlreadyComplete);
    /// // The worker that pops the queued process drops it.
    /// assert_eq!(cell.try_start(), Start::Terminated);
    /// ```
    pub fn force_complete(&self) -> ForceComplete {
        // AcqRel (both needed). Acquire: a forcer that finds the process
        // parked or queued owns it and sees the body its last owner left.
        // Release: a worker that then finds Complete sees what the forcer
        // did before (its reason for the termination).
        self.transition(Ordering::AcqRel, |s| match s.0 & PHASE_MASK {
            COMPLETE => (None, ForceComplete::AlreadyComplete),
            _ => (
                Some(State::of(COMPLETE)),
                ForceComplete::Won { previous: s },
            ),
        })
    }

    /// Tells the process that an event was pushed into its queue; call it
    /// after every push.
    ///
    /// Blocked/Idle → Ready, and exactly one of any number of concurrent
    /// wakers gets [`Wake::Queue`]. While Running it sets the wakeup flag
    /// instead (*notify while running*) and the owner re-queues the process
    /// when it leaves Running. Every call on an unfinished process writes the
    /// word, even when nothing changes, so that it is ordered against the
    /// owner's transitions (see the [module documentation](self)).
    ///
    /// ```
    /// use stepsched_process::{StateCell, Wake};
    ///
    /// let cell = StateCell::new();
    /// let _ = cell.try_start();
    /// let _ = cell.park_idle();
    /// assert_eq!(cell.wake(), Wake::Queue);        // this caller queues it
    /// assert_eq!(cell.wake(), Wake::AlreadyReady); // everyone else does nothing
    /// ```
    #[doc(alias = "notify_while_running")]
    #[inline]
    pub fn wake(&self) -> Wake {
        // Release (needed): the worker whose `try_start` reads this write or
        // a later one sees the event pushed before it. Acquire: not needed
        // (a waker reads nothing the cell publishes), kept: all AcqRel.
        self.transition(Ordering::AcqRel, |s| match s.0 & PHASE_MASK {
            BLOCKED | IDLE => (Some(State::of(READY)), Wake::Queue),
            RUNNING => (Some(State(s.0 | NOTIFIED)), Wake::Notified),
            // Rewrite the same value: see the doc comment above.
            READY => (Some(s), Wake::AlreadyReady),
            _ => (None, Wake::Complete),
        })
    }

    /// The one CAS loop every transition goes through: `decide` computes the
    /// next word (or none) from the current snapshot; a failed CAS decides
    /// again on the value it found.
    #[inline(always)]
    fn transition<R>(
        &self,
        success: atomic::Ordering,
        mut decide: impl FnMut(State) -> Decision<R>,
    ) -> R {
        // Acquire: when `decide` returns without writing, the caller may act
        // on what the last writer published (see `load`).
        let mut current = State(self.word.load(Ordering::Acquire));
        loop {
            debug_assert!(current.is_valid(), "corrupt state word {current:?}");
            let (next, result) = decide(current);
            let Some(next) = next else {
                return result;
            };
            debug_assert!(next.is_valid(), "transition to invalid word {next:?}");
            // `success` (AcqRel for every transition, argued at each): Release
            // publishes what this caller did before the transition (pushed
            // events, the process it stepped), Acquire makes it see what
            // earlier transitions published; all writes are RMWs, so release
            // sequences chain through the word.
            // Acquire on failure: the retry decides on the value read (same
            // argument as the first load). Weak: a spurious failure retries.
            match self
                .word
                .compare_exchange_weak(current.0, next.0, success, Ordering::Acquire)
            {
                Ok(_) => return result,
                Err(actual) => current = State(actual),
            }
        }
    }
}

impl Default for StateCell {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for StateCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateCell")
            .field("state", &self.load())
            .finish()
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests;

#[cfg(all(test, stepsched_loom))]
mod loom_tests;
