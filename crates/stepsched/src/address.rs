//! [`Address`]: a PID resolved once, to send through without a lookup.

use std::fmt;
use std::sync::Arc;

use stepsched_process::{Outbox, Package, Pid, SendError};

use crate::SchedProcess;
use crate::primitive::sync::SlotArc;
use crate::slot::Slot;

/// A resolved reference to one process: [`send`](Address::send) pushes
/// straight into its event queue, with no routing-table lookup.
///
/// [`Handle::send`](crate::Handle::send) finds the process by its PID on
/// every call (a read of the routing table and a reference count taken and
/// given back). A sender that talks to the same process many times gets
/// its address once — [`Handle::address`](crate::Handle::address) or
/// [`JoinHandle::address`](crate::JoinHandle::address) — and sends through
/// it, as an actor framework hands out actor references or a channel hands
/// out senders. A send through an address costs a push into the queue and
/// one update of the process's state word.
///
/// An address names one process, not a PID: once that process has
/// completed, every send returns [`SendError::Closed`], even if a new
/// process was since submitted under the same PID. Messages sent through
/// one address (from one thread) arrive in the order sent, each once, and
/// obey the same rule as [`Handle::send`](crate::Handle::send) for a process
/// that completes: `Ok` means queued for a process that had not finished.
///
/// An address keeps the process's slot (its state word and event queue,
/// not the process itself, which is dropped when it completes) in memory
/// until the last clone of the address is dropped.
///
/// ```
/// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
/// # struct Sum(u32, u32);
/// # impl Process for Sum {
/// #     type Input = (); type Message = u32; type Response = u32; type Command = String; type Output = u32;
/// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
/// #     fn step(&mut self, _cx: &mut Context<'_, Self>, events: Events<'_, u32>, out: &mut StepOutput<String, u32>) -> Result<(), Error> {
/// #         for n in events.filter_map(|e| e.into_data()) { self.0 += n; self.1 -= 1; }
/// #         out.set_status(if self.1 == 0 { Status::Done(self.0) } else { Status::Idle });
/// #         Ok(())
/// #     }
/// # }
/// use stepsched::{Scheduler, SendError};
///
/// let scheduler = Scheduler::<Sum>::builder().workers(1).build().unwrap();
/// let pid = scheduler.allocate_pid();
/// let join = scheduler.submit(pid, Sum(0, 3), "run", ()).unwrap();
/// let to = join.address();
/// for n in 1..=3 {
///     to.send(n).unwrap();
/// }
/// assert_eq!(join.join(), Ok(6));
/// assert!(matches!(to.send(4), Err(SendError::Closed(_))));
/// ```
///
/// # The sender
///
/// An address may carry the PID of the process that sends through it, its
/// *sender*: [`send`](Address::send) stamps every message with it, so the
/// receiving step can reply ([`Event::sender`](stepsched_process::Event::sender)).
/// Addresses a step gets through its context
/// ([`ContextExt::address`](crate::ContextExt::address),
/// [`ContextExt::spawn_address`](crate::ContextExt::spawn_address)) and
/// those of a group ([`Members::address`](crate::Members::address)) carry
/// their process's PID; those from a [`Handle`](crate::Handle) or a
/// [`JoinHandle`](crate::JoinHandle) carry none, as a send from outside the
/// scheduler has none. [`with_sender`](Address::with_sender) sets it.
pub struct Address<P: SchedProcess> {
    to: Target<P>,
    from: Sender,
}

/// An `Option<Pid>` in two words rather than three (`Option<Pid>` puts its
/// tag in a word of its own; here it sits in the padding after the node),
/// so that an address is four words: a sender that keeps a thousand
/// addresses (one per actor it talks to) keeps them in 32 KiB.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Sender {
    node: u32,
    some: bool,
    number: u64,
}

impl Sender {
    const NONE: Sender = Sender {
        node: 0,
        some: false,
        number: 0,
    };

