//! [`Handle::submit_group`]: processes that know each other's addresses
//! before any of them runs.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use stepsched_process::{Context, Pid, SubmitError};

use crate::SchedProcess;
use crate::address::Address;
use crate::handle::Handle;
use crate::join::JoinHandle;
use crate::primitive::sync::SlotArc;
use crate::primitive::sync::atomic::Ordering;
use crate::slot::{FORCED_CANCELLED, NOT_FORCED, Slot, init_caught};
use crate::trace;

/// What the maker of one member of a group sees
/// ([`Handle::submit_group`]): its own index and PID, and every member's
/// address, stamped with its own PID as their
/// [sender](Address::sender).
pub struct Members<'g, P: SchedProcess> {
    addresses: &'g [Address<P>],
    me: usize,
}

impl<P: SchedProcess> Members<'_, P> {
    /// The index of the member being made, in `0..len()`.
    pub fn me(&self) -> usize {
        self.me
    }

    /// The PID of the member being made.
    pub fn pid(&self) -> Pid {
        self.addresses[self.me].pid()
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    /// Whether the group has no member (never, while one is being made).
    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }

    /// The PID of member `i`.
    ///
    /// # Panics
    ///
    /// If `i >= len()`.
    pub fn pid_of(&self, i: usize) -> Pid {
        self.addresses[i].pid()
    }

    /// The address of member `i` (this one included), with the member
    /// being made as its sender.
    ///
    /// # Panics
    ///
    /// If `i >= len()`.
    pub fn address(&self, i: usize) -> Address<P> {
        self.addresses[i].clone().with_sender(self.pid())
    }

    /// Every member's address, in index order, with the member being made
    /// as their sender.
    pub fn addresses(&self) -> impl Iterator<Item = Address<P>> + '_ {
        let me = self.pid();
        self.addresses
            .iter()
            .map(move |a| a.clone().with_sender(me))
    }
}

impl<P: SchedProcess> fmt::Debug for Members<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Members")
            .field("me", &self.me)
            .field("len", &self.len())
            .finish()
    }
}

/// The group's slots until they start: on an early return or an unwind,
/// each is abandoned (its sends refused, its process dropped or closed).
struct Reserved<P: SchedProcess> {
    slots: Vec<SlotArc<Slot<P>>>,
    /// How many processes, from the first, ran `init` (and so are closed,
    /// not just dropped, if the group fails).
    initialized: usize,
}

impl<P: SchedProcess> Reserved<P> {
    /// Takes every process back out of its slot, closing the initialized
    /// ones, and abandons the slots (for a refusal that hands them back).
    fn take_back(mut self) -> Vec<P> {
        let initialized = std::mem::take(&mut self.initialized);
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, slot)| {
                // SAFETY: as in `drop`: the body is ours.
                let mut process = unsafe { (*slot.body.get()).process.take()? };
                if i < initialized {
                    let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
                }
                Some(process)
            })
            .collect()
    }
}

impl<P: SchedProcess> Drop for Reserved<P> {
    fn drop(&mut self) {
        for (i, slot) in self.slots.iter().enumerate() {
            // SAFETY: reserved by `submit_group` and never queued; never
            // routed, or routed, then unrouted and claimed by
            // `submit_group` before any forcer (one that a forcer claimed
            // is no longer in `slots`). So no other thread touches the
            // body. A started group empties `slots` first.
            unsafe { slot.abandon(i < self.initialized) };
        }
    }
}

