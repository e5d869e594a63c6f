//! [`Event`]: what a step receives — yield completions, messages and the
//! cancel signal.

use crate::{Error, Pid};

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
pub type Events<'a, M, R = M> = std::vec::Drain<'a, Event<M, R>>;

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
/// `M` is the process's [`Message`](crate::Process::Message) type and `R`
/// its [`Response`](crate::Process::Response) type (the same by default, as
/// for a host with one value type); both are stored inline, not boxed.
/// Which fields an event has depends on its kind, so the kinds are
/// variants: only a completion has a [`tag`](Self::tag) and can carry an
/// [`error`](Self::error), only a message has a [`sender`](Self::sender), a
/// cancel carries nothing.
///
/// ```
/// use stepsched_process::{Error, Event, EventKind, Pid};
///
/// let ok: Event<String, u32> = Event::completion(7, Ok(200));
/// assert_eq!((ok.kind(), ok.tag()), (EventKind::Completion, Some(7)));
/// assert_eq!(ok.response(), Some(&200));
///
/// let failed: Event<String, u32> = Event::completion(8, Err(Error::failed("no such table")));
/// assert!(failed.error().is_some() && failed.response().is_none());
///
/// let msg: Event<String, u32> = Event::message_from(Pid::new(0, 3), "ping".into());
/// assert_eq!((msg.kind(), msg.tag(), msg.sender()), (EventKind::Message, None, Some(Pid::new(0, 3))));
/// assert_eq!(msg.into_message().as_deref(), Some("ping"));
/// ```
#[derive(Debug)]
pub enum Event<M, R = M> {
    /// The result of the yield that had this tag.
    Completion {
        /// The tag of the yield this completes.
        tag: Tag,
        /// The handler's result.
        result: Result<R, Error>,
    },
    /// A message sent to the process.
    Message {
        /// The process that sent it, or `None` when it came from outside
        /// any process (a host thread, a handler, a timer).
        from: Option<Pid>,
        /// The message itself.
        data: M,
    },
    /// A request to stop; see [`EventKind::Cancel`].
    Cancel,
}

impl<M, R> Event<M, R> {
    /// The completion of the yield tagged `tag`, with the handler's result.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// let e: Event<(), i64> = Event::completion(1, Ok(10));
    /// assert!(matches!(e, Event::Completion { tag: 1, result: Ok(10) }));
    /// ```
    pub fn completion(tag: Tag, result: Result<R, Error>) -> Self {
        Self::Completion { tag, result }
    }

    /// A message carrying `data`, from no process.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert!(matches!(Event::<i32>::message(3), Event::Message { from: None, data: 3 }));
    /// ```
    pub fn message(data: M) -> Self {
        Self::Message { from: None, data }
    }