    #[inline]
    fn of(pid: Pid) -> Sender {
        Sender {
            node: pid.node(),
            some: true,
            number: pid.number(),
        }
    }

    #[inline]
    fn get(self) -> Option<Pid> {
        self.some.then(|| Pid::new(self.node, self.number))
    }
}

/// What an address sends into.
enum Target<P: SchedProcess> {
    /// A process of this scheduler: its slot.
    Slot(SlotArc<Slot<P>>),
    /// A process of another host (a simulator): its PID and the host's
    /// outbox, which that host delivers from on its own thread. Behind a
    /// pointer, so that the scheduler's own addresses stay as small as
    /// before (a sender that keeps a thousand of them keeps them in cache).
    Hosted(Arc<Hosted<P::Message>>),
}

/// A process of another host, and that host's outbox.
struct Hosted<M> {
    pid: Pid,
    /// The host's token for the process (see [`Outbox::token`]).
    token: u64,
    outbox: Arc<dyn Outbox<M>>,
}

impl<P: SchedProcess> Address<P> {
    pub(crate) fn new(slot: SlotArc<Slot<P>>) -> Self {
        Address {
            to: Target::Slot(slot),
            from: Sender::NONE,
        }
    }

    /// An address of process `pid` of a host that is not this scheduler,
    /// sending through its `outbox` (see [`ContextExt::address`](crate::ContextExt::address)).
    pub(crate) fn hosted(pid: Pid, token: u64, outbox: Arc<dyn Outbox<P::Message>>) -> Self {
        Address {
            to: Target::Hosted(Arc::new(Hosted { pid, token, outbox })),
            from: Sender::NONE,
        }
    }

    /// The PID of the process this address names.
    pub fn pid(&self) -> Pid {
        match &self.to {
            Target::Slot(slot) => slot.pid,
            Target::Hosted(hosted) => hosted.pid,
        }
    }

    /// The sender this address stamps on the messages it sends, if any.
    pub fn sender(&self) -> Option<Pid> {
        self.from.get()
    }

    /// This address with `from` as the sender of every message
    /// [`send`](Address::send) sends through it.
    ///
    /// ```
    /// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
    /// # struct Nop;
    /// # impl Process for Nop {
    /// #     type Input = (); type Message = u32; type Response = u32; type Command = String; type Output = ();
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _cx: &mut Context<'_, Self>, _: Events<'_, u32>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
    /// #         out.set_status(Status::Idle);
    /// #         Ok(())
    /// #     }
    /// # }
    /// use stepsched::{Pid, Scheduler};
    ///
    /// let scheduler = Scheduler::<Nop>::builder().workers(1).build().unwrap();
    /// let join = scheduler.submit(scheduler.allocate_pid(), Nop, "run", ()).unwrap();
    /// let me = Pid::new(0, 99);
    /// let to = join.address().with_sender(me);
    /// assert_eq!(to.sender(), Some(me));
    /// ```
    #[must_use]
    pub fn with_sender(self, from: Pid) -> Self {
        Address {
            from: Sender::of(from),
            ..self
        }
    }

    /// Sends `message` to the process, with this address's
    /// [`sender`](Address::sender) (if it has one): pushes a message event
    /// and wakes the process if it is Idle or Blocked.
    ///
    /// # Errors
    ///
    /// [`SendError::Closed`], with the message in a package to
    /// [`pid`](Address::pid) (this address's sender, empty topic), once
    /// the process has completed.
    pub fn send(&self, message: P::Message) -> Result<(), SendError<P::Message>> {
        self.deliver(self.from.get(), message)
    }

    /// Like [`send`](Address::send), with `from` as the message's sender
    /// (what [`Event::sender`](stepsched_process::Event::sender) returns to
    /// the receiving step) whatever this address's own.
    ///
    /// # Errors
    ///
    /// As for [`send`](Address::send).
    pub fn send_from(&self, from: Pid, message: P::Message) -> Result<(), SendError<P::Message>> {
        self.deliver(Some(from), message)
    }

