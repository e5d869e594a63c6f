//! Time for processes: the [`HostTime`] the simulator offers through its
//! reach, which `stepsched`'s `ContextExt::now` and `ContextExt::after`
//! use under it — each process's clock (virtual time, skewed and drifting
//! by the clock-skew fault) and its timers (on the simulator's timer
//! queue); and the draw of each process's clock.

use std::any::Any;
use std::cmp::Reverse;
use std::rc::Rc;
use std::time::Duration;

use stepsched_process::{Command, Event, Pid, Process};

use crate::rng::{Kind, Streams};
use crate::state::{Alarm, Inner, Origin, Shared};
use crate::trace::{push_fault, push_number, stamp};

/// The protocol of `stepsched`'s `HostTime`, spelled out in `std` types
/// (this crate does not depend on the scheduler, nor it on this crate; a
/// test of both, `tests/time.rs`, checks they agree): the simulator's
/// state, the clock of a process, and a timer for a process.
pub(crate) type HostTime = (
    Rc<dyn Any>,
    fn(&dyn Any, Pid) -> Duration,
    fn(&dyn Any, Pid, Duration, Box<dyn Any>) -> Result<(), Box<dyn Any>>,
);

/// The [`HostTime`] of `shared`.
pub(crate) fn host_time<P: Process + 'static>(shared: &Rc<Shared<P>>) -> HostTime
where
    P::Command: Command,
{
    let state: Rc<dyn Any> = Rc::<Shared<P>>::clone(shared);
    (state, clock_of::<P>, after::<P>)
}

/// The streams of process `pid`: live, or being initialized.
fn streams_of<P: Process>(inner: &Inner<P>, pid: Pid) -> Option<&Streams> {
    if let Some(entry) = inner.live.get(&pid) {
        return Some(&entry.streams);
    }
    let (_, streams) = inner.initializing.iter().rev().find(|(p, _)| *p == pid)?;
    Some(streams)
}

/// The time by process `pid`'s clock: virtual time, skewed.
fn clock_of<P: Process + 'static>(state: &dyn Any, pid: Pid) -> Duration {
    let shared = state
        .downcast_ref::<Shared<P>>()
        .expect("the simulator's state");
    let inner = shared.inner.borrow();
    match streams_of(&inner, pid) {
        Some(streams) => streams.clock(inner.now),
        None => inner.now,
    }
}

/// Sets a timer: `message` (a boxed `P::Message`) to `pid` after `delay`.
fn after<P: Process + 'static>(
    state: &dyn Any,
    pid: Pid,
    delay: Duration,
    message: Box<dyn Any>,
) -> Result<(), Box<dyn Any>>
where
    P::Command: Command,
{
    let shared = state
        .downcast_ref::<Shared<P>>()
        .expect("the simulator's state");
    let message = message.downcast::<P::Message>()?;
    shared
        .set_timer(pid, delay, *message)
        .map_err(|m| Box::new(m) as Box<dyn Any>)
}

impl<P: Process + 'static> Shared<P>
where
    P::Command: Command,
{
    /// Queues `message` for live process `pid`, from itself, at virtual
    /// time now + `delay`; written to the trace (`timer #3 +5000us`).
    /// Hands the message back if `pid` is not live (or terminated).
    pub(crate) fn set_timer(
        &self,
        pid: Pid,
        delay: Duration,
        message: P::Message,
    ) -> Result<(), P::Message> {
        let mut inner = self.inner.borrow_mut();
        let serial = match inner.live.get(&pid) {
            Some(e) if !e.terminated => e.serial,
            _ => return Err(message),
        };
        inner.alarm_count += 1;
        let n = inner.alarm_count;
        inner.timer_seq += 1;
        let seq = inner.timer_seq;
        let at = inner.now + delay;
        inner.timers.push(Reverse((at, seq)));
        inner.alarms.insert(seq, (pid, serial, n, message));
        if self.tracing {
            let mut line = String::new();
            stamp(&mut line, inner.now, pid);
            line.push_str(" timer #");
            push_number(&mut line, n);
            line.push_str(" +");
            push_number(&mut line, micros(delay));
            line.push_str("us");
            inner.push_line(&line);
        }
        Ok(())
    }

    /// Delivers a timer that is due (the clock is at its time): a message
    /// event from its process to itself (`timer #3 fired` in the trace).
    /// The message comes back if the process has ended.
    pub(crate) fn ring(&self, inner: &mut Inner<P>, alarm: Alarm<P>) -> Result<(), P::Message> {
        let (pid, serial, n, message) = alarm;
        if !inner.reachable(pid, serial) {
            return Err(message);
        }
        if self.tracing {
            let mut line = String::new();
            stamp(&mut line, inner.now, pid);
            line.push_str(" timer #");
            push_number(&mut line, n);
            line.push_str(" fired");
            inner.push_line(&line);
        }
        inner
            .push_event(pid, Origin::Process(pid), Event::message_from(pid, message))
            .map_err(|event| event.into_message().expect("a message event"))
    }

    /// Draws the clock of a process being submitted (the clock-skew
    /// fault), from its own stream, and writes it to the trace: nothing
    /// when the fault is off, or not `aimed` at it.
    pub(crate) fn draw_clock(
        &self,
        inner: &mut Inner<P>,
        pid: Pid,
        streams: &mut Streams,
        aimed: bool,
    ) {
        let faults = self.faults.get();
        let max = faults.clock_skew;
        let drift = faults.clock_drift.clamp(0.0, 0.5);
        if !aimed || (max.is_zero() && drift <= 0.0) {
            return;
        }
        let rng = streams.get(Kind::Clock);
        if !max.is_zero() {
            let us = rng.below(micros(max).saturating_add(1));
            streams.skew = Duration::from_micros(us);
        }
        let rng = streams.get(Kind::Clock);
        if drift > 0.0 {
            // At most 5e8: fits.
            let max_ppb = (drift * 1e9) as u64;
            streams.drift_ppb = rng.below(2 * max_ppb + 1) as i64 - max_ppb as i64;
        }
        if self.tracing {
            let (skew, ppb) = (streams.skew, streams.drift_ppb);
            let now = inner.now;
            push_fault(&mut inner.trace, now, pid, "clock-skew", |line| {
                line.push_str(" +");
                push_number(line, micros(skew));
                line.push_str("us");
                if drift > 0.0 {
                    line.push_str(" drift ");
                    line.push(if ppb < 0 { '-' } else { '+' });
                    push_number(line, ppb.unsigned_abs());
                    line.push_str("ppb");
                }
            });
        }
    }
}

/// `d` in whole microseconds.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
