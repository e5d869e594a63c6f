//! [`Handle`]: submit, send, terminate and observe, from any thread.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use stepsched_process::{CancelToken, Context, Error, Event};
use stepsched_relay::{Package, Pid, Receiver};

use crate::SchedProcess;
use crate::error::{SendError, SubmitError, TerminateError};
use crate::join::JoinHandle;
use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{Ordering, fence};
use crate::slot::{Core, FORCED_CANCELLED, FORCED_TERMINATED, Slot, Task};
use crate::step::panic_message;

/// A cloneable handle to a scheduler, for use anywhere — in handlers, in
/// processes' hooks, on other threads. It does not keep the workers
/// running: the [`Scheduler`] owns them.
pub struct Handle<P: stepsched_process::Process + 'static> {
    pub(crate) core: Arc<Core<P>>,
}

impl<P: SchedProcess> Clone for Handle<P> {
    fn clone(&self) -> Self {
        Handle {
            core: self.core.clone(),
        }
    }
}

impl<P: SchedProcess> fmt::Debug for Handle<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Relaxed: a snapshot for display.
        f.debug_struct("Handle")
            .field("live", &self.core.live.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<P: SchedProcess> Handle<P> {
    /// A fresh PID on this scheduler's node.
    pub fn allocate_pid(&self) -> Pid {
        self.core.pids.allocate()
    }

    /// The number of worker threads.
    pub fn workers(&self) -> usize {
        self.core.pool().workers()
    }

    /// Submits a process: calls `init(ctx, method, input)` on this thread,
    /// registers `pid`, and queues the process on the global queue.
    ///
    /// # Errors
    ///
    /// [`SubmitError::Stopping`] once shutdown began,
    /// [`SubmitError::LimitReached`] at the process limit,
    /// [`SubmitError::Init`] if `init` fails (the process is closed, nothing
    /// is registered), [`SubmitError::DuplicatePid`] if a live process has
    /// `pid`.
    pub fn submit(
        &self,
        pid: Pid,
        mut process: P,
        method: &str,
        input: P::Input,
    ) -> Result<JoinHandle<P>, SubmitError<P>> {
        let core = &self.core;
        // Reserve first, then check: concurrent submits cannot overshoot.
        // SeqCst: `unpublished` pairs with shutdown's wait (see
        // `release_unpublished`); the limit only needs the RMW's atomicity.
        core.unpublished.fetch_add(1, Ordering::SeqCst);
        if core.limited && core.live.fetch_add(1, Ordering::SeqCst) >= core.max_processes {
            core.release_reservation();
            return Err(SubmitError::LimitReached(process));
        }
        if core.stopping.load(Ordering::SeqCst) {
            core.release_reservation();
            return Err(SubmitError::Stopping(process));
        }
        let cancel = CancelToken::new();
        let ctx = Context::with_cancel_token(pid.number(), cancel.clone());
        let init = catch_unwind(AssertUnwindSafe(|| process.init(&ctx, method, input)));
        let init = match init {
            Ok(r) => r,
            Err(panic) => Err(Error::Panicked(panic_message(&*panic))),
        };
        if let Err(e) = init {
            let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
            core.release_reservation();
            return Err(SubmitError::Init(e));
        }
        let slot = Slot::new(pid, core.clone(), process, cancel);
        if let Err(e) = core.routes.register(pid, slot.clone()) {
            drop(e);
            // SAFETY: the slot was never published: the body is ours.
            let body = unsafe { &mut *slot.body.get() };
            let mut process = body.process.take().expect("just initialized");
            let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
            core.release_reservation();
            return Err(SubmitError::DuplicatePid(pid, process));
        }
        // Relaxed: a statistics counter.
        core.submitted.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(pid = %pid, method, "process submitted");
        if let Some(hook) = &core.on_start
            && catch_unwind(AssertUnwindSafe(|| hook(pid))).is_err()
        {
            tracing::debug!(pid = %pid, "start hook panicked");
        }
        let handle = JoinHandle::new(slot.clone());
        // Dekker with shutdown, twice. Shutdown stores `stopping` then
        // sweeps the routes to send cancel events, and later stores
        // `forcing` then sweeps them to force what is left; we registered
        // the route, then load each flag. With a SeqCst fence on each side,
        // at least one of us sees the other: the process gets its cancel
        // event (sent at most once), and is forced by the sweep or by us.
        fence(Ordering::SeqCst);
        if core.forcing.load(Ordering::SeqCst) {
            // The forcing sweep may have missed us, and the workers may be
            // stopping: end the process here.
            slot.force(FORCED_CANCELLED);
            return Ok(handle);
        }
        let stopping = core.stopping.load(Ordering::SeqCst);
        if core.pool().submit(Task::new(slot.clone())).is_err() {
            // The workers are gone: end the process here.
            slot.force(FORCED_CANCELLED);
        } else if stopping {
            slot.send_cancel();
        }
        Ok(handle)
    }

    /// Sends `message` to process `pid`: pushes a message event and wakes
    /// the process if it is Idle or Blocked.
    ///
    /// Messages from one sender arrive in the order sent, each once.
    /// Messages still queued when a process completes are dropped: `Ok`
    /// means the message was queued for a process that had not finished,
    /// not that a step saw it.
    ///
    /// # Errors
    ///
    /// [`SendError::UnknownPid`] if no live process has `pid`,
    /// [`SendError::Finished`] if it has finished (or was terminated and
    /// its last step is still running); both hand the message back.
    pub fn send(&self, pid: Pid, message: P::Payload) -> Result<(), SendError<P::Payload>> {
        let Some(slot) = self.core.routes.get(pid) else {
            return Err(SendError::UnknownPid(pid, message));
        };
        if slot.state.load().is_complete() {
            return Err(SendError::Finished(pid, message));
        }
        match slot.sender().push(Event::message(message)) {
            Ok(()) => {
                // If the process completed since, the message is dropped
                // with the rest of its queue, as documented.
                slot.wake();
                Ok(())
            }
            Err(e) => Err(SendError::Finished(
                pid,
                e.into_inner().into_data().expect("a message"),
            )),
        }
    }

    /// Terminates process `pid`: it ends with [`Error::Terminated`] and is
    /// closed — at once if no worker is stepping it (even if it is blocked
    /// on a yield that never completes), else when its current step
    /// returns (whatever that step returns). Its result is published after
    /// the close, and its PID stays registered until then.
    ///
    /// `Ok` means this call ended the process: its result is
    /// `Err(Terminated)`.
    ///
    /// # Errors
    ///
    /// [`TerminateError::UnknownPid`] if no live process has `pid`,
    /// [`TerminateError::AlreadyComplete`] if it completed first (or
    /// another terminate or shutdown ended it).
    pub fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        let slot = self
            .core
            .routes
            .get(pid)
            .ok_or(TerminateError::UnknownPid(pid))?;
        if slot.force(FORCED_TERMINATED) {
            Ok(())
        } else {
            Err(TerminateError::AlreadyComplete(pid))
        }
    }

    /// Whether a live process has `pid`.
    pub fn contains(&self, pid: Pid) -> bool {
        self.core.routes.contains(pid)
    }
}

impl<P: SchedProcess> Receiver<P::Payload> for Handle<P> {
    /// Routes a package to the process `package.to` (the topic and sender
    /// are not used by the scheduler).
    fn send(
        &self,
        package: Package<P::Payload>,
    ) -> Result<(), stepsched_relay::SendError<P::Payload>> {
        let to = package.to;
        let Some(slot) = self.core.routes.get(to) else {
            return Err(stepsched_relay::SendError::UnknownPid(package));
        };
        // As in `Handle::send`: a process already complete takes nothing.
        if slot.state.load().is_complete() {
            return Err(stepsched_relay::SendError::Closed(package));
        }
        let Package {
            from,
            to,
            topic,
            payload,
        } = package;
        match slot.sender().push(Event::message(payload)) {
            Ok(()) => {
                slot.wake();
                Ok(())
            }
            Err(e) => {
                let payload = e.into_inner().into_data().expect("a message");
                Err(stepsched_relay::SendError::Closed(Package {
                    from,
                    to,
                    topic,
                    payload,
                }))
            }
        }
    }
}
