//! The `deque` stress scenario: one owner and `--workers` thieves on
//! `stepsched-deque`, every item checked with a per-id ledger.
//!
//! Each round builds a fresh owner deque (with a small or default initial
//! capacity, so growth happens while thieves steal) and runs:
//!
//! * the **owner**, pushing the ids `0..n` as `Box<u64>` in random bursts and
//!   popping random numbers of them back (sometimes down to empty, so pops
//!   race thieves for the last items), then popping until empty;
//! * the **thieves**, each with its own deque (small initial capacity, so a
//!   steal-half grows it), mixing `steal`, `steal_half_into` and
//!   `steal_half_into_with_limit` (limits from 1 to past the maximum) on the
//!   owner's deque, and, with several thieves, on one another's deques, so
//!   their own pops race a steal-half too. A thief pops a random part of its
//!   deque after each success and drains it before it stops.
//!
//! Every consumed item marks its id in a `Vec<AtomicU8>` ledger; the round
//! fails on the first id taken twice or never taken. Items are boxed, so a
//! double hand-out is also a double free. A thief stops once an empty steal
//! from the owner's deque began after the owner had finished.
//!
//! Items per round are `10 * --processes` (so `--quick`, which caps
//! `--processes`, runs small rounds). At most 200 rounds are run, and no new
//! round starts after `--seconds`; `soak` repeats rounds until `--seconds`
//! pass.

use std::hint::spin_loop;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use stepsched_deque::{Steal, Stealer, Worker};

use crate::Opts;
use crate::report::{Outcome, count};

/// A round fails if no item is consumed for this long.
const STALL_TIMEOUT: Duration = Duration::from_secs(20);

/// Counters summed over every thread and round.
#[derive(Default)]
struct Stats {
    items: AtomicU64,
    owner_pops: AtomicU64,
    steals: AtomicU64,
    half_batches: AtomicU64,
    half_items: AtomicU64,
    retries: AtomicU64,
}

/// A thread's counters, flushed into [`Stats`] now and then.
#[derive(Default)]
struct Local {
    items: u64,
    owner_pops: u64,
    steals: u64,
    half_batches: u64,
    half_items: u64,
    retries: u64,
}

impl Local {
    fn flush(&mut self, stats: &Stats) {
        // Relaxed: statistics only, read after the threads are joined or as
        // a progress hint.
        stats.items.fetch_add(self.items, Ordering::Relaxed);
        stats
            .owner_pops
            .fetch_add(self.owner_pops, Ordering::Relaxed);
        stats.steals.fetch_add(self.steals, Ordering::Relaxed);
        stats
            .half_batches
            .fetch_add(self.half_batches, Ordering::Relaxed);
        stats
            .half_items
            .fetch_add(self.half_items, Ordering::Relaxed);
        stats.retries.fetch_add(self.retries, Ordering::Relaxed);
        *self = Local::default();
    }
}

/// State shared by the threads of one round.
struct Round<'a> {
    /// `ledger[id]` counts how many times `id` was consumed.
    ledger: &'a [AtomicU8],
    /// The first duplicate seen, reported at the end of the round.
    first_error: Mutex<Option<String>>,
    /// Set by the owner after its last pop.
    owner_done: AtomicBool,
    /// Set to stop every thread (stall or error).
    abort: AtomicBool,
    stats: &'a Stats,
}

impl Round<'_> {
    /// Marks `item` consumed by thread `who`.
    fn consume(&self, item: Box<u64>, who: &str, local: &mut Local) {
        let id = *item;
        drop(item);
        local.items += 1;
        let Some(slot) = usize::try_from(id).ok().and_then(|i| self.ledger.get(i)) else {
            self.fail(format!("{who} received id {id}, which was never pushed"));
            return;
        };
        // Relaxed: the count itself is the data; it is read after join.
        let before = slot.fetch_add(1, Ordering::Relaxed);
        if before != 0 {
            self.fail(format!("id {id} consumed twice (second time by {who})"));
        }
        if local.items >= 4096 {
            local.flush(self.stats);
        }
    }

    fn fail(&self, msg: String) {
        let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some(msg);
        }
        // Relaxed: a stop hint; results are read after join.
        self.abort.store(true, Ordering::Relaxed);
    }

    fn aborted(&self) -> bool {
        // Relaxed: a stop hint only.
        self.abort.load(Ordering::Relaxed)
    }
}

