//! A process's slot and the core every handle and worker shares: the
//! slot's lifecycle, how a process is woken, forced, closed and published.
//! What one step does is in `step.rs`.
//!
//! # The life of a process
//!
//! A [`Slot`] holds one process: its state cell, its event queue, and its
//! *body* (the process itself and how it waits). The body
//! is touched by one thread at a time, and the state cell says which:
//!
//! * the worker whose `try_start` moved the state Ready → Running owns the
//!   body until its next transition (park, reschedule, complete);
//! * a `force_complete` (terminate, shutdown) whose previous state was not
//!   Running owns the body from then on — no worker can start it any more;
//! * a worker whose transition out of Running reports `Terminated` still
//!   owns the body (the forcer saw Running and left `close` to it).
//!
//! Producers — completers and senders — never touch the body: they push an
//! event into the queue and call [`StateCell::wake`]; the single winner of a
//! Blocked/Idle → Ready transition puts the slot in a run queue. A wake
//! while Running sets the wakeup flag, and the worker's next transition
//! answers `Requeue`. So no event is lost and no two steps of a process
//! overlap (the argument is in `stepsched_process::state`).
//!
//! # Ending: close, then publish
//!
//! A process ends in one of two ways: its step finishes it (`Done`, an
//! error, a panic), or a *forcer* — [`Handle::terminate`](crate::Handle::terminate), or shutdown at
//! its deadline — moves it to Complete. A forcer first claims the slot's
//! `forced` word (one forcer per process, so the error that is published
//! is the winner's), then calls `force_complete`. Exactly one of the
//! worker's `complete` and the forcer's `force_complete` wins the state
//! cell, and that decides the result: the step's if the worker won, the
//! forcer's error if the forcer won (even if the step was about to return
//! `Done`, so that a successful `terminate` always reads `Terminated`).
//! Both seal the event queue before their transition, and the seal says
//! who came first: a forcer that finds the queue already sealed by the
//! worker gives way before touching the state cell, since a send may
//! already have been refused as to a completed process (see `inbox`).
//!
//! `close` is called exactly once, by whoever owns the body at the end:
//! the forcer if no worker was running the process, otherwise the worker
//! when its step returns. The result is *published* after `close`, by the
//! same party, once (the slot's `finished` flag): the route is removed
//! (compare-before-delete, so a newer process with the same PID keeps its
//! route), the completion hook runs, the process's place under the limit
//! is released, and the result is stored for the [`JoinHandle`](crate::JoinHandle). So when
//! `join` returns, `close` has run, the hook has run and the PID can be
//! reused. The one exception is a forced process whose step never returns
//! at shutdown: shutdown publishes `Cancelled` for it without waiting (the
//! worker still closes it if the step ever returns). A process whose step
//! ended it (`Done`, an error) always gets that result, even from a `close`
//! that outlives the shutdown deadline: only a forcer that *won* the state
//! cell (the slot's `FORCE_WON` mark) makes the result an error.
//!
//! `close`, the process's `Drop` and the `Drop` of its queued events run
//! inside `catch_unwind` (`Slot::close_body`): a panic there is logged and
//! the result is still published, the route removed, the place released.
//!
use std::fmt;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use stepsched_pool::Pool;
use stepsched_process::{
    CancelToken, Context, Error, Event, ForceComplete, Phase, Process, StateCell, StepOutput, Wake,
};
use stepsched_relay::{Pid, PidAllocator, RoutingTable};

use crate::SchedProcess;
use crate::inbox::{Inbox, Queue};
use crate::primitive::cell::UnsafeCell;
use crate::primitive::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
use crate::primitive::sync::{Arc, Condvar, Mutex, SlotArc};
use crate::result::ResultCell;
use crate::shutdown::Shared;
use crate::trace;
use crossbeam_utils::CachePadded;

/// `last_worker` before the first step.
pub(crate) const NO_WORKER: u32 = u32::MAX;

/// The slot's `forced` word: not forced, or the error its forcer chose,
/// plus [`FORCE_WON`] once that forcer won the state cell.
pub(crate) const NOT_FORCED: u8 = 0;
pub(crate) const FORCED_TERMINATED: u8 = 1;
pub(crate) const FORCED_CANCELLED: u8 = 2;
/// The kind bits of the `forced` word.
pub(crate) const FORCE_KIND: u8 = 0b011;
/// Set in the `forced` word by a forcer whose `force_complete` won: the
/// process's result is the forcer's error, whoever publishes it.
pub(crate) const FORCE_WON: u8 = 0b100;

/// A process's lifecycle hook.
pub(crate) type StartHook = Arc<dyn Fn(Pid) + Send + Sync>;
/// A process's completion hook.
pub(crate) type CompleteHook<O> = Arc<dyn Fn(Pid, Result<&O, &Error>) + Send + Sync>;

/// A hook run once, at the end of the shutdown (`Builder::on_shutdown`).
pub(crate) type ShutdownHook = Box<dyn FnOnce() + Send>;

/// Where sends to PIDs of other nodes go (`Handle::route_remote`).
pub(crate) type RemoteRoute<M> = Arc<dyn stepsched_relay::Receiver<M> + Send + Sync>;

