//! Command dispatch: the [`Command`](crate::Command) a yield carries, the [`Handler`] that
//! serves it, and the [`Completer`] through which the handler answers.

use std::cell::Cell;
use std::fmt;
use std::mem::ManuallyDrop;

use stepsched_process::{Error, Event, Pid, Process, Tag};

use crate::SchedProcess;
use crate::primitive::sync::Arc;
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
    slot: Arc<Slot<P>>,
    tag: Tag,
    /// `Slot::wake`, taken where `P: SchedProcess` is known, so that `Drop`
    /// (which cannot ask for more bounds than the type) can call it.
    wake: fn(&Arc<Slot<P>>) -> bool,
}

impl<P: SchedProcess> Completer<P> {
    pub(crate) fn new(slot: Arc<Slot<P>>, tag: Tag) -> Self {
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
        // `Arc` is read out exactly once and released when `slot` drops.
        let slot = unsafe { std::ptr::read(&this.slot) };
        deliver(&slot, this.tag, result, this.wake)
    }
}

/// The dispatch marker: the slot whose yields this thread is dispatching
/// right now (its address; 0 for none) and the batch its inline completions
/// go to (the dispatching worker's, `*mut Vec<Ev<P>>` for that slot's `P`).
type Marker = (usize, usize);

#[cfg(not(stepsched_loom))]
thread_local! {
    static DISPATCHING: Cell<Marker> = const { Cell::new((0, 0)) };
}

// loom's `thread_local!` takes no `const` initializer.
#[cfg(stepsched_loom)]
thread_local! {
    static DISPATCHING: Cell<Marker> = Cell::new((0, 0));
}

/// Marks this thread as dispatching the yields of one slot, until dropped.
pub(crate) struct Dispatching {
    previous: Marker,
}

impl Dispatching {
    /// Marks the dispatch of `slot`'s yields, whose inline completions go
    /// to `batch`, the dispatching worker's (empty: the step drained it).
    #[inline]
    pub(crate) fn enter<P: Process + 'static>(slot: &Arc<Slot<P>>, batch: *mut Vec<Ev<P>>) -> Self {
        let marker = (Arc::as_ptr(slot) as usize, batch as usize);
        let previous = DISPATCHING.with(|d| d.replace(marker));
        Dispatching { previous }
    }
}

impl Drop for Dispatching {
    #[inline]
    fn drop(&mut self) {
        DISPATCHING.with(|d| d.set(self.previous));
    }
}

/// Pushes the completion and wakes the process; `false` if refused.
///
/// When called on the thread that is dispatching this very process (a
/// handler completing at once), the event goes straight into the
/// dispatching worker's batch: that thread owns the process, which is
/// Running, so no queue, no wake and no run queue are needed — the
/// dispatcher steps the process again with it (or, if it does not, moves
/// it to the slot's `inline` completions before it lets the process go).
#[inline]
fn deliver<P: Process + 'static>(
    slot: &Arc<Slot<P>>,
    tag: Tag,
    result: Result<P::Response, Error>,
    wake: fn(&Arc<Slot<P>>) -> bool,
) -> bool {
    let (dispatching, batch) = DISPATCHING.with(|d| d.get());
    if dispatching == Arc::as_ptr(slot) as usize {
        let batch = batch as *mut Vec<Ev<P>>;
        // SAFETY: the marker names this slot on this thread only between
        // `Dispatching::enter` and its drop in `Core::dispatch`, which runs
        // on the worker that owns the process, with that worker's batch for
        // this slot's `P`; nothing else borrows the batch during the
        // dispatch.
        unsafe { (*batch).push(Event::completion(tag, result)) };
        // A terminate during the dispatch means the event is never stepped.
        return !slot.state_is_complete();
    }
    let Some(sender) = slot.sender() else {
        return false;
    };
    if sender.push(Event::completion(tag, result)).is_err() {
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
