//! [`RouteHasher`]: the hasher of a [`RoutingTable`](crate::RoutingTable),
//! which keeps neighbouring PIDs in neighbouring buckets.
//!
//! See [`RouteHasher`] for the layout and why.

use core::hash::{BuildHasherDefault, Hasher};

use crate::PidHasher;

/// The shards of a [`RoutingTable`](crate::RoutingTable), whatever its
/// hasher; [`RouteHasher`] places PIDs for exactly this many.
pub(crate) const ROUTE_SHARDS: usize = 64;

/// log2 of [`ROUTE_SHARDS`].
const SHARD_BITS: u32 = 6;

/// How many consecutive numbers share a shard (log2).
const RUN_BITS: u32 = 6;

/// Where dashmap reads the shard: the bits just under hashbrown's 7-bit tag.
const SHARD_SHIFT: u32 = 64 - 7 - SHARD_BITS;

/// The default hasher of a [`RoutingTable`](crate::RoutingTable): lays
/// sequential [`Pid`](crate::Pid)s out in runs of 64 per shard and in
/// consecutive buckets within a shard.
///
/// A scheduler hands out PIDs in sequence and registers, looks up and
/// removes them roughly in that order: the submitting thread registers PID
/// `n` while a worker removes PID `n - k` of a process that just finished.
/// A hash that scatters every PID over the whole table (like
/// [`PidHasher`](crate::PidHasher)) makes each of those operations a cache
/// miss once the table outgrows the cache. [`RouteHasher`] instead lays
/// PIDs out the way the table reads them:
///
/// * The table is a `dashmap::DashMap` with 64 shards,
///   which picks a key's shard from the 6 bits just under the top 7 of its
///   hash. Those bits are bits 6..12 of the number: 64 consecutive numbers
///   share a shard, and the next 64 go to the next one. The submitter and a
///   worker a few hundred PIDs behind it therefore lock different shards.
/// * Inside a shard, hashbrown picks the bucket from the low bits: there
///   the hash holds the number with the shard's 6 bits taken out, so
///   consecutive numbers of one shard sit in consecutive buckets (the same
///   cache lines, in the order the table visits them), and the numbers of
///   one shard use every bucket, not one in 64.
/// * hashbrown's 7-bit tag (the top 7 bits), compared 16 at a time in a
///   probe, is the low 7 bits of that in-shard position: 128 neighbouring
///   buckets have distinct tags, so a probe compares one key.
///
/// A [`Pid`](crate::Pid) hashes as `write_u32(node)` then
/// `write_u64(number)`. The hasher treats the last word written as the
/// number and mixes every word before it (the node) into a per-node
/// constant with [`PidHasher`](crate::PidHasher), which it XORs into the
/// number before the layout above. For one node the map from number to
/// hash is a bijection on numbers below 2⁵⁷, so PIDs of one node never
/// collide.
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
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteHasher {
    /// Every word before the last.
    prefix: PidHasher,
    /// The last word written: the PID's number.
    last: u64,
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
        let shard = (x >> RUN_BITS) & ((1 << SHARD_BITS) - 1);
        // The number with the shard's bits taken out: the in-shard position.
        let run = x & ((1 << RUN_BITS) - 1);
        let position = run | ((x >> (RUN_BITS + SHARD_BITS)) << RUN_BITS);
        let tag = position & 0x7f;
        (tag << 57) | (shard << SHARD_SHIFT) | (position & ((1 << SHARD_SHIFT) - 1))
    }
}

/// The default [`BuildHasher`](core::hash::BuildHasher) of
/// [`RoutingTable`](crate::RoutingTable): builds [`RouteHasher`]s.
pub type RouteBuildHasher = BuildHasherDefault<RouteHasher>;

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;
    use crate::Pid;
    use core::hash::BuildHasher;

    fn hash(pid: Pid) -> u64 {
        RouteBuildHasher::default().hash_one(pid)
    }

    /// dashmap's shard of `h` with [`ROUTE_SHARDS`] shards.
    fn shard(h: u64) -> u64 {
        (h << 7) >> (64 - SHARD_BITS)
    }

    #[test]
    fn no_collisions_within_a_node() {
        let mut hashes: Vec<u64> = (0..200_000)
            .map(|n| hash(Pid::new(3, n)))
            .chain((0..1000).map(|n| hash(Pid::new(3, (1 << 56) + n * 4099))))
            .collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), 201_000);
    }

    #[test]
    fn node_changes_the_hash() {
        for n in 0..1_000 {
            assert_ne!(hash(Pid::new(0, n)), hash(Pid::new(1, n)));
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
