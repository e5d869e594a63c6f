//! [`RoutingTable`]: the concurrent map from [`Pid`] to a route target, and
//! [`Router`], the table of boxed receivers.
//!
//! The keys are split over 64 shards, each an open-addressed map (see
//! `shard.rs`: Robin Hood linear probing, removal by backward shift, no
//! tombstones)
//! behind its own reader-writer lock on a cache line of its own. A lookup
//! read-locks one shard; register and unregister write-lock one shard.
//! Senders to different processes therefore rarely meet, unlike a single
//! `RwLock<HashMap>` whose one reader count every lookup writes to. The
//! default hasher, [`RouteBuildHasher`], lays sequential PIDs out in runs
//! per shard (64 by default, 1 for a table many threads write at once) and
//! in consecutive buckets within a shard, so a scheduler that registers and
//! removes PIDs roughly in the order it hands them out touches few cache
//! lines, finds each PID at its first probe, and its submitting thread and
//! its workers lock different shards.
//!
//! No lock is held while a target's [`Receiver::send`] runs: `send` clones
//! the target out of the shard and releases the lock first, so a target may
//! itself register, unregister or send through the same table.
//!
//! The locks are `std::sync::RwLock`s. A panic while one is held (in a
//! caller's predicate, in `with`'s closure or in a target's `clone`)
//! happens before the shard is changed, so a poisoned lock is used as it
//! is.

use core::fmt;
use core::hash::BuildHasher;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crossbeam_utils::CachePadded;

use crate::route_hash::{ROUTE_SHARDS, shard_of};
use crate::shard::Shard;
use crate::{Package, Pid, Receiver, RegisterError, RouteBuildHasher, SendError};

/// A concurrent routing table from [`Pid`] to a target `T`.
///
/// `T` is whatever the owner routes to: a scheduler stores its own process
/// slot handle (typically an `Arc`), a multi-runtime router stores
/// `Arc<dyn Receiver<M>>` (see [`Router`]). All methods take `&self`, so the
/// table is shared between threads behind an `Arc` or a reference.
///
/// When `T` is a [`Receiver`], so is the table: [`send`](Receiver::send)
/// looks up `package.to` and forwards to the target, or hands the package
/// back as [`SendError::UnknownPid`].
///
/// # Guarantees
///
/// - At most one route per PID: [`register`](Self::register) refuses a taken
///   PID and hands the target back.
/// - [`unregister_if`](Self::unregister_if) and
///   [`unregister_if_same`](Self::unregister_if_same) check and remove in one
///   step under the shard's write lock, so a finishing process never removes
///   the route of a newer process that reuses its PID.
/// - Each operation is linearizable on its PID.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use stepsched_relay::{PidAllocator, RoutingTable};
///
/// struct Slot {
///     name: &'static str,
/// }
///
/// let pids = PidAllocator::new(0);
/// let table: RoutingTable<Arc<Slot>> = RoutingTable::new();
///
/// let pid = pids.allocate();
/// let slot = Arc::new(Slot { name: "worker" });
/// table.register(pid, Arc::clone(&slot)).unwrap();
/// assert_eq!(table.get(pid).unwrap().name, "worker");
///
/// // When the process completes it removes its own route, and only that.
/// assert!(table.unregister_if_same(pid, &slot).is_some());
/// assert!(!table.contains(pid));
/// ```
pub struct RoutingTable<T, S = RouteBuildHasher> {
    /// A fixed-size array, so that indexing by 6 bits needs no bounds check.
    shards: Box<[CachePadded<RwLock<Shard<T>>>; ROUTE_SHARDS]>,
    hasher: S,
}

/// A routing table of type-erased receivers: the relay between runtimes.
///
/// Any `Arc<R>` where `R: Receiver<M> + Send + Sync` can be registered
/// (after coercion to the trait object), and the router is itself a
/// [`Receiver`].
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, mpsc};
/// use stepsched_relay::{Package, Pid, Receiver, Router};
///
/// let router: Router<String> = Router::new();
/// let (tx, rx) = mpsc::channel();
/// let pid = Pid::new(0, 1);
/// router.register(pid, Arc::new(tx)).unwrap();
///
/// router.send(Package::new(pid, "greet", "hello".to_string())).unwrap();
/// assert_eq!(rx.recv().unwrap().payload, "hello");
///
/// let err = router.send(Package::new(Pid::new(0, 2), "greet", "lost".to_string())).unwrap_err();
/// assert!(err.is_unknown_pid());
/// ```
pub type Router<M> = RoutingTable<Arc<dyn Receiver<M> + Send + Sync>>;

