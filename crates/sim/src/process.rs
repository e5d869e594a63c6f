//! One process's life in the simulator: submit, messages, terminate,
//! its steps (the events each takes, the step rules) and its end.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::rc::Rc;
use std::time::Duration;

use stepsched_process::{
    CancelToken, Command, Context, Error, Event, Package, Pid, Process, SendError, Status,
    StepOutput, SubmitError, TerminateError, UpgradeTo,
};

use crate::MAX_BATCH;
use crate::join::JoinHandle;
use crate::rng::{Kind, Streams};
use crate::sim::ReachOf;
use crate::state::{
    Entry, Ev, Inner, Origin, Outcome, ResultCell, Shared, caught, close, close_ref, quietly_drop,
};
use crate::trace::{describe, push_fault, push_number, stamp};

/// The earlier of two times, either of which may be absent.
pub(crate) fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl<P: Process + 'static> Shared<P>
where
    P::Command: Command,
{
    pub(crate) fn submit(
        self: &Rc<Self>,
        pid: Pid,
        process: P,
        method: &str,
        input: P::Input,
    ) -> Result<JoinHandle<P>, SubmitError<P>> {
        let result = self.start(pid, process, method, input, None)?;
        Ok(JoinHandle::new(Rc::downgrade(self), pid, result))
    }

    /// Starts `process` under `pid`: its `init`, then live and runnable.
    /// `restart`: the result cell of the named process it restarts after
    /// a crash (a new one otherwise). Its result cell.
    pub(crate) fn start(
        self: &Rc<Self>,
        pid: Pid,
        mut process: P,
        method: &str,
        input: P::Input,
        restart: Option<ResultCell<P>>,
    ) -> Result<ResultCell<P>, SubmitError<P>> {
        if self.inner.borrow().stopping() {
            return Err(SubmitError::Stopping(process));
        }
        let cancel = Rc::new(CancelToken::new());
        let reach = ReachOf::new(self);
        let ctx = Context::new(pid, &cancel, &reach);
        let (name, aimed) = {
            // Its streams, reachable from its `init` (for its random
            // numbers) before it is live.
            let mut inner = self.inner.borrow_mut();
            let name = inner.named.get(&pid).map(|n| Rc::clone(&n.name));
            let aimed = self
                .faults
                .get()
                .only_process
                .is_none_or(|target| name.as_deref() == Some(target));
            let incarnation = inner.results.get(&pid).map_or(0, |(_, n)| *n);
            let mut streams = Streams::new(self.seed, pid, incarnation);
            self.draw_clock(&mut inner, pid, &mut streams, aimed);
            inner.initializing.push((pid, streams));
            (name, aimed)
        };
        let initialized = caught(|| process.init(&ctx, method, input));
        let mut inner = self.inner.borrow_mut();
        let at = inner
            .initializing
            .iter()
            .rposition(|(p, _)| *p == pid)
            .expect("pushed above");
        let (_, streams) = inner.initializing.remove(at);
        if let Err(e) = initialized {
            drop(inner);
            close(process);
            return Err(SubmitError::Init(e));
        }
        if inner.live.contains_key(&pid) {
            drop(inner);
            close_ref(&mut process);
            return Err(SubmitError::DuplicatePid(pid, process));
        }
        if inner.stopping() {
            // A shutdown began during `init` (from a handler of a process
            // it spawned, say): the process gets its cancel event now.
            cancel.cancel();
        }
        let serial = inner.next_serial;
        inner.next_serial += 1;
        let restarted = inner.named.get(&pid).is_some_and(|n| n.crashes > 0);
        let result: ResultCell<P> =
            restart.unwrap_or_else(|| Rc::new(RefCell::new(Outcome::Pending)));
        let incarnations = inner.results.get(&pid).map_or(0, |(_, n)| *n) + 1;
        inner
            .results
            .insert(pid, (Rc::clone(&result), incarnations));
        let mut pending = Vec::new();
        if inner.stopping() {
            pending.push((Origin::Cancel, Event::cancel()));
        }
        inner.live.insert(
            pid,
            Entry {
                process: Some(process),
                serial,
                cancel,
                pending,
                result: Rc::clone(&result),
                queued: false,
                running: false,
                terminated: false,
                streams,
                name,
                aimed,
            },
        );
        inner.make_ready(pid);
        if let Some(outbox) = self.outbox.get() {
            outbox.started(pid, restarted);
        }
        if self.tracing {
            let mut line = String::new();
            stamp(&mut line, inner.now, pid);
            if restarted {
                let name = inner.named.get(&pid).map(|n| Rc::clone(&n.name));
                let _ = write!(line, " restart {}", name.as_deref().unwrap_or(""));
            } else {
                let _ = write!(line, " submit {method}");
            }
            inner.push_line(&line);
        }
        Ok(result)
    }

    /// A process started by another through its context (`Reach::spawn`):
    /// a fresh PID, submitted.
    pub(crate) fn spawn(
        self: &Rc<Self>,
        child: P,
        method: &str,
        input: P::Input,
    ) -> Result<Pid, SubmitError<P>> {
        let pid = self.allocate_pid();
        self.submit(pid, child, method, input).map(|h| h.pid())
    }

    pub(crate) fn allocate_pid(&self) -> Pid {
        let mut inner = self.inner.borrow_mut();
        let pid = Pid::new(0, inner.next_number);
        inner.next_number += 1;
        pid
    }

    pub(crate) fn deliver(
        &self,
        package: Package<P::Message>,
    ) -> Result<(), SendError<P::Message>> {
        let mut inner = self.inner.borrow_mut();
        if self.network.get().is_some() || inner.net.has_cuts() {
            return self.send_over_net(&mut inner, package);
        }
        let Package {
            from,
            to,
            topic,
            payload,
        } = package;
        let (origin, event) = match from {
            Some(from) => (Origin::Process(from), Event::message_from(from, payload)),
            None => (Origin::Host, Event::message(payload)),
        };
        inner.push_event(to, origin, event).or_else(|event| {
            if inner.down(to) {
                self.drop_down(&mut inner, to, event);
                return Ok(());
            }
            let payload = event.into_message().expect("a message event");
            let mut package = Package::new(to, topic, payload);
            package.from = from;
            Err(if inner.known(to) {
                SendError::Closed(package)
            } else {
                SendError::UnknownPid(package)
            })
        })
    }

    /// Drops `event`, a message for `pid`, which is down (crashed, not
    /// restarted yet): `dropped m<0.1> (down)` in the trace.
    #[cold]
    #[inline(never)]
    pub(crate) fn drop_down(&self, inner: &mut Inner<P>, pid: Pid, event: Ev<P>) {
        if self.tracing {
            let mut line = String::new();
            stamp(&mut line, inner.now, pid);
            line.push_str(" dropped ");
            describe(&mut line, &event);
            line.push_str(" (down)");
            inner.push_line(&line);
        }
        quietly_drop(event);
    }

    pub(crate) fn terminate(&self, pid: Pid, why: &str) -> Result<(), TerminateError> {
        let mut inner = self.inner.borrow_mut();
        if inner.down(pid) {
            drop(inner);
            self.end_down(pid, why, Err(Error::Terminated));
            return Ok(());
        }
        let Some(entry) = inner.live.get_mut(&pid) else {
            return Err(if inner.known(pid) {
                TerminateError::AlreadyComplete(pid)
            } else {
                TerminateError::UnknownPid(pid)
            });
        };
        if entry.terminated {
            return Err(TerminateError::AlreadyComplete(pid));
        }
        entry.cancel.cancel();
        let running = entry.running;
        if running {
            // The step's end closes it and publishes the result.
            entry.terminated = true;
        }
        if self.tracing {
            let mut line = String::new();
            stamp(&mut line, inner.now, pid);
            let _ = write!(line, " terminated ({why})");
            inner.push_line(&line);
        }
        if running {
            return Ok(());
        }
        drop(inner);
        self.end(pid, None, Err(Error::Terminated));
        Ok(())
    }

    /// Ends live process `pid`: drops its queued events, closes it (the
    /// value passed in, or the one in its entry), publishes `result`.
    pub(crate) fn end(&self, pid: Pid, process: Option<P>, result: Result<P::Output, Error>) {
        let entry = {
            let mut inner = self.inner.borrow_mut();
            let entry = inner.live.remove(&pid);
            if let Some(outbox) = self.outbox.get() {
                outbox.ended(pid);
            }
            if entry.as_ref().is_some_and(|e| e.queued) {
                inner.ready.retain(|Reverse(r)| r.pid() != pid);
            }
            if entry.as_ref().is_some_and(|e| e.name.is_some()) {
                // A named process's end is for good: no restart.
                let named = inner.named.remove(&pid);
                drop(inner);
                quietly_drop(named);
            }
            entry
        };
        // Dropped and closed outside the borrow: user code runs here.
        let mut stored = None;
        let mut cell = None;
        if let Some(mut entry) = entry {
            entry.cancel.cancel();
            quietly_drop(std::mem::take(&mut entry.pending));
            stored = entry.process.take();
            cell = Some(Rc::clone(&entry.result));
            quietly_drop(entry);
        }
        if let Some(p) = process.or(stored) {
            close(p);
        }
        let mut inner = self.inner.borrow_mut();
        if self.tracing {
            let mut line = String::new();
            stamp(&mut line, inner.now, pid);
            match &result {
                Ok(_) => line.push_str(" end ok"),
                Err(e) => {
                    let _ = write!(line, " end err: {e}");
                }
            }
            inner.push_line(&line);
        }
        drop(inner);
        if let Some(cell) = cell {
            let old = std::mem::replace(&mut *cell.borrow_mut(), Outcome::Done(result));
            debug_assert!(matches!(old, Outcome::Pending), "a result published twice");
        } else {
            quietly_drop(result);
        }
    }

    /// Moves the clock to the next timer or message arrival and fires
    /// every timer due then, then delivers every message due then.
    pub(crate) fn fire_timers(self: &Rc<Self>) {
        let mut inner = self.inner.borrow_mut();
        let timer = inner.timers.peek().map(|&Reverse((at, _))| at);
        let Some(at) = earliest(timer, inner.net.next_arrival()) else {
            return;
        };
        inner.now = inner.now.max(at);
        let mut dropped = Vec::new();
        let mut messages = Vec::new();
        let mut restarts = Vec::new();
        while let Some(&Reverse((t, seq))) = inner.timers.peek() {
            if t > at {
                break;
            }
            inner.timers.pop();
            let Some((pid, serial, tag, result)) = inner.timed.remove(&seq) else {
                if let Some(alarm) = inner.alarms.remove(&seq) {
                    if let Err(message) = self.ring(&mut inner, alarm) {
                        messages.push(message);
                    }
                } else {
                    let restart = inner.restarts.remove(&seq);
                    restarts.extend(restart);
                }
                continue;
            };
            if !inner.reachable(pid, serial) {
                dropped.push(Event::completion(tag, result));
                continue;
            }
            inner.completion_seq += 1;
            let origin = Origin::Completion(inner.completion_seq);
            if let Err(event) = inner.push_event(pid, origin, Event::completion(tag, result)) {
                dropped.push(event);
            }
        }
        if inner.net.in_flight() {
            self.arrive(&mut inner, at, &mut messages);
        }
        drop(inner);
        quietly_drop(dropped);
        quietly_drop(messages);
        for (pid, crash) in restarts {
            self.restart(pid, crash);
        }
    }

    /// Moves into `batch` the events `pid`'s next step takes: at most
    /// [`MAX_BATCH`] (fewer under the short-batch fault), shuffled across
    /// origins if the reorder fault fires. The rest stay queued, first.
    pub(crate) fn take_batch(&self, inner: &mut Inner<P>, pid: Pid, batch: &mut Vec<Ev<P>>) {
        let Inner {
            live, trace, now, ..
        } = inner;
        let entry = live.get_mut(&pid).expect("live");
        let pending = &mut entry.pending;
        let len = pending.len();
        let mut n = len.min(MAX_BATCH);
        let faults = self.faults.get();
        let (short_batch, reorder) = if entry.aimed {
            (faults.short_batch, faults.reorder)
        } else {
            (0.0, 0.0)
        };
        if n > 1 {
            let rng = entry.streams.get(Kind::ShortBatch);
            if rng.chance(short_batch) {
                n = 1 + rng.index(n);
                if self.tracing {
                    push_fault(trace, *now, pid, "short-batch", |line| {
                        line.push(' ');
                        push_number(line, n as u64);
                        line.push_str(" of ");
                        push_number(line, len as u64);
                    });
                }
            }
        }
        let rng = entry.streams.get(Kind::Reorder);
        if len > 1 && rng.chance(reorder) {
            if self.tracing {
                push_fault(trace, *now, pid, "reorder", |line| {
                    line.push(' ');
                    push_number(line, len as u64);
                    line.push_str(" events");
                });
            }
            // An interleaving of the origins' queues, each kept in order.
            let mut queues: Vec<(Origin, VecDeque<Ev<P>>)> = Vec::new();
            for (origin, event) in pending.drain(..) {
                match queues.iter_mut().find(|(o, _)| *o == origin) {
                    Some((_, q)) => q.push_back(event),
                    None => queues.push((origin, VecDeque::from([event]))),
                }
            }
            while !queues.is_empty() {
                let i = rng.index(queues.len());
                let event = queues[i].1.pop_front().expect("queues are non-empty");
                pending.push((queues[i].0, event));
                if queues[i].1.is_empty() {
                    queues.remove(i);
                }
            }
        }
        if n == len {
            batch.extend(pending.drain(..).map(|(_, e)| e));
        } else {
            batch.extend(pending.drain(..n).map(|(_, e)| e));
        }
    }

    /// Steps process `pid` once, with the events queued for it.
    pub(crate) fn step(self: &Rc<Self>, pid: Pid) {
        let (mut process, cancel, serial, mut batch) = {
            let mut guard = self.inner.borrow_mut();
            let inner = &mut *guard;
            let Some(entry) = inner.live.get_mut(&pid) else {
                return;
            };
            entry.queued = false;
            let Some(process) = entry.process.take() else {
                return;
            };
            entry.running = true;
            let cancel = Rc::clone(&entry.cancel);
            let serial = entry.serial;
            let mut batch = std::mem::take(&mut inner.batch);
            self.take_batch(inner, pid, &mut batch);
            inner.steps += 1;
            (process, cancel, serial, batch)
        };
        let mut line = String::new();
        if self.tracing {
            let mut inner = self.inner.borrow_mut();
            line = std::mem::take(&mut inner.line);
            stamp(&mut line, inner.now, pid);
            drop(inner);
            line.push_str(" events=[");
            for (i, event) in batch.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                describe(&mut line, event);
            }
            line.push(']');
        }
        let reach = ReachOf::new(self);
        let mut out = StepOutput::new();
        let mut cx = Context::new(pid, &cancel, &reach);
        let stepped = caught(|| process.step(&mut cx, batch.drain(..), &mut out));
        let upgrade = cx.take_upgrade();
        drop(cx);
        // What the step sent through addresses goes out now, before its
        // line, as its `Context::send`s did.
        self.deliver_posted();
        // Empty (the drain took every event); kept for the next step.
        if let Ok(mut inner) = self.inner.try_borrow_mut()
            && inner.batch.capacity() < batch.capacity()
        {
            inner.batch = batch;
        }
        let terminated = self
            .inner
            .borrow()
            .live
            .get(&pid)
            .is_none_or(|e| e.terminated);
        if terminated {
            self.trace_line(line, " terminated-during-step");
            quietly_drop(upgrade);
            quietly_drop(out);
            return self.end(pid, Some(process), Err(Error::Terminated));
        }
        if let (Some(upgrade), Ok(())) = (upgrade, &stepped) {
            quietly_drop(out);
            close(process);
            let made = match upgrade.to {
                UpgradeTo::Process(new) => Ok(new),
                UpgradeTo::Factory(name) => match self.factories.get(&*name) {
                    Some(factory) => caught(factory),
                    None => Err(Error::UnknownFactory(name.into_owned())),
                },
            };
            let mut new = match made {
                Ok(new) => new,
                Err(e) => {
                    self.trace_line(line, " upgrade-failed");
                    quietly_drop(upgrade.input);
                    return self.end(pid, None, Err(e));
                }
            };
            let cx = Context::new(pid, &cancel, &reach);
            if let Err(e) = caught(|| new.init(&cx, &upgrade.method, upgrade.input)) {
                self.trace_line(line, " upgrade-failed");
                return self.end(pid, Some(new), Err(e));
            }
            if self.tracing {
                let _ = write!(line, " upgrade {}", upgrade.method);
                self.trace_line(line, "");
            }
            return self.park(pid, new, true);
        }
        let status = match stepped {
            Ok(()) => out.take_status(),
            Err(e) => {
                if self.tracing {
                    let _ = write!(line, " error: {e}");
                    self.trace_line(line, "");
                }
                quietly_drop(out);
                return self.end(pid, Some(process), Err(e));
            }
        };
        let status = match status {
            None => {
                self.trace_line(line, " status=none");
                quietly_drop(out);
                let e = Error::Failed(format!("process {pid}: step set no status"));
                return self.end(pid, Some(process), Err(e));
            }
            Some(Status::Done(output)) => {
                self.trace_line(line, " status=done");
                // A finished process's yields are not dispatched.
                quietly_drop(out);
                return self.end(pid, Some(process), Ok(output));
            }
            Some(status) => status,
        };
        if self.tracing {
            line.push_str(match status {
                Status::Continue => " status=continue yields=[",
                Status::Idle => " status=idle yields=[",
                _ => " status=yield yields=[",
            });
            for (i, y) in out.yields().iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                line.push_str(y.command.name());
                line.push('#');
                push_number(&mut line, y.tag);
            }
            self.trace_line(line, "]");
        }
        if !out.yields().is_empty() {
            self.dispatch(pid, serial, &mut out);
        }
        if self
            .inner
            .borrow()
            .live
            .get(&pid)
            .is_none_or(|e| e.terminated)
        {
            return self.end(pid, Some(process), Err(Error::Terminated));
        }
        if self.faults.get().crash > 0.0 && self.crash_drawn(pid) {
            self.crash(pid, Some(process), None);
            return;
        }
        self.park(pid, process, matches!(status, Status::Continue));
    }

    /// Puts `process` back after its step; it is runnable again if it
    /// asked to continue or events wait for it.
    pub(crate) fn park(&self, pid: Pid, process: P, again: bool) {
        let mut inner = self.inner.borrow_mut();
        let entry = inner.live.get_mut(&pid).expect("a stepped process is live");
        if entry.terminated {
            // Terminated by an upgrade's `init`: no new step starts.
            drop(inner);
            return self.end(pid, Some(process), Err(Error::Terminated));
        }
        entry.process = Some(process);
        entry.running = false;
        if again || !entry.pending.is_empty() {
            inner.make_ready(pid);
        }
    }
}