/// Everything the scheduler's handles and workers share.
///
/// The counters that submits and completions write (`pids`, `live`,
/// `submitted`) each have a cache line of their own, so
/// they do not evict the fields every worker reads (the pool, the routing
/// table, the hooks, the flags) from the other cores' caches.
pub(crate) struct Core<P: Process + 'static> {
    /// What every handle shares besides the core (kept apart so that a
    /// `Shutdown` future need not name the process type).
    pub(crate) shared: Arc<Shared>,
    pub(crate) pool: OnceLock<Pool<Task<P>>>,
    pub(crate) routes: RoutingTable<SlotArc<Slot<P>>>,
    pub(crate) pids: CachePadded<PidAllocator>,
    pub(crate) max_processes: usize,
    /// Places taken under `max_processes`: processes registered and not
    /// yet published, and submits in progress (a reservation counts).
    pub(crate) live: CachePadded<AtomicUsize>,
    pub(crate) stopping: AtomicBool,
    /// Set by shutdown before its forcing sweep; a submit that registers
    /// after the sweep sees it and forces its own process.
    pub(crate) forcing: AtomicBool,
    /// Shutdown waits here for every reservation to be released (see
    /// [`CounterLines::all_released`]).
    pub(crate) drained: Mutex<()>,
    pub(crate) drained_cv: Condvar,
    pub(crate) on_start: Option<StartHook>,
    pub(crate) on_complete: Option<CompleteHook<P::Output>>,
    /// Taken once, by the one shutdown, at its end. A std mutex in every
    /// build: it is locked once, by the thread that claimed the shutdown,
    /// so loom has no interleaving to explore in it.
    pub(crate) on_shutdown: std::sync::Mutex<Vec<ShutdownHook>>,
    /// The route for PIDs of other nodes, if a node layer set one; dropped
    /// at the end of the shutdown (it may hold a handle: no cycle outlives
    /// the scheduler). Read only when a PID of another node has no local
    /// route, never on a local send.
    pub(crate) remote: std::sync::RwLock<Option<RemoteRoute<P::Message>>>,
    /// Group members forced at submit (see `group`); every started process
    /// is counted on its submitter's counter line instead (`Counters::submitted`).
    pub(crate) submitted: CachePadded<AtomicU64>,
    /// Steps, results and phase transitions, one cache line per worker
    /// (plus [`SHARED_LINES`] for other threads), so workers never contend
    /// on a counter.
    pub(crate) counters: CounterLines,
    /// The event batch each worker steps its processes with.
    pub(crate) batches: Batches<P>,
    /// Whether `live` is maintained (a process limit is set).
    pub(crate) limited: bool,
}

/// One pair of buffers per worker, lent to each run: the event batch a
/// step iterates (filled at the start of each step from the process's
/// carried inline completions and its queue, empty again when the step
/// returns) and the [`StepOutput`] it writes its status and yields into
/// (status taken, yields dispatched, or dropped by `Core::end`, before the
/// run ends). Per worker rather than per process, they stay warm in the
/// worker's cache and cost a process nothing: the output alone is 72 bytes
/// or more (its yields are stored inline up to a few), more than a third
/// of a small process's slot.
pub(crate) struct Batches<P: Process + 'static> {
    lines: Box<[Batch<P>]>,
}

/// One worker's buffers, on lines of their own.
type Batch<P> = CachePadded<UnsafeCell<Buffers<P>>>;

/// What [`Batches::of`] lends a worker for one run.
pub(crate) struct Buffers<P: Process + 'static> {
    /// The events of the step being taken (see [`Batches`]).
    pub(crate) batch: Vec<Ev<P>>,
    /// The output of the step being taken (see [`Batches`]).
    pub(crate) out: StepOutput<P::Command, P::Output>,
}

// SAFETY: buffer `i` is touched only by worker `i`, inside `Core::run`,
// which a worker does not re-enter (a step, a handler run inline or a hook
// never runs another process on the same thread); no reference to a buffer
// outlives that call. So each buffer has one thread at a time, and what
// moves between threads is the events and commands, which are `Send`.
unsafe impl<P: Process + 'static> Sync for Batches<P>
where
    Ev<P>: Send,
    P::Command: Send,
    P::Output: Send,
{
}

impl<P: Process + 'static> Batches<P> {
    pub(crate) fn new(workers: usize) -> Self {
        Batches {
            lines: (0..workers)
                .map(|_| {
                    CachePadded::new(UnsafeCell::new(Buffers {
                        batch: Vec::new(),
                        out: StepOutput::new(),
                    }))
                })
                .collect(),
        }
    }

    /// The buffers of worker `index`. Dereferenced only by that worker,
    /// inside `Core::run` (see the `Sync` impl).
    #[inline]
    pub(crate) fn of(&self, index: usize) -> *mut Buffers<P> {
        self.lines[index].get()
    }
}

/// Statistics counters of one line: steps, results, and the transitions
/// of processes between phases.
///
/// A worker's line has one writer, the worker, which adds with a load and
/// a store (no locked instruction). Threads that are not workers add with
/// `fetch_add` to one of [`SHARED_LINES`] shared lines, picked per thread.
///
/// Phase counts are not stored: each is summed at read time from the
/// transitions into and out of its phase ([`CounterLines::totals`]). Every
/// transition is counted by the thread that made it, on that thread's line.
/// A submitted process enters Ready (counted by `submitted` on the
/// submitter's line, or by `Core::submitted` for forced group members).
#[derive(Default)]
pub(crate) struct Counters {
    /// Processes submitted (entered Ready) by this line's thread; added to
    /// `Core::submitted` (which counts the rest) in the totals.
    pub(crate) submitted: AtomicU64,
    pub(crate) steps: AtomicU64,
    /// Message events handed to steps (counted by the worker that drained
    /// them, so every message received is counted once).
    pub(crate) messages: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) failed: AtomicU64,
    /// Ready → Running (`try_start`).
    pub(crate) started: AtomicU64,
    /// Running → Ready: a requeue after a wake while running, `Continue`,
    /// or an exhausted inline budget.
    pub(crate) requeued: AtomicU64,
    /// Running → Blocked.
    pub(crate) parked_blocked: AtomicU64,
    /// Running → Idle.
    pub(crate) parked_idle: AtomicU64,
    /// Blocked → Ready (a wake that queued the process).
    pub(crate) woken_blocked: AtomicU64,
    /// Idle → Ready.
    pub(crate) woken_idle: AtomicU64,
    /// Running → Complete by the worker (the step ended the process).
    pub(crate) ended: AtomicU64,
    /// Ready, Running, Blocked, Idle → Complete by a forcer (terminate,
    /// shutdown), by the phase it found.
    pub(crate) forced: [AtomicU64; 4],
    /// Not a statistic: places reserved by submits on this line's thread,
    /// which shutdown waits to see released (see
    /// [`CounterLines::all_released`]).
    pub(crate) reserved: AtomicU64,
    /// Not a statistic: reservations released on this line's thread (a
    /// result stored, or a submit that gave up).
    pub(crate) released: AtomicU64,
}

/// Indices into [`Counters::forced`].
pub(crate) const FORCED_READY: usize = 0;
pub(crate) const FORCED_RUNNING: usize = 1;
pub(crate) const FORCED_BLOCKED: usize = 2;
pub(crate) const FORCED_IDLE: usize = 3;

/// Lines shared by the threads that are not workers (handler threads,
/// senders, terminate): two such threads share a line only when more than
/// this many of them count.
pub(crate) const SHARED_LINES: usize = 8;

