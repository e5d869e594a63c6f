//! [`RouteHasher`]: the hasher of a [`RoutingTable`](crate::RoutingTable),
//! which keeps neighbouring PIDs in neighbouring buckets.
//!
//! See [`RouteHasher`] for the layout and why.

use core::hash::{BuildHasher, Hasher};

use crate::PidHasher;

/// The shards of a [`RoutingTable`](crate::RoutingTable), whatever its
/// hasher; [`RouteHasher`] places PIDs for exactly this many.
pub(crate) const ROUTE_SHARDS: usize = 64;

/// log2 of [`ROUTE_SHARDS`].
const SHARD_BITS: u32 = 6;

/// The longest run of consecutive numbers that share a shard.
const MAX_RUN: usize = 64;

/// Where the table reads the shard: the 6 bits just under the top 7.
const SHARD_SHIFT: u32 = 64 - 7 - SHARD_BITS;

/// The shard of a key with hash `hash` in a table of [`ROUTE_SHARDS`]
/// shards: the 6 bits just under the top 7, where [`RouteHasher`] puts it.
#[inline]
pub(crate) fn shard_of(hash: u64) -> usize {
    (hash >> SHARD_SHIFT) as usize & (ROUTE_SHARDS - 1)
}

/// The default hasher of a [`RoutingTable`](crate::RoutingTable): lays
/// sequential [`Pid`](crate::Pid)s out in runs of consecutive numbers per
/// shard (64 by default; see [`RouteBuildHasher::runs_of`]), the runs dealt
/// to the 64 shards in turn, and each shard's share in consecutive buckets.
///
/// A scheduler hands out PIDs in sequence and registers, looks up and
/// removes them roughly in that order: the submitting thread registers PID
/// `n` while workers remove PIDs `n - k` of processes that just finished.
/// A hash that scatters every PID over the whole table (like
/// [`PidHasher`](crate::PidHasher)) makes each of those operations a cache
/// miss once the table outgrows the cache. [`RouteHasher`] instead lays
/// PIDs out the way the table reads them:
///
/// * The table has 64 shards and picks a key's shard from the 6 bits just
///   under the top 7 of its hash. With runs of `r`, those bits are the
///   number's bits `log2 r .. log2 r + 6`: `r` consecutive numbers share a
///   shard, and the next `r` go to the next one.
/// * Inside a shard, the table picks the bucket from the low bits: there
///   the hash holds the number with the shard's 6 bits taken out, so
///   consecutive numbers of one shard sit in consecutive buckets, each at
///   its home (the same cache lines, in the order the table visits them),
///   and the numbers of one shard use every bucket, not one in 64.
/// * The top 7 bits repeat the low 7 bits of that in-shard position. The
///   table does not read them; they make the hash lay PIDs out as well in
///   a `hashbrown`-based map with 64 shards (a `dashmap::DashMap`, what
///   the table was before), whose 7-bit tags then differ for 128
///   neighbouring buckets.
///
/// Which run length is cheaper depends on how many threads use the table
/// at once. With one or two (a submitter and a worker), runs of 64 keep
/// each shard's lock and header on one thread's cache for 64 operations in
/// a row. With more, every worker that finishes a recent process removes a
/// PID from the run the submitter is filling, so they all take one shard's
/// write lock and queue on it; runs of 1 put 64 consecutive PIDs on 64
/// different locks. A scheduler picks by its worker count (see
/// [`RouteBuildHasher::runs_of`]).
///
/// A [`Pid`](crate::Pid) hashes as `write_u32(node)` then
/// `write_u64(number)`. The hasher treats the last word written as the
/// number and mixes every word before it (the node) into a per-node
/// constant with [`PidHasher`](crate::PidHasher), which it XORs into the
/// number before the layout above. For one node and one run length the
/// map from number to hash is a bijection on numbers below 2⁵⁷, so PIDs of
/// one node never collide.
///
/// The hash suits nothing but PID keys in a table built for it: as a
/// general-purpose hasher (a `std::collections::HashMap` with no shards),
/// the 6 bits given to the shard would be missing from its buckets. Use
/// [`PidBuildHasher`](crate::PidBuildHasher) there. Like it, this hasher is
/// not keyed: whoever chooses the PIDs can choose collisions.
///
/// # Examples
///
/// ```
/// use std::hash::BuildHasher;
/// use stepsched_relay::{Pid, RouteBuildHasher};
///
/// let build = RouteBuildHasher::default();
/// // Deterministic, and distinct for distinct PIDs of one node.
/// assert_eq!(build.hash_one(Pid::new(0, 7)), build.hash_one(Pid::new(0, 7)));
/// assert_ne!(build.hash_one(Pid::new(0, 7)), build.hash_one(Pid::new(0, 8)));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RouteHasher {
    /// Every word before the last.
    prefix: PidHasher,
    /// The last word written: the PID's number.
    last: u64,
    /// log2 of the run length.
    run_bits: u32,
}

