//! Handlers and their [`Completer`]s: dispatching a step's yields, with
//! the faults of a dispatch, and queueing their completions.

use std::cmp::Reverse;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::rc::{Rc, Weak};
use std::time::Duration;

use stepsched_process::{Command, Complete, Error, Event, Pid, Process, StepOutput, Tag};

use crate::rng::{Kind, SimRng};
use crate::state::{Origin, Shared, quietly_drop};
use crate::trace::{push_fault, push_number};

impl<P: Process> Shared<P> {
    /// Queues the completion of yield `tag` of process `serial` (under
    /// `pid`), after `after` plus any injected delay (if the faults are
    /// `aimed` at it). Whether that process is live.
    pub(crate) fn complete(
        &self,
        pid: Pid,
        serial: u64,
        (tag, aimed): (Tag, bool),
        result: Result<P::Response, Error>,
        after: Duration,
    ) -> bool {
        // Not borrowed only if a completer is dropped inside the simulator's
        // own bookkeeping (inside an event being dropped, say): the process
        // is ending then, and the completion would reach nothing.
        let Ok(mut inner) = self.inner.try_borrow_mut() else {
            return false;
        };
        let inner = &mut *inner;
        let Some(entry) = inner
            .live
            .get_mut(&pid)
            .filter(|e| e.serial == serial && !e.terminated)
        else {
            return false;
        };
        let mut after = after;
        let rng = entry.streams.get(Kind::Delay);
        let faults = self.faults.get();
        if aimed && rng.chance(faults.delay) {
            let delay = rng.millis_up_to(faults.max_delay);
            after += delay;
            if self.tracing {
                push_fault(&mut inner.trace, inner.now, pid, "delay", |line| {
                    line.push_str(" c");
                    push_number(line, tag);
                    line.push_str(" +");
                    push_number(line, u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
                    line.push_str("ms");
                });
            }
        }
        if after.is_zero() {
            inner.completion_seq += 1;
            let origin = Origin::Completion(inner.completion_seq);
            inner
                .push_event(pid, origin, Event::completion(tag, result))
                .is_ok()
        } else {
            inner.timer_seq += 1;
            let seq = inner.timer_seq;
            let at = inner.now + after;
            inner.timers.push(Reverse((at, seq)));
            inner.timed.insert(seq, (pid, serial, tag, result));
            true
        }
    }
}

impl<P: Process + 'static> Shared<P>
where
    P::Command: Command,
{
    /// Hands each yield of `out` to its handler, with the faults of a
    /// dispatch.
    pub(crate) fn dispatch(
        self: &Rc<Self>,
        pid: Pid,
        serial: u64,
        out: &mut StepOutput<P::Command, P::Output>,
    ) {
        let mut yields = out.yields_mut().drain();
        for y in yields.by_ref() {
            let (error, panic, never, seed, aimed) = {
                let mut guard = self.inner.borrow_mut();
                let inner = &mut *guard;
                // Terminated during the dispatch (by a handler): the yields
                // not yet dispatched never will be.
                let Some(entry) = inner.live.get_mut(&pid).filter(|e| !e.terminated) else {
                    drop(guard);
                    quietly_drop(y);
                    break;
                };
                let faults = self.faults.get();
                let aimed = entry.aimed
                    && faults
                        .only_handler
                        .is_none_or(|name| name == y.command.name());
                let p = |p: f64| if aimed { p } else { 0.0 };
                let streams = &mut entry.streams;
                let drawn = (
                    streams
                        .get(Kind::HandlerError)
                        .chance(p(faults.handler_error)),
                    streams
                        .get(Kind::HandlerPanic)
                        .chance(p(faults.handler_panic)),
                    streams
                        .get(Kind::NeverComplete)
                        .chance(p(faults.never_complete)),
                    streams.get(Kind::Handler).next_u64(),
                    aimed,
                );
                if self.tracing {
                    let fired = [
                        (drawn.0, "handler-error"),
                        (drawn.1, "handler-panic"),
                        (drawn.2, "never-complete"),
                    ];
                    for (_, what) in fired.iter().filter(|(fired, _)| *fired) {
                        push_fault(&mut inner.trace, inner.now, pid, what, |line| {
                            line.push(' ');
                            line.push_str(y.command.name());
                            line.push('#');
                            push_number(line, y.tag);
                        });
                    }
                }
                drawn
            };
            let completer = Completer {
                shared: Rc::downgrade(self),
                pid,
                serial,
                tag: y.tag,
                aimed,
                done: false,
                lost: never,
                rng: SimRng::new(seed),
            };
            if error {
                quietly_drop(y.command);
                completer.complete(Err(Error::failed("injected handler error")));
                continue;
            }
            if panic {
                quietly_drop(y.command);
                // Unwinds without the panic hook (nothing is printed); the
                // completer, dropped while unwinding, completes the yield
                // with `Error::Panicked`, as a real panic would.
                let _ = catch_unwind(AssertUnwindSafe(move || {
                    let _completer = completer;
                    resume_unwind(Box::new("injected handler panic"));
                }));
                continue;
            }
            match self.handlers.get(y.command.name()) {
                Some(handler) => {
                    let _ = catch_unwind(AssertUnwindSafe(|| handler(y.command, completer)));
                }
                None => {
                    let message = format!("unknown command `{}`", y.command.name());
                    quietly_drop(y.command);
                    completer.complete(Err(Error::Failed(message)));
                }
            }
        }
        // The yields not dispatched (the process was terminated).
        let _ = catch_unwind(AssertUnwindSafe(move || yields.for_each(drop)));
    }
}

/// Completes one yield of one process, once: now
/// ([`complete`](Self::complete)) or at a virtual time
/// ([`complete_after`](Self::complete_after)). Dropped without completing
/// (the handler forgot it, or panicked), it completes the yield with an
/// error, as the scheduler's does; [`never`](Self::never) drops it without
/// that. It may be kept and completed later, from another handler's call;
/// if the process has ended by then, the completion reaches nothing (nor
/// does it reach a later process submitted under the same PID).
pub struct Completer<P: Process> {
    shared: Weak<Shared<P>>,
    pid: Pid,
    serial: u64,
    tag: Tag,
    /// Whether the faults are aimed at this yield (its delay fault).
    aimed: bool,
    done: bool,
    /// The never-complete fault: whatever this completes reaches nothing.
    lost: bool,
    /// The handler's random numbers (see [`rng`](Self::rng)).
    rng: SimRng,
}

impl<P: Process> fmt::Debug for Completer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer")
            .field("pid", &self.pid)
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

impl<P: Process + 'static> Completer<P>
where
    P::Command: Command,
{
    /// The process whose yield this completes.
    #[must_use]
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The tag of the yield this completes.
    #[must_use]
    pub fn tag(&self) -> Tag {
        self.tag
    }

    /// A random source for the handler (a latency to complete after, an
    /// answer to pick), seeded from the run's seed, the process and its
    /// yield: the same on every replay of the seed, and drawing from it
    /// moves no other decision of the simulator.
    ///
    /// ```
    /// # use stepsched_process::{Context, Error, Event, Events, Process, Status, StepOutput};
    /// # struct Asker;
    /// # impl Process for Asker {
    /// #     type Input = (); type Message = (); type Response = u64; type Command = &'static str; type Output = u64;
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _: &mut Context<'_, Self>, events: Events<'_, (), u64>, out: &mut StepOutput<&'static str, u64>) -> Result<(), Error> {
    /// #         for event in events {
    /// #             if let Event::Completion { result, .. } = event { out.set_status(Status::Done(result?)); return Ok(()); }
    /// #         }
    /// #         out.push_yield(1, "fetch");
    /// #         out.set_status(Status::Yield);
    /// #         Ok(())
    /// #     }
    /// # }
    /// use std::time::Duration;
    /// use stepsched_sim::Sim;
    ///
    /// let run = |seed| {
    ///     let sim = Sim::<Asker>::builder()
    ///         .seed(seed)
    ///         .handler("fetch", |_, mut done| {
    ///             let ms = 1 + done.rng().below(100);
    ///             done.complete_after(Duration::from_millis(ms), Ok(ms));
    ///         })
    ///         .build();
    ///     let join = sim.submit(sim.allocate_pid(), Asker, "main", ()).unwrap();
    ///     let ms = join.join().unwrap();
    ///     assert_eq!(sim.now(), Duration::from_millis(ms));
    ///     ms
    /// };
    /// assert_eq!(run(5), run(5));
    /// ```
    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.rng
    }