/// Every counter line of a scheduler: one per worker, then
/// [`SHARED_LINES`] for other threads. Reading all of them costs
/// O(workers), whatever the number of processes.
pub(crate) struct CounterLines {
    lines: Box<[CachePadded<Counters>]>,
    workers: usize,
}

impl FromIterator<CachePadded<Counters>> for CounterLines {
    /// Takes one line per worker plus one (what the builder makes); the
    /// extra line becomes the first shared line.
    fn from_iter<I: IntoIterator<Item = CachePadded<Counters>>>(iter: I) -> Self {
        let mut lines: Vec<_> = iter.into_iter().collect();
        let workers = lines.len().saturating_sub(1);
        lines.resize_with(workers + SHARED_LINES, Default::default);
        CounterLines {
            lines: lines.into_boxed_slice(),
            workers,
        }
    }
}

/// Phase counts summed from the transition counters (see [`Counters`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Phases {
    pub(crate) ready: usize,
    pub(crate) running: usize,
    pub(crate) blocked: usize,
    pub(crate) idle: usize,
}

/// Totals of every line.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Totals {
    /// Processes submitted: the lines' counts and the one passed in.
    pub(crate) submitted: u64,
    pub(crate) steps: u64,
    pub(crate) messages: u64,
    pub(crate) completed: u64,
    pub(crate) failed: u64,
    pub(crate) phases: Phases,
}

impl CounterLines {
    /// The line of `worker` (owned by it: `true`), or the calling thread's
    /// shared line (`false`).
    #[inline]
    pub(crate) fn line(&self, worker: Option<usize>) -> (&Counters, bool) {
        match worker {
            Some(w) if w < self.workers => (&self.lines[w], true),
            _ => (&self.lines[self.workers + shared_line()], false),
        }
    }

    /// Sums every line. `submitted`: processes submitted (each entered
    /// Ready). Each counter is read once, one after another, so a count
    /// may be momentarily off while processes move; a difference that
    /// reads below zero is reported as zero.
    pub(crate) fn totals(&self, submitted: u64) -> Totals {
        // Relaxed: statistics; each value is one a writer stored.
        let sum = |f: &dyn Fn(&Counters) -> &AtomicU64| -> u64 {
            self.lines
                .iter()
                .map(|l| f(l).load(Ordering::Relaxed))
                .fold(0u64, u64::wrapping_add)
        };
        let submitted = submitted.wrapping_add(sum(&|c| &c.submitted));
        let started = sum(&|c| &c.started);
        let requeued = sum(&|c| &c.requeued);
        let parked_blocked = sum(&|c| &c.parked_blocked);
        let parked_idle = sum(&|c| &c.parked_idle);
        let woken_blocked = sum(&|c| &c.woken_blocked);
        let woken_idle = sum(&|c| &c.woken_idle);
        let ended = sum(&|c| &c.ended);
        let forced = |i: usize| sum(&|c| &c.forced[i]);
        // In minus out, in wrapping arithmetic; a transient negative
        // (an out counted before its in was read) reads as zero.
        let count = |into: u64, out: u64| -> usize {
            let d = into.wrapping_sub(out) as i64;
            usize::try_from(d).unwrap_or(0)
        };
        let phases = Phases {
            ready: count(
                submitted
                    .wrapping_add(requeued)
                    .wrapping_add(woken_blocked)
                    .wrapping_add(woken_idle),
                started.wrapping_add(forced(FORCED_READY)),
            ),
            running: count(
                started,
                parked_blocked
                    .wrapping_add(parked_idle)
                    .wrapping_add(requeued)
                    .wrapping_add(ended)
                    .wrapping_add(forced(FORCED_RUNNING)),
            ),
            blocked: count(
                parked_blocked,
                woken_blocked.wrapping_add(forced(FORCED_BLOCKED)),
            ),
            idle: count(parked_idle, woken_idle.wrapping_add(forced(FORCED_IDLE))),
        };
        Totals {
            submitted,
            steps: sum(&|c| &c.steps),
            messages: sum(&|c| &c.messages),
            completed: sum(&|c| &c.completed),
            failed: sum(&|c| &c.failed),
            phases,
        }
    }
}

/// # Reservations: what shutdown waits for
///
/// Every submit reserves a place before it checks `stopping`, and the
/// place is released once the process's result is stored (or the submit
/// gives up); shutdown waits until every reservation is released, so that
/// it returns only once every finished process's `JoinHandle` has its
/// result. A spawner reserves and some other worker, later, releases: one
/// shared count would move its cache line between cores twice per process.
/// So each thread counts on its own line, two counters that only grow
/// (`reserved`, `released`), and only shutdown adds the lines up.
///
/// The sum is read in two passes, every `released` first (Acquire), then
/// every `reserved`. A release is stored with Release after its
/// reservation (the process was handed from the reserving thread to the
/// releasing one, or it is the same thread), so each release the first
/// pass counts carries its reservation into the second pass (read
/// coherence). Hence the second sum is at least the first, and they are
/// equal only if every reservation the second pass counts was released.
/// Reading `reserved` first would be wrong: a reservation made and
/// released between the two passes would count as a release with no
/// reservation and hide one still held (the loom model
/// `a_reservation_made_and_released_between_the_passes_hides_nothing`
/// fails that way).
///
/// Which reservations the second pass must count is the Dekker with
/// `stopping` (see `Core::reserve` and `Core::release_unpublished`):
/// every submit that did not see `stopping` stored its reservation before
/// a SeqCst fence, and shutdown reads the lines after its own fence that
/// follows its store of `stopping`.
impl CounterLines {
    /// Counts `n` reserved places on `worker`'s line (the calling thread's:
    /// see [`line`](Self::line)), then issues the SeqCst fence after which
    /// the caller loads `stopping`.
    #[inline]
    pub(crate) fn reserve(&self, worker: Option<usize>, n: u64) {
        let (line, owned) = self.line(worker);
        // Relaxed: the reservation reaches shutdown's second pass through
        // the release that follows it, or through the fence after it (see
        // the section above); nothing is published by it.
        add(&line.reserved, n, owned, Ordering::Relaxed);
        // Dekker with shutdown, which stores `stopping`, fences, then reads
        // the lines: we count the reservation, fence, then the caller loads
        // `stopping`. Either it sees `stopping` and gives up (and
        // releases), or shutdown's reads count the reservation and wait
        // for its release.
        fence(Ordering::SeqCst);
    }

