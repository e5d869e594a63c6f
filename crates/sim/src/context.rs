//! [`SimContextExt`]: what a process's [`Context`] offers under the
//! simulator: a random source of its own, and the durable store of a
//! named process.

use stepsched_process::{Command, Context, Pid, Process};

use std::rc::Rc;

use crate::rng::Kind;
use crate::state::{Inner, Shared};
use crate::time::HostTime;
use crate::{DurableStore, SimRng};

/// The simulator's extension of a process's [`Context`]: a random source
/// drawn from the process's own stream, seeded from the run's seed and
/// the process's PID, so a process that needs random numbers (a backoff, a
/// random peer, a generated key) stays replayable: the same seed draws the
/// same numbers, and drawing them moves no other decision (not the
/// schedule, not a fault, not another process's numbers).
///
/// Under another host (the `stepsched` scheduler, or
/// [`Context::detached`]) there is no such source: the methods return
/// `None`, and the process picks its own fallback.
///
/// ```
/// use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};
/// use stepsched_sim::{Sim, SimContextExt};
///
/// /// Finishes with a die roll.
/// struct Roller;
/// impl Process for Roller {
///     type Input = (); type Message = (); type Response = (); type Command = &'static str; type Output = u64;
///     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
///     fn step(&mut self, cx: &mut Context<'_, Self>, _: Events<'_, ()>, out: &mut StepOutput<&'static str, u64>) -> Result<(), Error> {
///         let roll = cx.with_rng(|rng| 1 + rng.below(6)).expect("under the simulator");
///         out.set_status(Status::Done(roll));
///         Ok(())
///     }
/// }
///
/// let roll = |seed| {
///     let sim = Sim::<Roller>::builder().seed(seed).build();
///     sim.submit(sim.allocate_pid(), Roller, "main", ()).unwrap().join().unwrap()
/// };
/// assert!((1..=6).contains(&roll(3)));
/// assert_eq!(roll(3), roll(3));
/// ```
pub trait SimContextExt {
    /// Runs `f` with the process's random source, from its `init` or its
    /// `step`; `None` when the process does not run under a
    /// [`Sim`](crate::Sim). `f` gets a copy of the source, put back when it
    /// returns: a call from inside `f` draws the same numbers again.
    fn with_rng<R>(&self, f: impl FnOnce(&mut SimRng) -> R) -> Option<R>;

    /// 64 random bits from the process's random source; `None` when the
    /// process does not run under a [`Sim`](crate::Sim).
    fn random_u64(&self) -> Option<u64> {
        self.with_rng(SimRng::next_u64)
    }

    /// Runs `f` with the process's [`DurableStore`], from its `init` or
    /// its `step`: the store of its name, which outlives its crashes (see
    /// [`Sim::submit_named`](crate::Sim::submit_named)). `None` when the
    /// process does not run under a [`Sim`](crate::Sim), was not started
    /// by name, or when called from inside `f` (the store is out while
    /// `f` runs).
    ///
    /// ```
    /// # use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};
    /// use stepsched_sim::{Sim, SimContextExt};
    ///
    /// /// Writes `"k"` without syncing it.
    /// struct Writer;
    /// impl Process for Writer {
    /// #   type Input = (); type Message = (); type Response = (); type Command = &'static str; type Output = ();
    /// #   fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    ///     fn step(&mut self, cx: &mut Context<'_, Self>, _: Events<'_, ()>, out: &mut StepOutput<&'static str, ()>) -> Result<(), Error> {
    ///         cx.with_store(|store| store.write("k", b"v".to_vec())).expect("a named process");
    ///         out.set_status(Status::Done(()));
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sim = Sim::<Writer>::builder().factory("writer", || Ok(Writer)).build();
    /// sim.submit_named(sim.allocate_pid(), "writer", "main", ()).unwrap().join().unwrap();
    /// let store = sim.store("writer").unwrap();
    /// assert_eq!(store.get("k"), Some(&b"v"[..]));
    /// assert_eq!(store.durable().get("k"), None, "not synced");
    /// ```
    fn with_store<R>(&self, f: impl FnOnce(&mut DurableStore) -> R) -> Option<R>;
}

impl<P: Process + 'static> SimContextExt for Context<'_, P>
where
    P::Command: Command,
{
    fn with_rng<R>(&self, f: impl FnOnce(&mut SimRng) -> R) -> Option<R> {
        let host = self.reach().as_any()?.downcast_ref::<HostTime>()?;
        let shared = host.0.downcast_ref::<Shared<P>>()?;
        let pid = self.pid();
        let mut rng = {
            let mut inner = shared.inner.try_borrow_mut().ok()?;
            process_rng(&mut inner, pid)?.clone()
        };
        // Not borrowed while `f` runs: it may call into the simulator.
        let result = f(&mut rng);
        if let Ok(mut inner) = shared.inner.try_borrow_mut()
            && let Some(slot) = process_rng(&mut inner, pid)
        {
            *slot = rng;
        }
        Some(result)
    }

    fn with_store<R>(&self, f: impl FnOnce(&mut DurableStore) -> R) -> Option<R> {
        let host = self.reach().as_any()?.downcast_ref::<HostTime>()?;
        let shared = host.0.downcast_ref::<Shared<P>>()?;
        let pid = self.pid();
        let (name, mut store) = {
            let mut inner = shared.inner.try_borrow_mut().ok()?;
            let name = Rc::clone(&inner.named.get(&pid)?.name);
            let store = inner.stores.get_mut(&name)?.take()?;
            (name, store)
        };
        // Not borrowed while `f` runs: it may call into the simulator.
        let result = f(&mut store);
        let mut inner = shared.inner.borrow_mut();
        inner.stores.insert(name, Some(store));
        Some(result)
    }
}

/// The random stream of process `pid`: live, or being initialized.
fn process_rng<P: Process>(inner: &mut Inner<P>, pid: Pid) -> Option<&mut SimRng> {
    if let Some(entry) = inner.live.get_mut(&pid) {
        return Some(entry.streams.get(Kind::Process));
    }
    let (_, streams) = inner
        .initializing
        .iter_mut()
        .rev()
        .find(|(p, _)| *p == pid)?;
    Some(streams.get(Kind::Process))
}
