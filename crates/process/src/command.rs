//! [`Command`]: what a yield carries, named for the handler that serves it.

/// A command a process yields: it names the handler that serves it. Every
/// host dispatches on this name: the `stepsched` scheduler, the
/// `stepsched-sim` simulator, and any other that runs [`Process`]es; each
/// re-exports this one trait, so a command type implements it once.
///
/// [`Process`]: crate::Process
///
/// ```
/// use stepsched_process::Command;
///
/// enum Io {
///     Read(String),
///     Sleep(u64),
/// }
///
/// impl Command for Io {
///     fn name(&self) -> &str {
///         match self {
///             Io::Read(_) => "read",
///             Io::Sleep(_) => "sleep",
///         }
///     }
/// }
/// assert_eq!(Io::Sleep(5).name(), "sleep");
/// assert_eq!("read".name(), "read");
/// ```
pub trait Command {
    /// The name of the handler to dispatch this command to.
    fn name(&self) -> &str;
}

impl Command for String {
    fn name(&self) -> &str {
        self
    }
}

impl Command for &'static str {
    fn name(&self) -> &str {
        self
    }
}

/// The command type of a process that never yields (an actor that only
/// sends and receives messages): it has no value, so such a process cannot
/// push a yield by mistake, and no handler is ever looked up for it.
///
/// With it, such a process declares `type Command = NoCommand;` and, by
/// convention, `type Response = Self::Message;` (no completion ever
/// arrives, and then [`Event::data`](crate::Event::data) and
/// [`Event::into_data`](crate::Event::into_data), which exist when the two
/// are the same type, read a message's payload).
///
/// ```
/// use stepsched_process::{Context, Error, Events, NoCommand, Process, Status, StepOutput};
///
/// /// Counts the messages it gets until one is zero.
/// struct Counter(u64);
///
/// impl Process for Counter {
///     type Input = ();
///     type Message = u64;
///     type Response = Self::Message;
///     type Command = NoCommand;
///     type Output = u64;
///
///     fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
///         Ok(())
///     }
///
///     fn step(
///         &mut self,
///         _: &mut Context<'_, Self>,
///         events: Events<'_, u64>,
///         out: &mut StepOutput<NoCommand, u64>,
///     ) -> Result<(), Error> {
///         for n in events.filter_map(|e| e.into_data()) {
///             if n == 0 {
///                 out.set_status(Status::Done(self.0));
///                 return Ok(());
///             }
///             self.0 += 1;
///         }
///         out.set_status(Status::Idle);
///         Ok(())
///     }
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NoCommand {}

impl Command for NoCommand {
    fn name(&self) -> &str {
        match *self {}
    }
}
