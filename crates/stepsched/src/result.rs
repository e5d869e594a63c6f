//! Where a process's result waits for its [`JoinHandle`](crate::JoinHandle).
//!
//! # Protocol
//!
//! Every process stores its result here once, and most are never joined
//! (a child spawned from a step has no handle), so the store takes no
//! lock: the finisher writes the result into its cell, then sets [`DONE`]
//! in the flag word with one `fetch_or`, which publishes the write. A
//! joiner that reads `DONE` with Acquire takes the result; only the one
//! handle ever reads it, and its reads take it by value or `&mut` (see
//! `JoinHandle`), so two takes never race.
//!
//! A joiner that finds the process running waits on the mutex and the
//! condvar, and the finisher takes the mutex only if one registered:
//! under the mutex the joiner stores its waker (a `poll`) and sets
//! [`WAITING`] with its own `fetch_or`, then sleeps on the condvar (a
//! `wait`) or returns `Pending`. Both writes of the word are
//! read-modify-writes, so one comes first:
//!
//! * the finisher's: the joiner's `fetch_or` returns `DONE`, and the
//!   joiner takes the result at once (its Acquire RMW reads the value the
//!   finisher's Release RMW wrote);
//! * the joiner's: the finisher's `fetch_or` returns `WAITING`, so it
//!   takes the mutex, which it gets only once the joiner has released it
//!   (by sleeping on the condvar, or by returning after storing its
//!   waker), then marks the joiner `notified`, notifies the condvar and
//!   wakes the waker. A woken joiner checks `notified` under the mutex,
//!   which also orders the finisher's write of the result before its
//!   take.
//!
//! Nothing is lost either way; the models in this module check both
//! orders. `WAITING` is never cleared: a joiner that registers again (a
//! second poll, perhaps with another waker, or a blocking join after a
//! poll) does the same under the mutex, and its `fetch_or` either comes
//! before the finisher's, which then finds the newest waker under the
//! mutex, or after it, and returns `DONE`.
//!
//! The waker is the joiner's code: a panic in its `wake` is caught, so it
//! never reaches the thread that completed the process (a worker, or the
//! caller of `terminate`), which still publishes the rest. A handle
//! dropped after a poll that returned `Pending` takes its waker out (a
//! handle that never polled has none to take, and does nothing).
//!
//! `set` and the reads are `unsafe`: the cell relies on its callers for
//! one `set` (the slot's `finished` flag) and one reader (the process's
//! only `JoinHandle`, whose methods take it by value or `&mut`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use stepsched_process::Error;

use crate::primitive::sync::atomic::{AtomicU8, Ordering};
use crate::primitive::sync::{Condvar, Mutex, MutexGuard};
use crate::primitive::tracked;
use crate::trace;

/// The result is in its cell.
const DONE: u8 = 1;
/// A joiner waits (on the condvar, or with a waker under the mutex).
const WAITING: u8 = 2;

/// Where a process's result waits for its join handle.
pub(crate) struct ResultCell<O> {
    /// [`DONE`] and [`WAITING`] (see the module docs).
    flags: AtomicU8,
    /// No handle will ever read the result: `set` only stores it. Fixed
    /// when the cell is made, before it is shared.
    detached: bool,
    /// Written once by the finisher before it sets `DONE`; taken by the
    /// one joiner after it read `DONE` (or `notified`).
    result: tracked::UnsafeCell<Option<Result<O, Error>>>,
    /// What a registered joiner and the finisher share under the mutex.
    joiner: Mutex<Joiner>,
    ready: Condvar,
}

/// The registered joiner's side, under the cell's mutex.
struct Joiner {
    /// The waker of the last poll that returned `Pending`.
    waker: Option<Waker>,
    /// The finisher found `WAITING` and came by: the result is in (the
    /// mutex orders its write before this flag's).
    notified: bool,
}

// SAFETY: the result moves from the finisher's thread to the joiner's
// (hence `O: Send`), and the cell is accessed by one thread at a time, as
// the module docs argue: the finisher before its Release `fetch_or` of
// `DONE`, the joiner after an Acquire read of it. The other fields are
// `Sync` (`Waker` is `Send + Sync`).
unsafe impl<O: Send> Sync for ResultCell<O> {}

impl<O> ResultCell<O> {
    /// `joinable`: whether a join handle will read the result. If not,
    /// `set` only stores it, to be dropped with the cell.
    pub(crate) fn new(joinable: bool) -> Self {
        ResultCell {
            flags: AtomicU8::new(0),
            detached: !joinable,
            result: tracked::UnsafeCell::new(None),
            joiner: Mutex::new(Joiner {
                waker: None,
                notified: false,
            }),
            ready: Condvar::new(),
        }
    }

