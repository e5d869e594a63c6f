//! One shard of a [`RoutingTable`](crate::RoutingTable): an open-addressed
//! map from [`Pid`] to a target, with Robin Hood linear probing and
//! deletion by backward shift, which leaves no tombstones.
//!
//! # Layout
//!
//! The buckets are one array whose length is zero or a power of two. A
//! route's *home* is the low bits of its hash (`hash & mask`) and its
//! *distance* how far past its home it sits (wrapping). The routes of a run
//! of occupied buckets are kept in the order of their homes (Robin Hood
//! hashing, Celis 1986): an insert walks from its home and takes the first
//! bucket that is free or whose route is closer to its own home than the
//! insert is to its, and that route moves on the same way. So a route sits
//! at its home or after a run of routes whose homes are at or before its
//! own, and a lookup stops at a free bucket or at a route closer to its
//! home than the lookup has come.
//!
//! With [`RouteHasher`](crate::RouteHasher), the table's default, a shard's
//! PIDs take consecutive homes in the order they are handed out, so a
//! scheduler's registrations fill consecutive buckets, each at its home,
//! and lookups compare one entry.
//!
//! # Deletion
//!
//! Removing a route leaves a hole. The routes after it in its run that are
//! not at their home each move back one bucket; the first free bucket or
//! route at its home ends the walk, since by the order above no route
//! after it can have its home before it. No bucket is ever marked deleted,
//! so a table whose routes come and go, as a scheduler's do, never fills
//! with markers that lengthen probes or force a rehash; and a removal
//! among consecutive PIDs, all at their homes, moves nothing and reads one
//! bucket past its own. (A `hashbrown` map, what a `DashMap` shard is,
//! turns a removal into a tombstone whenever the 16 buckets around it are
//! full, which is always the case for the oldest of a run of consecutive
//! PIDs, and rehashes when the tombstones use up its room. Plain linear
//! probing with backward shift, without the order, must walk to the end
//! of the run: over every live consecutive PID.)
//!
//! # Growth
//!
//! At most seven eighths of the buckets are occupied (as in `hashbrown`),
//! so a probe meets a free bucket soon whatever the hasher (Robin Hood
//! keeps the walks of a full array short): when an insert would pass that,
//! the array doubles (from 16 buckets) and every route moves to its place
//! in the new one. The array also doubles when an insert walked past more
//! than 8 buckets, while it has fewer than 8 buckets per route: the live
//! PIDs of a scheduler's shard are a window of consecutive numbers with
//! gaps (processes finish out of order), and when the window is wider
//! than the array, PIDs a window's width apart share a home and their runs
//! merge; doubling makes the array as wide as the window. (The bound on
//! buckets per route keeps a hasher that sends many PIDs to one home from
//! growing the array without end.) The array never shrinks (as
//! `hashbrown`'s does not on removal).
//!
//! Each entry keeps the low 31 bits of its hash, enough to find its home
//! in an array of up to 2³¹ buckets, so neither a removal nor a growth
//! calls the hasher again; with the top bit of that word always set, an
//! entry with an 8-byte target and its bucket take 24 bytes.

use core::num::NonZeroU32;

use crate::Pid;

/// The smallest array a shard allocates.
const MIN_BUCKETS: usize = 16;

/// The most buckets one shard may have (its entries keep 32 bits of hash).
const MAX_BUCKETS: usize = 1 << 31;

/// An insert that walks past this many buckets doubles the array, if it is
/// less than [`SPARSE`] times as long as the routes are many.
const LONG_WALK: usize = 8;

/// See [`LONG_WALK`].
const SPARSE: usize = 8;

/// One route: the PID (node and number, kept apart so that the entry packs
/// into 24 bytes with an 8-byte target), the low bits of its hash and the
/// target. The hash's top bit is always set ([`stored`]), which leaves
/// `Option<Entry<T>>` the size of `Entry<T>`.
struct Entry<T> {
    number: u64,
    node: u32,
    hash: NonZeroU32,
    target: T,
}