impl<T> RoutingTable<T> {
    /// An empty table with the default [`RouteBuildHasher`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::RoutingTable;
    ///
    /// let table: RoutingTable<u32> = RoutingTable::new();
    /// assert!(table.is_empty());
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Self::with_hasher(RouteBuildHasher::default())
    }

    /// An empty table with room for `capacity` routes before it grows.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::RoutingTable;
    ///
    /// let table: RoutingTable<u32> = RoutingTable::with_capacity(1024);
    /// assert_eq!(table.len(), 0);
    /// ```
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_capacity_and_hasher(capacity, RouteBuildHasher::default())
    }
}

impl<T, S: BuildHasher + Clone> RoutingTable<T, S> {
    /// An empty table that hashes with `hasher`, for example
    /// `std::hash::RandomState` when PIDs come from untrusted peers.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::hash::RandomState;
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// let table = RoutingTable::with_hasher(RandomState::new());
    /// table.register(Pid::new(0, 1), 'a').unwrap();
    /// assert_eq!(table.get(Pid::new(0, 1)), Some('a'));
    /// ```
    #[must_use]
    pub fn with_hasher(hasher: S) -> Self {
        Self::with_capacity_and_hasher(0, hasher)
    }

    /// An empty table with room for `capacity` routes that hashes with
    /// `hasher`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{PidBuildHasher, RoutingTable};
    ///
    /// let table: RoutingTable<u8, PidBuildHasher> =
    ///     RoutingTable::with_capacity_and_hasher(64, PidBuildHasher::default());
    /// assert!(table.is_empty());
    /// ```
    #[must_use]
    pub fn with_capacity_and_hasher(capacity: usize, hasher: S) -> Self {
        let per_shard = capacity.div_ceil(ROUTE_SHARDS);
        Self {
            shards: Box::new(std::array::from_fn(|_| {
                CachePadded::new(RwLock::new(Shard::with_capacity(per_shard)))
            })),
            hasher,
        }
    }

    /// The shard of `pid` and the hash its shard keeps (the low 32 bits).
    #[inline]
    fn locate(&self, pid: Pid) -> (&RwLock<Shard<T>>, u32) {
        let hash = self.hasher.hash_one(pid);
        (&self.shards[shard_of(hash)], hash as u32)
    }

