//! Errors of the queue: every refusal hands the value back.

use core::fmt;

/// Why a push was refused. Either way the value comes back to the caller:
/// nothing is dropped silently.
///
/// ```
/// use stepsched_mpsc::{channel, PushError};
///
/// let (tx, mut rx) = channel::<u32>();
/// rx.close();
/// match tx.push(7) {
///     Err(PushError::Closed(v)) => assert_eq!(v, 7),
///     other => panic!("unexpected {other:?}"),
/// }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum PushError<T> {
    /// The queue of the sender's generation is closed.
    Closed(T),
    /// The queue has been reset since the sender was made: the sender
    /// belongs to a generation that has ended.
    StaleGeneration(T),
}

impl<T> PushError<T> {
    /// The value that was not pushed.
    pub fn into_inner(self) -> T {
        match self {
            PushError::Closed(v) | PushError::StaleGeneration(v) => v,
        }
    }

    /// Whether the push was refused because the queue is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, PushError::Closed(_))
    }

    /// Whether the push was refused because the sender's generation ended.
    pub fn is_stale(&self) -> bool {
        matches!(self, PushError::StaleGeneration(_))
    }
}

// Like std's `SendError`, `Debug` does not require `T: Debug`.
impl<T> fmt::Debug for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Closed(_) => f.write_str("Closed(..)"),
            PushError::StaleGeneration(_) => f.write_str("StaleGeneration(..)"),
        }
    }
}

impl<T> fmt::Display for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Closed(_) => f.write_str("push on a closed event queue"),
            PushError::StaleGeneration(_) => {
                f.write_str("push with a stale generation: the event queue has been reset")
            }
        }
    }
}

impl<T> std::error::Error for PushError<T> {}
