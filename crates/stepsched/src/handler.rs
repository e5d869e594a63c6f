//! Command dispatch: the [`Command`](crate::Command) a yield carries, the [`Handler`] that
//! serves it, and the [`Completer`] through which the handler answers.

use std::cell::Cell;
use std::fmt;
use std::mem::ManuallyDrop;
use std::time::{Duration, Instant};

use stepsched_process::{Complete, Error, Event, Pid, Process, Tag};

use crate::SchedProcess;
use crate::primitive::sync::SlotArc;
use crate::primitive::thread_local;
use crate::slot::{Ev, Slot};

/// One variant of a command enum, served by a handler of its own that
/// receives the variant's data, not the enum: see
/// [`Builder::on`](crate::Builder::on). [`commands!`](crate::commands)
/// writes the enum, its [`Command`](crate::Command) impl and these impls.
///
/// ```
/// use stepsched::{Command, Variant};
///
/// struct Sleep(u64);
/// enum Io {
///     Read(String),
///     Sleep(Sleep),
/// }
/// impl Command for Io {
///     fn name(&self) -> &str {
///         match self {
///             Io::Read(_) => "read",
///             Io::Sleep(_) => Sleep::NAME,
///         }
///     }
/// }
/// impl Variant<Io> for Sleep {
///     const NAME: &'static str = "sleep";
///     fn from_command(command: Io) -> Result<Self, Io> {
///         match command {
///             Io::Sleep(sleep) => Ok(sleep),
///             other => Err(other),
///         }
///     }
/// }
/// assert_eq!(Sleep::from_command(Io::Sleep(Sleep(5))).map(|s| s.0).ok(), Some(5));
/// ```
pub trait Variant<C>: Sized {
    /// The name commands of this variant report ([`Command::name`](crate::Command::name)).
    const NAME: &'static str;
    /// The variant's data, or the command back if it is another variant.
    ///
    /// # Errors
    ///
    /// The command, when it is not this variant.
    fn from_command(command: C) -> Result<Self, C>;
}

/// Declares a command enum whose variants each hold one type of their own,
/// with its [`Command`](crate::Command) impl (each variant's name given after `=`), a
/// [`Variant`] impl per held type (for [`Builder::on`](crate::Builder::on))
/// and `From` each held type into the enum.
///
/// ```
/// use stepsched::{Command, Variant};
///
/// pub struct Get { pub key: String }
/// pub struct Put { pub key: String, pub value: i64 }
///
/// stepsched::commands! {
///     /// What a store process asks its handlers.
///     pub enum StoreCommand {
///         Get(Get) = "get",
///         Put(Put) = "put",
///     }
/// }
///
/// let cmd = StoreCommand::from(Put { key: "a".into(), value: 1 });
/// assert_eq!(cmd.name(), "put");
/// assert_eq!(<Put as Variant<StoreCommand>>::NAME, "put");
/// assert!(Get::from_command(cmd).is_err());
/// ```
#[macro_export]
macro_rules! commands {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident($ty:ty) = $cmd:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant($ty) ),+
        }

        impl $crate::Command for $name {
            fn name(&self) -> &str {
                match self {
                    $( $name::$variant(_) => $cmd ),+
                }
            }
        }

        $(
            impl $crate::Variant<$name> for $ty {
                const NAME: &'static str = $cmd;
                fn from_command(command: $name) -> ::core::result::Result<Self, $name> {
                    #[allow(unreachable_patterns)]
                    match command {
                        $name::$variant(data) => ::core::result::Result::Ok(data),
                        other => ::core::result::Result::Err(other),
                    }
                }
            }

            impl ::core::convert::From<$ty> for $name {
                fn from(data: $ty) -> Self {
                    $name::$variant(data)
                }
            }
        )+
    };
}

/// Serves one kind of command.
///
/// A handler gets the command and a [`Completer`] for its tag. It may
/// complete at once, on the same thread, or hand the completer to another
/// thread and complete later. An error is reported by completing with
/// `Err`. If the completer is dropped without completing — the handler
/// forgot it, or panicked — the process receives an error completion for
/// that tag, so a process never waits for a completion that cannot come.
///
/// Closures `Fn(C, Completer<P>)` are handlers.
pub trait Handler<P: Process>: Send + Sync + 'static {
    /// Serves `command`; answers through `completer`.
    fn handle(&self, command: P::Command, completer: Completer<P>);
}