    #[inline]
    fn read(shard: &RwLock<Shard<T>>) -> RwLockReadGuard<'_, Shard<T>> {
        shard.read().unwrap_or_else(PoisonError::into_inner)
    }

    #[inline]
    fn write(shard: &RwLock<Shard<T>>) -> RwLockWriteGuard<'_, Shard<T>> {
        shard.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds the route `pid → target`.
    ///
    /// # Errors
    ///
    /// [`RegisterError::AlreadyRegistered`], carrying `target` back, if `pid`
    /// already has a route; the existing route is left untouched.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// let table = RoutingTable::new();
    /// assert!(table.register(Pid::new(0, 1), "a").is_ok());
    /// let refused = table.register(Pid::new(0, 1), "b").unwrap_err();
    /// assert_eq!(refused.into_target(), "b");
    /// ```
    #[inline]
    pub fn register(&self, pid: Pid, target: T) -> Result<(), RegisterError<T>> {
        let (shard, hash) = self.locate(pid);
        Self::write(shard)
            .insert(hash, pid, target)
            .map_err(|target| RegisterError::AlreadyRegistered { pid, target })
    }

    /// Removes the route of `pid` unconditionally and returns its target.
    ///
    /// Prefer [`unregister_if_same`](Self::unregister_if_same) or
    /// [`unregister_if`](Self::unregister_if) when the caller is the
    /// process itself: if its PID was reused, this removes the newer route.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// let table = RoutingTable::new();
    /// table.register(Pid::new(0, 1), "a").unwrap();
    /// assert_eq!(table.unregister(Pid::new(0, 1)), Some("a"));
    /// assert_eq!(table.unregister(Pid::new(0, 1)), None);
    /// ```
    #[inline]
    pub fn unregister(&self, pid: Pid) -> Option<T> {
        self.unregister_if(pid, |_| true)
    }

    /// Removes the route of `pid` only if `predicate` accepts its current
    /// target; check and removal happen under one write lock, so no other
    /// thread can swap the route in between.
    ///
    /// This is compare-before-delete: a process that finishes passes a
    /// predicate recognising *its own* target (same allocation, same
    /// generation), so it cannot remove the route of a newer process that
    /// registered the same PID after it.
    ///
    /// `predicate` runs with the shard write-locked: keep it short and do
    /// not touch this table from it (that would deadlock).
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// // Targets carry a generation; each life of a PID has its own.
    /// let table = RoutingTable::new();
    /// let pid = Pid::new(0, 1);
    /// table.register(pid, 2_u64).unwrap();
    ///
    /// // The process of generation 1 finishes late: the route stays.
    /// assert_eq!(table.unregister_if(pid, |&generation| generation == 1), None);
    /// assert_eq!(table.get(pid), Some(2));
    /// // Generation 2 removes its own route.
    /// assert_eq!(table.unregister_if(pid, |&generation| generation == 2), Some(2));
    /// ```
    #[inline]
    pub fn unregister_if(&self, pid: Pid, predicate: impl FnOnce(&T) -> bool) -> Option<T> {
        let (shard, hash) = self.locate(pid);
        Self::write(shard).remove_if(hash, pid, predicate)
    }

    /// A clone of the target of `pid`, if it has a route.
    ///
    /// The shard lock is released before this returns; for `T = Arc<_>` the
    /// clone is one reference-count increment.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// let table = RoutingTable::new();
    /// table.register(Pid::new(0, 1), String::from("a")).unwrap();
    /// assert_eq!(table.get(Pid::new(0, 1)).as_deref(), Some("a"));
    /// assert_eq!(table.get(Pid::new(0, 2)), None);
    /// ```
    #[must_use]
    #[inline]
    pub fn get(&self, pid: Pid) -> Option<T>
    where
        T: Clone,
    {
        self.with(pid, T::clone)
    }

    /// Runs `f` on the target of `pid` without cloning it, and returns its
    /// result; `None` if `pid` has no route.
    ///
    /// `f` runs with the shard read-locked: keep it short and do not touch
    /// this table from it (a register or unregister on the same shard would
    /// deadlock). [`get`](Self::get) has no such restriction.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// let table = RoutingTable::new();
    /// table.register(Pid::new(0, 1), vec![1, 2, 3]).unwrap();
    /// assert_eq!(table.with(Pid::new(0, 1), |v| v.len()), Some(3));
    /// assert_eq!(table.with(Pid::new(0, 2), |v| v.len()), None);
    /// ```
    #[inline]
    pub fn with<R>(&self, pid: Pid, f: impl FnOnce(&T) -> R) -> Option<R> {
        let (shard, hash) = self.locate(pid);
        Self::read(shard).get(hash, pid).map(f)
    }

    /// Whether `pid` has a route.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// let table = RoutingTable::new();
    /// table.register(Pid::new(0, 1), ()).unwrap();
    /// assert!(table.contains(Pid::new(0, 1)));
    /// assert!(!table.contains(Pid::new(0, 2)));
    /// ```
    #[must_use]
    #[inline]
    pub fn contains(&self, pid: Pid) -> bool {
        self.with(pid, |_| ()).is_some()
    }

    /// The number of routes.
    ///
    /// Under concurrent changes this is a snapshot that may already be stale:
    /// it sums the shards one after another.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// let table = RoutingTable::new();
    /// table.register(Pid::new(0, 1), ()).unwrap();
    /// table.register(Pid::new(0, 2), ()).unwrap();
    /// assert_eq!(table.len(), 2);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| Self::read(shard).len())
            .sum()
    }

    /// Whether the table has no routes (a snapshot, like [`len`](Self::len)).
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::RoutingTable;
    ///
    /// assert!(RoutingTable::<()>::new().is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|shard| Self::read(shard).len() == 0)
    }

    /// The PIDs that have a route, in no particular order.
    ///
    /// Shards are read one after another, so under concurrent changes the
    /// list mixes moments: a PID registered or removed meanwhile may or may
    /// not appear.
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// let table = RoutingTable::new();
    /// table.register(Pid::new(0, 2), ()).unwrap();
    /// table.register(Pid::new(0, 1), ()).unwrap();
    /// let mut pids = table.pids();
    /// pids.sort();
    /// assert_eq!(pids, [Pid::new(0, 1), Pid::new(0, 2)]);
    /// ```
    #[must_use]
    pub fn pids(&self) -> Vec<Pid> {
        self.collect(|pid, _| pid)
    }

    /// Every route as `(pid, target clone)`, in no particular order; for
    /// example to send a cancel message to every live process at shutdown.
    /// Same consistency as [`pids`](Self::pids).
    ///
    /// # Examples
    ///
    /// ```
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// let table = RoutingTable::new();
    /// table.register(Pid::new(0, 1), 'a').unwrap();
    /// assert_eq!(table.snapshot(), [(Pid::new(0, 1), 'a')]);
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> Vec<(Pid, T)>
    where
        T: Clone,
    {
        self.collect(|pid, target| (pid, target.clone()))
    }

    /// `f` of every route, one shard read-locked at a time.
    fn collect<R>(&self, f: impl Fn(Pid, &T) -> R) -> Vec<R> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let shard = Self::read(shard);
            all.reserve(shard.len());
            all.extend(shard.iter().map(|(pid, target)| f(pid, target)));
        }
        all
    }
}