    /// Stores the result and wakes the joiner if one waits.
    ///
    /// # Safety
    ///
    /// At most one call per cell (the slot's `finished` flag sees to it).
    #[inline]
    pub(crate) unsafe fn set(&self, result: Result<O, Error>) {
        // SAFETY: nobody else touches the cell before `DONE` is set: one
        // `set` per process, and the joiner reads only after `DONE`.
        self.result.with_mut(|cell| unsafe { *cell = Some(result) });
        // No handle reads a detached result: the cell's drop does, after
        // the last reference is released.
        if self.detached {
            return;
        }
        // Release: publishes the write above to the joiner's Acquire read
        // of `DONE`. Relaxed would do for `WAITING` itself: the waker it
        // guards is read under the mutex, which orders it.
        if self.flags.fetch_or(DONE, Ordering::Release) & WAITING != 0 {
            self.notify();
        }
    }

    /// Wakes the registered joiner (see the module docs).
    #[cold]
    #[inline(never)]
    fn notify(&self) {
        let waker = {
            let mut joiner = self.lock();
            joiner.notified = true;
            joiner.waker.take()
        };
        self.ready.notify_all();
        if let Some(w) = waker
            && catch_unwind(AssertUnwindSafe(|| w.wake())).is_err()
        {
            trace::debug!("a join handle's waker panicked");
        }
    }

    /// Takes out the waker a poll left, if any: the handle that polled is
    /// dropped.
    #[cold]
    #[inline(never)]
    pub(crate) fn forget_waker(&self) {
        let waker = self.lock().waker.take();
        drop(waker);
    }

