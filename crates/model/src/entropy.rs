//! Where the relay's randomness comes from: hop ids, the keys of every hash map a peer can fill,
//! backoff jitter. Each thread draws from its own generator, seeded from the operating system
//! at first use, unless a simulation seeds it first ([`seed_thread`]): a whole mesh run on one
//! thread then draws the same numbers, hashes the same way and iterates its maps in the same
//! order on every run of a seed.
//!
//! The generator is SplitMix64 over a secret 64-bit state: unpredictable to a peer that cannot
//! read the state, which is all hash keys and hop ids need. Maps are keyed SipHash-1-3, as
//! std's, so a peer choosing paths or ids cannot flood one bucket.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};

thread_local! {
    /// The thread's generator state; `None` until first use or a seed.
    static STATE: Cell<Option<u64>> = const { Cell::new(None) };
    /// The hash keys of this thread's maps: drawn once, the first one counted up per map.
    static KEYS: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// Seed this thread's generator (and forget its hash keys): what it draws from now on follows
/// from `seed` alone.
pub fn seed_thread(seed: u64) {
    STATE.with(|state| state.set(Some(seed)));
    KEYS.with(|keys| keys.set(None));
}

/// The next 64 random bits of this thread's generator.
pub fn next_u64() -> u64 {
    STATE.with(|state| {
        let mut x = state
            .get()
            .unwrap_or_else(|| RandomState::new().hash_one(0x5eed_u64));
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        state.set(Some(x));
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// A number in `0..n` (`n` > 0), near enough uniform for ids and jitter.
pub fn below(n: u64) -> u64 {
    ((next_u64() as u128 * n as u128) >> 64) as u64
}

/// A map whose hashing is keyed from this thread's generator.
pub type Map<K, V> = HashMap<K, V, Keyed>;
/// A set whose hashing is keyed from this thread's generator.
pub type Set<K> = HashSet<K, Keyed>;

/// Keyed SipHash-1-3 (see the module comment).
#[derive(Clone, Debug)]
pub struct Keyed {
    k0: u64,
    k1: u64,
}

impl Default for Keyed {
    fn default() -> Self {
        let (k0, k1) = KEYS.with(|keys| {
            let (k0, k1) = keys.get().unwrap_or_else(|| (next_u64(), next_u64()));
            keys.set(Some((k0.wrapping_add(1), k1)));
            (k0, k1)
        });
        Keyed { k0, k1 }
    }
}

impl BuildHasher for Keyed {
    type Hasher = siphasher::sip::SipHasher13;

    fn build_hasher(&self) -> Self::Hasher {
        siphasher::sip::SipHasher13::new_with_keys(self.k0, self.k1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_thread_draws_the_same_numbers_and_orders_maps_the_same() {
        let run = |seed| {
            seed_thread(seed);
            let draws: Vec<u64> = (0..4).map(|_| next_u64()).collect();
            let map: Map<u64, ()> = (0..64).map(|i| (i, ())).collect();
            (draws, map.keys().copied().collect::<Vec<_>>())
        };
        assert_eq!(run(7), run(7));
        let (seven, eight) = (run(7), run(8));
        assert_ne!(seven.0, eight.0);
        assert_ne!(seven.1, eight.1, "another seed keys maps otherwise");
    }

    #[test]
    fn draws_stay_below_the_bound() {
        seed_thread(1);
        assert!((0..1000).all(|_| below(10) < 10));
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[below(10) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