impl Default for RouteHasher {
    /// A hasher with runs of 64, as [`RouteBuildHasher::default`] builds.
    fn default() -> Self {
        RouteBuildHasher::default().build_hasher()
    }
}

impl RouteHasher {
    #[inline(always)]
    fn add(&mut self, word: u64) {
        self.prefix.write_u64(self.last);
        self.last = word;
    }
}

impl Hasher for RouteHasher {
    /// Takes bytes as 8-byte little-endian words (the last padded with
    /// zeros), each as an integer write.
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // A bijection of the number for a fixed prefix (node).
        let x = self.last ^ self.prefix.finish();
        let r = self.run_bits;
        let shard = (x >> r) & ((1 << SHARD_BITS) - 1);
        // The number with the shard's bits taken out: the in-shard position.
        let run = x & ((1 << r) - 1);
        let position = run | ((x >> (r + SHARD_BITS)) << r);
        let tag = position & 0x7f;
        (tag << 57) | (shard << SHARD_SHIFT) | (position & ((1 << SHARD_SHIFT) - 1))
    }
}

/// The default [`BuildHasher`] of [`RoutingTable`](crate::RoutingTable):
/// builds [`RouteHasher`]s with one run length.
///
/// # Examples
///
/// ```
/// use stepsched_relay::{Pid, RouteBuildHasher, RoutingTable};
///
/// // A table that many threads register in and remove from at once.
/// let table: RoutingTable<u32> = RoutingTable::with_hasher(RouteBuildHasher::runs_of(1));
/// table.register(Pid::new(0, 1), 7).unwrap();
/// assert_eq!(RouteBuildHasher::runs_of(1).run(), 1);
/// assert_eq!(RouteBuildHasher::default().run(), 64);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteBuildHasher {
    run_bits: u32,
}

impl RouteBuildHasher {
    /// Runs of `run` consecutive PIDs per shard.
    ///
    /// 64 (the default) suits a table that one or two threads use at a
    /// time; 1 one that many threads register in and remove from at once
    /// (see [`RouteHasher`]).
    ///
    /// # Panics
    ///
    /// If `run` is not a power of two from 1 to 64.
    pub const fn runs_of(run: usize) -> Self {
        assert!(
            run.is_power_of_two() && run <= MAX_RUN,
            "a run is a power of two from 1 to 64"
        );
        RouteBuildHasher {
            run_bits: run.trailing_zeros(),
        }
    }

    /// Consecutive PIDs per shard.
    pub const fn run(&self) -> usize {
        1 << self.run_bits
    }
}

impl Default for RouteBuildHasher {
    /// Runs of 64.
    fn default() -> Self {
        Self::runs_of(MAX_RUN)
    }
}

impl BuildHasher for RouteBuildHasher {
    type Hasher = RouteHasher;

