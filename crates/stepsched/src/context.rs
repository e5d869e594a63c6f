//! [`ContextExt`]: what a step reaches of this scheduler through its
//! context beyond `send`, `spawn` and `terminate`.

use std::time::Duration;

use stepsched_process::{Context, Pid, SubmitError};

use crate::SchedProcess;
use crate::address::Address;
use crate::handle::Handle;
use crate::scheduler::Shutdown;

/// What a step (or `init`) offers beyond [`Context`]'s own methods when the
/// process runs on this scheduler: the fast path of [`Address`]es, spawns
/// that return one, and the shutdown — what a [`Handle`] offers, without a
/// handle smuggled into the process.
///
/// Addresses obtained here carry the calling process's PID as their
/// [sender](Address::sender): a message sent through one reaches its
/// receiver with `from` set, so the receiver can reply.
///
/// On a context that is not this scheduler's (one made by
/// [`Context::detached`], or by another scheduler such as a simulator)
/// these methods find nothing: `None`, or the child handed back.
///
/// ```
/// use stepsched::{Address, Context, ContextExt, Error, Events, Process, Status, StepOutput};
///
/// /// Spawns a child, sends it a number through its address, and finishes
/// /// with the child's answer.
/// enum Node {
///     Parent { child: Option<Address<Node>> },
///     Child,
/// }
///
/// impl Process for Node {
///     type Input = ();
///     type Message = u32;
///     type Response = ();
///     type Command = &'static str;
///     type Output = u32;
///
///     fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
///         Ok(())
///     }
///
///     fn step(
///         &mut self,
///         cx: &mut Context<'_, Self>,
///         events: Events<'_, u32, ()>,
///         out: &mut StepOutput<&'static str, u32>,
///     ) -> Result<(), Error> {
///         match self {
///             Node::Parent { child } => match child {
///                 None => {
///                     let to = cx.spawn_address(Node::Child, "run", ())?;
///                     to.send(20)?; // stamped with the parent's PID
///                     *child = Some(to);
///                     out.set_status(Status::Idle);
///                 }
///                 Some(_) => {
///                     let answer = events.filter_map(|e| e.into_message()).sum();
///                     out.set_status(Status::Done(answer));
///                 }
///             },
///             Node::Child => {
///                 for event in events {
///                     if let (Some(from), Some(n)) = (event.sender(), event.message_data()) {
///                         let reply = *n + 1;
///                         cx.address(from).expect("the parent waits").send(reply)?;
///                         out.set_status(Status::Done(0));
///                         return Ok(());
///                     }
///                 }
///                 out.set_status(Status::Idle);
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = stepsched::Scheduler::<Node>::builder().workers(2).build().unwrap();
/// let parent = Node::Parent { child: None };
/// let join = scheduler.submit(scheduler.allocate_pid(), parent, "run", ()).unwrap();
/// assert_eq!(join.join(), Ok(21));
/// ```
pub trait ContextExt<P: SchedProcess> {
    /// The handle of the scheduler running this process, if it is this
    /// crate's scheduler.
    fn handle(&self) -> Option<Handle<P>>;

    /// The address of live process `pid`, stamped with this process's PID
    /// as its sender ([`Handle::address`], then
    /// [`with_sender`](Address::with_sender)). `None` if no live process
    /// has `pid` (or the context is not this scheduler's).
    fn address(&self, pid: Pid) -> Option<Address<P>>;

    /// Starts `child` under a fresh PID, as [`Context::spawn`] does, and
    /// returns its address, stamped with this process's PID as its sender:
    /// the parent can send to the child at once, with no lookup.
    ///
    /// # Errors
    ///
    /// As [`Context::spawn`]; on a context that is not this scheduler's,
    /// [`SubmitError::Stopping`] with the child.
    fn spawn_address(
        &self,
        child: P,
        method: &str,
        input: P::Input,
    ) -> Result<Address<P>, SubmitError<P>>;

    /// Starts this scheduler's shutdown, as [`Handle::begin_shutdown`]
    /// does, and returns at once: a step must not wait for it (that would
    /// hold its worker until the deadline). `None` on a context that is not
    /// this scheduler's.
    fn begin_shutdown(&self, deadline: Duration) -> Option<Shutdown>;
}

/// The scheduler behind `cx`, if it is this crate's.
fn handle_of<'a, P: SchedProcess>(cx: &Context<'a, P>) -> Option<&'a Handle<P>> {
    cx.reach().as_any()?.downcast_ref::<Handle<P>>()
}

impl<P: SchedProcess> ContextExt<P> for Context<'_, P> {
    fn handle(&self) -> Option<Handle<P>> {
        handle_of(self).cloned()
    }

    fn address(&self, pid: Pid) -> Option<Address<P>> {
        let to = handle_of(self)?.address(pid)?;
        Some(to.with_sender(self.pid()))
    }

    fn spawn_address(
        &self,
        child: P,
        method: &str,
        input: P::Input,
    ) -> Result<Address<P>, SubmitError<P>> {
        let Some(handle) = handle_of(self) else {
            return Err(SubmitError::Stopping(child));
        };
        let pid = handle.allocate_pid();
        let join = handle.submit(pid, child, method, input)?;
        Ok(join.address().with_sender(self.pid()))
    }

    fn begin_shutdown(&self, deadline: Duration) -> Option<Shutdown> {
        Some(handle_of(self)?.begin_shutdown(deadline))
    }
}