    /// Counts one released place on `worker`'s line (the calling
    /// thread's), then issues the SeqCst fence after which the caller
    /// loads `stopping` (and, if set, wakes shutdown's wait).
    #[inline]
    pub(crate) fn release(&self, worker: Option<usize>) {
        let (line, owned) = self.line(worker);
        // Release: shutdown's first pass reads this with Acquire, which
        // brings the matching reservation into its second pass.
        add(&line.released, 1, owned, Ordering::Release);
        // Dekker with shutdown, as in `reserve`: either the caller's load
        // sees `stopping` and wakes shutdown, or shutdown's reads count
        // this release. (The fence is needed, not just SeqCst accesses:
        // loom models those as acquire/release, and found the lost
        // wake-up without it.) Every release pays the fence, where one
        // shared count paid it only at zero: a locked instruction on this
        // core's own line rather than a shared line moved between cores.
        fence(Ordering::SeqCst);
    }

    /// Whether every reservation counted so far was released: every
    /// `released` first, then every `reserved` (see the section above).
    pub(crate) fn all_released(&self) -> bool {
        let sum = |count: fn(&Counters) -> u64| {
            self.lines
                .iter()
                .map(|l| count(l))
                .fold(0u64, u64::wrapping_add)
        };
        // Acquire: pairs with the Release in `release`. Relaxed: every
        // reservation this must count happens before a release read in the
        // first pass, or before the fences of the Dekker with `stopping`;
        // coherence does the rest.
        let released = sum(|l| l.released.load(Ordering::Acquire));
        let reserved = sum(|l| l.reserved.load(Ordering::Relaxed));
        reserved == released
    }
}

#[cfg(all(test, stepsched_loom))]
mod loom_tests;

/// The calling thread's shared line, `0..SHARED_LINES`: threads get them
/// in turn on their first use.
#[inline]
fn shared_line() -> usize {
    use std::cell::Cell;
    // A std atomic in every build: it only spreads threads over lines
    // (any index is correct), so loom has nothing to model in it.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    std::thread_local! {
        static LINE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    LINE.with(|line| {
        let mut i = line.get();
        if i == usize::MAX {
            // Relaxed: only the RMW's atomicity matters (distinct indices).
            i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % SHARED_LINES;
            line.set(i);
        }
        i
    })
}

/// Adds `n` to a counter. `owned`: this thread is the line's only writer.
#[inline]
pub(crate) fn bump_by(counter: &AtomicU64, n: u64, owned: bool) {
    // Relaxed: statistics; readers only need some recent value.
    add(counter, n, owned, Ordering::Relaxed);
}

/// Adds `n` to a counter of a line, with `order` (Relaxed or Release) on
/// the write: the owner of the line (`owned`) with a load and a store, no
/// locked instruction; any other thread with `fetch_add`.
#[inline]
fn add(counter: &AtomicU64, n: u64, owned: bool, order: Ordering) {
    if owned {
        // Relaxed load: this thread is the only writer, so it reads its
        // own last store.
        counter.store(counter.load(Ordering::Relaxed).wrapping_add(n), order);
    } else {
        counter.fetch_add(n, order);
    }
}

/// Adds one to a counter, as [`bump_by`].
#[inline]
pub(crate) fn bump(counter: &AtomicU64, owned: bool) {
    bump_by(counter, 1, owned);
}

/// A slot in a run queue, with the number of times in a row it was
/// requeued locally after a wake while running (see `LOCAL_REQUEUES` in `step.rs`).
pub(crate) struct Task<P: Process + 'static>(pub(crate) SlotArc<Slot<P>>, pub(crate) u32);

// SAFETY: a `Task` is only made by `Task::new`, which requires
// `P: SchedProcess`; then `Slot<P>` is `Send + Sync` (see below), so the
// `Arc` may move between threads. The impl is unconditional only so that
// the pool's `Send` bound does not send the compiler around the cycle
// process → handle → pool → slot → process.
unsafe impl<P: Process + 'static> Send for Task<P> {}

impl<P: SchedProcess> Task<P> {
    pub(crate) fn new(slot: SlotArc<Slot<P>>) -> Self {
        Task(slot, 0)
    }

    pub(crate) fn requeued(slot: SlotArc<Slot<P>>, streak: u32) -> Self {
        Task(slot, streak)
    }
}

