//! [`Event`]: what a step receives — yield completions, messages and the
//! cancel signal.

use crate::Error;

/// The correlation tag a process gives each of its yields; the completion of
/// that yield carries the same tag back.
pub type Tag = u64;

/// The events handed to one [`Process::step`](crate::Process::step), in the
/// order they were queued.
///
/// It is a draining iterator over the scheduler's reusable event buffer: the
/// process takes each event by value, events it does not consume are dropped
/// when the step returns, and the buffer keeps its capacity for the next step.
/// [`as_slice`](std::vec::Drain::as_slice) and
/// [`len`](ExactSizeIterator::len) look at what is left.
pub type Events<'a, T> = std::vec::Drain<'a, Event<T>>;

/// What kind of [`Event`] it is, without its contents.
///
/// ```
/// use stepsched_process::{Event, EventKind};
///
/// assert_eq!(Event::<()>::cancel().kind(), EventKind::Cancel);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The result of one of the process's yields.
    Completion,
    /// A message sent to the process.
    Message,
    /// A request to stop (for example at shutdown): the process should
    /// finish soon, typically with [`Error::Cancelled`].
    Cancel,
}

/// One event delivered to a process: a yield completion, a message, or the
/// cancel signal.
///
/// `T` is the runtime's value type (the process's
/// [`Payload`](crate::Process::Payload)); it is stored inline, not boxed.
/// Which fields an event has depends on its kind, so the kinds are variants:
/// only a completion has a [`tag`](Self::tag) and can carry an
/// [`error`](Self::error), a cancel carries nothing.
///
/// ```
/// use stepsched_process::{Error, Event, EventKind};
///
/// let ok = Event::completion(7, Ok("row"));
/// assert_eq!((ok.kind(), ok.tag(), ok.data()), (EventKind::Completion, Some(7), Some(&"row")));
///
/// let failed: Event<&str> = Event::completion(8, Err(Error::failed("no such table")));
/// assert!(failed.error().is_some() && failed.data().is_none());
///
/// let msg = Event::message("ping");
/// assert_eq!((msg.kind(), msg.tag()), (EventKind::Message, None));
/// assert_eq!(msg.into_data(), Some("ping"));
/// ```
#[derive(Debug)]
pub enum Event<T> {
    /// The result of the yield that had this tag.
    Completion {
        /// The tag of the yield this completes.
        tag: Tag,
        /// The handler's result.
        result: Result<T, Error>,
    },
    /// A message sent to the process.
    Message(T),
    /// A request to stop; see [`EventKind::Cancel`].
    Cancel,
}

impl<T> Event<T> {
    /// The completion of the yield tagged `tag`, with the handler's result.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// let e = Event::completion(1, Ok(10_i64));
    /// assert!(matches!(e, Event::Completion { tag: 1, result: Ok(10) }));
    /// ```
    pub fn completion(tag: Tag, result: Result<T, Error>) -> Self {
        Self::Completion { tag, result }
    }

    /// A message carrying `data`.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert!(matches!(Event::message(3), Event::Message(3)));
    /// ```
    pub fn message(data: T) -> Self {
        Self::Message(data)
    }

    /// The cancel signal.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert!(Event::<u8>::cancel().is_cancel());
    /// ```
    pub fn cancel() -> Self {
        Self::Cancel
    }

    /// The kind of this event.
    ///
    /// ```
    /// use stepsched_process::{Event, EventKind};
    ///
    /// assert_eq!(Event::message(()).kind(), EventKind::Message);
    /// ```
    pub fn kind(&self) -> EventKind {
        match self {
            Self::Completion { .. } => EventKind::Completion,
            Self::Message(_) => EventKind::Message,
            Self::Cancel => EventKind::Cancel,
        }
    }

    /// Whether this is the cancel signal.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert!(!Event::message(1).is_cancel());
    /// ```
    pub fn is_cancel(&self) -> bool {
        matches!(self, Self::Cancel)
    }

    /// The correlation tag, for a completion.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert_eq!(Event::completion(5, Ok(())).tag(), Some(5));
    /// assert_eq!(Event::message(()).tag(), None);
    /// ```
    pub fn tag(&self) -> Option<Tag> {
        match self {
            Self::Completion { tag, .. } => Some(*tag),
            _ => None,
        }
    }

    /// The data of a message or of a successful completion.
    ///
    /// ```
    /// use stepsched_process::{Error, Event};
    ///
    /// assert_eq!(Event::message(2).data(), Some(&2));
    /// assert_eq!(Event::<i32>::completion(1, Err(Error::Cancelled)).data(), None);
    /// ```
    pub fn data(&self) -> Option<&T> {
        match self {
            Self::Completion {
                result: Ok(data), ..
            }
            | Self::Message(data) => Some(data),
            _ => None,
        }
    }

    /// The error of a failed completion.
    ///
    /// ```
    /// use stepsched_process::{Error, Event};
    ///
    /// let e = Event::<()>::completion(1, Err(Error::failed("denied")));
    /// assert_eq!(e.error().map(ToString::to_string).as_deref(), Some("process failed: denied"));
    /// ```
    pub fn error(&self) -> Option<&Error> {
        match self {
            Self::Completion {
                result: Err(error), ..
            } => Some(error),
            _ => None,
        }
    }

    /// The data of a message or of a successful completion, by value.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert_eq!(Event::message(String::from("hi")).into_data().as_deref(), Some("hi"));
    /// ```
    pub fn into_data(self) -> Option<T> {
        match self {
            Self::Completion {
                result: Ok(data), ..
            }
            | Self::Message(data) => Some(data),
            _ => None,
        }
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    #[test]
    fn accessors_agree_with_the_variant() {
        let ok = Event::completion(9, Ok(1_u32));
        assert_eq!(ok.kind(), EventKind::Completion);
        assert_eq!(ok.tag(), Some(9));
        assert_eq!(ok.data(), Some(&1));
        assert!(ok.error().is_none());
        assert!(!ok.is_cancel());

        let err = Event::<u32>::completion(4, Err(Error::Terminated));
        assert_eq!(err.tag(), Some(4));
        assert!(err.data().is_none());
        assert!(matches!(err.error(), Some(Error::Terminated)));
        assert_eq!(err.into_data(), None);

        let msg = Event::message(2_u32);
        assert_eq!(msg.kind(), EventKind::Message);
        assert_eq!(msg.tag(), None);
        assert!(msg.error().is_none());
        assert_eq!(msg.into_data(), Some(2));

        let cancel = Event::<u32>::cancel();
        assert_eq!(cancel.kind(), EventKind::Cancel);
        assert!(cancel.is_cancel());
        assert_eq!(cancel.tag(), None);
        assert!(cancel.data().is_none() && cancel.error().is_none());
    }

    #[test]
    fn events_drain_and_keep_the_buffer() {
        let mut buf = vec![Event::message(1), Event::cancel(), Event::message(3)];
        let cap = buf.capacity();
        let events: Events<'_, i32> = buf.drain(..);
        let data: Vec<_> = events.filter_map(Event::into_data).collect();
        assert_eq!(data, [1, 3]);
        assert!(buf.is_empty());
        assert_eq!(buf.capacity(), cap);
    }
}
