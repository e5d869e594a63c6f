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
