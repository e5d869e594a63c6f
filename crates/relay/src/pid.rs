//! [`PidAllocator`]: unique [`Pid`]s for one node. (`Pid` itself is
//! defined by `stepsched-process`, the contract every layer shares, and
//! re-exported here.)

use core::num::NonZeroU64;

use crate::Pid;
use crate::primitive::sync::atomic::{AtomicU64, Ordering};

/// Hands out unique [`Pid`]s for one node from an atomic counter.
///
/// [`allocate`](Self::allocate) is a single lock-free read-modify-write, so
/// every worker can call it on a shared allocator. Numbers start at 1 (or at
/// the value given to [`starting_at`](Self::starting_at)) and are never
/// handed out twice; `<node.0>` is left free for a well-known process of the
/// caller's choice.
///
/// # Examples
///
/// ```
/// use stepsched_relay::{Pid, PidAllocator};
///
/// let pids = PidAllocator::new(7);
/// assert_eq!(pids.allocate(), Pid::new(7, 1));
/// assert_eq!(pids.allocate(), Pid::new(7, 2));
/// ```
#[derive(Debug)]
pub struct PidAllocator {
    node: u32,
    /// The first number handed out.
    first: u64,
    /// The next number to hand out; `u64::MAX` once the space is used up
    /// (`u64::MAX` itself is never handed out, see `try_allocate`).
    next: AtomicU64,
}

impl PidAllocator {
    /// An allocator for `node` whose first id is `<node.1>`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::PidAllocator;
    ///
    /// assert_eq!(PidAllocator::new(0).allocate().to_string(), "<0.1>");
    /// ```
    #[must_use]
    pub fn new(node: u32) -> Self {
        Self::starting_at(node, NonZeroU64::MIN)
    }

    /// An allocator for `node` whose first id is `<node.first>`, for example
    /// to resume above the ids a previous run of the node handed out.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use stepsched_relay::{Pid, PidAllocator};
    ///
    /// let pids = PidAllocator::starting_at(1, NonZeroU64::new(1000).unwrap());
    /// assert_eq!(pids.allocate(), Pid::new(1, 1000));
    /// ```
    #[must_use]
    pub fn starting_at(node: u32, first: NonZeroU64) -> Self {
        Self {
            node,
            first: first.get(),
            next: AtomicU64::new(first.get()),
        }
    }

    /// The node whose ids this allocator hands out.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::PidAllocator;
    ///
    /// assert_eq!(PidAllocator::new(5).node(), 5);
    /// ```
    #[must_use]
    pub fn node(&self) -> u32 {
        self.node
    }

    /// Hands out a fresh id.
    ///
    /// # Panics
    ///
    /// When all `u64::MAX - 1` numbers have been handed out (about 580 years
    /// at a billion ids a second). Use [`try_allocate`](Self::try_allocate)
    /// to handle that case.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::PidAllocator;
    ///
    /// let pids = PidAllocator::new(0);
    /// assert_ne!(pids.allocate(), pids.allocate());
    /// ```
    #[must_use]
    pub fn allocate(&self) -> Pid {
        self.try_allocate().unwrap_or_else(|| exhausted(self.node))
    }

    /// Hands out a fresh id, or `None` once the node's numbers are used up.
    ///
    /// Exhaustion is sticky: the counter stops at `u64::MAX` instead of
    /// wrapping, so no id is ever handed out twice.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use stepsched_relay::{Pid, PidAllocator};
    ///
    /// let pids = PidAllocator::starting_at(0, NonZeroU64::new(u64::MAX - 1).unwrap());
    /// assert_eq!(pids.try_allocate(), Some(Pid::new(0, u64::MAX - 1)));
    /// assert_eq!(pids.try_allocate(), None);
    /// assert_eq!(pids.try_allocate(), None);
    /// ```
    #[must_use]
    pub fn try_allocate(&self) -> Option<Pid> {
        self.next
            // Relaxed: uniqueness needs only the atomicity of the RMW (all
            // RMWs on one location are totally ordered); the counter
            // publishes no other memory, so nothing needs happens-before.
            // `u64::MAX` is never handed out: it marks exhaustion.
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
            .ok()
            .map(|number| Pid::new(self.node, number))
    }