impl<R: ?Sized, S: BuildHasher + Clone> RoutingTable<Arc<R>, S> {
    /// Removes the route of `pid` only if it points to the same allocation
    /// as `target` ([`Arc::ptr_eq`]); the check and the removal are atomic.
    ///
    /// This is how a finishing process removes its own route: if the PID was
    /// meanwhile reused by a newer process, the newer route stays.
    ///
    /// Pointer identity, not `==`: two distinct slots with equal contents
    /// are different routes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stepsched_relay::{Pid, RoutingTable};
    ///
    /// let table = RoutingTable::new();
    /// let pid = Pid::new(0, 1);
    /// let old = Arc::new("slot");
    /// table.register(pid, Arc::clone(&old)).unwrap();
    /// table.unregister(pid);
    ///
    /// let new = Arc::new("slot"); // equal contents, another process
    /// table.register(pid, Arc::clone(&new)).unwrap();
    /// assert!(table.unregister_if_same(pid, &old).is_none());
    /// assert!(Arc::ptr_eq(&table.get(pid).unwrap(), &new));
    /// ```
    pub fn unregister_if_same(&self, pid: Pid, target: &Arc<R>) -> Option<Arc<R>> {
        self.unregister_if(pid, |current| Arc::ptr_eq(current, target))
    }
}

impl<T, S: Default + BuildHasher + Clone> Default for RoutingTable<T, S> {
    /// An empty table.
    fn default() -> Self {
        Self::with_hasher(S::default())
    }
}