/// The hash an entry keeps: the low 31 bits of `hash` (all a home in
/// [`MAX_BUCKETS`] buckets uses) and the top bit set.
#[inline]
fn stored(hash: u32) -> NonZeroU32 {
    NonZeroU32::new(hash | (1 << 31)).expect("the top bit is set")
}

impl<T> Entry<T> {
    #[inline]
    fn is(&self, hash: NonZeroU32, pid: Pid) -> bool {
        self.hash == hash && self.number == pid.number() && self.node == pid.node()
    }

    /// The entry's home in an array with mask `mask`.
    #[inline]
    fn home(&self, mask: usize) -> usize {
        self.hash.get() as usize & mask
    }

    #[inline]
    fn pid(&self) -> Pid {
        Pid::new(self.node, self.number)
    }
}

/// A shard's map; the table keeps each behind its own lock.
pub(crate) struct Shard<T> {
    /// Zero or a power of two buckets.
    buckets: Box<[Option<Entry<T>>]>,
    /// Occupied buckets.
    len: usize,
}

impl<T> Shard<T> {
    /// An empty shard with room for `capacity` routes before it grows.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let mut shard = Shard {
            buckets: Box::new([]),
            len: 0,
        };
        if capacity > 0 {
            shard.resize(buckets_for(capacity));
        }
        shard
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn mask(&self) -> usize {
        self.buckets.len().wrapping_sub(1)
    }

    /// The bucket that holds `pid`, if it has a route.
    #[inline]
    fn find(&self, hash: NonZeroU32, pid: Pid) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = hash.get() as usize & mask;
        let mut distance = 0;
        // Ends: at most seven eighths of the buckets are occupied.
        loop {
            match &self.buckets[i] {
                None => return None,
                Some(entry) if entry.is(hash, pid) => return Some(i),
                // Every route after this one has its home after ours.
                Some(entry) if self.distance(entry, i) < distance => return None,
                Some(_) => {
                    i = (i + 1) & mask;
                    distance += 1;
                }
            }
        }
    }

    /// How far past its home `entry` sits at bucket `i`.
    #[inline]
    fn distance(&self, entry: &Entry<T>, i: usize) -> usize {
        i.wrapping_sub(entry.home(self.mask())) & self.mask()
    }

    /// The target of `pid`.
    #[inline]
    pub(crate) fn get(&self, hash: u32, pid: Pid) -> Option<&T> {
        let i = self.find(stored(hash), pid)?;
        self.buckets[i].as_ref().map(|entry| &entry.target)
    }

    /// Adds `pid → target`, or hands `target` back if `pid` has a route.
    #[inline]
    pub(crate) fn insert(&mut self, hash: u32, pid: Pid, target: T) -> Result<(), T> {
        let hash = stored(hash);
        if self.find(hash, pid).is_some() {
            return Err(target);
        }
        if (self.len + 1) * 8 > self.buckets.len() * 7 {
            self.grow();
        }
        let walked = self.place(Entry {
            number: pid.number(),
            node: pid.node(),
            hash,
            target,
        });
        self.len += 1;
        if walked > LONG_WALK && self.buckets.len() < SPARSE * self.len {
            self.grow();
        }
        Ok(())
    }

    /// Removes the route of `pid` if `remove` accepts its target, and
    /// returns the target. `remove` runs on the current target only.
    #[inline]
    pub(crate) fn remove_if(
        &mut self,
        hash: u32,
        pid: Pid,
        remove: impl FnOnce(&T) -> bool,
    ) -> Option<T> {
        let i = self.find(stored(hash), pid)?;
        let entry = self.buckets[i]
            .as_ref()
            .expect("find returns an occupied bucket");
        if !remove(&entry.target) {
            return None;
        }
        let entry = self.buckets[i].take().expect("checked above");
        self.len -= 1;
        self.close_hole(i);
        Some(entry.target)
    }

    /// Every route, in bucket order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Pid, &T)> {
        self.buckets
            .iter()
            .filter_map(|bucket| bucket.as_ref().map(|entry| (entry.pid(), &entry.target)))
    }

    /// Puts `entry` in its place from its home, moving on the routes
    /// closer to their homes (see the module docs), and returns how many
    /// buckets it walked past. There is a free bucket: the caller made room.
    #[inline]
    fn place(&mut self, mut entry: Entry<T>) -> usize {
        let mask = self.mask();
        let mut i = entry.home(mask);
        let mut distance = 0;
        let mut walked = 0;
        loop {
            match &mut self.buckets[i] {
                None => {
                    self.buckets[i] = Some(entry);
                    return walked;
                }
                Some(resident) => {
                    let theirs = i.wrapping_sub(resident.home(mask)) & mask;
                    if theirs < distance {
                        std::mem::swap(resident, &mut entry);
                        distance = theirs;
                    }
                }
            }
            i = (i + 1) & mask;
            distance += 1;
            walked += 1;
        }
    }

    /// Moves back by one bucket each route after the hole at `hole` up to
    /// the first free bucket or route at its home (see the module docs).
    #[inline]
    fn close_hole(&mut self, mut hole: usize) {
        let mask = self.mask();
        loop {
            let next = (hole + 1) & mask;
            match &self.buckets[next] {
                Some(entry) if self.distance(entry, next) > 0 => {
                    self.buckets[hole] = self.buckets[next].take();
                    hole = next;
                }
                _ => return,
            }
        }
    }

    /// Doubles the array (or makes the first one).
    #[cold]
    fn grow(&mut self) {
        let buckets = (self.buckets.len() * 2).max(MIN_BUCKETS);
        self.resize(buckets);
    }

    /// Moves every route into a new array of `buckets` buckets.
    fn resize(&mut self, buckets: usize) {
        assert!(
            buckets <= MAX_BUCKETS,
            "a routing table shard holds at most 2^31 buckets"
        );
        let old = std::mem::replace(
            &mut self.buckets,
            std::iter::repeat_with(|| None).take(buckets).collect(),
        );
        for entry in old.into_vec().into_iter().flatten() {
            self.place(entry);
        }
    }
}

