//! The unbounded MPMC FIFO behind the global queue and the per-worker
//! inboxes.
//!
//! Normally this is [`crossbeam_queue::SegQueue`] (lock-free, segmented; see
//! its docs for the algorithm). SegQueue is not loom-aware, so under
//! `--cfg stepsched_loom` the same type is a loom `Mutex<VecDeque<T>>`: loom
//! then sees every access, and the pool's protocols are checked against a
//! queue with the same contract (linearizable push, pop and emptiness test).

#[cfg(not(stepsched_loom))]
mod imp {
    use crossbeam_queue::SegQueue;

    /// A multi-producer, multi-consumer FIFO queue.
    pub(crate) struct Queue<T>(SegQueue<T>);

    impl<T> Queue<T> {
        pub(crate) fn new() -> Self {
            Self(SegQueue::new())
        }

        #[inline]
        pub(crate) fn push(&self, item: T) {
            self.0.push(item);
        }

        #[inline]
        pub(crate) fn pop(&self) -> Option<T> {
            self.0.pop()
        }

        /// [`pop`](Self::pop), after telling an empty queue by two loads
        /// (`SegQueue::is_empty`): `SegQueue::pop` on an empty queue
        /// issues a SeqCst fence first, and a searching worker looks at
        /// every inbox in turn, most of them empty. What the two loads can
        /// miss, a push not yet visible, the pop could miss as well; the
        /// sleep protocol's re-check after its own fence covers both.
        #[inline]
        pub(crate) fn try_pop(&self) -> Option<T> {
            if self.0.is_empty() {
                return None;
            }
            self.0.pop()
        }

        #[inline]
        pub(crate) fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }
}

#[cfg(stepsched_loom)]
mod imp {
    use std::collections::VecDeque;

    use crate::primitive::sync::Mutex;

    /// A multi-producer, multi-consumer FIFO queue (loom stand-in).
    pub(crate) struct Queue<T>(Mutex<VecDeque<T>>);

    impl<T> Queue<T> {
        pub(crate) fn new() -> Self {
            Self(Mutex::new(VecDeque::new()))
        }

        pub(crate) fn push(&self, item: T) {
            self.0.lock().unwrap().push_back(item);
        }

        pub(crate) fn pop(&self) -> Option<T> {
            self.0.lock().unwrap().pop_front()
        }

        pub(crate) fn try_pop(&self) -> Option<T> {
            self.pop()
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.0.lock().unwrap().is_empty()
        }
    }
}

pub(crate) use imp::Queue;

impl<T> std::fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Queue { .. }")
    }
}
