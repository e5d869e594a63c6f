//! A fast, deterministic hasher for [`Pid`](crate::Pid) keys.
//!
//! `Pid` hashes as two integer writes (`write_u32(node)`, `write_u64(number)`).
//! [`PidHasher`] folds each write into its state with one rotate, xor and
//! multiply (the FxHash step of rustc-hash), then [`finish`](PidHasher::finish)
//! applies MurmurHash3's 64-bit finalizer (`fmix64`) so that every output bit
//! depends on every input bit. Both kinds of map that use it need that: a
//! [`RoutingTable`](crate::RoutingTable) picks the shard from the bits just
//! under the top 7 and the bucket from the low bits, a `hashbrown` map (a
//! `std::collections::HashMap`) the bucket from the low bits and the tag
//! from the top 7. Sequential numbers from a
//! [`PidAllocator`](crate::PidAllocator) therefore spread evenly.
//!
//! For a fixed node the map from `number` to hash is a bijection (every step
//! is invertible), so ids of one node never collide in the full 64 bits.
//!
//! The hasher is not keyed: whoever chooses the ids can choose collisions.
//! Ids handed out by a `PidAllocator` are fine; if ids come from untrusted
//! peers, build the table with `std::hash::RandomState` instead.

use core::hash::{BuildHasherDefault, Hasher};

/// The multiplier of the FxHash step (rustc-hash 2.x).
const K: u64 = 0xf135_7aea_2e62_a9c5;

/// A fast, unkeyed [`Hasher`] for integer keys such as [`Pid`](crate::Pid).
///
/// # Examples
///
/// ```
/// use std::hash::{BuildHasher, Hash, Hasher};
/// use stepsched_relay::{Pid, PidBuildHasher};
///
/// let build = PidBuildHasher::default();
/// // Deterministic: the same id always gives the same hash.
/// assert_eq!(build.hash_one(Pid::new(0, 1)), build.hash_one(Pid::new(0, 1)));
/// assert_ne!(build.hash_one(Pid::new(0, 1)), build.hash_one(Pid::new(0, 2)));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PidHasher {
    state: u64,
}

impl PidHasher {
    #[inline(always)]
    fn add(&mut self, word: u64) {
        self.state = (self.state.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for PidHasher {
    /// Folds bytes in 8-byte little-endian words; the last word is padded
    /// with zeros. Integer writes take the faster paths below.
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0; 8];
            word[..rest.len()].copy_from_slice(rest);
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
    fn write_u128(&mut self, i: u128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    /// MurmurHash3's `fmix64` over the state.
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.state;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A [`BuildHasher`](core::hash::BuildHasher) of [`PidHasher`]s, for
/// general-purpose maps keyed by PID (a
/// [`RoutingTable`](crate::RoutingTable) defaults to
/// [`RouteBuildHasher`](crate::RouteBuildHasher), laid out for its shards).
///
/// # Examples
///
/// ```
/// use std::collections::HashMap;
/// use stepsched_relay::{Pid, PidBuildHasher};
///
/// let mut names: HashMap<Pid, &str, PidBuildHasher> = HashMap::default();
/// names.insert(Pid::new(0, 1), "init");
/// assert_eq!(names[&Pid::new(0, 1)], "init");
/// ```
pub type PidBuildHasher = BuildHasherDefault<PidHasher>;

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;
    use crate::Pid;
    use core::hash::BuildHasher;

    fn hash(pid: Pid) -> u64 {
        PidBuildHasher::default().hash_one(pid)
    }

    #[test]
    fn no_collisions_within_a_node() {
        let mut hashes: Vec<u64> = (0..50_000).map(|n| hash(Pid::new(3, n))).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), 50_000);
    }

    #[test]
    fn node_changes_the_hash() {
        for n in 0..1_000 {
            assert_ne!(hash(Pid::new(0, n)), hash(Pid::new(1, n)));
        }
    }

    /// Sequential ids must spread over the table's shard bits (just under
    /// the top 7), the bucket bits (the low ones) and hashbrown's tag bits
    /// (the top 7): every 16-way split gets between half and twice its
    /// share.
    #[test]
    fn sequential_ids_spread_over_every_bit_range() {
        const N: u64 = 16_384;
        type Split = fn(u64) -> usize;
        let splits: [(&str, Split); 3] = [
            ("shard", |h| ((h << 7) >> 60) as usize),
            ("bucket", |h| (h & 15) as usize),
            ("tag", |h| (h >> 60) as usize),
        ];
        for (name, split) in splits {
            let mut counts = [0u64; 16];
            for n in 1..=N {
                counts[split(hash(Pid::new(0, n)))] += 1;
            }
            let share = N / 16;
            for (i, &c) in counts.iter().enumerate() {
                assert!(
                    (share / 2..=share * 2).contains(&c),
                    "{name} {i}: {c} of {N} (share {share})"
                );
            }
        }
    }

    #[test]
    fn integer_writes_match_their_widths() {
        // Each integer write is one fold of the zero-extended value, so the
        // widths agree on equal values and `write` pads like them.
        let fold = |f: &dyn Fn(&mut PidHasher)| {
            let mut h = PidHasher::default();
            f(&mut h);
            h.finish()
        };
        let expected = fold(&|h| h.write_u64(0xAB));
        assert_eq!(fold(&|h| h.write_u8(0xAB)), expected);
        assert_eq!(fold(&|h| h.write_u16(0xAB)), expected);
        assert_eq!(fold(&|h| h.write_u32(0xAB)), expected);
        assert_eq!(fold(&|h| h.write_usize(0xAB)), expected);
        assert_eq!(fold(&|h| h.write(&[0xAB])), expected);
        assert_eq!(
            fold(&|h| h.write(&[1, 0, 0, 0, 0, 0, 0, 0, 2])),
            fold(&|h| {
                h.write_u64(1);
                h.write_u64(2);
            })
        );
        assert_eq!(
            fold(&|h| h.write_u128(1 | (2 << 64))),
            fold(&|h| {
                h.write_u64(1);
                h.write_u64(2);
            })
        );
        assert_ne!(fold(&|h| h.write_u64(1)), fold(&|h| h.write_u64(2)));
        assert_ne!(PidHasher::default().finish(), expected);
    }
}
