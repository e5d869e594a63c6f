//! Keyed BLAKE3 of one chunk (at most 1 024 bytes), truncated to 128 bits:
//! the frame tag's hash, in scalar code.
//!
//! It computes exactly `blake3::keyed_hash(key, input)`'s first 16 bytes
//! (the tests compare the two for every length up to a chunk), only
//! faster for a frame's few bytes: a one-block input is a single chain of
//! seven rounds that the `blake3` crate hands to its SIMD compression
//! function, where the 4-lane vectors do not shorten the chain and the
//! diagonal shuffles lengthen it; the scalar rounds here, inlined, take
//! about 70 ns against the crate's 95 ns on the development machine (a
//! 32-byte frame). Longer input goes to the crate, whose SIMD pays off
//! across chunks.

/// BLAKE3's chunk length: longer input is not handled here.
pub(crate) const CHUNK_LEN: usize = 1024;

const BLOCK_LEN: usize = 64;

/// The initialisation vector (SHA-256's).
const IV: [u32; 4] = [0x6A09_E667, 0xBB67_AE85, 0x3C6E_F372, 0xA54F_F53A];

// Domain flags.
const CHUNK_START: u32 = 1 << 0;
const CHUNK_END: u32 = 1 << 1;
const ROOT: u32 = 1 << 3;
const KEYED_HASH: u32 = 1 << 4;

/// Which message word each round takes where: round 0 in order, each
/// later one BLAKE3's permutation of the one before.
const SCHEDULE: [[usize; 16]; 7] = {
    const PERMUTATION: [usize; 16] = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8];
    let mut schedule = [[0; 16]; 7];
    let mut i = 0;
    while i < 16 {
        schedule[0][i] = i;
        i += 1;
    }
    let mut round = 1;
    while round < 7 {
        let mut i = 0;
        while i < 16 {
            schedule[round][i] = schedule[round - 1][PERMUTATION[i]];
            i += 1;
        }
        round += 1;
    }
    schedule
};

/// The quarter-round on columns or diagonals.
#[inline(always)]
fn g(v: &mut [u32; 16], (a, b, c, d): (usize, usize, usize, usize), x: u32, y: u32) {
    v[a] = v[a].wrapping_add(v[b]).wrapping_add(x);
    v[d] = (v[d] ^ v[a]).rotate_right(16);
    v[c] = v[c].wrapping_add(v[d]);
    v[b] = (v[b] ^ v[c]).rotate_right(12);
    v[a] = v[a].wrapping_add(v[b]).wrapping_add(y);
    v[d] = (v[d] ^ v[a]).rotate_right(8);
    v[c] = v[c].wrapping_add(v[d]);
    v[b] = (v[b] ^ v[c]).rotate_right(7);
}

/// The compression function, its output truncated to the chaining value
/// (the first 8 words), for the blocks of chunk 0.
#[inline(always)]
fn compress(cv: &[u32; 8], m: &[u32; 16], len: u32, flags: u32) -> [u32; 8] {
    let mut v = [
        cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7], IV[0], IV[1], IV[2], IV[3],
        0, // the chunk counter, low and high words: always chunk 0
        0, len, flags,
    ];
    for s in &SCHEDULE {
        g(&mut v, (0, 4, 8, 12), m[s[0]], m[s[1]]);
        g(&mut v, (1, 5, 9, 13), m[s[2]], m[s[3]]);
        g(&mut v, (2, 6, 10, 14), m[s[4]], m[s[5]]);
        g(&mut v, (3, 7, 11, 15), m[s[6]], m[s[7]]);
        g(&mut v, (0, 5, 10, 15), m[s[8]], m[s[9]]);
        g(&mut v, (1, 6, 11, 12), m[s[10]], m[s[11]]);
        g(&mut v, (2, 7, 8, 13), m[s[12]], m[s[13]]);
        g(&mut v, (3, 4, 9, 14), m[s[14]], m[s[15]]);
    }
    std::array::from_fn(|i| v[i] ^ v[i + 8])
}

/// The first 16 bytes of `blake3::keyed_hash(key, input)`, for `input` of
/// at most [`CHUNK_LEN`] bytes.
///
/// # Panics
///
/// If `input` is longer (the caller goes to the `blake3` crate then).
pub(crate) fn keyed_hash_128(key: &[u8; 32], input: &[u8]) -> [u8; 16] {
    assert!(input.len() <= CHUNK_LEN, "one chunk at most");
    let mut cv: [u32; 8] =
        std::array::from_fn(|i| u32::from_le_bytes(key[4 * i..4 * i + 4].try_into().unwrap()));
    // An empty input is one empty block.
    let blocks = input.len().div_ceil(BLOCK_LEN).max(1);
    for i in 0..blocks {
        let block = &input[i * BLOCK_LEN..input.len().min((i + 1) * BLOCK_LEN)];
        let mut bytes = [0; BLOCK_LEN];
        bytes[..block.len()].copy_from_slice(block);
        let m = std::array::from_fn(|j| {
            u32::from_le_bytes(bytes[4 * j..4 * j + 4].try_into().unwrap())
        });
        let mut flags = KEYED_HASH;
        if i == 0 {
            flags |= CHUNK_START;
        }
        if i + 1 == blocks {
            flags |= CHUNK_END | ROOT;
        }
        // A block is at most 64 bytes: the length fits.
        cv = compress(&cv, &m, block.len() as u32, flags);
    }
    let mut out = [0; 16];
    for (bytes, word) in out.chunks_exact_mut(4).zip(&cv) {
        bytes.copy_from_slice(&word.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes (xorshift), so a failure replays.
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn equals_blake3_keyed_hash_at_every_length_of_a_chunk() {
        for seed in 1..=4 {
            let key: [u8; 32] = bytes(seed, 32).try_into().unwrap();
            let data = bytes(seed + 100, CHUNK_LEN);
            for n in 0..=CHUNK_LEN {
                let want = blake3::keyed_hash(&key, &data[..n]);
                assert_eq!(
                    keyed_hash_128(&key, &data[..n])[..],
                    want.as_bytes()[..16],
                    "seed {seed}, {n} bytes"
                );
            }
        }
    }

    #[test]
    fn equals_blake3_keyed_hash_on_frame_sized_inputs() {
        // Many keys and contents at the lengths frames have.
        for seed in 1..=2_000u64 {
            let key: [u8; 32] = bytes(seed, 32).try_into().unwrap();
            let n = 21 + (seed as usize % 80);
            let data = bytes(seed * 7 + 3, n);
            let want = blake3::keyed_hash(&key, &data);
            assert_eq!(keyed_hash_128(&key, &data)[..], want.as_bytes()[..16]);
        }
    }

    #[test]
    #[should_panic(expected = "one chunk at most")]
    fn longer_input_is_refused() {
        keyed_hash_128(&[0; 32], &[0; CHUNK_LEN + 1]);
    }
}