/// One process: its state, its event queue, its body.
///
/// `repr(C)`, in two groups: first what a sender touches (the state word,
/// which every wake writes, then `parked_as` and `last_worker`, which the
/// waker that queues the process reads, then the queue pointer, the core
/// and the PID, which it reads), then, a cache line past the last of those
/// bytes, what the worker that runs the process writes at every run (the
/// process itself, the inline completions; the step's output and event
/// batch are the worker's, see [`Batches`]); the cancel
/// token and the result cell, written once, fill the gap. A byte 64 bytes
/// or more past another is on another line whatever the allocation's
/// address, so a sender never reads or writes a line that the receiver's
/// step writes (a test checks the offsets). The owner's writes at every
/// run into the first group besides the state word are `last_worker`,
/// stored just after the `try_start` transition wrote the state word, and
/// `parked_as`, stored just before the park transition writes it, both on
/// the same line; the three flags beside it (`cancel_sent`, `forced`,
/// `finished`) are written at most once or twice in a process's life.
#[repr(C)]
pub(crate) struct Slot<P: Process + 'static> {
    pub(crate) state: StateCell,
    /// How the process last waited ([`Waiting`] as a byte), for the
    /// statistics of the waker that queues it. Written by the owner before
    /// each park, read by the waker whose `wake` answered `Queue`: the
    /// park's Release transition and the wake's Acquire one order the two,
    /// and no later run (hence no later write) can begin before that waker
    /// has read it and queued the process. Next to the state word, whose
    /// line the waker has just written: no miss of its own (in the same
    /// 16 bytes, so on the same line wherever an allocator that aligns to
    /// 16, as malloc does, puts the slot).
    pub(crate) parked_as: AtomicU8,
    // Three flags written at most once or twice in the process's life, in
    // the bytes `parked_as` leaves free before the next 8-aligned field.
    pub(crate) cancel_sent: AtomicBool,
    /// `NOT_FORCED`, or the error the one forcer allowed to try chose
    /// (with `FORCE_WON` once it won the state cell).
    pub(crate) forced: AtomicU8,
    pub(crate) finished: AtomicBool,
    /// The worker that last stepped the process, where a wake from outside
    /// the pool queues it. Written by the owner
    /// at the start of every run, right after the `try_start` CAS of the
    /// state word brought this line into its cache; read by the waker
    /// whose `wake` answered `Queue`, right after its own CAS of that
    /// word. In the 4 bytes the flags leave before `queue`, so within the
    /// state word's 16 bytes: neither side pays a miss for it (a field on
    /// the owner's line cost every wake from outside the pool one).
    pub(crate) last_worker: AtomicU32,
    /// The event queue, created by the first event (an idle process that
    /// was never sent anything costs no queue), sealed before the process
    /// completes (see `inbox`).
    pub(crate) queue: Inbox<Ev<P>>,
    /// Lent by the worker that made the slot, and taken back by the one
    /// that frees it (see `lent`); taken out only by `drop`.
    pub(crate) core: ManuallyDrop<Arc<Core<P>>>,
    pub(crate) pid: Pid,
    pub(crate) cancel: CancelToken,
    pub(crate) result: ResultCell<P::Output>,
    /// Completions made by handlers on the dispatching thread while the
    /// process is being dispatched. Only the worker that owns the process
    /// (see the module docs) touches it: a completer pushes here only when
    /// the thread-local dispatch marker names this slot, which is set on
    /// that worker's thread for the duration of its `dispatch`.
    pub(crate) inline: UnsafeCell<Vec<Ev<P>>>,
    /// The process and what only its owner touches; see the module docs
    /// for who the owner is.
    pub(crate) body: UnsafeCell<Body<P>>,
    /// Under loom, a cell written when the slot is dropped and read by
    /// [`Slot::pid`]: a worker that reads the slot after the transition
    /// that gave it away (a park) races with its release on another
    /// thread, which loom reports, where a normal build would read freed
    /// memory.
    #[cfg(stepsched_loom)]
    alive: loom::cell::UnsafeCell<()>,
}

impl<P: Process + 'static> Drop for Slot<P> {
    fn drop(&mut self) {
        #[cfg(stepsched_loom)]
        self.alive.with_mut(|_| ());
        // SAFETY: the field is taken once, here, and not used again.
        crate::lent::take_back(unsafe { ManuallyDrop::take(&mut self.core) });
    }
}

/// An event of process type `P`.
pub(crate) type Ev<P> = Event<<P as Process>::Message, <P as Process>::Response>;

pub(crate) struct Body<P: Process + 'static> {
    /// `None` once closed.
    pub(crate) process: Option<P>,
    /// How the last step left the process waiting, if it did (`Idle` or
    /// `Yield`): a run of a waiting process that finds no event parks it
    /// again instead of stepping it with an empty batch.
    pub(crate) waiting: Option<Waiting>,
}

/// How a process waits between steps.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Waiting {
    /// `Status::Idle`: for a message (or any event).
    Idle,
    /// `Status::Yield`: for completions (or any event).
    Blocked,
}

// SAFETY: `Slot` moves between worker threads and is shared with producers.
// Its fields are atomics, `Sync` channel ends and a mutex-protected result,
// except `body`, which one thread at a time accesses (the owner as defined
// in the module docs, established by a CAS on `state` that synchronizes
// with the previous owner's transition). Everything in the body is `Send`.
unsafe impl<P> Sync for Slot<P>
where
    P: Process + Send,
    P::Message: Send,
    P::Response: Send,
    P::Command: Send,
    P::Output: Send,
{
}
// SAFETY: as above; every field is `Send` when the process and its
// associated types are (which `SchedProcess` requires).
unsafe impl<P> Send for Slot<P>
where
    P: Process + Send,
    P::Message: Send,
    P::Response: Send,
    P::Command: Send,
    P::Output: Send,
{
}

impl<P: Process + 'static> Slot<P> {
    /// A slot for a process whose `init` succeeded, Ready, not yet routed.
    /// `joinable`: whether a [`JoinHandle`](crate::JoinHandle) will read
    /// its result (see [`ResultCell::new`]).
    pub(crate) fn new(
        pid: Pid,
        core: Arc<Core<P>>,
        process: P,
        cancel: CancelToken,
        joinable: bool,
    ) -> SlotArc<Self> {
        Self::with_process(pid, core, Some(process), cancel, joinable)
    }

    /// A slot with no process yet, Ready, not routed, never queued: a
    /// member of a group whose processes are made once every member has
    /// an address (see `group`). Its maker owns its body and either puts
    /// the process in and starts it, or abandons it (`Slot::abandon`).
    pub(crate) fn reserved(pid: Pid, core: Arc<Core<P>>) -> SlotArc<Self> {
        Self::with_process(pid, core, None, CancelToken::new(), true)
    }

    fn with_process(
        pid: Pid,
        core: Arc<Core<P>>,
        process: Option<P>,
        cancel: CancelToken,
        joinable: bool,
    ) -> SlotArc<Self> {
        let slot = SlotArc::new(Slot {
            pid,
            core: ManuallyDrop::new(core),
            state: StateCell::new(),
            queue: Inbox::new(),
            body: UnsafeCell::new(Body {
                process,
                waiting: None,
            }),
            last_worker: AtomicU32::new(NO_WORKER),
            cancel,
            cancel_sent: AtomicBool::new(false),
            forced: AtomicU8::new(NOT_FORCED),
            finished: AtomicBool::new(false),
            parked_as: AtomicU8::new(Waiting::Idle as u8),
            result: ResultCell::new(joinable),
            inline: UnsafeCell::new(Vec::new()),
            #[cfg(stepsched_loom)]
            alive: loom::cell::UnsafeCell::new(()),
        });
        // Under loom the whole-scheduler model asks for the queue at once
        // (see `primitive::once::eager_event_queues`).
        #[cfg(stepsched_loom)]
        if crate::primitive::once::eager() {
            let _ = slot.sender();
        }
        slot
    }

    /// The producers' side of the event queue, created on first use;
    /// `None` once the process is sealed for completion (see `inbox`).
    #[inline]
    pub(crate) fn sender(&self) -> Option<Queue<'_, Ev<P>>> {
        self.queue.open()
    }

    /// The process's PID, for the worker that runs it: under loom the read
    /// is checked against the slot's release (see `alive`).
    #[inline(always)]
    /// Events waiting in the queue (see `Handle::queued`).
    pub(crate) fn queued(&self) -> usize {
        self.queue.get().map_or(0, |queue| queue.queued())
    }

    pub(crate) fn pid(&self) -> Pid {
        #[cfg(stepsched_loom)]
        self.alive.with(|_| ());
        self.pid
    }

    /// Whether the process is Complete.
    #[inline]
    pub(crate) fn state_is_complete(&self) -> bool {
        self.state.load().is_complete()
    }
}

