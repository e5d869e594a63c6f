//! The references to the core that a slot holds, lent by the worker that
//! makes or frees the slot.
//!
//! Every slot holds a strong reference to its scheduler's core: a slot
//! outlives its run and may outlive the scheduler's handles (a
//! `JoinHandle` or an `Address` keeps it). Taking and dropping that
//! reference is a read-modify-write of the `Arc`'s count, one word for the
//! whole scheduler: the spawner took it and whichever worker freed the
//! child's slot gave it back, so that cache line moved between cores twice
//! per process, and every worker finishing processes wrote it.
//!
//! Instead each worker thread keeps a stash of references to its core, in
//! a thread-local: a slot made on a worker takes one from the stash, a slot
//! freed on a worker puts its reference back, and the count is touched only
//! when a stash runs empty (it takes [`REFILL`] references, one
//! `increment_strong_count` each, in a burst on a line no other worker is
//! writing) or grows past [`MOST`] (it gives back all but `REFILL`). Where
//! slots are made and freed on the same worker the stash balances and the
//! count is not written at all; where one worker spawns and others run the
//! children, the spawner still pays one increment per child, but the
//! count's line stays in its cache, and the finishing workers write
//! nothing.
//!
//! A stash's references are strong counts like any other, so the core
//! stays alive while a worker holds some. They go back when the worker
//! thread exits, in the thread-local's destructor: that runs before the
//! thread's join returns, so before the shutdown that joins the workers
//! (and holds a reference of its own meanwhile) lets the core go. A stash
//! is used only on a thread that is one of its core's workers and inside
//! its loop (`Pool::current_worker`), so it only ever holds references to
//! that one core.

use std::cell::Cell;
use std::mem;

use crate::primitive::sync::Arc;
use crate::primitive::thread_local;
use stepsched_process::Process;

use crate::SchedProcess;
use crate::slot::Core;

/// References a stash takes from the count when it runs empty, and keeps
/// when it gives back.
pub(crate) const REFILL: usize = 64;
/// The most references a stash holds before giving some back: large, so
/// that a worker that frees more slots than it makes (the children of a
/// spawner on another worker) writes the count rarely; the references
/// are only counts, and go back when the worker exits.
pub(crate) const MOST: usize = 1 << 16;

/// One worker thread's references to its core.
struct Stash {
    /// The core (`Arc::as_ptr`), or null before the first use.
    core: Cell<*const ()>,
    /// How many strong counts of `core` this stash holds.
    held: Cell<usize>,
    /// Gives back `n` strong counts of `core` (typed by the scheduler's
    /// process type, which a thread-local cannot name).
    give_back: Cell<unsafe fn(*const (), usize)>,
}

impl Drop for Stash {
    fn drop(&mut self) {
        let held = self.held.replace(0);
        if held > 0 {
            // SAFETY: `core` holds `held` strong counts that this stash
            // owns (see `lend` and `take_back`), and `give_back` was set
            // with them, for the core's own type.
            unsafe { (self.give_back.get())(self.core.get(), held) };
        }
    }
}

/// Gives back `n` strong counts of the `Core<P>` at `core`.
///
/// # Safety
///
/// `core` is `Arc::as_ptr` of a live `Arc<Core<P>>` and the caller owns
/// `n` of its strong counts.
unsafe fn give_back<P: SchedProcess>(core: *const (), n: usize) {
    for _ in 0..n {
        // SAFETY: as the function's contract says: each call gives back
        // one of the counts the caller owns. The last reference to the
        // core is never one of them while a worker runs (see the module
        // docs), so the core is not dropped here in practice; if it were,
        // that would be a normal drop of the last `Arc`.
        unsafe { Arc::decrement_strong_count(core.cast::<Core<P>>()) };
    }
}

/// Does nothing (a stash's initial `give_back`; it holds nothing then).
unsafe fn give_back_nothing(_: *const (), _: usize) {}

#[cfg(not(stepsched_loom))]
thread_local! {
    static STASH: Stash = const {
        Stash {
            core: Cell::new(std::ptr::null()),
            held: Cell::new(0),
            give_back: Cell::new(give_back_nothing),
        }
    };
}

// loom's `thread_local!` takes no `const` initializer.
#[cfg(stepsched_loom)]
thread_local! {
    static STASH: Stash = Stash {
        core: Cell::new(std::ptr::null()),
        held: Cell::new(0),
        give_back: Cell::new(give_back_nothing),
    };
}

