//! The result of a process, and the [`JoinHandle`] that waits for it,
//! blocking or as a `Future`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use stepsched_process::{Error, Process};
use stepsched_relay::Pid;

use crate::SchedProcess;
use crate::primitive::sync::{Arc, Condvar, Mutex};
use crate::scheduler::Slot;

/// Where a process's result waits for its [`JoinHandle`].
pub(crate) struct ResultCell<O> {
    state: Mutex<CellState<O>>,
    ready: Condvar,
}

struct CellState<O> {
    result: Option<Result<O, Error>>,
    done: bool,
    /// A thread waits in `wait`: `set` must notify the condvar (a futex
    /// wake is a system call, so it is skipped when nobody waits).
    waiting: bool,
    waker: Option<Waker>,
}

impl<O> ResultCell<O> {
    pub(crate) fn new() -> Self {
        ResultCell {
            state: Mutex::new(CellState {
                result: None,
                done: false,
                waiting: false,
                waker: None,
            }),
            ready: Condvar::new(),
        }
    }

    /// Stores the result and wakes the waiter. Called once per process (the
    /// caller holds the slot's `finished` flag).
    pub(crate) fn set(&self, result: Result<O, Error>) {
        let (waker, waiting) = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.result = Some(result);
            state.done = true;
            (state.waker.take(), state.waiting)
        };
        if waiting {
            self.ready.notify_all();
        }
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn wait(&self) -> Result<O, Error> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while !state.done {
            state.waiting = true;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        take(&mut state.result)
    }

    fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<O, Error>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.done {
            return Poll::Ready(take(&mut state.result));
        }
        match &mut state.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    fn is_done(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).done
    }
}

fn take<O>(result: &mut Option<Result<O, Error>>) -> Result<O, Error> {
    result
        .take()
        .unwrap_or_else(|| Err(Error::failed("the result was already taken")))
}

/// Waits for the result of one process: [`join`](JoinHandle::join) blocks,
/// and the handle is also a `Future`.
///
/// Dropping the handle does not affect the process; its result is then
/// dropped when it completes.
pub struct JoinHandle<P: Process + 'static> {
    slot: Arc<Slot<P>>,
}

impl<P: SchedProcess> JoinHandle<P> {
    pub(crate) fn new(slot: Arc<Slot<P>>) -> Self {
        JoinHandle { slot }
    }

    /// The process's PID.
    pub fn pid(&self) -> Pid {
        self.slot.pid
    }

    /// Whether the process has completed.
    pub fn is_finished(&self) -> bool {
        self.slot.result.is_done()
    }

    /// Blocks until the process completes and returns its result: the
    /// output of its `Done` status, or the error that ended it
    /// ([`Error::Terminated`], [`Error::Cancelled`], [`Error::Panicked`], or
    /// an error its `step` returned).
    pub fn join(self) -> Result<P::Output, Error> {
        self.slot.result.wait()
    }
}

impl<P: SchedProcess> Future for JoinHandle<P> {
    type Output = Result<P::Output, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.slot.result.poll(cx)
    }
}

impl<P: SchedProcess> fmt::Debug for JoinHandle<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("pid", &self.slot.pid)
            .finish_non_exhaustive()
    }
}