    /// Completes the yield now (unless a delay fault holds it back).
    /// Whether the process was still live to receive it.
    pub fn complete(self, result: Result<P::Response, Error>) -> bool {
        self.complete_after(Duration::ZERO, result)
    }

    /// Completes the yield `after` this much virtual time from now.
    /// Whether the process is live now (it may end before the time comes;
    /// the completion then reaches nothing).
    pub fn complete_after(mut self, after: Duration, result: Result<P::Response, Error>) -> bool {
        self.done = true;
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        if self.lost {
            quietly_drop(result);
            return shared
                .inner
                .try_borrow()
                .is_ok_and(|inner| inner.reachable(self.pid, self.serial));
        }
        shared.complete(self.pid, self.serial, (self.tag, self.aimed), result, after)
    }

    /// Drops the completer without completing and without the error a
    /// dropped completer sends: the yield never completes, as with a
    /// handler that holds its completer forever (a request lost on the
    /// way). The process waits until it is terminated or shut down.
    pub fn never(mut self) {
        self.done = true;
    }
}

/// The simulator's completer serves [`PortableHandler`](crate::PortableHandler)s,
/// registered with [`Builder::portable_handler`](crate::Builder::portable_handler):
/// the trait's methods are the inherent ones (a completion through it, now,
/// is subject to the delay fault as [`Completer::complete`] is).
impl<P: Process + 'static> Complete<P> for Completer<P>
where
    P::Command: Command,
{
    fn pid(&self) -> Pid {
        Completer::pid(self)
    }

    fn tag(&self) -> Tag {
        Completer::tag(self)
    }

    fn complete(self, result: Result<P::Response, Error>) -> bool {
        Completer::complete(self, result)
    }

    fn complete_after(self, delay: Duration, result: Result<P::Response, Error>) -> bool {
        Completer::complete_after(self, delay, result)
    }
}

impl<P: Process> Drop for Completer<P> {
    fn drop(&mut self) {
        if self.done || self.lost {
            return;
        }
        let error = if std::thread::panicking() {
            Error::Panicked("the handler panicked before completing".into())
        } else {
            Error::failed("the handler dropped its completer without completing")
        };
        if let Some(shared) = self.shared.upgrade() {
            let id = (self.tag, self.aimed);
            shared.complete(self.pid, self.serial, id, Err(error), Duration::ZERO);
        }
    }
}
