//! [`JoinHandle`]: the result of one simulated process, with the shape of
//! the scheduler's (`pid`, `is_finished`, `join`, `join_timeout`), where
//! waiting means running the simulation.

use std::fmt;
use std::rc::{Rc, Weak};
use std::time::Duration;

use stepsched_process::{Command, Error, Pid, Process};

use crate::state::{Outcome, ResultCell, Shared};

/// The result of one process, from [`Sim::submit`](crate::Sim::submit):
/// [`join`](Self::join) runs the simulation until the process has ended
/// and returns its result, as the scheduler's `JoinHandle::join` blocks
/// until it has; [`join_timeout`](Self::join_timeout) gives up when the
/// virtual clock would pass a deadline.
///
/// Other processes step meanwhile, in the seeded order, exactly as in
/// [`Sim::run`](crate::Sim::run): joining does not change what happens,
/// only where the run stops. Dropping the handle does not affect the
/// process. The result is taken once: by the handle or by
/// [`Sim::take_result`](crate::Sim::take_result).
///
/// ```
/// # use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};
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
/// use stepsched_sim::Sim;
///
/// let sim = Sim::<Waits>::builder().seed(1).build();
/// let pid = sim.allocate_pid();
/// let join = sim.submit(pid, Waits, "run", ()).unwrap();
/// // It waits for a message that was not sent: not done in a second.
/// let join = join.join_timeout(Duration::from_secs(1)).unwrap_err();
/// assert_eq!(sim.now(), Duration::from_secs(1));
/// sim.send(pid, 5).unwrap();
/// assert_eq!(join.join(), Ok(5));
/// ```
pub struct JoinHandle<P: Process> {
    shared: Weak<Shared<P>>,
    pid: Pid,
    result: ResultCell<P>,
}

impl<P: Process + 'static> JoinHandle<P>
where
    P::Command: Command,
{
    pub(crate) fn new(shared: Weak<Shared<P>>, pid: Pid, result: ResultCell<P>) -> Self {
        JoinHandle {
            shared,
            pid,
            result,
        }
    }

    /// The process's PID.
    #[must_use]
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Whether the process has ended (without running anything).
    #[must_use]
    pub fn is_finished(&self) -> bool {
        !matches!(*self.result.borrow(), Outcome::Pending)
    }

    /// Takes the result if the process has ended, without running
    /// anything: after [`Sim::run`](crate::Sim::run), say. `None` if it
    /// has not ended, or its result was taken.
    #[must_use]
    pub fn take_result(&self) -> Option<Result<P::Output, Error>> {
        let mut cell = self.result.borrow_mut();
        match std::mem::replace(&mut *cell, Outcome::Taken) {
            Outcome::Done(result) => Some(result),
            other => {
                *cell = other;
                None
            }
        }
    }

    /// Runs the simulation until the process has ended, and returns its
    /// result: the output of its `Done` status, or the error that ended it
    /// ([`Error::Terminated`], [`Error::Cancelled`], [`Error::Panicked`],
    /// or an error its `step` returned).
    ///
    /// # Panics
    ///
    /// Where the scheduler's `join` would wait forever: when the process
    /// can never end — no process is runnable, no timer is pending, and
    /// it is still live (it waits for a message or a completion that will
    /// not come) — or the step limit is reached first. The message names
    /// the seed. Also if the result was taken by
    /// [`Sim::take_result`](crate::Sim::take_result), or if called from
    /// inside a step or a handler.
    pub fn join(self) -> Result<P::Output, Error> {
        match self.wait(None) {
            Ok(result) => result,
            Err(why) => panic!("{why}"),
        }
    }

    /// Like [`join`](Self::join), but stops when the virtual clock would
    /// pass `timeout` from now: the result, or — if the process has not
    /// ended by then — the handle back (the clock is then at the
    /// deadline, as after a real wait). If the process can never end, the
    /// clock also moves to the deadline and the handle comes back.
    ///
    /// # Errors
    ///
    /// The handle itself, if the process has not ended within `timeout`.
    ///
    /// # Panics
    ///
    /// If the result was taken by
    /// [`Sim::take_result`](crate::Sim::take_result), or if called from
    /// inside a step or a handler.
    pub fn join_timeout(self, timeout: Duration) -> Result<Result<P::Output, Error>, Self> {
        match self.wait(Some(timeout)) {
            Ok(result) => Ok(result),
            Err(_) => Err(self),
        }
    }

    /// Runs until the process has ended (or `timeout` passes); its result,
    /// or why it did not end.
    fn wait(&self, timeout: Option<Duration>) -> Result<Result<P::Output, Error>, String> {
        if !self.is_finished() {
            let Some(shared) = self.shared.upgrade() else {
                return Err(format!("join: process {} outlived its simulator", self.pid));
            };
            let until = timeout.map(|t| shared.inner.borrow().now + t);
            let cell = Rc::clone(&self.result);
            let done = move || !matches!(*cell.borrow(), Outcome::Pending);
            let report = shared.drive(&done, until);
            if !self.is_finished() {
                if timeout.is_none() {
                    let why = if report.step_limit_hit {
                        "the step limit was reached"
                    } else {
                        "no process is runnable and no timer is pending"
                    };
                    return Err(format!(
                        "join: process {} can never end: {why} (seed {}, {} processes live)",
                        self.pid, shared.seed, report.live
                    ));
                }
                // `drive` moved the clock to the deadline.
                return Err(String::new());
            }
        }
        match std::mem::replace(&mut *self.result.borrow_mut(), Outcome::Taken) {
            Outcome::Done(result) => Ok(result),
            _ => panic!(
                "join: the result of process {} was taken by Sim::take_result",
                self.pid
            ),
        }
    }
}

impl<P: Process> fmt::Debug for JoinHandle<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("pid", &self.pid)
            .field(
                "finished",
                &!matches!(*self.result.borrow(), Outcome::Pending),
            )
            .finish_non_exhaustive()
    }
}
