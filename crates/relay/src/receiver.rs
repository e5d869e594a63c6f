//! The [`Receiver`] trait: where packages leave the relay.

use std::sync::Arc;
use std::sync::mpsc;

use crate::{Package, SendError};

/// Something that accepts [`Package`]s: a process slot of a scheduler,
/// another runtime, a channel, or (later) a network transport.
///
/// This is the seam between the relay and whoever delivers messages. A
/// [`RoutingTable`](crate::RoutingTable) whose targets are receivers is a
/// receiver too, so tables nest (a node router holding per-runtime routers).
///
/// # Contract
///
/// - `Ok(())` means the receiver took ownership of the package.
/// - `Err(e)` means it did not: the package inside `e` is the one passed in,
///   unchanged, and the receiver kept no copy. A package is therefore either
///   accepted or handed back, never both and never neither.
/// - Use [`SendError::UnknownPid`] when the recipient does not exist and
///   [`SendError::Closed`] when it exists but no longer accepts messages.
/// - `send` must not block for long: it runs on the sender's thread, often a
///   scheduler worker.
///
/// # Examples
///
/// A receiver that keeps what it gets:
///
/// ```
/// use std::sync::Mutex;
/// use stepsched_relay::{Package, Pid, Receiver, SendError};
///
/// #[derive(Default)]
/// struct Inbox {
///     open: bool,
///     got: Mutex<Vec<u32>>,
/// }
///
/// impl Receiver<u32> for Inbox {
///     fn send(&self, package: Package<u32>) -> Result<(), SendError<u32>> {
///         if !self.open {
///             return Err(SendError::Closed(package));
///         }
///         self.got.lock().unwrap().push(package.payload);
///         Ok(())
///     }
/// }
///
/// let inbox = Inbox { open: true, ..Inbox::default() };
/// inbox.send(Package::new(Pid::new(0, 1), "n", 5)).unwrap();
/// assert_eq!(*inbox.got.lock().unwrap(), [5]);
///
/// let closed = Inbox::default();
/// let err = closed.send(Package::new(Pid::new(0, 1), "n", 6)).unwrap_err();
/// assert!(err.is_closed());
/// assert_eq!(err.into_package().payload, 6);
/// ```
pub trait Receiver<M> {
    /// Delivers `package`, or hands it back in the error.
    ///
    /// # Errors
    ///
    /// [`SendError::UnknownPid`] if the recipient does not exist,
    /// [`SendError::Closed`] if it no longer accepts messages.
    fn send(&self, package: Package<M>) -> Result<(), SendError<M>>;
}

impl<M, R: Receiver<M> + ?Sized> Receiver<M> for &R {
    #[inline]
    fn send(&self, package: Package<M>) -> Result<(), SendError<M>> {
        (**self).send(package)
    }
}

impl<M, R: Receiver<M> + ?Sized> Receiver<M> for Box<R> {
    #[inline]
    fn send(&self, package: Package<M>) -> Result<(), SendError<M>> {
        (**self).send(package)
    }
}

impl<M, R: Receiver<M> + ?Sized> Receiver<M> for Arc<R> {
    #[inline]
    fn send(&self, package: Package<M>) -> Result<(), SendError<M>> {
        (**self).send(package)
    }
}

/// A std channel is a receiver; a disconnected channel (its receiving half
/// dropped) reports [`SendError::Closed`].
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
/// use stepsched_relay::{Package, Pid, Receiver};
///
/// let (tx, rx) = mpsc::channel();
/// tx.send(Package::new(Pid::new(0, 1), "n", 1)).unwrap();
/// assert_eq!(rx.recv().unwrap().payload, 1);
///
/// drop(rx);
/// let err = Receiver::send(&tx, Package::new(Pid::new(0, 1), "n", 2)).unwrap_err();
/// assert!(err.is_closed());
/// ```
impl<M> Receiver<M> for mpsc::Sender<Package<M>> {
    #[inline]
    fn send(&self, package: Package<M>) -> Result<(), SendError<M>> {
        mpsc::Sender::send(self, package).map_err(|mpsc::SendError(p)| SendError::Closed(p))
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;
    use crate::Pid;

    struct Echo;

    impl Receiver<u8> for Echo {
        fn send(&self, package: Package<u8>) -> Result<(), SendError<u8>> {
            // Refuses odd payloads, so both outcomes pass through the wrappers.
            if package.payload.is_multiple_of(2) {
                Ok(())
            } else {
                Err(SendError::Closed(package))
            }
        }
    }

    fn check(r: &dyn Receiver<u8>) {
        assert!(r.send(Package::new(Pid::new(0, 1), "t", 2)).is_ok());
        let err = r.send(Package::new(Pid::new(0, 1), "t", 3)).unwrap_err();
        assert!(err.is_closed());
        assert_eq!(err.into_package().payload, 3);
    }

    #[test]
    fn wrappers_forward_both_outcomes() {
        check(&Echo);
        check(&&Echo);
        check(&Box::new(Echo));
        check(&Arc::new(Echo));
        let dynamic: Arc<dyn Receiver<u8> + Send + Sync> = Arc::new(Echo);
        check(&dynamic);
    }

    #[test]
    fn channel_receiver_delivers_then_reports_closed() {
        let (tx, rx) = mpsc::channel();
        Receiver::send(&tx, Package::new(Pid::new(0, 1), "t", 1_u8)).unwrap();
        assert_eq!(rx.try_recv().unwrap().payload, 1);
        drop(rx);
        let err = Receiver::send(&tx, Package::new(Pid::new(0, 1), "t", 2_u8)).unwrap_err();
        assert!(err.is_closed());
        assert_eq!(err.into_package().payload, 2);
    }
}
