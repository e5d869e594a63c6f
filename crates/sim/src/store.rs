//! [`DurableStore`]: the simulated disk of a named process, owned by the
//! simulator, which survives the process's crashes — what it synced.

use std::collections::BTreeMap;

#[cfg(doc)]
use crate::{Faults, Sim, SimContextExt};

/// A small durable key-value store, one per named process (see
/// [`Sim::submit_named`]), owned by the simulator: it outlives the
/// process, so the process restarted after a crash reads what the crashed
/// one made durable. A step reaches its process's store through
/// [`SimContextExt::with_store`]; the test through [`Sim::store`].
///
/// Like a file on a real disk, a [`write`](Self::write) (or
/// [`remove`](Self::remove)) is seen at once by later reads, but is
/// *unsynced*: it reaches the disk only with the next
/// [`sync`](Self::sync), which makes every earlier write durable, in
/// order. A crash ([`Faults::crash`], [`Sim::crash`]) loses every unsynced
/// write (the trace's crash line counts them), so the restarted process
/// sees the store as of its last sync; with [`Faults::keep_unsynced`] it
/// keeps each one with a probability instead, out of order.
///
/// ```
/// use stepsched_sim::DurableStore;
///
/// let mut store = DurableStore::default();
/// store.write("a", b"1".to_vec());
/// store.sync();
/// store.write("b", b"2".to_vec());
/// assert_eq!(store.get("b"), Some(&b"2"[..]));
/// assert_eq!(store.unsynced(), 1);
/// // What a crash leaves: the synced writes only.
/// let after = store.durable();
/// assert_eq!(after.get("a"), Some(&b"1"[..]));
/// assert_eq!(after.get("b"), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurableStore {
    /// What the last sync made durable.
    synced: BTreeMap<String, Vec<u8>>,
    /// The writes since (a `None` value: a removal), in order.
    pending: Vec<(String, Option<Vec<u8>>)>,
}

impl DurableStore {
    /// The value of `key`: the latest write, synced or not.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        match self.pending.iter().rev().find(|(k, _)| k == key) {
            Some((_, value)) => value.as_deref(),
            None => self.synced.get(key).map(Vec::as_slice),
        }
    }

    /// Writes `value` under `key`: seen by reads at once, durable at the
    /// next [`sync`](Self::sync).
    pub fn write(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) {
        self.pending.push((key.into(), Some(value.into())));
    }

    /// Removes `key`: at once for reads, durably at the next
    /// [`sync`](Self::sync).
    pub fn remove(&mut self, key: impl Into<String>) {
        self.pending.push((key.into(), None));
    }

    /// Makes every earlier write and removal durable: a crash no longer
    /// loses them.
    pub fn sync(&mut self) {
        for (key, value) in self.pending.drain(..) {
            match value {
                Some(value) => {
                    self.synced.insert(key, value);
                }
                None => {
                    self.synced.remove(&key);
                }
            }
        }
    }

    /// How many writes and removals are not synced yet.
    #[must_use]
    pub fn unsynced(&self) -> usize {
        self.pending.len()
    }

    /// The keys with a value now (synced or not), in order.
    #[must_use]
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.synced.keys().cloned().collect();
        for (key, _) in &self.pending {
            if !keys.contains(key) {
                keys.push(key.clone());
            }
        }
        keys.retain(|k| self.get(k).is_some());
        keys.sort();
        keys
    }

    /// The store as a crash leaves it: its synced contents only.
    #[must_use]
    pub fn durable(&self) -> DurableStore {
        DurableStore {
            synced: self.synced.clone(),
            pending: Vec::new(),
        }
    }

    /// A crash: each unsynced write (and removal) reaches the disk if
    /// `keep` says so, in order, and the rest are lost; how many were lost
    /// and how many kept.
    pub(crate) fn crash(&mut self, mut keep: impl FnMut() -> bool) -> (usize, usize) {
        let (mut lost, mut kept) = (0, 0);
        for (key, value) in std::mem::take(&mut self.pending) {
            if !keep() {
                lost += 1;
                continue;
            }
            kept += 1;
            match value {
                Some(value) => {
                    self.synced.insert(key, value);
                }
                None => {
                    self.synced.remove(&key);
                }
            }
        }
        (lost, kept)
    }
}