    /// Whether this allocator has handed out `pid`: on its node, from its
    /// first number up to the last one handed out.
    ///
    /// Answers `true` for every PID that a thread got from
    /// [`allocate`](Self::allocate) or [`try_allocate`](Self::try_allocate)
    /// before the call (in happens-before order, as when the PID was passed
    /// along); a PID allocated concurrently may be seen either way. One
    /// load: what a scheduler asks on a send to a PID it no longer routes,
    /// to tell "finished" from "never existed".
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use stepsched_relay::{Pid, PidAllocator};
    ///
    /// let pids = PidAllocator::starting_at(4, NonZeroU64::new(10).unwrap());
    /// let pid = pids.allocate();
    /// assert!(pids.handed_out(pid));
    /// assert!(!pids.handed_out(Pid::new(4, 11))); // not yet
    /// assert!(!pids.handed_out(Pid::new(4, 9))); // below the first
    /// assert!(!pids.handed_out(Pid::new(5, 10))); // another node
    /// ```
    #[must_use]
    pub fn handed_out(&self, pid: Pid) -> bool {
        // Relaxed: a PID handed out before this call (happens-before) was
        // allocated by an RMW that stored a larger `next`, which this load
        // sees or passes (read coherence); nothing else is read.
        pid.node() == self.node
            && pid.number() >= self.first
            && pid.number() < self.next.load(Ordering::Relaxed)
    }
}

#[cold]
#[inline(never)]
fn exhausted(node: u32) -> ! {
    panic!("stepsched-relay: pid numbers of node {node} are exhausted")
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    #[test]
    fn allocator_counts_up_from_one() {
        let pids = PidAllocator::new(9);
        assert_eq!(pids.node(), 9);
        let got: Vec<Pid> = (0..3).map(|_| pids.allocate()).collect();
        assert_eq!(got, [Pid::new(9, 1), Pid::new(9, 2), Pid::new(9, 3)]);
    }

    #[test]
    fn handed_out_is_the_range_from_first_to_the_last_allocated() {
        let pids = PidAllocator::starting_at(2, NonZeroU64::new(5).unwrap());
        assert!(!pids.handed_out(Pid::new(2, 5)), "nothing allocated yet");
        let a = pids.allocate();
        let b = pids.allocate();
        assert!(pids.handed_out(a) && pids.handed_out(b));
        assert!(!pids.handed_out(Pid::new(2, 4)), "below the first number");
        assert!(!pids.handed_out(Pid::new(2, 7)), "not allocated yet");
        assert!(!pids.handed_out(Pid::new(3, 5)), "another node");
    }

    #[test]
    fn handed_out_after_exhaustion_covers_the_last_number_only() {
        let pids = PidAllocator::starting_at(0, NonZeroU64::new(u64::MAX - 1).unwrap());
        let last = pids.allocate();
        assert_eq!(pids.try_allocate(), None);
        assert!(pids.handed_out(last));
        assert!(!pids.handed_out(Pid::new(0, u64::MAX)), "never handed out");
    }

    #[test]
    fn allocator_exhaustion_is_sticky() {
        let pids = PidAllocator::starting_at(0, NonZeroU64::new(u64::MAX - 2).unwrap());
        assert_eq!(pids.try_allocate(), Some(Pid::new(0, u64::MAX - 2)));
        assert_eq!(pids.try_allocate(), Some(Pid::new(0, u64::MAX - 1)));
        for _ in 0..3 {
            assert_eq!(pids.try_allocate(), None);
        }
    }

    #[test]
    #[should_panic(expected = "pid numbers of node 3 are exhausted")]
    fn allocate_panics_when_exhausted() {
        let pids = PidAllocator::starting_at(3, NonZeroU64::new(u64::MAX).unwrap());
        let _ = pids.allocate();
    }
}