/// The methods that take over or release a reference to the slot (a
/// parked process's, see `wake` and `force`), and those that call them,
/// take the caller's [`SlotArc`] (`this`), whose pointer carries the
/// provenance of the whole allocation, counts included.
impl<P: SchedProcess> Slot<P> {
    /// Wakes the process after an event was pushed: the winner queues it.
    /// Returns `false` if the process is complete: the event will never be
    /// stepped.
    pub(crate) fn wake(this: &SlotArc<Self>) -> bool {
        match this.state.wake() {
            Wake::Queue => {
                // Read before the process is queued: no later park can
                // have overwritten it (see `parked_as`). Relaxed: ordered
                // by the state cell, as argued there.
                let from = this.parked_as.load(Ordering::Relaxed);
                let current = this.core.pool().current_worker();
                let (line, owned) = this.core.counter_line(current);
                let blocked = from == Waiting::Blocked as u8;
                if blocked {
                    bump(&line.woken_blocked, owned);
                } else {
                    bump(&line.woken_idle, owned);
                }
                trace::debug!(
                    pid = %this.pid,
                    from = if blocked { "blocked" } else { "idle" },
                    "process woken"
                );
                // SAFETY: a parked (Blocked or Idle) process owns one strong
                // reference to its slot, left by the run that parked it (see
                // the end of `Core::run`); the winner of `Queue` is the one
                // caller that takes it over, for the task it queues.
                let task = unsafe { SlotArc::from_raw(SlotArc::as_ptr(this)) };
                this.core.schedule(task, current);
                true
            }
            Wake::Notified => {
                trace::trace!(pid = %this.pid, "process woken while running");
                true
            }
            Wake::AlreadyReady => true,
            Wake::Complete => {
                trace::trace!(pid = %this.pid, "wake of a complete process");
                false
            }
        }
    }

    /// Pushes a message event (from `from`, if given) and wakes the
    /// process; hands the payload back if the process has completed (then
    /// it would never be stepped). The one path of every message send, by
    /// PID or by address.
    pub(crate) fn deliver(
        this: &SlotArc<Self>,
        from: Option<Pid>,
        payload: P::Message,
    ) -> Result<(), P::Message> {
        // A process already complete takes nothing: whoever completed it
        // sealed its queue first (see `inbox`), and the seal is read with
        // the queue pointer, not from the state word the worker writes.
        let Some(sender) = this.sender() else {
            return Err(payload);
        };
        // Made inside the push, so that it can be built in its slot.
        let event = move || match from {
            Some(from) => Event::message_from(from, payload),
            None => Event::message(payload),
        };
        // Without the queue's pre-check: the seal above already refuses
        // every send that comes after the process completed, so only a send
        // racing the completion claims in a closed queue (and leaves one
        // tombstone); the pre-check would cost a cache line per message.
        match sender.push_with_claim_only(event) {
            Ok(()) => {
                // If the process completed since, the event is dropped with
                // the rest of its queue, as `Handle::send` documents.
                Slot::wake(this);
                Ok(())
            }
            Err(e) => Err(e.into_inner().into_message().expect("the event we made")),
        }
    }

    /// Sends the shutdown cancel event, once.
    pub(crate) fn send_cancel(this: &SlotArc<Self>) {
        // Relaxed: only the RMW's atomicity matters (one sender); the
        // event itself is ordered by the queue and the state cell.
        if this.cancel_sent.swap(true, Ordering::Relaxed) {
            return;
        }
        this.cancel.cancel();
        if let Some(sender) = this.sender()
            && sender.push(Event::cancel()).is_ok()
        {
            Slot::wake(this);
        }
    }

    /// Calls `close` on `process` and drops it, catching a panic in
    /// either (the process was taken out of the body, or never put in).
    pub(crate) fn close_process(&self, mut process: P) {
        if catch_unwind(AssertUnwindSafe(|| process.close())).is_err() {
            trace::debug!(pid = %self.pid, "close panicked");
        }
        let mut process = Some(process);
        if catch_unwind(AssertUnwindSafe(|| drop(process.take()))).is_err() {
            trace::debug!(pid = %self.pid, "the process's drop panicked");
        }
    }

    /// Closes the process: `close`, then the event queue (later pushes are
    /// refused; queued events are dropped).
    ///
    /// Never unwinds: a panic in `close`, in the process's `Drop`, or in the
    /// `Drop` of an event payload or a command is caught here, so the
    /// caller always goes on to publish the result.
    ///
    /// # Safety
    ///
    /// The caller owns the body (module docs).
    pub(crate) unsafe fn close_body(&self) {
        // SAFETY: the caller owns the body.
        let body = unsafe { &mut *self.body.get() };
        let caught = |what: &str, f: &mut dyn FnMut()| {
            if catch_unwind(AssertUnwindSafe(f)).is_err() {
                trace::debug!(pid = %self.pid, "{what} panicked");
            }
        };
        if let Some(process) = body.process.take() {
            self.close_process(process);
        }
        // `Vec::clear` empties the vector before dropping the elements, so
        // after a panicking payload the vector is still sound (and empty).
        // Most processes end with nothing left (no inline completion, an
        // empty queue): no call, no unwind guard.
        // SAFETY: the inline batch belongs to the owner of the body.
        let inline = unsafe { &mut *self.inline.get() };
        if !inline.is_empty() {
            caught("an event's drop", &mut || inline.clear());
        }
        // SAFETY: the caller owns the body, hence the receiver.
        if let Some(mut receiver) = unsafe { self.queue.receiver() } {
            receiver.close();
            // Allocates only if events were left in the queue.
            let mut left = Vec::new();
            receiver.drain_into(&mut left);
            caught("an event's drop", &mut || left.clear());
        }
    }