    fn lock(&self) -> MutexGuard<'_, Joiner> {
        self.joiner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the result is in; Acquire, so that the caller may then take
    /// it.
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        // Acquire: pairs with the Release `fetch_or` in `set`.
        self.flags.load(Ordering::Acquire) & DONE != 0
    }

    /// Registers the joiner, under the mutex; whether the result is in.
    fn register(&self) -> bool {
        // Acquire: if the finisher's RMW came first, ours reads its value
        // (or a later RMW's) and synchronizes with its Release.
        self.flags.fetch_or(WAITING, Ordering::Acquire) & DONE != 0
    }

    /// Blocks until the result is in and takes it.
    ///
    /// # Safety
    ///
    /// Only the cell's one reader calls the reads (`wait`, `wait_timeout`,
    /// `poll`), never two at once.
    pub(crate) unsafe fn wait(&self) -> Result<O, Error> {
        let mut guard = self.lock();
        if !self.register() {
            // Registered before the finisher's RMW: it will come by under
            // the mutex and set `notified` (checked under the mutex, so
            // its write of the result happens before our take).
            while !guard.notified {
                guard = self.ready.wait(guard).unwrap_or_else(|p| p.into_inner());
            }
        }
        drop(guard);
        // SAFETY: `DONE` was read with Acquire, or `notified` under the
        // mutex after the finisher's write; we are the one reader.
        unsafe { self.take() }
    }

    /// As `wait`, but gives up after `timeout` (`None`: not done yet).
    ///
    /// # Safety
    ///
    /// As for `wait`.
    pub(crate) unsafe fn wait_timeout(&self, timeout: Duration) -> Option<Result<O, Error>> {
        if !self.is_done() {
            // An unrepresentable deadline is as good as none.
            let until = Instant::now().checked_add(timeout);
            let mut guard = self.lock();
            let registered_first = !self.register();
            // As in `wait`.
            while registered_first && !guard.notified {
                let left = match until {
                    Some(until) => until.saturating_duration_since(Instant::now()),
                    None => Duration::MAX,
                };
                if left.is_zero() {
                    return None;
                }
                guard = self
                    .ready
                    .wait_timeout(guard, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        // SAFETY: as in `wait`.
        Some(unsafe { self.take() })
    }

    /// The result if it is in (taken), else registers `cx`'s waker.
    ///
    /// # Safety
    ///
    /// As for `wait`.
    pub(crate) unsafe fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<O, Error>> {
        if !self.is_done() {
            let mut joiner = self.lock();
            if joiner.notified {
                // The finisher came by since our last registration.
                joiner.waker = None;
            } else {
                match &mut joiner.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    slot => *slot = Some(cx.waker().clone()),
                }
                if !self.register() {
                    return Poll::Pending;
                }
                // Done after all: our registration came after the
                // finisher's RMW, which may have found no `WAITING` (then
                // it never looks for the waker) or an earlier one's; the
                // waker is not needed.
                joiner.waker = None;
            }
        }
        // SAFETY: as in `wait`.
        Poll::Ready(unsafe { self.take() })
    }

    /// Takes the result, once `DONE` was read with Acquire (or `notified`
    /// under the mutex).
    ///
    /// # Safety
    ///
    /// As for `wait`.
    unsafe fn take(&self) -> Result<O, Error> {
        // SAFETY: `DONE` was read with Acquire, or `notified` under the
        // mutex the finisher took after its write, so the write is visible
        // and the finisher touches the cell no more; only the one reader
        // takes (the caller's contract).
        let result = self.result.with_mut(|cell| unsafe { (*cell).take() });
        take(result)
    }
}

fn take<O>(result: Option<Result<O, Error>>) -> Result<O, Error> {
    result.unwrap_or_else(|| Err(Error::failed("the result was already taken")))
}

#[cfg(all(test, stepsched_loom))]
mod loom_tests {
    use std::sync::Arc as StdArc;
    use std::task::{Context, Poll, Wake, Waker};

    use super::ResultCell;
    use crate::primitive::sync::Arc;
    use crate::primitive::sync::atomic::{AtomicBool, Ordering};

    /// A waker that records its wake.
    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: StdArc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn flag() -> (StdArc<Flag>, Waker) {
        let flag = StdArc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        (flag, waker)
    }

    /// A finisher thread that sets `Ok(7)`, once.
    fn finisher(cell: &Arc<ResultCell<u32>>) -> loom::thread::JoinHandle<()> {
        let cell = cell.clone();
        // SAFETY: the model's one `set`.
        loom::thread::spawn(move || unsafe { cell.set(Ok(7)) })
    }

    /// The finisher stores the result while the joiner blocks in `wait`:
    /// the joiner gets it, in either order of their flag writes (a lost
    /// wake-up would leave it blocked, which loom reports as a deadlock).
    #[test]
    fn loom_a_result_set_while_the_joiner_waits_reaches_it() {
        loom::model(|| {
            let cell = Arc::new(ResultCell::<u32>::new(true));
            let finisher = finisher(&cell);
            // SAFETY: the main thread is the model's one reader.
            assert_eq!(unsafe { cell.wait() }, Ok(7));
            finisher.join().unwrap();
        });
    }

    /// As above with a poll: either it is ready, or its waker is woken by
    /// the time the finisher is done, and the next poll is ready.
    #[test]
    fn loom_a_result_set_while_the_joiner_polls_wakes_it() {
        loom::model(|| {
            let cell = Arc::new(ResultCell::<u32>::new(true));
            let finisher = finisher(&cell);
            let (flag, waker) = flag();
            let mut cx = Context::from_waker(&waker);
            // SAFETY: the main thread is the model's one reader.
            let first = unsafe { cell.poll(&mut cx) };
            finisher.join().unwrap();
            match first {
                Poll::Ready(result) => assert_eq!(result, Ok(7)),
                Poll::Pending => {
                    assert!(
                        flag.0.load(Ordering::SeqCst),
                        "a pending joiner was never woken"
                    );
                    // SAFETY: as above.
                    assert_eq!(unsafe { cell.poll(&mut cx) }, Poll::Ready(Ok(7)));
                }
            }
        });
    }

    /// A joiner that polled before the race polls again with another
    /// waker while the finisher runs: `WAITING` is already set, and the
    /// newest waker is the one woken.
    #[test]
    fn loom_a_result_set_while_the_joiner_polls_again_wakes_the_new_waker() {
        loom::model(|| {
            let cell = Arc::new(ResultCell::<u32>::new(true));
            let (_, first) = flag();
            // SAFETY: the main thread is the model's one reader.
            assert!(unsafe { cell.poll(&mut Context::from_waker(&first)) }.is_pending());
            let finisher = finisher(&cell);
            let (flag, waker) = flag();
            let mut cx = Context::from_waker(&waker);
            // SAFETY: as above.
            let again = unsafe { cell.poll(&mut cx) };
            finisher.join().unwrap();
            match again {
                Poll::Ready(result) => assert_eq!(result, Ok(7)),
                Poll::Pending => {
                    assert!(
                        flag.0.load(Ordering::SeqCst),
                        "the new waker was never woken"
                    );
                    // SAFETY: as above.
                    assert_eq!(unsafe { cell.poll(&mut cx) }, Poll::Ready(Ok(7)));
                }
            }
        });
    }

    /// A joiner that polled and then blocks in `wait` gets the result.
    #[test]
    fn loom_a_result_set_while_the_joiner_polls_then_waits_reaches_it() {
        loom::model(|| {
            let cell = Arc::new(ResultCell::<u32>::new(true));
            let finisher = finisher(&cell);
            let (_, waker) = flag();
            // SAFETY: the main thread is the model's one reader.
            match unsafe { cell.poll(&mut Context::from_waker(&waker)) } {
                Poll::Ready(result) => assert_eq!(result, Ok(7)),
                // SAFETY: as above.
                Poll::Pending => assert_eq!(unsafe { cell.wait() }, Ok(7)),
            }
            finisher.join().unwrap();
        });
    }

    /// A detached cell's result is written with no atomic; the cell's
    /// drop, after the last reference, reads it (loom checks the access).
    #[test]
    fn loom_a_detached_result_is_dropped_with_the_cell() {
        loom::model(|| {
            let cell = Arc::new(ResultCell::<u32>::new(false));
            let finisher = finisher(&cell);
            drop(cell);
            finisher.join().unwrap();
        });
    }
}
