//! Where a process's result waits for its [`JoinHandle`](crate::JoinHandle).

use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use stepsched_process::Error;

use crate::primitive::sync::{Condvar, Mutex};

/// Where a process's result waits for its join handle.
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

    pub(crate) fn wait(&self) -> Result<O, Error> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while !state.done {
            state.waiting = true;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        take(&mut state.result)
    }

    /// As `wait`, but gives up after `timeout` (`None`: not done yet).
    pub(crate) fn wait_timeout(&self, timeout: Duration) -> Option<Result<O, Error>> {
        // An unrepresentable deadline is as good as none.
        let until = Instant::now().checked_add(timeout);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while !state.done {
            let left = match until {
                Some(until) => until.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            if left.is_zero() {
                return None;
            }
            state.waiting = true;
            state = self
                .ready
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Some(take(&mut state.result))
    }

    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<O, Error>> {
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

    pub(crate) fn is_done(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).done
    }
}

fn take<O>(result: &mut Option<Result<O, Error>>) -> Result<O, Error> {
    result
        .take()
        .unwrap_or_else(|| Err(Error::failed("the result was already taken")))
}
