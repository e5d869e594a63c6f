//! Named processes: started from a factory, crashed (the crash fault,
//! [`Sim::crash`](crate::Sim::crash)) and restarted under the same PID,
//! with a durable store each; and healing every fault
//! ([`Sim::heal`](crate::Sim::heal)).

use std::cell::RefCell;
use std::cmp::Reverse;
use std::fmt::Write as _;
use std::rc::Rc;
use std::time::Duration;

use stepsched_process::{Command, Error, Pid, Process, SubmitError};

use crate::rng::Kind;
use crate::state::{Named, Outcome, ResultCell, Shared, caught, quietly_drop};
use crate::trace::{push_fault, push_number, stamp};
use crate::{DurableStore, Faults, Network};

impl<P: Process + 'static> Shared<P>
where
    P::Command: Command,
{
    /// Starts the process named `name` under `pid`: made by the factory
    /// `name`, restartable. Its result cell.
    pub(crate) fn submit_named(
        self: &Rc<Self>,
        pid: Pid,
        name: &str,
        method: &str,
        input: Box<dyn Fn() -> P::Input>,
    ) -> Result<ResultCell<P>, SubmitError<P>> {
        let factory = self
            .factories
            .get(name)
            .ok_or_else(|| SubmitError::Init(Error::UnknownFactory(name.to_owned())))?;
        let process = caught(factory).map_err(SubmitError::Init)?;
        let first = input();
        {
            let mut inner = self.inner.borrow_mut();
            if inner.live.contains_key(&pid) || inner.named.contains_key(&pid) {
                drop(inner);
                return Err(SubmitError::DuplicatePid(pid, process));
            }
            let name: Rc<str> = Rc::from(name);
            inner
                .stores
                .entry(Rc::clone(&name))
                .or_insert_with(|| Some(DurableStore::default()));
            let result: ResultCell<P> = Rc::new(RefCell::new(Outcome::Pending));
            inner.named.insert(
                pid,
                Named {
                    name,
                    method: method.to_owned(),
                    input,
                    result,
                    down: false,
                    crashes: 0,
                },
            );
        }
        let cell = Rc::clone(&self.inner.borrow().named[&pid].result);
        match self.start(pid, process, method, first, Some(cell)) {
            Ok(cell) => Ok(cell),
            Err(e) => {
                let named = self.inner.borrow_mut().named.remove(&pid);
                quietly_drop(named);
                Err(e)
            }
        }
    }

    /// Whether the crash fault fires after this step of live process
    /// `pid`: only for a named process the faults are aimed at, drawn
    /// from its own stream.
    #[cold]
    #[inline(never)]
    pub(crate) fn crash_drawn(&self, pid: Pid) -> bool {
        let p = self.faults.get().crash;
        let mut inner = self.inner.borrow_mut();
        match inner.live.get_mut(&pid) {
            Some(e) if e.name.is_some() && e.aimed => e.streams.get(Kind::Crash).chance(p),
            _ => false,
        }
    }

    /// Crashes named process `pid` (live; `process`: its value, if it is
    /// out of its entry, being stepped): dropped without `close`, its
    /// queued events lost, its store's unsynced writes lost; restarted
    /// after `after` (`None`: the crash fault, which draws the delay from
    /// the process's crash stream). Whether it crashed (it is live, not
    /// terminated, and named).
    #[cold]
    #[inline(never)]
    pub(crate) fn crash(&self, pid: Pid, process: Option<P>, after: Option<Duration>) -> bool {
        let mut inner = self.inner.borrow_mut();
        let crashable = inner.live.get(&pid).is_some_and(|e| {
            e.name.is_some() && !e.terminated && (process.is_some() || !e.running)
        });
        if !crashable {
            drop(inner);
            quietly_drop(process);
            return false;
        }
        let mut entry = inner.live.remove(&pid).expect("live");
        if entry.queued {
            inner.ready.retain(|Reverse(r)| r.pid() != pid);
        }
        let faults = self.faults.get();
        let delay = match after {
            Some(after) => after,
            None => entry
                .streams
                .get(Kind::Crash)
                .millis_up_to(faults.restart_delay),
        };
        let name = entry.name.clone().expect("named");
        let keep = faults.keep_unsynced;
        let (lost, kept) = match inner.stores.get_mut(&name) {
            // No draw unless the fault is on: the stream moves nothing else.
            Some(Some(store)) if keep > 0.0 => {
                let rng = entry.streams.get(Kind::KeepUnsynced);
                store.crash(|| rng.chance(keep))
            }
            Some(Some(store)) => store.crash(|| false),
            _ => (0, 0),
        };
        let at = inner.now + delay;
        let named = inner
            .named
            .get_mut(&pid)
            .expect("a named process is in `named`");
        named.down = true;
        named.crashes += 1;
        let crashes = named.crashes;
        inner.timer_seq += 1;
        let seq = inner.timer_seq;
        inner.timers.push(Reverse((at, seq)));
        inner.restarts.insert(seq, (pid, crashes));
        if self.tracing {
            let now = inner.now;
            let detail = |line: &mut String| {
                line.push_str(" lost=");
                push_number(line, lost as u64);
                if keep > 0.0 {
                    line.push_str(" kept=");
                    push_number(line, kept as u64);
                }
                line.push_str(" restart t=");
                push_number(line, u64::try_from(at.as_micros()).unwrap_or(u64::MAX));
                line.push_str("us");
            };
            if after.is_none() {
                push_fault(&mut inner.trace, now, pid, "crash", detail);
            } else {
                let mut line = String::new();
                stamp(&mut line, now, pid);
                line.push_str(" crash (requested)");
                detail(&mut line);
                inner.push_line(&line);
            }
        }
        drop(inner);
        // Dropped, not closed: a crash runs none of its code.
        entry.cancel.cancel();
        quietly_drop(std::mem::take(&mut entry.pending));
        quietly_drop(process);
        quietly_drop(entry);
        true
    }

    /// Restarts named process `pid` after its crash number `crash`, if it
    /// is still down from that crash: a new process from its factory,
    /// started under its PID with its method and input. If the factory
    /// or `init` fails, or a shutdown has begun, it ends with that error.
    pub(crate) fn restart(self: &Rc<Self>, pid: Pid, crash: u64) {
        let (name, method, input, cell) = {
            let mut inner = self.inner.borrow_mut();
            let Some(named) = inner
                .named
                .get_mut(&pid)
                .filter(|n| n.down && n.crashes == crash)
            else {
                return;
            };
            named.down = false;
            (
                Rc::clone(&named.name),
                named.method.clone(),
                (named.input)(),
                Rc::clone(&named.result),
            )
        };
        let made = match self.factories.get(&*name) {
            Some(factory) => caught(factory),
            None => Err(Error::UnknownFactory(name.to_string())),
        };
        let error = match made {
            Ok(process) => match self.start(pid, process, &method, input, Some(cell)) {
                Ok(_) => return,
                Err(SubmitError::Stopping(p)) => {
                    quietly_drop(p);
                    Error::Cancelled
                }
                Err(SubmitError::Init(e)) => e,
                Err(e) => Error::failed(e.to_string()),
            },
            Err(e) => {
                quietly_drop(input);
                e
            }
        };
        self.inner
            .borrow_mut()
            .named
            .get_mut(&pid)
            .expect("named")
            .down = true;
        self.end_down(pid, "restart failed", Err(error));
    }

    /// Ends named process `pid`, which is down, for good: its result is
    /// `result`; a pending restart does nothing.
    pub(crate) fn end_down(&self, pid: Pid, why: &str, result: Result<P::Output, Error>) {
        let mut inner = self.inner.borrow_mut();
        let Some(named) = inner.named.remove(&pid) else {
            drop(inner);
            return quietly_drop(result);
        };
        if let Some(outbox) = self.outbox.get() {
            outbox.ended(pid);
        }
        if self.tracing {
            let mut line = String::new();
            stamp(&mut line, inner.now, pid);
            match &result {
                Ok(_) => {
                    let _ = write!(line, " end ok ({why})");
                }
                Err(e) => {
                    let _ = write!(line, " end err: {e} ({why})");
                }
            }
            inner.push_line(&line);
        }
        drop(inner);
        let old = std::mem::replace(&mut *named.result.borrow_mut(), Outcome::Done(result));
        quietly_drop(old);
        quietly_drop(named);
    }

    /// The processes that are down now.
    pub(crate) fn down_pids(&self) -> Vec<Pid> {
        let inner = self.inner.borrow();
        inner
            .named
            .iter()
            .filter(|(_, n)| n.down)
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// Heals every fault from now on: the fault probabilities and the
    /// network's loss, duplication and random partitions go to zero
    /// (delays, clocks and the network's own delay stay), partitions end
    /// now, and every process that is down restarts now. Writes `heal` to
    /// the trace.
    pub(crate) fn heal(self: &Rc<Self>) {
        let old = self.faults.get();
        self.faults.set(Faults {
            max_delay: old.max_delay,
            shutdown_deadline: old.shutdown_deadline,
            clock_skew: old.clock_skew,
            clock_drift: old.clock_drift,
            restart_delay: old.restart_delay,
            ..Faults::default()
        });
        if let Some(net) = self.network.get() {
            self.network.set(Some(Network {
                loss: 0.0,
                duplicate: 0.0,
                partition: 0.0,
                ..net
            }));
        }
        let down = self.down_pids();
        {
            let mut inner = self.inner.borrow_mut();
            let now = inner.now;
            inner.net.heal(now);
            if self.tracing {
                let line = format!("t={}us heal", inner.now.as_micros());
                inner.push_line(&line);
            }
        }
        for pid in down {
            let crashes = self.inner.borrow().named[&pid].crashes;
            self.restart(pid, crashes);
        }
    }
}