impl<P: SchedProcess> Handle<P> {
    /// Submits `n` processes that know each other's addresses before any
    /// of them runs: a ring, a pipeline, a mall and its creatures.
    ///
    /// Each member gets a fresh PID and an [`Address`]; then `make` is
    /// called once per member, in index order, with [`Members`] (its index,
    /// its PID, every member's address with itself as the sender) and
    /// returns the member's process and its `init` input. Only when every
    /// member is made are they initialized (entry point `method`, in index
    /// order, on this thread), registered and started, all or none. A
    /// message sent through an address before its process runs waits in
    /// its queue for its first step.
    ///
    /// # Errors
    ///
    /// As [`submit`](Handle::submit), for the whole group, with every
    /// process handed back (uninitialized for [`SubmitError::Stopping`] and
    /// [`SubmitError::LimitReached`], which counts the `n` places at once;
    /// initialized and closed for [`SubmitError::DuplicatePid`], except a
    /// member that a racing `terminate` or shutdown found registered in the
    /// meantime: that one ends as that call says, and is not handed back).
    /// If one `init` fails the group is not started: the members
    /// initialized before it are closed, the rest dropped, and its error is
    /// returned.
    /// Either way no member runs, and sends through the addresses are
    /// refused.
    ///
    /// ```
    /// use stepsched::{Address, Context, Error, Events, Process, Status, StepOutput};
    ///
    /// /// A ring: each member passes the token on to the next, less one,
    /// /// and the member that gets it at zero finishes with its index.
    /// struct Link {
    ///     me: usize,
    ///     next: Address<Link>,
    /// }
    ///
    /// impl Process for Link {
    ///     type Input = ();
    ///     type Message = u32;
    ///     type Response = ();
    ///     type Command = &'static str;
    ///     type Output = usize;
    ///
    ///     fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
    ///         Ok(())
    ///     }
    ///
    ///     fn step(
    ///         &mut self,
    ///         _: &mut Context<'_, Self>,
    ///         events: Events<'_, u32, ()>,
    ///         out: &mut StepOutput<&'static str, usize>,
    ///     ) -> Result<(), Error> {
    ///         for token in events.filter_map(|e| e.into_message()) {
    ///             if token == 0 {
    ///                 out.set_status(Status::Done(self.me));
    ///                 return Ok(());
    ///             }
    ///             self.next.send(token - 1)?;
    ///         }
    ///         out.set_status(Status::Idle);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = stepsched::Scheduler::<Link>::builder().workers(2).build().unwrap();
    /// let mut ring = scheduler
    ///     .submit_group(5, "run", |members| {
    ///         let me = members.me();
    ///         let next = members.address((me + 1) % members.len());
    ///         (Link { me, next }, ())
    ///     })
    ///     .unwrap();
    /// // 12 hops from member 0: the token stops at member 2.
    /// ring[0].address().send(12).unwrap();
    /// assert_eq!(ring.swap_remove(2).join(), Ok(2));
    /// ```
    pub fn submit_group<F>(
        &self,
        n: usize,
        method: &str,
        mut make: F,
    ) -> Result<Vec<JoinHandle<P>>, SubmitError<Vec<P>>>
    where
        F: FnMut(&Members<'_, P>) -> (P, P::Input),
    {
        let core = &self.core;
        let worker = core.pool().current_worker();
        let mut reserved = Reserved {
            slots: (0..n)
                .map(|_| Slot::reserved(self.allocate_pid(), crate::lent::lend(core, worker)))
                .collect(),
            initialized: 0,
        };
        let addresses: Vec<Address<P>> = reserved
            .slots
            .iter()
            .map(|slot| Address::new(slot.clone()))
            .collect();
        let mut inputs = Vec::with_capacity(n);
        for (me, slot) in reserved.slots.iter().enumerate() {
            let (process, input) = make(&Members {
                addresses: &addresses,
                me,
            });
            // SAFETY: reserved, never queued: the body is ours.
            unsafe { (*slot.body.get()).process = Some(process) };
            inputs.push(input);
        }
        drop(addresses);
        // The `n` places at once (see `submit`: reserve, then check).
        core.reserve(worker, n as u64);
        let release = || (0..n).for_each(|_| core.release_reservation(worker));
        if core.limited
            && core.live.fetch_add(n, Ordering::SeqCst).saturating_add(n) > core.max_processes
        {
            release();
            return Err(SubmitError::LimitReached(reserved.take_back()));
        }
        if core.stopping.load(Ordering::SeqCst) {
            release();
            return Err(SubmitError::Stopping(reserved.take_back()));
        }
        for (slot, input) in reserved.slots.iter().zip(inputs) {
            // SAFETY: as above.
            let body = unsafe { &mut *slot.body.get() };
            let process = body.process.as_mut().expect("made above");
            let ctx = Context::new(slot.pid, &slot.cancel, self);
            // Counted before `init`: a failed `init` is closed too.
            reserved.initialized += 1;
            if let Err(e) = init_caught(process, &ctx, method, input) {
                release();
                return Err(SubmitError::Init(e));
            }
        }
        for (i, slot) in reserved.slots.iter().enumerate() {
            if core.routes.register(slot.pid, slot.clone()).is_err() {
                let pid = slot.pid;
                // The members routed before this one were visible: a
                // `terminate` or shutdown's forcing sweep may have found
                // one. Unrouted, each is claimed as a forcer would; one
                // whose claim a forcer won is that forcer's to close and
                // publish (which gives its place back), not ours.
                let mut forced = 0;
                let routed: Vec<_> = reserved.slots.drain(..i).collect();
                for earlier in routed.into_iter().rev() {
                    core.routes
                        .unregister_if(earlier.pid, |route| SlotArc::ptr_eq(route, &earlier));
                    // AcqRel: as a forcer's claim (`Slot::force`).
                    let claimed = earlier.forced.compare_exchange(
                        NOT_FORCED,
                        FORCED_CANCELLED,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    if claimed.is_ok() {
                        reserved.slots.insert(0, earlier);
                    } else {
                        forced += 1;
                    }
                }
                reserved.initialized = reserved.slots.len();
                for _ in forced..n {
                    core.release_reservation(worker);
                }
                // A forced member publishes a result (counted as failed):
                // count it as submitted too, as the statistics' phases
                // expect of every process that leaves Ready. Relaxed: a
                // statistics counter.
                core.submitted.fetch_add(forced as u64, Ordering::Relaxed);
                return Err(SubmitError::DuplicatePid(pid, reserved.take_back()));
            }
        }
        trace::debug!(members = n, method, "group submitted");
        let slots = std::mem::take(&mut reserved.slots);
        Ok(slots
            .into_iter()
            .map(|slot| self.start(slot, worker))
            .collect())
    }
}