/// Binds this thread's stash to `core`, whose worker this thread is: the
/// pool calls the runner, and so this, only on its own workers, before
/// each run. A worker thread serves one pool, so it binds once and the
/// stash only ever holds references to that core.
#[inline]
pub(crate) fn enter<P: SchedProcess>(core: &Arc<Core<P>>) {
    let ptr = Arc::as_ptr(core).cast::<()>();
    let _ = STASH.try_with(|stash| {
        if stash.core.get() != ptr && stash.held.get() == 0 {
            stash.core.set(ptr);
            stash.give_back.set(give_back::<P>);
        }
    });
}

/// A strong reference to `core` for a slot made on this thread; `worker`:
/// `core`'s worker index of this thread, if it is one (`None`: a plain
/// clone).
#[inline]
pub(crate) fn lend<P: SchedProcess>(core: &Arc<Core<P>>, worker: Option<usize>) -> Arc<Core<P>> {
    if worker.is_none() {
        return core.clone();
    }
    let ptr = Arc::as_ptr(core).cast::<()>();
    let lent = STASH.try_with(|stash| {
        if stash.core.get() != ptr {
            return false;
        }
        let mut held = stash.held.get();
        if held == 0 {
            for _ in 0..REFILL {
                mem::forget(core.clone());
            }
            held = REFILL;
        }
        stash.held.set(held - 1);
        true
    });
    if matches!(lent, Ok(true)) {
        // SAFETY: one of the strong counts the stash held (forgotten
        // clones, or references put back by `take_back`) becomes this
        // `Arc`; `Arc::as_ptr` is the pointer `Arc::into_raw` returns.
        unsafe { Arc::from_raw(Arc::as_ptr(core)) }
    } else {
        core.clone()
    }
}

/// Takes back a slot's reference to its core: into this thread's stash if
/// the thread is one of the core's workers (its stash is bound to the
/// core), else a plain drop.
#[inline]
pub(crate) fn take_back<P: Process + 'static>(core: Arc<Core<P>>) {
    let ptr = Arc::as_ptr(&core).cast::<()>();
    let kept = STASH.try_with(|stash| {
        if stash.core.get() != ptr {
            return false;
        }
        let held = stash.held.get() + 1;
        if held > MOST {
            // SAFETY: the stash owns `held - 1` counts and we add ours; we
            // give back all but `REFILL`, so the core keeps at least those
            // (ours among them, forgotten below). `give_back` was set by
            // `enter` for this core's type.
            unsafe { (stash.give_back.get())(ptr, held - REFILL) };
            stash.held.set(REFILL);
        } else {
            stash.held.set(held);
        }
        true
    });
    if matches!(kept, Ok(true)) {
        // The stash owns this count now.
        mem::forget(core);
    } else {
        drop(core);
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use std::sync::{Arc, Weak};
    use std::time::{Duration, Instant};

    use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};

    use super::REFILL;
    use crate::Scheduler;

    /// Spawns `children` one-step children from its first step, then ends.
    struct Spawner {
        children: Option<usize>,
    }

    impl Process for Spawner {
        type Input = ();
        type Message = ();
        type Response = ();
        type Command = &'static str;
        type Output = ();

        fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
            Ok(())
        }

        fn step(
            &mut self,
            cx: &mut Context<'_, Self>,
            _: Events<'_, ()>,
            out: &mut StepOutput<&'static str, ()>,
        ) -> Result<(), Error> {
            if let Some(n) = self.children.take() {
                for _ in 0..n {
                    cx.spawn(Spawner { children: None }, "run", ())?;
                }
            }
            out.set_status(Status::Done(()));
            Ok(())
        }
    }

    /// The workers' stashes go back when the workers exit: once the
    /// scheduler is dropped (which joins them), nothing holds the core. A
    /// stash that kept its references would leak the core.
    #[test]
    fn the_core_is_freed_once_the_workers_gave_their_stashes_back() {
        for workers in [1, 2, 3] {
            let scheduler = Scheduler::<Spawner>::builder()
                .workers(workers)
                .build()
                .unwrap();
            let core: Weak<_> = Arc::downgrade(&scheduler.handle().core);
            let parent = Spawner {
                children: Some(3 * REFILL + 1),
            };
            let join = scheduler
                .submit(scheduler.allocate_pid(), parent, "run", ())
                .unwrap();
            assert_eq!(join.join(), Ok(()));
            drop(scheduler);
            // The thread that stopped the pool may still be dropping its
            // own reference: wait for it (a hang guard, not a timing
            // assumption: a stash never given back keeps the count up for
            // good).
            let deadline = Instant::now() + Duration::from_secs(10);
            while core.strong_count() > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(
                core.strong_count(),
                0,
                "{workers} workers: the core outlived the scheduler"
            );
        }
    }
}
