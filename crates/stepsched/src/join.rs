//! The [`JoinHandle`] that waits for a process's result, blocking or as a
//! `Future`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use stepsched_process::{Error, Process};
use stepsched_relay::Pid;

use crate::SchedProcess;
use crate::primitive::sync::Arc;
use crate::slot::Slot;

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
