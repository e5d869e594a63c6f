//! A process made of a closure, with a probe counting its inits, steps and
//! closes, shared by the tests of join handles, shutdown, batches, faults
//! and upgrades.
#![allow(dead_code)]

use std::cell::Cell;
use std::rc::Rc;

use stepsched_process::{Context, Error, Event, Events, Process, StepOutput};
use stepsched_sim::Sim;

/// The event type of [`FnProc`].
pub(crate) type Ev = Event<u32, u32>;

/// What a [`FnProc`]'s step does, given its events as a vector.
pub(crate) type Body =
    Box<dyn FnMut(&mut Context<'_, FnProc>, Vec<Ev>, &mut Out) -> Result<(), Error>>;

/// The output type of [`FnProc`].
pub(crate) type Out = StepOutput<&'static str, u32>;

/// Counts of one process's calls.
#[derive(Default, Debug)]
pub(crate) struct Probe {
    pub(crate) inits: Cell<u32>,
    pub(crate) steps: Cell<u32>,
    pub(crate) closes: Cell<u32>,
}

impl Probe {
    pub(crate) fn new() -> Rc<Probe> {
        Rc::default()
    }

    /// `(inits, steps, closes)`.
    pub(crate) fn counts(&self) -> (u32, u32, u32) {
        (self.inits.get(), self.steps.get(), self.closes.get())
    }
}

/// A process whose step is a closure. `init` fails for the method
/// `"fail"`.
pub(crate) struct FnProc {
    pub(crate) probe: Rc<Probe>,
    pub(crate) body: Body,
}

impl FnProc {
    pub(crate) fn new(
        probe: &Rc<Probe>,
        body: impl FnMut(&mut Context<'_, FnProc>, Vec<Ev>, &mut Out) -> Result<(), Error> + 'static,
    ) -> Self {
        FnProc {
            probe: Rc::clone(probe),
            body: Box::new(body),
        }
    }
}

impl Process for FnProc {
    type Input = u32;
    type Message = u32;
    type Response = u32;
    type Command = &'static str;
    type Output = u32;

    fn init(&mut self, _: &Context<'_, Self>, method: &str, _: u32) -> Result<(), Error> {
        self.probe.inits.set(self.probe.inits.get() + 1);
        if method == "fail" {
            return Err(Error::failed("init refused"));
        }
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, u32, u32>,
        out: &mut Out,
    ) -> Result<(), Error> {
        self.probe.steps.set(self.probe.steps.get() + 1);
        (self.body)(ctx, events.collect(), out)
    }

    fn close(&mut self) {
        self.probe.closes.set(self.probe.closes.get() + 1);
    }
}

/// Submits `p` under a fresh PID.
pub(crate) fn submit(sim: &Sim<FnProc>, p: FnProc) -> stepsched_sim::JoinHandle<FnProc> {
    let pid = sim.allocate_pid();
    sim.submit(pid, p, "main", 0).unwrap()
}