impl<T, S: BuildHasher + Clone> fmt::Debug for RoutingTable<T, S> {
    /// Prints the number of routes, not the routes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoutingTable")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// A table of receivers is a receiver: it forwards each package to the
/// target registered for `package.to`.
impl<M, T, S> Receiver<M> for RoutingTable<T, S>
where
    T: Receiver<M> + Clone,
    S: BuildHasher + Clone,
{
    /// Looks up `package.to`, releases the shard lock, then forwards.
    ///
    /// A target removed between the lookup and the forward still receives
    /// the package; it is the target's to accept or refuse as
    /// [`SendError::Closed`], which is why a process should close its inbox
    /// before it unregisters.
    ///
    /// # Errors
    ///
    /// [`SendError::UnknownPid`] if `package.to` has no route; otherwise
    /// whatever the target returns.
    #[inline]
    fn send(&self, package: Package<M>) -> Result<(), SendError<M>> {
        match self.get(package.to) {
            Some(target) => target.send(package),
            None => Err(SendError::UnknownPid(package)),
        }
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;
    use std::hash::RandomState;
    use std::sync::Mutex;
    use std::sync::mpsc;

    fn pid(n: u64) -> Pid {
        Pid::new(0, n)
    }

    #[test]
    fn register_get_contains_len() {
        let table = RoutingTable::new();
        assert!(table.is_empty());
        for n in 0..100 {
            table.register(pid(n), n * 10).unwrap();
        }
        assert_eq!(table.len(), 100);
        assert!(!table.is_empty());
        for n in 0..100 {
            assert_eq!(table.get(pid(n)), Some(n * 10));
            assert!(table.contains(pid(n)));
        }
        assert_eq!(table.get(pid(100)), None);
        assert!(!table.contains(pid(100)));
        assert!(!table.contains(Pid::new(1, 0)), "node is part of the key");
    }

    #[test]
    fn duplicate_register_is_refused_and_keeps_the_old_route() {
        let table = RoutingTable::new();
        table.register(pid(1), "old").unwrap();
        let err = table.register(pid(1), "new").unwrap_err();
        assert_eq!(err.pid(), pid(1));
        assert_eq!(err.into_target(), "new");
        assert_eq!(table.get(pid(1)), Some("old"));
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn unregister_returns_the_target_once() {
        let table = RoutingTable::new();
        table.register(pid(1), 'a').unwrap();
        table.register(pid(2), 'b').unwrap();
        assert_eq!(table.unregister(pid(1)), Some('a'));
        assert_eq!(table.unregister(pid(1)), None);
        assert_eq!(table.get(pid(2)), Some('b'));
        assert_eq!(table.len(), 1);
        // The PID can be registered again once free.
        table.register(pid(1), 'c').unwrap();
        assert_eq!(table.get(pid(1)), Some('c'));
    }

    #[test]
    fn unregister_if_checks_the_current_target() {
        let table = RoutingTable::new();
        table.register(pid(1), 7).unwrap();
        let mut seen = None;
        assert_eq!(
            table.unregister_if(pid(1), |&t| {
                seen = Some(t);
                false
            }),
            None
        );
        assert_eq!(seen, Some(7));
        assert_eq!(table.get(pid(1)), Some(7));
        assert_eq!(table.unregister_if(pid(1), |&t| t == 7), Some(7));
        assert!(table.is_empty());
        let mut called = false;
        assert_eq!(
            table.unregister_if(pid(1), |_| {
                called = true;
                true
            }),
            None
        );
        assert!(!called, "no route, no predicate call");
    }

    /// Pitfall 6 of the reference: completing an old process with a
    /// duplicate PID deleted the new one's route.
    #[test]
    fn old_process_does_not_remove_the_new_route() {
        let table: RoutingTable<Arc<&str>> = RoutingTable::new();
        let old = Arc::new("slot");
        table.register(pid(1), Arc::clone(&old)).unwrap();
        // The old process is forced out and its PID reused.
        assert!(table.unregister(pid(1)).is_some());
        let new = Arc::new("slot");
        table.register(pid(1), Arc::clone(&new)).unwrap();

        // The old process completes late.
        assert!(table.unregister_if_same(pid(1), &old).is_none());
        assert!(Arc::ptr_eq(&table.get(pid(1)).unwrap(), &new));

        // The new one completes.
        let removed = table.unregister_if_same(pid(1), &new).unwrap();
        assert!(Arc::ptr_eq(&removed, &new));
        assert!(table.is_empty());
    }

    #[test]
    fn with_borrows_without_cloning() {
        struct NotClone(u32);
        let table = RoutingTable::new();
        table.register(pid(1), NotClone(5)).unwrap();
        assert_eq!(table.with(pid(1), |t| t.0), Some(5));
        assert_eq!(table.with(pid(2), |t| t.0), None);
    }

    #[test]
    fn pids_and_snapshot_list_every_route_once() {
        let table = RoutingTable::with_capacity(8);
        for n in [5, 1, 3] {
            table.register(pid(n), n).unwrap();
        }
        let mut pids = table.pids();
        pids.sort();
        assert_eq!(pids, [pid(1), pid(3), pid(5)]);
        let mut snap = table.snapshot();
        snap.sort();
        assert_eq!(snap, [(pid(1), 1), (pid(3), 3), (pid(5), 5)]);
    }

    #[test]
    fn other_hashers_work() {
        let table = RoutingTable::with_capacity_and_hasher(4, RandomState::new());
        table.register(pid(1), 1).unwrap();
        assert_eq!(table.get(pid(1)), Some(1));
        let table: RoutingTable<u8, RandomState> = RoutingTable::default();
        assert!(table.is_empty());
    }

    #[test]
    fn debug_prints_len_only() {
        let table = RoutingTable::new();
        table.register(pid(1), "secret").unwrap();
        assert_eq!(format!("{table:?}"), "RoutingTable { len: 1, .. }");
    }

    /// Records what it gets, refuses once closed.
    #[derive(Default)]
    struct Inbox {
        closed: bool,
        got: Mutex<Vec<u32>>,
    }

    impl Receiver<u32> for Inbox {
        fn send(&self, package: Package<u32>) -> Result<(), SendError<u32>> {
            if self.closed {
                return Err(SendError::Closed(package));
            }
            self.got.lock().unwrap().push(package.payload);
            Ok(())
        }
    }

    #[test]
    fn table_forwards_to_the_addressed_target() {
        let a = Arc::new(Inbox::default());
        let b = Arc::new(Inbox::default());
        let table = RoutingTable::new();
        table.register(pid(1), Arc::clone(&a)).unwrap();
        table.register(pid(2), Arc::clone(&b)).unwrap();
        table.send(Package::new(pid(1), "t", 10)).unwrap();
        table.send(Package::new(pid(2), "t", 20)).unwrap();
        table.send(Package::new(pid(1), "t", 11)).unwrap();
        assert_eq!(*a.got.lock().unwrap(), [10, 11]);
        assert_eq!(*b.got.lock().unwrap(), [20]);
    }

    #[test]
    fn table_separates_unknown_from_closed() {
        let table = RoutingTable::new();
        table
            .register(
                pid(1),
                Arc::new(Inbox {
                    closed: true,
                    ..Inbox::default()
                }),
            )
            .unwrap();
        let closed = table.send(Package::new(pid(1), "t", 1)).unwrap_err();
        assert!(closed.is_closed());
        assert_eq!(closed.into_package().payload, 1);
        let unknown = table.send(Package::new(pid(2), "t", 2)).unwrap_err();
        assert!(unknown.is_unknown_pid());
        assert_eq!(unknown.into_package().payload, 2);
    }

    #[test]
    fn router_holds_mixed_receivers_and_nests() {
        let inner: Router<u32> = Router::new();
        let inbox = Arc::new(Inbox::default());
        inner.register(pid(1), inbox.clone()).unwrap();

        let (tx, rx) = mpsc::channel();
        let outer: Router<u32> = Router::default();
        outer.register(pid(1), Arc::new(inner)).unwrap();
        outer.register(pid(2), Arc::new(tx)).unwrap();

        outer.send(Package::new(pid(1), "t", 1)).unwrap();
        outer.send(Package::new(pid(2), "t", 2)).unwrap();
        assert_eq!(*inbox.got.lock().unwrap(), [1]);
        assert_eq!(rx.try_recv().unwrap().payload, 2);
        assert!(
            outer
                .send(Package::new(pid(3), "t", 3))
                .unwrap_err()
                .is_unknown_pid()
        );
    }

    /// A target may use the table it is registered in from `send`: no lock
    /// is held while it runs (this would deadlock otherwise).
    #[test]
    fn target_may_unregister_itself_from_send() {
        struct SelfRemoving(Arc<RoutingTable<Arc<SelfRemoving>>>);
        impl Receiver<()> for SelfRemoving {
            fn send(&self, package: Package<()>) -> Result<(), SendError<()>> {
                self.0.unregister(package.to);
                Ok(())
            }
        }
        let table = Arc::new(RoutingTable::new());
        table
            .register(pid(1), Arc::new(SelfRemoving(Arc::clone(&table))))
            .unwrap();
        table.send(Package::new(pid(1), "t", ())).unwrap();
        assert!(table.is_empty());
        // Break the cycle: nothing is left in the table holding `table`.
    }

    #[test]
    fn table_is_send_and_sync() {
        fn assert_send_sync<X: Send + Sync>() {}
        assert_send_sync::<Router<u32>>();
        assert_send_sync::<RoutingTable<Arc<Inbox>>>();
    }
}