    /// Whether the process this address names has completed: from then on
    /// every send returns [`SendError::Closed`].
    pub fn is_closed(&self) -> bool {
        match &self.to {
            Target::Slot(slot) => slot.state_is_complete(),
            Target::Hosted(hosted) => hosted.outbox.is_closed(hosted.pid, hosted.token),
        }
    }

    fn deliver(&self, from: Option<Pid>, message: P::Message) -> Result<(), SendError<P::Message>> {
        match &self.to {
            Target::Slot(slot) => Slot::deliver(slot, from, message)
                .map_err(|payload| closed(slot.pid, from, payload)),
            Target::Hosted(hosted) => post(hosted, from, message),
        }
    }
}

/// A send through a host's outbox: off the path of this scheduler's
/// sends, which only pay the check of the target's kind.
#[cold]
#[inline(never)]
fn post<M>(hosted: &Hosted<M>, from: Option<Pid>, message: M) -> Result<(), SendError<M>> {
    hosted
        .outbox
        .post(hosted.pid, hosted.token, from, message)
        .map_err(|payload| closed(hosted.pid, from, payload))
}

/// The refusal of a send to `pid` from `from`: the payload handed back.
fn closed<M>(pid: Pid, from: Option<Pid>, payload: M) -> SendError<M> {
    let mut package = Package::new(pid, "", payload);
    package.from = from;
    SendError::Closed(package)
}

impl<P: SchedProcess> Clone for Target<P> {
    fn clone(&self) -> Self {
        match self {
            Target::Slot(slot) => Target::Slot(slot.clone()),
            Target::Hosted(hosted) => Target::Hosted(Arc::clone(hosted)),
        }
    }
}

impl<P: SchedProcess> Clone for Address<P> {
    fn clone(&self) -> Self {
        Address {
            to: self.to.clone(),
            from: self.from,
        }
    }
}

impl<P: SchedProcess> PartialEq for Address<P> {
    /// Two addresses are equal when they name the same process (not merely
    /// the same PID), whatever their senders.
    fn eq(&self, other: &Self) -> bool {
        match (&self.to, &other.to) {
            (Target::Slot(a), Target::Slot(b)) => SlotArc::ptr_eq(a, b),
            // One host's outbox, one PID, one token: one process.
            (Target::Hosted(a), Target::Hosted(b)) => {
                (a.pid, a.token) == (b.pid, b.token) && Arc::ptr_eq(&a.outbox, &b.outbox)
            }
            _ => false,
        }
    }
}

impl<P: SchedProcess> Eq for Address<P> {}

impl<P: SchedProcess> fmt::Debug for Address<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Address")
            .field("pid", &self.pid())
            .field("sender", &self.from.get())
            .field("closed", &self.is_closed())
            .finish()
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;
    use stepsched_process::{Context, Error, Events, Process, StepOutput};

    struct Nop;
    impl Process for Nop {
        type Input = ();
        type Message = u32;
        type Response = ();
        type Command = String;
        type Output = ();
        fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
            Ok(())
        }
        fn step(
            &mut self,
            _: &mut Context<'_, Self>,
            _: Events<'_, u32, ()>,
            _: &mut StepOutput<String, ()>,
        ) -> Result<(), Error> {
            Ok(())
        }
    }

    /// Four words, as when an address was a slot pointer and an
    /// `Option<Pid>`: a sender holding an address per receiver (fan-in)
    /// measured 20 % slower with the seven-word first version.
    #[test]
    fn an_address_is_four_words() {
        assert_eq!(
            std::mem::size_of::<Address<Nop>>(),
            4 * std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn the_compact_sender_keeps_every_pid() {
        for pid in [
            Pid::new(0, 0),
            Pid::new(u32::MAX, u64::MAX),
            Pid::new(3, 1 << 40),
        ] {
            assert_eq!(Sender::of(pid).get(), Some(pid));
        }
        assert_eq!(Sender::NONE.get(), None);
    }
}