impl<P, F> Handler<P> for F
where
    P: SchedProcess,
    F: Fn(P::Command, Completer<P>) + Send + Sync + 'static,
{
    #[inline]
    fn handle(&self, command: P::Command, completer: Completer<P>) {
        self(command, completer)
    }
}

/// Completes one yield of one process, from any thread, once.
///
/// The completer is bound to the life of the process that yielded: if that
/// process has ended by the time it completes, the completion is dropped
/// and reaches nothing (see [`complete`](Completer::complete)).
pub struct Completer<P: Process + 'static> {
    slot: SlotArc<Slot<P>>,
    tag: Tag,
    /// `Slot::wake`, taken where `P: SchedProcess` is known, so that `Drop`
    /// (which cannot ask for more bounds than the type) can call it.
    wake: fn(&SlotArc<Slot<P>>) -> bool,
}

impl<P: SchedProcess> Completer<P> {
    /// The completer of yield `tag` of `slot`, whose yields this thread
    /// is dispatching (see [`Dispatching`]).
    ///
    /// It takes one of the run's spare references to the slot if there is
    /// one (handed back by a completer completed inline earlier in the
    /// run), else it clones one: a process whose handlers complete at once
    /// costs one reference count increment per run, not two atomic
    /// operations per yield.
    #[inline]
    pub(crate) fn dispatched(slot: &SlotArc<Slot<P>>, tag: Tag) -> Self {
        let spare = DISPATCHING.with(|d| {
            let marker = d.get();
            let spare = marker.spare > 0 && marker.slot == SlotArc::as_ptr(slot) as usize;
            if spare {
                d.set(Marker {
                    spare: marker.spare - 1,
                    ..marker
                });
            }
            spare
        });
        let slot = if spare {
            // SAFETY: the marker's spare count counts strong references to
            // this slot that the dispatching run owns and has not released
            // (see `SpareRefs`); we took one from the count, so its
            // ownership moves into this `Arc`.
            unsafe { SlotArc::from_raw(SlotArc::as_ptr(slot)) }
        } else {
            SlotArc::clone(slot)
        };
        // The completer holds its own process's slot. Slots are never
        // reused, so it cannot reach a later process with the same PID; once
        // its process has closed, its queue refuses the completion.
        Completer {
            slot,
            tag,
            wake: Slot::wake,
        }
    }

    /// The correlation tag of the yield this completer answers.
    pub fn tag(&self) -> Tag {
        self.tag
    }

    /// The PID of the process whose yield this completer answers.
    ///
    /// ```
    /// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
    /// # struct Asks;
    /// # impl Process for Asks {
    /// #     type Input = (); type Message = u64; type Response = u64; type Command = String; type Output = u64;
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _cx: &mut Context<'_, Self>, events: Events<'_, u64>, out: &mut StepOutput<String, u64>) -> Result<(), Error> {
    /// #         match events.into_iter().find_map(|e| e.into_data()) {
    /// #             Some(v) => out.set_status(Status::Done(v)),
    /// #             None => { out.push_yield(1, "whoami".to_string()); out.set_status(Status::Yield); }
    /// #         }
    /// #         Ok(())
    /// #     }
    /// # }
    /// use stepsched::{Completer, Scheduler};
    ///
    /// let scheduler = Scheduler::<Asks>::builder()
    ///     .workers(1)
    ///     .handler("whoami", |_: String, done: Completer<Asks>| {
    ///         let number = done.pid().number();
    ///         done.complete(Ok(number));
    ///     })
    ///     .build()
    ///     .unwrap();
    /// let pid = scheduler.allocate_pid();
    /// let join = scheduler.submit(pid, Asks, "run", ()).unwrap();
    /// assert_eq!(join.join(), Ok(pid.number()));
    /// ```
    pub fn pid(&self) -> Pid {
        self.slot.pid
    }

    /// Completes the yield with `result`, which becomes an
    /// [`Event::completion`] for the process's next step.
    ///
    /// Returns `false` if the process had already ended: the completion was
    /// dropped.
    #[inline]
    pub fn complete(self, result: Result<P::Response, Error>) -> bool {
        // Taken apart without running `Drop` (which would deliver an error
        // for a completer never used): the slot's reference moves out here.
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the slot's
        // `Arc` is read out exactly once.
        let slot = unsafe { std::ptr::read(&this.slot) };
        let marker = DISPATCHING.with(Cell::get);
        if marker.slot != SlotArc::as_ptr(&slot) as usize {
            return deliver_queued(&slot, this.tag, result, this.wake);
        }
        let delivered = deliver_inline(&slot, marker, this.tag, result);
        // Our reference goes back to the dispatching run, as a spare for
        // the next completer of this slot (released at the run's end).
        DISPATCHING.with(|d| {
            d.set(Marker {
                spare: marker.spare + 1,
                ..marker
            })
        });
        std::mem::forget(slot);
        delivered
    }
}