/// The owner: pushes `0..n` in bursts, pops some back, then drains.
fn owner(worker: &Worker<Box<u64>>, n: u64, round: &Round<'_>, rng: &mut fastrand::Rng) {
    let mut local = Local::default();
    let mut next = 0u64;
    while next < n && !round.aborted() {
        // Mostly short bursts; now and then a long one, so a steal-half
        // claims full batches and the ring grows under the thieves.
        let burst = if rng.u8(0..8) == 0 {
            rng.u64(256..=2048)
        } else {
            rng.u64(1..=64)
        };
        let burst = burst.min(n - next);
        for _ in 0..burst {
            worker.push(Box::new(next));
            next += 1;
        }
        let pops = match rng.u8(0..16) {
            0..=5 => 0,
            6..=10 => 1,
            11..=14 => rng.u64(0..=burst),
            // Pop down to empty: the last items race the thieves.
            _ => u64::MAX,
        };
        for _ in 0..pops {
            match worker.pop() {
                Some(item) => {
                    local.owner_pops += 1;
                    round.consume(item, "owner", &mut local);
                }
                None => break,
            }
        }
        if rng.u8(0..64) == 0 {
            thread::yield_now();
        }
    }
    while let Some(item) = worker.pop() {
        local.owner_pops += 1;
        round.consume(item, "owner", &mut local);
    }
    local.flush(round.stats);
    // Release: every push of the round happens before a thief's load that
    // sees the flag, so a steal that starts after that load and finds the
    // deque empty means no item is left in it.
    round.owner_done.store(true, Ordering::Release);
}

/// A thief: steals from the owner (and from other thieves) into `mine`.
fn thief(
    index: usize,
    mine: &Worker<Box<u64>>,
    owner: &Stealer<Box<u64>>,
    peers: &[Stealer<Box<u64>>],
    round: &Round<'_>,
    rng: &mut fastrand::Rng,
) {
    let who = format!("thief {index}");
    let mut local = Local::default();
    let mut empty_spins = 0u32;
    while !round.aborted() {
        // Acquire: pairs with the owner's Release store (see `owner`).
        let owner_done = round.owner_done.load(Ordering::Acquire);
        let from_peer = peers.len() > 1 && rng.u8(0..4) == 0;
        let victim = if from_peer {
            let mut j = rng.usize(0..peers.len() - 1);
            if j >= index {
                j += 1;
            }
            &peers[j]
        } else {
            owner
        };
        let kind = rng.u8(0..10);
        let held = mine.len() as u64;
        let result = match kind {
            0..=2 => victim.steal(),
            3..=7 => victim.steal_half_into(mine),
            _ => victim.steal_half_into_with_limit(mine, rng.usize(0..=300)),
        };
        match result {
            Steal::Success(item) => {
                empty_spins = 0;
                if kind <= 2 {
                    local.steals += 1;
                } else {
                    local.half_batches += 1;
                    local.half_items += 1 + (mine.len() as u64 - held);
                }
                round.consume(item, &who, &mut local);
                // Run part of the batch; the rest stays stealable by peers.
                let keep = if rng.bool() {
                    0
                } else {
                    rng.usize(0..=mine.len())
                };
                while mine.len() > keep {
                    match mine.pop() {
                        Some(item) => round.consume(item, &who, &mut local),
                        None => break,
                    }
                }
            }
            Steal::Retry => {
                local.retries += 1;
                spin_loop();
            }
            Steal::Empty if owner_done && !from_peer => break,
            Steal::Empty => {
                empty_spins += 1;
                if empty_spins.is_multiple_of(64) {
                    thread::yield_now();
                } else {
                    spin_loop();
                }
            }
        }
    }
    while let Some(item) = mine.pop() {
        round.consume(item, &who, &mut local);
    }
    local.flush(round.stats);
}

