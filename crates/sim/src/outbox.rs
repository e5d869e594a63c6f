//! Addresses under the simulator: the [`Outbox`] the simulator offers
//! through its reach, so that `stepsched`'s `ContextExt::address` and
//! `ContextExt::spawn_address` work in a simulated step, and the messages
//! sent through those addresses take the way every `Context::send` takes
//! (the simulated network, if there is one; the trace).
//!
//! An address may be kept and used from any thread, while the simulator's
//! state lives on its own: a send through it only queues the message here,
//! under a mutex, and the run loop delivers what is queued, in the order it
//! was queued, before it picks the next step. A send made in a step is
//! thus delivered right after that step, deterministically; a send from
//! another OS thread lands wherever the run loop happens to be, which
//! breaks replay (as any real concurrency does).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use stepsched_process::{Command, Outbox, Package, Pid, Process, SendError};

use crate::state::{Shared, quietly_drop};
use crate::trace::stamp;

/// The simulator's outbox: messages sent through addresses, not yet
/// delivered, and which processes an address can still reach.
pub(crate) struct SimOutbox<M> {
    post: Mutex<Post<M>>,
    /// Something is queued (a hint that saves the run loop a lock per
    /// step; the queue under the lock is what counts).
    pending: AtomicBool,
}

struct Post<M> {
    queue: VecDeque<(Pid, Option<Pid>, M)>,
    /// Processes that are live, or down awaiting a restart (the ones an
    /// address may still reach), each with its token: a process submitted
    /// later under the same PID gets another, so an address of the ended
    /// one stays closed. A restart keeps the token of the process it
    /// restarts.
    alive: HashMap<Pid, u64>,
    /// The next token.
    tokens: u64,
}

impl<M> SimOutbox<M> {
    fn lock(&self) -> MutexGuard<'_, Post<M>> {
        // A panic while the lock is held cannot leave the queue or the set
        // half-changed (each change is one call): go on with them.
        self.post.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Process `pid` started, or restarted after a crash (`restart`: it
    /// keeps its token).
    pub(crate) fn started(&self, pid: Pid, restart: bool) {
        let mut post = self.lock();
        if restart && post.alive.contains_key(&pid) {
            return;
        }
        post.tokens += 1;
        let token = post.tokens;
        post.alive.insert(pid, token);
    }

    /// Process `pid` ended for good.
    pub(crate) fn ended(&self, pid: Pid) {
        self.lock().alive.remove(&pid);
    }

    /// The simulator is gone: no process is alive any more, so sends
    /// fail, and what is queued is dropped.
    pub(crate) fn close(&self) {
        let queue = {
            let mut post = self.lock();
            post.alive.clear();
            std::mem::take(&mut post.queue)
        };
        quietly_drop(queue);
    }

    /// Whether something may be queued (the run loop's look, before it
    /// takes the lock).
    #[inline]
    pub(crate) fn has_posts(&self) -> bool {
        // Acquire: pairs with the Release store in `post`; a miss only
        // delays the messages to the next look, and the lock orders the
        // queue itself.
        self.pending.load(Ordering::Acquire)
    }

    /// Takes what is queued.
    fn take(&self) -> VecDeque<(Pid, Option<Pid>, M)> {
        let mut post = self.lock();
        self.pending.store(false, Ordering::Relaxed);
        std::mem::take(&mut post.queue)
    }
}

impl<M: Send + 'static> Outbox<M> for SimOutbox<M> {
    fn token(&self, pid: Pid) -> Option<u64> {
        self.lock().alive.get(&pid).copied()
    }

    fn post(&self, to: Pid, token: u64, from: Option<Pid>, message: M) -> Result<(), M> {
        let mut post = self.lock();
        if post.alive.get(&to) != Some(&token) {
            return Err(message);
        }
        post.queue.push_back((to, from, message));
        // Release: with the lock, makes the queued message visible to the
        // run loop's look (see `take`).
        self.pending.store(true, Ordering::Release);
        Ok(())
    }

    fn is_closed(&self, pid: Pid, token: u64) -> bool {
        self.lock().alive.get(&pid) != Some(&token)
    }
}

impl<P: Process + 'static> Shared<P>
where
    P::Command: Command,
{
    /// The simulator's outbox, made at its first use from what is live (or
    /// down awaiting a restart) then; kept up to date from then on.
    pub(crate) fn outbox(&self) -> Arc<SimOutbox<P::Message>> {
        Arc::clone(self.outbox.get_or_init(|| {
            let inner = self.inner.borrow();
            let pids: BTreeSet<Pid> = inner
                .live
                .keys()
                .chain(inner.named.keys())
                .copied()
                .collect();
            let alive: HashMap<Pid, u64> = pids.into_iter().zip(1..).collect();
            let tokens = alive.len() as u64;
            Arc::new(SimOutbox {
                post: Mutex::new(Post {
                    queue: VecDeque::new(),
                    alive,
                    tokens,
                }),
                pending: AtomicBool::new(false),
            })
        }))
    }

    /// Delivers what was sent through addresses since the last look, in
    /// order, as `Context::send`s; a message whose process has ended by
    /// now is dropped, with a trace line. Called after each step (and
    /// before each `Context::send` of a step, so that a step's sends keep
    /// their order whichever way each went), and by the run loop.
    #[inline]
    pub(crate) fn deliver_posted(self: &Rc<Self>) {
        if let Some(outbox) = self.outbox.get()
            && outbox.has_posts()
        {
            self.deliver_queued(outbox.take());
        }
    }

    /// The delivery of [`deliver_posted`](Self::deliver_posted), out of
    /// the loops' way.
    #[cold]
    #[inline(never)]
    fn deliver_queued(self: &Rc<Self>, queue: VecDeque<(Pid, Option<Pid>, P::Message)>) {
        for (to, from, message) in queue {
            let mut package = Package::new(to, "", message);
            package.from = from;
            if let Err(e) = self.deliver(package) {
                let why = match &e {
                    SendError::Closed(_) => "closed",
                    SendError::UnknownPid(_) => "unknown",
                };
                if self.tracing {
                    let mut inner = self.inner.borrow_mut();
                    let mut line = String::new();
                    stamp(&mut line, inner.now, to);
                    let _ = write!(line, " dropped m");
                    if let Some(from) = from {
                        let _ = write!(line, "{from}");
                    }
                    let _ = write!(line, " ({why})");
                    inner.push_line(&line);
                }
                quietly_drop(e);
            }
        }
    }
}