/// The scheduler's completer serves [`PortableHandler`](crate::PortableHandler)s,
/// registered with [`Builder::portable_handler`](crate::Builder::portable_handler):
/// the trait's methods are the inherent ones.
impl<P: SchedProcess> Complete<P> for Completer<P> {
    #[inline]
    fn pid(&self) -> Pid {
        Completer::pid(self)
    }

    #[inline]
    fn tag(&self) -> Tag {
        Completer::tag(self)
    }

    #[inline]
    fn complete(self, result: Result<P::Response, Error>) -> bool {
        Completer::complete(self, result)
    }

    /// Completes from the program's timer thread (the one behind
    /// [`ContextExt::after`](crate::ContextExt::after)) once `delay` has
    /// passed; at once for a zero delay.
    fn complete_after(self, delay: Duration, result: Result<P::Response, Error>) -> bool {
        if delay.is_zero() {
            return Completer::complete(self, result);
        }
        let live = !self.slot.state_is_complete();
        // A delay past what the clock can represent never comes: the
        // completer is dropped, which completes the yield with an error.
        let Some(when) = Instant::now().checked_add(delay) else {
            drop(result);
            return live;
        };
        crate::context::at(when, move || {
            Completer::complete(self, result);
        });
        live
    }
}

/// The dispatch marker: the slot whose yields this thread is dispatching
/// right now (its address; 0 for none), the batch its inline completions
/// go to (the dispatching worker's, `*mut Vec<Ev<P>>` for that slot's
/// `P`), and how many spare strong references to the slot the dispatching
/// run owns (handed back by completers completed inline, taken by the next
/// ones).
#[derive(Clone, Copy)]
struct Marker {
    slot: usize,
    batch: usize,
    spare: usize,
}

/// No dispatch.
const NO_DISPATCH: Marker = Marker {
    slot: 0,
    batch: 0,
    spare: 0,
};

#[cfg(not(stepsched_loom))]
thread_local! {
    static DISPATCHING: Cell<Marker> = const { Cell::new(NO_DISPATCH) };
}

// loom's `thread_local!` takes no `const` initializer.
#[cfg(stepsched_loom)]
thread_local! {
    static DISPATCHING: Cell<Marker> = Cell::new(NO_DISPATCH);
}

/// Marks this thread as dispatching the yields of one slot, until
/// [`finish`](Self::finish)ed (or dropped, on an unwind).
pub(crate) struct Dispatching<P: Process + 'static> {
    previous: Marker,
    slot: *const Slot<P>,
}

impl<P: Process + 'static> Dispatching<P> {
    /// Marks the dispatch of `slot`'s yields, whose inline completions go
    /// to `batch`, the dispatching worker's (empty: the step drained it),
    /// with `spare` strong references to the slot that the caller owns and
    /// hands over (see `SpareRefs`).
    #[inline]
    pub(crate) fn enter(slot: &SlotArc<Slot<P>>, batch: *mut Vec<Ev<P>>, spare: usize) -> Self {
        let marker = Marker {
            slot: SlotArc::as_ptr(slot) as usize,
            batch: batch as usize,
            spare,
        };
        let previous = DISPATCHING.with(|d| d.replace(marker));
        Dispatching {
            previous,
            slot: SlotArc::as_ptr(slot),
        }
    }

    /// Ends the dispatch; returns the spare references the caller owns
    /// again.
    #[inline]
    pub(crate) fn finish(self) -> usize {
        let this = ManuallyDrop::new(self);
        DISPATCHING.with(|d| d.replace(this.previous)).spare
    }
}

impl<P: Process + 'static> Drop for Dispatching<P> {
    /// Only on an unwind out of the dispatch: restores the marker and
    /// releases the spare references, which nobody else will.
    fn drop(&mut self) {
        let marker = DISPATCHING.with(|d| d.replace(self.previous));
        release(self.slot, marker.spare);
    }
}