/// Runs one round of `n` items; `Err` on a ledger breach or a stall.
fn round(opts: &Opts, index: u64, n: u64, stats: &Stats) -> Result<(), String> {
    let mut rng = fastrand::Rng::with_seed(opts.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let thieves = opts.workers.max(1);
    let ledger: Vec<AtomicU8> = (0..n).map(|_| AtomicU8::new(0)).collect();
    let state = Round {
        ledger: &ledger,
        first_error: Mutex::new(None),
        owner_done: AtomicBool::new(false),
        abort: AtomicBool::new(false),
        stats,
    };
    let victim: Worker<Box<u64>> = if rng.bool() {
        Worker::new()
    } else {
        Worker::with_capacity(rng.usize(1..=64))
    };
    let owner_stealer = victim.stealer();
    let mine: Vec<Worker<Box<u64>>> = (0..thieves)
        .map(|_| Worker::with_capacity(rng.usize(1..=8)))
        .collect();
    let peers: Vec<Stealer<Box<u64>>> = mine.iter().map(Worker::stealer).collect();
    let finished = AtomicUsize::new(0);
    let mut stalled = false;

    thread::scope(|s| {
        let (state, finished, peers, owner_stealer) = (&state, &finished, &peers, &owner_stealer);
        let mut owner_rng = rng.fork();
        s.spawn(move || {
            owner(&victim, n, state, &mut owner_rng);
            // Release: orders the owner's work before the monitor's check.
            finished.fetch_add(1, Ordering::Release);
        });
        for (i, w) in mine.into_iter().enumerate() {
            let mut thief_rng = rng.fork();
            s.spawn(move || {
                thief(i, &w, owner_stealer, peers, state, &mut thief_rng);
                finished.fetch_add(1, Ordering::Release);
            });
        }
        // Monitor: progress lines and stall detection.
        let mut last_items = stats.items.load(Ordering::Relaxed);
        let mut last_change = Instant::now();
        // Acquire: pairs with the threads' Release increments.
        while finished.load(Ordering::Acquire) < thieves + 1 {
            thread::sleep(Duration::from_millis(1));
            let items = stats.items.load(Ordering::Relaxed);
            if items != last_items {
                last_items = items;
                last_change = Instant::now();
            } else if last_change.elapsed() > STALL_TIMEOUT && !state.aborted() {
                stalled = true;
                state.abort.store(true, Ordering::Relaxed);
            }
            crate::report::progress(items);
        }
    });

    if stalled {
        return Err(format!(
            "round {index}: no item consumed for {STALL_TIMEOUT:?} (a steal that never stops retrying, or a lost wake-up)"
        ));
    }
    if let Some(e) = state
        .first_error
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
    {
        return Err(format!("round {index}: {e}"));
    }
    // Every thread has stopped: every deque must be empty.
    let leftovers = std::iter::once(("the owner's deque".to_string(), &owner_stealer)).chain(
        peers
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("thief {i}'s deque"), s)),
    );
    for (name, stealer) in leftovers {
        let len = stealer.len();
        let mut ids = Vec::new();
        while let Steal::Success(item) = stealer.steal() {
            ids.push(*item);
        }
        if len != 0 || !ids.is_empty() {
            ids.truncate(8);
            return Err(format!(
                "round {index}: {name} holds {len} items after every thread stopped (first ids {ids:?})"
            ));
        }
    }
    for (id, slot) in ledger.iter().enumerate() {
        match slot.load(Ordering::Relaxed) {
            1 => {}
            0 => return Err(format!("round {index}: id {id} was never consumed (lost)")),
            k => return Err(format!("round {index}: id {id} consumed {k} times")),
        }
    }
    Ok(())
}

/// Runs the scenario; an `Err` names the invariant that broke.
pub(crate) fn run(opts: &Opts) -> Result<Outcome, String> {
    let start = Instant::now();
    let deadline = opts.deadline(start);
    // `--processes` scales the items per round (10 items per process).
    let n = (opts.processes as u64).saturating_mul(10).max(1);
    let rounds = if opts.soak { u64::MAX } else { 200 };
    println!(
        "deque: 1 owner + {} thieves, {} items per round, {}",
        opts.workers.max(1),
        count(n),
        if opts.soak {
            "soak".to_string()
        } else {
            format!("up to {rounds} rounds")
        },
    );
    let stats = Stats::default();
    let mut done = 0u64;
    while done < rounds && (done == 0 || Instant::now() < deadline) {
        round(opts, done, n, &stats)?;
        done += 1;
    }
    let items = stats.items.load(Ordering::Relaxed);
    let half_batches = stats.half_batches.load(Ordering::Relaxed);
    println!(
        "deque: {done} rounds, {} items: owner pops {}, steals {}, steal-half batches {} ({:.1} items each), retries {}",
        count(items),
        count(stats.owner_pops.load(Ordering::Relaxed)),
        count(stats.steals.load(Ordering::Relaxed)),
        count(half_batches),
        stats.half_items.load(Ordering::Relaxed) as f64 / half_batches.max(1) as f64,
        count(stats.retries.load(Ordering::Relaxed)),
    );
    Ok(Outcome {
        checked: "every item taken exactly once (owner pops, steals, steal-half)",
        count: items,
        unit: "items",
    })
}