    /// Publishes the result, once; later calls do nothing.
    ///
    /// `worker`: the index of the worker calling, if a worker is calling.
    pub(crate) fn finish(&self, result: Result<P::Output, Error>, worker: Option<usize>) {
        // AcqRel: the winner's writes (the closed body) are published to
        // any later caller that loses; only one caller proceeds.
        if self.finished.swap(true, Ordering::AcqRel) {
            return;
        }
        let core = &self.core;
        // Compare-before-delete: a newer process with the same PID keeps its
        // route.
        core.routes
            .unregister_if(self.pid, |route| std::ptr::eq(SlotArc::as_ptr(route), self));
        let (line, owned) = core.counter_line(worker);
        if result.is_ok() {
            bump(&line.completed, owned);
        } else {
            bump(&line.failed, owned);
        }
        trace::debug!(pid = %self.pid, ok = result.is_ok(), "process complete");
        if let Some(hook) = &core.on_complete {
            let r = result.as_ref();
            if catch_unwind(AssertUnwindSafe(|| hook(self.pid, r))).is_err() {
                trace::debug!(pid = %self.pid, "completion hook panicked");
            }
        }
        // The place under the limit is free before `join` returns, so a
        // caller that joined may submit again at once.
        if core.limited {
            core.live.fetch_sub(1, Ordering::SeqCst);
        }
        // SAFETY: the first caller of `finish` (the swap above) is the
        // one caller of `set`.
        unsafe { self.result.set(result) };
        core.release_unpublished(worker);
    }

    /// The error a forcer chose, for the party that publishes a forced
    /// process's result.
    pub(crate) fn forced_error(&self) -> Error {
        // Acquire: pairs with the forcer's claim, which precedes its
        // Release transition to Complete that the caller has seen.
        match self.forced.load(Ordering::Acquire) & FORCE_KIND {
            FORCED_CANCELLED => Error::Cancelled,
            _ => Error::Terminated,
        }
    }

    /// Whether a forcer won the state cell: the result is its error,
    /// whoever publishes it. (A forcer that claimed the slot but found it
    /// already Complete did not: the step's own result stands.)
    pub(crate) fn force_won(&self) -> bool {
        // Acquire: pairs with the winner's Release `fetch_or`.
        self.forced.load(Ordering::Acquire) & FORCE_WON != 0
    }

    /// Completes a reserved slot that will never start (its group failed):
    /// later sends through its addresses are refused, and what was queued
    /// for it, and its process if one was put in, is dropped (closed if
    /// `initialized`).
    ///
    /// # Safety
    ///
    /// The caller made the slot with [`Slot::reserved`] and never queued or
    /// routed it: it owns the body.
    pub(crate) unsafe fn abandon(&self, initialized: bool) {
        self.queue.seal();
        let _ = self.state.force_complete();
        // SAFETY: the caller owns the body (never queued: no worker has it).
        let body = unsafe { &mut *self.body.get() };
        if !initialized && let Some(process) = body.process.take() {
            // Never initialized: dropped, not closed (as a refused submit
            // hands a process back unclosed).
            if catch_unwind(AssertUnwindSafe(|| drop(process))).is_err() {
                trace::debug!(pid = %self.pid, "the process's drop panicked");
            }
        }
        // SAFETY: as above; `close_body` closes a process still in the body.
        unsafe { self.close_body() };
    }

    /// Forces the process to Complete (terminate: `Terminated`; shutdown:
    /// `Cancelled`). Returns `false` if it had already completed, if its
    /// step had already ended it (its worker sealed the queue first), or
    /// another forcer got there first.
    ///
    /// If no worker was running it, it is closed and its result published
    /// here; otherwise the worker does both when its step returns.
    pub(crate) fn force(this: &SlotArc<Self>, kind: u8) -> bool {
        // One forcer per process: the winner's error is the one published.
        // AcqRel: the claim is ordered before our transition below (and
        // read with Acquire by whoever publishes), and a loser sees it.
        if this
            .forced
            .compare_exchange(NOT_FORCED, kind, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        // Sends are refused from before the transition on (see `inbox`).
        // If the worker sealed first, the process's step has ended it: a
        // send may already have been refused as to a completed process, so
        // its result stands and this forcer gives way (the caller answers
        // `AlreadyComplete`; the claim stays, without `FORCE_WON`).
        if !this.queue.seal() {
            return false;
        }
        match this.state.force_complete() {
            won @ ForceComplete::Won { previous } => {
                let (line, owned) = this.core.counter_line(None);
                let (i, phase) = match previous.phase() {
                    Phase::Ready => (FORCED_READY, "ready"),
                    Phase::Running => (FORCED_RUNNING, "running"),
                    Phase::Blocked => (FORCED_BLOCKED, "blocked"),
                    _ => (FORCED_IDLE, "idle"),
                };
                bump(&line.forced[i], owned);
                trace::debug!(
                    pid = %this.pid,
                    reason = if kind == FORCED_CANCELLED { "cancelled" } else { "terminated" },
                    phase,
                    "process forced to complete"
                );
                // Release: a publisher that reads the mark also reads the
                // claimed kind (same word, earlier in its modification order).
                this.forced.fetch_or(FORCE_WON, Ordering::Release);
                // The process learns it at once: a step polling its token
                // stops, and an idle process's token reads cancelled.
                this.cancel.cancel();
                if won.must_close() {
                    // SAFETY: the previous state was not Running and no
                    // worker can start a Complete process: the body is ours.
                    unsafe { this.close_body() };
                    this.finish(Err(this.forced_error()), None);
                }
                if previous.is_parked() {
                    // SAFETY: the reference the parked process owned (see
                    // `wake`): no waker can take it over any more (the
                    // process is Complete), so it is ours to release; the
                    // caller's own reference keeps the slot alive meanwhile.
                    unsafe { SlotArc::decrement_strong_count(SlotArc::as_ptr(this)) };
                }
                true
            }
            ForceComplete::AlreadyComplete => false,
        }
    }
}

impl<P: SchedProcess> Core<P> {
    pub(crate) fn pool(&self) -> &Pool<Task<P>> {
        self.pool.get().expect("the pool is set at build")
    }