    /// A message carrying `data`, from process `from`.
    ///
    /// ```
    /// use stepsched_process::{Event, Pid};
    ///
    /// let e = Event::<i32>::message_from(Pid::new(0, 1), 3);
    /// assert_eq!(e.sender(), Some(Pid::new(0, 1)));
    /// ```
    pub fn message_from(from: Pid, data: M) -> Self {
        Self::Message {
            from: Some(from),
            data,
        }
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
    /// assert_eq!(Event::<()>::message(()).kind(), EventKind::Message);
    /// ```
    pub fn kind(&self) -> EventKind {
        match self {
            Self::Completion { .. } => EventKind::Completion,
            Self::Message { .. } => EventKind::Message,
            Self::Cancel => EventKind::Cancel,
        }
    }

    /// Whether this is the cancel signal.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert!(!Event::<i32>::message(1).is_cancel());
    /// ```
    pub fn is_cancel(&self) -> bool {
        matches!(self, Self::Cancel)
    }

    /// The correlation tag, for a completion.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert_eq!(Event::<(), ()>::completion(5, Ok(())).tag(), Some(5));
    /// assert_eq!(Event::<(), ()>::message(()).tag(), None);
    /// ```
    pub fn tag(&self) -> Option<Tag> {
        match self {
            Self::Completion { tag, .. } => Some(*tag),
            _ => None,
        }
    }

    /// The sender of a message, when it came from a process.
    ///
    /// ```
    /// use stepsched_process::{Event, Pid};
    ///
    /// assert_eq!(Event::<u8>::message(1).sender(), None);
    /// assert_eq!(Event::<u8>::message_from(Pid::new(2, 5), 1).sender(), Some(Pid::new(2, 5)));
    /// ```
    pub fn sender(&self) -> Option<Pid> {
        match self {
            Self::Message { from, .. } => *from,
            _ => None,
        }
    }

    /// The data of a message.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert_eq!(Event::<i32>::message(2).message_data(), Some(&2));
    /// assert_eq!(Event::<i32>::completion(1, Ok(2)).message_data(), None);
    /// ```
    pub fn message_data(&self) -> Option<&M> {
        match self {
            Self::Message { data, .. } => Some(data),
            _ => None,
        }
    }

    /// The data of a successful completion.
    ///
    /// ```
    /// use stepsched_process::{Error, Event};
    ///
    /// assert_eq!(Event::<(), i32>::completion(1, Ok(4)).response(), Some(&4));
    /// assert_eq!(Event::<(), i32>::completion(1, Err(Error::Cancelled)).response(), None);
    /// ```
    pub fn response(&self) -> Option<&R> {
        match self {
            Self::Completion { result: Ok(r), .. } => Some(r),
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
            Self::Completion { result: Err(e), .. } => Some(e),
            _ => None,
        }
    }

    /// The data of a message, by value.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert_eq!(Event::<String>::message("hi".into()).into_message().as_deref(), Some("hi"));
    /// ```
    pub fn into_message(self) -> Option<M> {
        match self {
            Self::Message { data, .. } => Some(data),
            _ => None,
        }
    }

    /// The result of a completion, by value.
    ///
    /// ```
    /// use stepsched_process::Event;
    ///
    /// assert_eq!(Event::<(), u8>::completion(3, Ok(9)).into_result().unwrap(), Ok(9));
    /// assert!(Event::<(), u8>::cancel().into_result().is_none());
    /// ```
    pub fn into_result(self) -> Option<Result<R, Error>> {
        match self {
            Self::Completion { result, .. } => Some(result),
            _ => None,
        }
    }
}

/// For a host with one value type (`Message` and `Response` the same).
impl<T> Event<T, T> {
    /// The data of a message or of a successful completion.
    ///
    /// ```
    /// use stepsched_process::{Error, Event};
    ///
    /// assert_eq!(Event::message(2).data(), Some(&2));
    /// assert_eq!(Event::completion(1, Ok(3)).data(), Some(&3));
    /// assert_eq!(Event::<i32>::completion(1, Err(Error::Cancelled)).data(), None);
    /// ```
    pub fn data(&self) -> Option<&T> {
        match self {
            Self::Completion {
                result: Ok(data), ..
            }
            | Self::Message { data, .. } => Some(data),
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
            | Self::Message { data, .. } => Some(data),
            _ => None,
        }
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    #[test]
    fn accessors_agree_with_the_variant() {
        let ok = Event::<&str, u32>::completion(9, Ok(1));
        assert_eq!(ok.kind(), EventKind::Completion);
        assert_eq!(ok.tag(), Some(9));
        assert_eq!(ok.response(), Some(&1));
        assert_eq!(ok.message_data(), None);
        assert_eq!(ok.sender(), None);
        assert!(ok.error().is_none());
        assert!(!ok.is_cancel());

        let err = Event::<&str, u32>::completion(4, Err(Error::Terminated));
        assert_eq!(err.tag(), Some(4));
        assert!(err.response().is_none());
        assert!(matches!(err.error(), Some(Error::Terminated)));
        assert_eq!(err.into_result(), Some(Err(Error::Terminated)));

        let msg = Event::<&str, u32>::message_from(Pid::new(1, 2), "m");
        assert_eq!(msg.kind(), EventKind::Message);
        assert_eq!(msg.tag(), None);
        assert_eq!(msg.sender(), Some(Pid::new(1, 2)));
        assert_eq!(msg.message_data(), Some(&"m"));
        assert!(msg.response().is_none() && msg.error().is_none());
        assert_eq!(msg.into_message(), Some("m"));

        let cancel = Event::<&str, u32>::cancel();
        assert_eq!(cancel.kind(), EventKind::Cancel);
        assert!(cancel.is_cancel());
        assert_eq!(cancel.tag(), None);
        assert_eq!(cancel.sender(), None);
        assert!(cancel.response().is_none() && cancel.error().is_none());
        assert!(cancel.into_message().is_none());
    }

    #[test]
    fn events_drain_and_keep_the_buffer() {
        let mut buf = vec![Event::message(1), Event::cancel(), Event::message(3)];
        let cap = buf.capacity();
        let events: Events<'_, i32> = buf.drain(..);
        let data: Vec<_> = events.filter_map(Event::into_message).collect();
        assert_eq!(data, [1, 3]);
        assert!(buf.is_empty());
        assert_eq!(buf.capacity(), cap);
    }
}
