//! [`Package`]: one message on its way to a process.

use std::borrow::Cow;

use crate::Pid;

/// A message addressed to a process: sender, recipient, topic and payload.
///
/// The topic says what kind of message this is (`"call"`, `"cancel"`,
/// `"tick"`, ...). It is a `Cow<'static, str>`: a string literal costs
/// nothing, and a topic built at run time (say, read off a network frame) is
/// an owned `String`.
///
/// The fields are public; [`Package::new`] and
/// [`with_sender`](Package::with_sender) are shorthands.
///
/// # Examples
///
/// ```
/// use stepsched_process::{Package, Pid};
///
/// let to = Pid::new(0, 2);
/// let package = Package::new(to, "greet", "hello").with_sender(Pid::new(0, 1));
/// assert_eq!(package.from, Some(Pid::new(0, 1)));
/// assert_eq!(package.to, to);
/// assert_eq!(package.topic, "greet");
/// assert_eq!(package.into_payload(), "hello");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Package<M> {
    /// The sending process, or `None` when the message comes from outside
    /// any process (a host, a timer, a test).
    pub from: Option<Pid>,
    /// The process the message is for.
    pub to: Pid,
    /// What kind of message this is.
    pub topic: Cow<'static, str>,
    /// The message itself.
    pub payload: M,
}

impl<M> Package<M> {
    /// A package for `to` with no sender.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_process::{Package, Pid};
    ///
    /// let package = Package::new(Pid::new(0, 9), String::from("dynamic"), 7_u32);
    /// assert_eq!(package.from, None);
    /// assert_eq!(package.topic, "dynamic");
    /// assert_eq!(package.payload, 7);
    /// ```
    #[inline]
    #[must_use]
    pub fn new(to: Pid, topic: impl Into<Cow<'static, str>>, payload: M) -> Self {
        Self {
            from: None,
            to,
            topic: topic.into(),
            payload,
        }
    }

    /// Sets the sending process.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_process::{Package, Pid};
    ///
    /// let package = Package::new(Pid::new(0, 2), "ping", ()).with_sender(Pid::new(0, 1));
    /// assert_eq!(package.from, Some(Pid::new(0, 1)));
    /// ```
    #[inline]
    #[must_use]
    pub fn with_sender(mut self, from: Pid) -> Self {
        self.from = Some(from);
        self
    }

    /// Takes the payload out, dropping the envelope.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_process::{Package, Pid};
    ///
    /// assert_eq!(Package::new(Pid::new(0, 1), "n", 5).into_payload(), 5);
    /// ```
    #[inline]
    #[must_use]
    pub fn into_payload(self) -> M {
        self.payload
    }

    /// Keeps the envelope and transforms the payload, for example to wrap it
    /// in a receiver's own event type.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_process::{Package, Pid};
    ///
    /// let package = Package::new(Pid::new(0, 1), "n", 5).map(|n| n * 2);
    /// assert_eq!(package.payload, 10);
    /// assert_eq!(package.topic, "n");
    /// ```
    #[inline]
    #[must_use]
    pub fn map<N>(self, f: impl FnOnce(M) -> N) -> Package<N> {
        Package {
            from: self.from,
            to: self.to,
            topic: self.topic,
            payload: f(self.payload),
        }
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    #[test]
    fn new_sets_every_field() {
        let p = Package::new(Pid::new(1, 2), "t", vec![1, 2]);
        assert_eq!(
            p,
            Package {
                from: None,
                to: Pid::new(1, 2),
                topic: Cow::Borrowed("t"),
                payload: vec![1, 2],
            }
        );
    }

    #[test]
    fn static_topic_is_borrowed_and_dynamic_is_owned() {
        assert!(matches!(
            Package::new(Pid::new(0, 1), "t", ()).topic,
            Cow::Borrowed("t")
        ));
        let owned = Package::new(Pid::new(0, 1), format!("t{}", 1), ()).topic;
        assert!(matches!(owned, Cow::Owned(ref s) if s == "t1"));
    }

    #[test]
    fn with_sender_map_and_into_payload() {
        let p = Package::new(Pid::new(0, 2), "t", 3_u8)
            .with_sender(Pid::new(0, 1))
            .map(u32::from);
        assert_eq!(p.from, Some(Pid::new(0, 1)));
        assert_eq!(p.to, Pid::new(0, 2));
        assert_eq!(p.topic, "t");
        assert_eq!(p.into_payload(), 3_u32);
    }
}