/// Strong references to a slot owned by the run that steps it, beside the
/// one its task holds: spares for the completers of its yields (see
/// [`Completer::dispatched`]). Released when the run ends.
pub(crate) struct SpareRefs<P: Process + 'static> {
    slot: *const Slot<P>,
    /// How many; moved into the dispatch marker while a dispatch runs.
    pub(crate) count: usize,
}

impl<P: Process + 'static> SpareRefs<P> {
    pub(crate) fn new(slot: &SlotArc<Slot<P>>) -> Self {
        SpareRefs {
            slot: SlotArc::as_ptr(slot),
            count: 0,
        }
    }
}

impl<P: Process + 'static> Drop for SpareRefs<P> {
    #[inline]
    fn drop(&mut self) {
        release(self.slot, self.count);
    }
}

/// Releases `count` strong references to `slot` that the caller owns.
#[inline]
fn release<P: Process + 'static>(slot: *const Slot<P>, count: usize) {
    for _ in 0..count {
        // SAFETY: each is a strong reference the caller owns (taken from
        // an `Arc` with `mem::forget` by `Completer::complete`) and gives
        // up here, once.
        unsafe { SlotArc::decrement_strong_count(slot) };
    }
}

/// Pushes the completion and wakes the process; `false` if refused.
///
/// When called on the thread that is dispatching this very process (a
/// handler completing at once), the event goes straight into the
/// dispatching worker's batch (`deliver_inline`).
#[inline]
fn deliver<P: Process + 'static>(
    slot: &SlotArc<Slot<P>>,
    tag: Tag,
    result: Result<P::Response, Error>,
    wake: fn(&SlotArc<Slot<P>>) -> bool,
) -> bool {
    let marker = DISPATCHING.with(Cell::get);
    if marker.slot == SlotArc::as_ptr(slot) as usize {
        deliver_inline(slot, marker, tag, result)
    } else {
        deliver_queued(slot, tag, result, wake)
    }
}

/// Pushes the completion into the dispatching worker's batch: the calling
/// thread owns the process, which is Running, so no queue, no wake and no
/// run queue are needed — the dispatcher steps the process again with it
/// (or, if it does not, moves it to the slot's `inline` completions before
/// it lets the process go). `marker` names `slot`.
#[inline]
fn deliver_inline<P: Process + 'static>(
    slot: &Slot<P>,
    marker: Marker,
    tag: Tag,
    result: Result<P::Response, Error>,
) -> bool {
    let batch = marker.batch as *mut Vec<Ev<P>>;
    // SAFETY: the marker names this slot on this thread only between
    // `Dispatching::enter` and its end in `Core::dispatch`, which runs on
    // the worker that owns the process, with that worker's batch for this
    // slot's `P`; nothing else borrows the batch during the dispatch.
    unsafe { (*batch).push(Event::completion(tag, result)) };
    // A terminate during the dispatch means the event is never stepped.
    !slot.state_is_complete()
}

/// Pushes the completion to the process's event queue and wakes it.
fn deliver_queued<P: Process + 'static>(
    slot: &SlotArc<Slot<P>>,
    tag: Tag,
    result: Result<P::Response, Error>,
    wake: fn(&SlotArc<Slot<P>>) -> bool,
) -> bool {
    let Some(sender) = slot.sender() else {
        return false;
    };
    // Without the pre-check, as `Slot::deliver` pushes: the seal refuses
    // what comes after the completion.
    if sender
        .push_with_claim_only(|| Event::completion(tag, result))
        .is_err()
    {
        return false;
    }
    // A process that completed after the push will never step the event
    // (it is dropped with the rest of the queue): report it refused.
    wake(slot)
}

impl<P: Process + 'static> Drop for Completer<P> {
    fn drop(&mut self) {
        // Only a completer never used is dropped: `complete` consumes it
        // without running this.
        let error = if std::thread::panicking() {
            Error::Panicked("the handler panicked before completing".into())
        } else {
            Error::failed("the handler dropped its completer without completing")
        };
        deliver(&self.slot, self.tag, Err(error), self.wake);
    }
}

impl<P: Process + 'static> fmt::Debug for Completer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer")
            .field("pid", &self.slot.pid)
            .field("tag", &self.tag)
            .finish()
    }
}