/// The buckets that hold `routes` without growing: a power of two, at
/// least [`MIN_BUCKETS`], at most seven eighths full.
fn buckets_for(routes: usize) -> usize {
    routes
        .saturating_mul(8)
        .div_ceil(7)
        .max(MIN_BUCKETS)
        .checked_next_power_of_two()
        .unwrap_or(MAX_BUCKETS)
        .min(MAX_BUCKETS)
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn pid(n: u64) -> Pid {
        Pid::new(0, n)
    }

    /// Every route is at its home or right after a route whose home is at
    /// or before its own (so the run from its home to it is occupied), and
    /// `len` counts them.
    fn check<T>(shard: &Shard<T>) {
        let mask = shard.mask();
        let mut len = 0;
        for (i, bucket) in shard.buckets.iter().enumerate() {
            let Some(entry) = bucket else { continue };
            len += 1;
            let distance = shard.distance(entry, i);
            if distance > 0 {
                let before = (i + mask) & mask;
                let previous = shard.buckets[before]
                    .as_ref()
                    .expect("a free bucket before a displaced route");
                assert!(
                    shard.distance(previous, before) + 1 >= distance,
                    "routes out of the order of their homes"
                );
            }
        }
        assert_eq!(len, shard.len);
        assert!(shard.len * 8 <= shard.buckets.len() * 7);
    }

    #[test]
    fn a_removal_in_a_run_of_collisions_keeps_every_other_route_reachable() {
        // Every hash has the same home: one run, removed from the middle,
        // the front and the back.
        let mut shard = Shard::with_capacity(8);
        for n in 0..8 {
            shard.insert(5, pid(n), n).unwrap();
        }
        check(&shard);
        for n in [3, 0, 7, 4] {
            assert_eq!(shard.remove_if(5, pid(n), |_| true), Some(n));
            check(&shard);
            for m in 0..8 {
                let live = ![3, 0, 7, 4][..=[3, 0, 7, 4].iter().position(|&x| x == n).unwrap()]
                    .contains(&m);
                assert_eq!(
                    shard.get(5, pid(m)),
                    live.then_some(&m),
                    "after removing {n}"
                );
            }
        }
    }

    #[test]
    fn a_run_that_wraps_around_the_end_is_closed_up() {
        let mut shard = Shard::with_capacity(8);
        let mask = shard.mask() as u32;
        // Homes at the last two buckets, spilling over to the front.
        for n in 0..4 {
            shard.insert(mask - 1 + (n as u32 & 1), pid(n), n).unwrap();
        }
        // An entry whose home is the front bucket, displaced further.
        shard.insert(0, pid(9), 9).unwrap();
        check(&shard);
        assert_eq!(shard.remove_if(mask - 1, pid(0), |_| true), Some(0));
        check(&shard);
        for n in [1, 2, 3] {
            assert_eq!(shard.get(mask - 1 + (n as u32 & 1), pid(n)), Some(&n));
        }
        assert_eq!(shard.get(0, pid(9)), Some(&9));
    }

    #[test]
    fn remove_if_leaves_a_refused_route_in_place() {
        let mut shard = Shard::with_capacity(0);
        shard.insert(1, pid(1), 'a').unwrap();
        assert_eq!(shard.remove_if(1, pid(1), |&t| t == 'b'), None);
        assert_eq!(shard.get(1, pid(1)), Some(&'a'));
        assert_eq!(shard.insert(1, pid(1), 'c'), Err('c'));
        assert_eq!(shard.len(), 1);
    }

    #[test]
    fn matches_a_hash_map_under_random_operations() {
        // Few distinct homes and PIDs, so runs collide, wrap and shift.
        let mut state = 7u64;
        let mut next = move || {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut shard = Shard::with_capacity(0);
        let mut model: HashMap<u64, u32> = HashMap::new();
        let hash = |n: u64| (n.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as u32 % 24;
        for step in 0..200_000u32 {
            let r = next();
            let n = r % 200;
            let h = hash(n);
            if r & (1 << 40) != 0 {
                assert_eq!(
                    shard.insert(h, pid(n), step).is_ok(),
                    !model.contains_key(&n),
                    "insert {n}"
                );
                model.entry(n).or_insert(step);
            } else {
                assert_eq!(
                    shard.remove_if(h, pid(n), |_| true),
                    model.remove(&n),
                    "remove {n}"
                );
            }
            if step % 1000 == 0 {
                check(&shard);
                for m in 0..200 {
                    assert_eq!(shard.get(hash(m), pid(m)), model.get(&m), "get {m}");
                }
            }
        }
        check(&shard);
    }

    #[test]
    fn a_window_of_pids_wider_than_the_array_grows_it_until_each_is_at_home() {
        // 96 live routes whose homes are consecutive numbers in a window of
        // 176 (the middle gone), in an array sized for 96: homes 128 apart
        // share a bucket, and their runs merge.
        let mut shard = Shard::with_capacity(96);
        assert_eq!(shard.buckets.len(), 128);
        for n in (0..48).chain(128..176) {
            shard.insert(n as u32, pid(n), n).unwrap();
        }
        check(&shard);
        assert_eq!(shard.buckets.len(), 256);
        for (i, bucket) in shard.buckets.iter().enumerate() {
            if let Some(entry) = bucket {
                assert_eq!(shard.distance(entry, i), 0, "every route at its home");
            }
        }
    }

    #[test]
    fn a_hasher_that_sends_every_pid_home_to_one_bucket_grows_the_array_only_so_far() {
        let mut shard = Shard::with_capacity(0);
        for n in 0..100 {
            shard.insert(3, pid(n), n).unwrap();
            // Checked at every insert, so that a shard that doubles without
            // end fails here while its array is still small.
            assert!(
                shard.buckets.len() <= (2 * SPARSE * shard.len()).max(MIN_BUCKETS),
                "{} buckets for {} routes",
                shard.buckets.len(),
                shard.len()
            );
        }
        check(&shard);
        for n in 0..100 {
            assert_eq!(shard.get(3, pid(n)), Some(&n));
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(buckets_for(0), 16);
        assert_eq!(buckets_for(14), 16);
        assert_eq!(buckets_for(15), 32);
        assert_eq!(buckets_for(usize::MAX), MAX_BUCKETS);
        assert_eq!(size_of::<Option<Entry<u64>>>(), 24);
    }
}