    #[inline]
    fn build_hasher(&self) -> RouteHasher {
        RouteHasher {
            prefix: PidHasher::default(),
            last: 0,
            run_bits: self.run_bits,
        }
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;
    use crate::Pid;

    fn hash(pid: Pid) -> u64 {
        RouteBuildHasher::default().hash_one(pid)
    }

    fn hash_runs_of_1(pid: Pid) -> u64 {
        RouteBuildHasher::runs_of(1).hash_one(pid)
    }

    /// The table's shard of `h`, as the tests' `u64`.
    fn shard(h: u64) -> u64 {
        shard_of(h) as u64
    }

    #[test]
    fn no_collisions_within_a_node() {
        for run in [64, 8, 1] {
            let build = RouteBuildHasher::runs_of(run);
            let mut hashes: Vec<u64> = (0..200_000)
                .map(|n| build.hash_one(Pid::new(3, n)))
                .chain((0..1000).map(|n| build.hash_one(Pid::new(3, (1 << 56) + n * 4099))))
                .collect();
            hashes.sort_unstable();
            hashes.dedup();
            assert_eq!(hashes.len(), 201_000, "runs of {run}");
        }
    }

    #[test]
    fn runs_are_powers_of_two_up_to_64() {
        for run in [1, 2, 4, 8, 16, 32, 64] {
            assert_eq!(RouteBuildHasher::runs_of(run).run(), run);
        }
        assert_eq!(RouteBuildHasher::default(), RouteBuildHasher::runs_of(64));
        for bad in [0, 3, 128] {
            let refused = std::panic::catch_unwind(|| RouteBuildHasher::runs_of(bad));
            assert!(refused.is_err(), "runs of {bad} accepted");
        }
    }

    #[test]
    fn node_changes_the_hash() {
        for n in 0..1_000 {
            assert_ne!(hash(Pid::new(0, n)), hash(Pid::new(1, n)));
        }
    }

    /// Runs of 1: 64 consecutive numbers (aligned) go to the 64 shards, one each; 128
    /// consecutive numbers of a shard (`n`, `n + 64`, …, aligned) sit in
    /// 128 neighbouring buckets (the node's constant permutes them within
    /// the block) with distinct tags.
    #[test]
    fn runs_of_1_deal_consecutive_numbers_to_different_shards() {
        for node in [0, 9] {
            for base in [0u64, 64 * 1000] {
                let mut shards: Vec<u64> = (0..64)
                    .map(|j| shard(hash_runs_of_1(Pid::new(node, base + j))))
                    .collect();
                shards.sort_unstable();
                shards.dedup();
                assert_eq!(shards.len(), ROUTE_SHARDS, "node {node} base {base}");
            }
            let base = 64 * 128 * 3 + 5;
            let first = hash_runs_of_1(Pid::new(node, base));
            let mut tags = Vec::new();
            for k in 0..128 {
                let h = hash_runs_of_1(Pid::new(node, base + 64 * k));
                assert_eq!(shard(h), shard(first), "node {node} +64×{k}");
                // Within the block only the low 7 bits of the bucket move.
                let block = |h: u64| (h & ((1 << SHARD_SHIFT) - 1)) >> 7;
                assert_eq!(block(h), block(first), "node {node} +64×{k}");
                tags.push(h >> 57);
            }
            tags.sort_unstable();
            tags.dedup();
            assert_eq!(tags.len(), 128, "node {node}: tags repeat");
        }
    }

    /// 64 consecutive numbers (aligned) share a shard and sit in consecutive
    /// in-shard buckets with distinct tags; the next 64 go to another shard,
    /// and 64 runs in a row cover every shard once.
    #[test]
    fn runs_of_64_share_a_shard_and_neighbouring_buckets() {
        for node in [0, 9] {
            let mut shards = Vec::new();
            for run in 0..64u64 {
                let first = hash(Pid::new(node, run * 64));
                shards.push(shard(first));
                let mut tags = Vec::new();
                for j in 0..64 {
                    let h = hash(Pid::new(node, run * 64 + j));
                    assert_eq!(shard(h), shard(first), "node {node} run {run} +{j}");
                    // Within the run only the low 6 bits move.
                    let upper = |h: u64| h & !0x3f & ((1 << SHARD_SHIFT) - 1);
                    assert_eq!(upper(h), upper(first));
                    tags.push(h >> 57);
                }
                tags.sort_unstable();
                tags.dedup();
                assert_eq!(tags.len(), 64, "node {node} run {run}: tags repeat");
            }
            shards.sort_unstable();
            shards.dedup();
            assert_eq!(shards.len(), ROUTE_SHARDS, "node {node}");
        }
    }

    /// The PIDs one shard holds fill its buckets densely: 4096 × 64
    /// consecutive numbers put 4096 in each shard, at 4096 distinct
    /// positions of the low 12 bits.
    #[test]
    fn one_shards_pids_use_every_bucket() {
        let mut per_shard = vec![Vec::new(); ROUTE_SHARDS];
        for n in 0..(4096 * 64) {
            let h = hash(Pid::new(2, n));
            per_shard[shard(h) as usize].push(h & 0xfff);
        }
        for (s, mut buckets) in per_shard.into_iter().enumerate() {
            assert_eq!(buckets.len(), 4096, "shard {s}");
            buckets.sort_unstable();
            buckets.dedup();
            assert_eq!(buckets.len(), 4096, "shard {s}: buckets repeat");
        }
    }
}
