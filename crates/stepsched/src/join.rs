//! The [`JoinHandle`] that waits for a process's result, blocking or as a
//! `Future`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use stepsched_process::{Error, Process};
use stepsched_relay::Pid;

use crate::SchedProcess;
use crate::address::Address;
use crate::primitive::sync::SlotArc;
use crate::slot::Slot;

/// Waits for the result of one process: [`join`](JoinHandle::join) blocks,
/// and the handle is also a `Future`.
///
/// Dropping the handle does not affect the process; its result is then
/// dropped when it completes.
pub struct JoinHandle<P: Process + 'static> {
    slot: SlotArc<Slot<P>>,
    /// A poll returned `Pending`: the cell may hold our waker.
    polled: bool,
}

impl<P: SchedProcess> JoinHandle<P> {
    pub(crate) fn new(slot: SlotArc<Slot<P>>) -> Self {
        JoinHandle {
            slot,
            polled: false,
        }
    }

    /// The process's PID.
    pub fn pid(&self) -> Pid {
        self.slot.pid
    }

    /// The process's [`Address`], to send to it without a lookup.
    pub fn address(&self) -> Address<P> {
        Address::new(self.slot.clone())
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
        // SAFETY: this handle is its result cell's one reader (one is made
        // per joinable slot, by `start`; it is not `Clone`), and `self`
        // is ours.
        unsafe { self.slot.result.wait() }
    }

    /// Like [`join`](JoinHandle::join), but waits at most `timeout`: the
    /// process's result, or — if it has not completed by then — the handle
    /// back, to wait again, poll, or drop. A zero `timeout` only looks.
    ///
    /// # Errors
    ///
    /// The handle itself, if the process has not completed within
    /// `timeout`.
    ///
    /// ```
    /// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
    /// # struct Waits;
    /// # impl Process for Waits {
    /// #     type Input = (); type Message = u8; type Response = u8; type Command = String; type Output = u8;
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _cx: &mut Context<'_, Self>, events: Events<'_, u8>, out: &mut StepOutput<String, u8>) -> Result<(), Error> {
    /// #         match events.into_iter().find_map(|e| e.into_data()) {
    /// #             Some(v) => out.set_status(Status::Done(v)),
    /// #             None => out.set_status(Status::Idle),
    /// #         }
    /// #         Ok(())
    /// #     }
    /// # }
    /// use std::time::Duration;
    /// use stepsched::Scheduler;
    ///
    /// let scheduler = Scheduler::<Waits>::builder().workers(1).build().unwrap();
    /// let pid = scheduler.allocate_pid();
    /// let join = scheduler.submit(pid, Waits, "run", ()).unwrap();
    /// // It waits for a message that was not sent: not done.
    /// let join = join.join_timeout(Duration::ZERO).unwrap_err();
    /// scheduler.send(pid, 5).unwrap();
    /// assert_eq!(join.join_timeout(Duration::from_secs(60)).unwrap(), Ok(5));
    /// ```
    pub fn join_timeout(self, timeout: Duration) -> Result<Result<P::Output, Error>, Self> {
        // SAFETY: as in `join`.
        match unsafe { self.slot.result.wait_timeout(timeout) } {
            Some(result) => Ok(result),
            None => Err(self),
        }
    }
}

impl<P: SchedProcess> Future for JoinHandle<P> {
    type Output = Result<P::Output, Error>;

    /// Ready with the process's result once it has completed; polled
    /// again after that, `Ready(Err(Error::Failed(..)))`: the result was
    /// already taken.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // SAFETY: as in `join`, with `&mut self`.
        let poll = unsafe { this.slot.result.poll(cx) };
        this.polled |= poll.is_pending();
        poll
    }
}

impl<P: Process + 'static> Drop for JoinHandle<P> {
    /// Lets go of the waker a pending poll left with the process.
    #[inline]
    fn drop(&mut self) {
        if self.polled {
            self.slot.result.forget_waker();
        }
    }
}

impl<P: SchedProcess> fmt::Debug for JoinHandle<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("pid", &self.slot.pid)
            .finish_non_exhaustive()
    }
}