    /// Puts a Ready slot in a run queue. Woken from a worker of this pool
    /// (a process messaging another, a handler completing on a worker), it
    /// goes to that worker's next-item slot with `submit_next`: it runs
    /// next and cache-warm, and no sleeping worker is woken for it (a chain
    /// of messages stays on one core instead of waking a second one per
    /// hop); an idle worker takes it from there only if this worker's run
    /// goes on for long, and an item it displaces goes to the deque,
    /// announced. Woken from any other thread,
    /// back to the worker that last ran it (affinity), else the global
    /// queue.
    ///
    /// `current`: the worker the calling thread is, if any
    /// (`Pool::current_worker`).
    pub(crate) fn schedule(&self, slot: SlotArc<Slot<P>>, current: Option<usize>) {
        let pool = self.pool();
        let refused = if current.is_some() {
            pool.submit_next(Task::new(slot)).err()
        } else {
            // Read only here, where the waker's CAS of the state word has
            // just brought in its line (see `last_worker`). Relaxed: a hint;
            // any worker may run the slot.
            match slot.last_worker.load(Ordering::Relaxed) {
                NO_WORKER => pool.submit(Task::new(slot)).err(),
                worker => pool.submit_to(worker as usize, Task::new(slot)).err(),
            }
        };
        // A refusal means the pool is shutting down; shutdown force-closes
        // every live process, so the slot is not stranded.
        drop(refused);
    }

    /// Gives back the reservation of a submit that failed; `worker` is
    /// the calling thread's index if it is one of this scheduler's workers.
    pub(crate) fn release_reservation(&self, worker: Option<usize>) {
        if self.limited {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
        self.release_unpublished(worker);
    }

    /// The counter line of `worker` (owned by it: `true`), or the calling
    /// thread's shared line (`false`). `worker` must be the calling
    /// thread's own index.
    #[inline]
    pub(crate) fn counter_line(&self, worker: Option<usize>) -> (&Counters, bool) {
        self.counters.line(worker)
    }

    /// Reserves `n` places for a submit in progress (see "Reservations"
    /// at [`CounterLines`]), before the submit checks `stopping`;
    /// `worker` is the calling thread's index if it is one of this
    /// scheduler's workers.
    #[inline]
    pub(crate) fn reserve(&self, worker: Option<usize>, n: u64) {
        // The fence of the Dekker with shutdown is in there.
        self.counters.reserve(worker, n);
    }

    /// Releases one reserved place; `worker` is the calling thread's index
    /// if it is one of this scheduler's workers.
    #[inline]
    pub(crate) fn release_unpublished(&self, worker: Option<usize>) {
        // Counts, then fences (Dekker with shutdown's store of `stopping`
        // and its reads of the lines): if we miss `stopping`, shutdown's
        // reads count this release.
        self.counters.release(worker);
        if self.stopping.load(Ordering::SeqCst) {
            let _guard = self.drained.lock().unwrap_or_else(|p| p.into_inner());
            self.drained_cv.notify_all();
        }
    }
}

impl<P: SchedProcess> fmt::Debug for Slot<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("pid", &self.pid)
            .field("state", &self.state.load())
            .finish_non_exhaustive()
    }
}

/// Runs `process.init`, turning a panic into [`Error::Panicked`]: the
/// start of a submitted process and of an upgraded one.
pub(crate) fn init_caught<P: Process>(
    process: &mut P,
    ctx: &Context<'_, P>,
    method: &str,
    input: P::Input,
) -> Result<(), Error> {
    match catch_unwind(AssertUnwindSafe(|| process.init(ctx, method, input))) {
        Ok(init) => init,
        Err(panic) => Err(Error::from_panic(&*panic)),
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod layout {
    use std::mem::offset_of;

    use super::*;
    use crate::{Context, Error, Events};

    /// A process with a small body, as a counting receiver has.
    struct Counter(u32);

    impl Process for Counter {
        type Input = ();
        type Message = u64;
        type Response = u64;
        type Command = ();
        type Output = u32;

        fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
            Ok(())
        }

        fn step(
            &mut self,
            _: &mut Context<'_, Self>,
            events: Events<'_, u64>,
            _: &mut StepOutput<(), u32>,
        ) -> Result<(), Error> {
            self.0 += events.count() as u32;
            Ok(())
        }
    }

    /// A cache line: how far past the state word the fields the owner
    /// writes at every run must begin.
    const LINE: usize = 64;

    /// A small process's slot, with the `Arc`'s two counts before it,
    /// fits three cache lines: the step's output (72 bytes here, 96 with a
    /// `&'static str` command) is the worker's, not the slot's, and so is
    /// the event batch. Every line of a slot is written when it is made
    /// and read by the worker that first runs it, usually another thread.
    #[test]
    fn a_small_process_fits_three_lines() {
        let with_counts = size_of::<Slot<Counter>>() + 2 * size_of::<usize>();
        assert!(
            with_counts <= 3 * LINE,
            "a slot of a small process takes {with_counts} bytes, more than three lines"
        );
    }

    #[test]
    fn what_the_owner_writes_is_a_line_past_what_a_sender_touches() {
        let state = offset_of!(Slot<Counter>, state);
        // The state word is first (after the `Arc`'s counts), then what a
        // sender reads.
        assert_eq!(state, 0);
        let sender_end = offset_of!(Slot<Counter>, pid) + size_of::<Pid>();
        assert!(offset_of!(Slot<Counter>, queue) < sender_end);
        assert!(offset_of!(Slot<Counter>, core) < sender_end);
        // A waker that queues the process reads `parked_as` after its CAS
        // of the state word: in the state word's 16 bytes (the `Arc`'s
        // counts before it keep those 16-aligned where the allocation is),
        // it is on the line that CAS brought in.
        assert!(offset_of!(Slot<Counter>, parked_as) < state + 16);
        // Likewise `last_worker`, which a waker from outside the pool reads
        // and the owner writes after its `try_start` CAS.
        assert!(offset_of!(Slot<Counter>, last_worker) + size_of::<AtomicU32>() <= state + 16);
        for (name, owned) in [
            ("inline", offset_of!(Slot<Counter>, inline)),
            ("body", offset_of!(Slot<Counter>, body)),
        ] {
            assert!(
                owned >= sender_end - 1 + LINE,
                "{name} at {owned} may share a line with what a sender touches (up to {sender_end})"
            );
        }
    }
}
