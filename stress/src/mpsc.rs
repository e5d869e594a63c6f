//! The `mpsc` stress scenario: `--workers` producers (at least 2) and one
//! consumer on one long-lived `stepsched-mpsc` queue, every item checked
//! with per-id ledgers.
//!
//! The queue lives across rounds, so its blocks are recycled again and again
//! and its 32-bit index wraps; each round is one generation. In a round the
//! producers push their ids `0..n` in random bursts (yielding now and then),
//! each item carrying its generation, producer and sequence number, while
//! the consumer drains with a reused buffer (checking `has_events` against
//! what the drain returns). The round ends in one of three ways, chosen at
//! random:
//!
//! * **complete**: every item is drained, then `reset` must find no
//!   leftovers;
//! * **close**: after a random number of items the consumer closes; later
//!   pushes must be refused with `Closed` and hand their item back, and what
//!   was accepted must still be drained;
//! * **reset**: after a random number of items the consumer resets while the
//!   producers are still pushing with the ending generation; leftovers must
//!   belong to it, and nothing of it may be drained afterwards (stale pushes
//!   are refused).
//!
//! Invariants, checked per item: each id is drained, returned in leftovers
//! or handed back exactly once, and dropped exactly once (a drop ledger);
//! per producer, the accepted items come out in push order and form a prefix
//! of what it pushed (no acceptance after a refusal); a drained item belongs
//! to the current generation; `has_events` true means the next drain returns
//! something.
//!
//! Items per round are `10 * --processes` per producer. At most 300 rounds
//! are run, no new round starts after `--seconds`; `soak` repeats rounds
//! until `--seconds` pass.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use stepsched_mpsc::{PushError, Receiver};

use crate::Opts;
use crate::report::{Outcome, count, progress};

/// A round fails if nothing is drained for this long while producers run.
const STALL_TIMEOUT: Duration = Duration::from_secs(20);

/// An event: its id, generation and place in its producer's sequence. Drops
/// are counted per id, so a double drop (or a leak) breaks the ledger.
struct Item {
    id: usize,
    generation: u32,
    producer: usize,
    seq: usize,
    /// The drop ledger: allocated once per run (the queue, and so the item
    /// type, outlives every round), zeroed at the start of each round.
    drops: &'static [AtomicU8],
}

impl Drop for Item {
    fn drop(&mut self) {
        // Relaxed: read after the threads are joined.
        self.drops[self.id].fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    Complete,
    Close,
    Reset,
}

/// Totals over every round.
#[derive(Default)]
struct Totals {
    items: u64,
    drained: u64,
    refused_closed: u64,
    refused_stale: u64,
    leftovers: u64,
    endings: [u64; 3],
}

/// What one producer hands back: the items refused to it, in order.
type Refused = Vec<(Item, bool)>;

fn producer(
    tx: stepsched_mpsc::Sender<Item>,
    p: usize,
    n: usize,
    drops: &'static [AtomicU8],
    seed: u64,
    finished: &AtomicUsize,
) -> Result<Refused, String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let generation = tx.generation().get();
    let mut refused: Refused = Vec::new();
    let mut seq = 0;
    while seq < n {
        let burst = rng.usize(1..=64).min(n - seq);
        for _ in 0..burst {
            let item = Item {
                id: p * n + seq,
                generation,
                producer: p,
                seq,
                drops,
            };
            match tx.push(item) {
                Ok(()) if !refused.is_empty() => {
                    finished.fetch_add(1, Ordering::Release);
                    return Err(format!("producer {p}: item {seq} accepted after a refusal"));
                }
                Ok(()) => {}
                Err(PushError::Closed(item)) => refused.push((item, false)),
                Err(PushError::StaleGeneration(item)) => refused.push((item, true)),
            }
            seq += 1;
        }
        if rng.u8(..) < 16 {
            thread::yield_now();
        }
    }
    // Release: the consumer's Acquire load of `finished` then sees every
    // push of this producer as completed.
    finished.fetch_add(1, Ordering::Release);
    Ok(refused)
}

/// Consumer-side bookkeeping of one round.
struct Ledger {
    /// Times each id was drained or returned in leftovers.
    seen: Vec<u8>,
    /// Next expected sequence number per producer (drained or leftover).
    next: Vec<usize>,
}

impl Ledger {
    fn take(&mut self, item: &Item, expected_generation: u32, what: &str) -> Result<(), String> {
        if item.generation != expected_generation {
            return Err(format!(
                "{what}: item {} of generation {} where generation {expected_generation} was expected",
                item.id, item.generation
            ));
        }
        if item.seq != self.next[item.producer] {
            return Err(format!(
                "{what}: producer {} out of order: item {} where {} was expected",
                item.producer, item.seq, self.next[item.producer]
            ));
        }
        self.next[item.producer] += 1;
        self.seen[item.id] += 1;
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn round(
    rx: &mut Receiver<Item>,
    opts: &Opts,
    round_no: u64,
    n: usize,
    drops: &'static [AtomicU8],
    rng: &mut fastrand::Rng,
    totals: &mut Totals,
) -> Result<(), String> {
    let producers = opts.workers.max(2);
    let ids = producers * n;
    for d in drops {
        // Relaxed: no item exists between rounds.
        d.store(0, Ordering::Relaxed);
    }
    let ending = match rng.u8(0..3) {
        0 => Ending::Complete,
        1 => Ending::Close,
        _ => Ending::Reset,
    };
    let end_after = rng.usize(0..=ids);
    let generation = rx.generation().get();
    let finished = AtomicUsize::new(0);
    let mut ledger = Ledger {
        seen: vec![0; ids],
        next: vec![0; producers],
    };
    let mut refused_all: Vec<Refused> = Vec::new();
    let mut result: Result<(), String> = Ok(());
    thread::scope(|s| {
        let handles: Vec<_> = (0..producers)
            .map(|p| {
                let tx = rx.sender();
                let finished = &finished;
                let seed = opts.seed ^ round_no.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ p as u64;
                s.spawn(move || producer(tx, p, n, drops, seed, finished))
            })
            .collect();
        result = consume(
            rx,
            &mut ledger,
            generation,
            ending,
            end_after,
            producers,
            &finished,
            rng,
            totals,
        );
        for h in handles {
            match h.join() {
                Ok(Ok(refused)) => refused_all.push(refused),
                Ok(Err(e)) => result = result.clone().and(Err(e)),
                Err(_) => result = result.clone().and(Err("a producer panicked".to_string())),
            }
        }
    });
    result?;

    // Refusals: per producer a suffix of its sequence, with the right cause.
    for (p, refused) in refused_all.iter().enumerate() {
        for (k, (item, stale)) in refused.iter().enumerate() {
            let expected_seq = ledger.next[p] + k;
            if item.seq != expected_seq {
                return Err(format!(
                    "producer {p}: refused item {} where {expected_seq} was expected",
                    item.seq
                ));
            }
            let cause_ok = match ending {
                Ending::Complete => false,
                Ending::Close => !*stale,
                // Racing the reset: closed during it, or stale after it.
                Ending::Reset => true,
            };
            if !cause_ok {
                return Err(format!(
                    "producer {p}: item {} refused ({}) in a round ending {ending:?}",
                    item.seq,
                    if *stale { "stale" } else { "closed" }
                ));
            }
            ledger.seen[item.id] += 1;
            if *stale {
                totals.refused_stale += 1;
            } else {
                totals.refused_closed += 1;
            }
        }
    }
    drop(refused_all);
    for (id, &count) in ledger.seen.iter().enumerate() {
        if count != 1 {
            return Err(format!(
                "round {round_no}: item {id} accounted for {count} times (expected once)"
            ));
        }
    }
    for (id, d) in drops.iter().enumerate().take(ids) {
        let count = d.load(Ordering::Relaxed);
        if count != 1 {
            return Err(format!(
                "round {round_no}: item {id} dropped {count} times (expected once)"
            ));
        }
    }
    totals.items += ids as u64;
    totals.endings[ending as usize] += 1;
    Ok(())
}

/// The consumer's side of a round; on return the producers may still run
/// only in the error case.
#[allow(clippy::too_many_arguments)]
fn consume(
    rx: &mut Receiver<Item>,
    ledger: &mut Ledger,
    generation: u32,
    ending: Ending,
    end_after: usize,
    producers: usize,
    finished: &AtomicUsize,
    rng: &mut fastrand::Rng,
    totals: &mut Totals,
) -> Result<(), String> {
    let mut buf = Vec::with_capacity(rng.usize(0..256));
    let mut current = generation;
    let mut taken = 0usize;
    let mut ended = false;
    let mut last_progress = Instant::now();
    loop {
        // Acquire: pairs with the producers' Release increment, so once all
        // are counted every accepted push is complete and drainable.
        let all_finished = finished.load(Ordering::Acquire) == producers;
        if !ended && (taken >= end_after || all_finished) {
            ended = true;
            match ending {
                Ending::Complete => {}
                Ending::Close => rx.close(),
                Ending::Reset => {
                    let mut leftovers = Vec::new();
                    current = rx.reset(&mut leftovers).get();
                    if current != (generation + 1) & (u32::MAX >> 1) {
                        return Err(format!("reset from generation {generation} gave {current}"));
                    }
                    for item in &leftovers {
                        ledger.take(item, generation, "leftovers")?;
                    }
                    totals.leftovers += leftovers.len() as u64;
                    taken += leftovers.len();
                }
            }
        }
        let promised = rng.bool() && rx.has_events();
        buf.clear();
        let got = rx.drain_into(&mut buf);
        if got != buf.len() {
            return Err(format!(
                "drain_into returned {got} but appended {}",
                buf.len()
            ));
        }
        if promised && got == 0 {
            return Err("has_events was true but the drain returned nothing".to_string());
        }
        for item in &buf {
            ledger.take(item, current, "drain")?;
        }
        taken += got;
        totals.drained += got as u64;
        if got > 0 {
            last_progress = Instant::now();
        } else if all_finished {
            // Everything accepted was complete before this drain.
            if rx.has_events() {
                return Err("has_events true after a drain of a quiet queue".to_string());
            }
            break;
        } else {
            if last_progress.elapsed() > STALL_TIMEOUT {
                return Err(format!(
                    "no progress for {STALL_TIMEOUT:?} with producers running"
                ));
            }
            thread::yield_now();
        }
    }
    // End of the round: a fresh generation for the next one. Nothing of
    // this round may be left.
    let mut leftovers = Vec::new();
    rx.reset(&mut leftovers);
    if !leftovers.is_empty() {
        return Err(format!(
            "{} items left after the round was drained",
            leftovers.len()
        ));
    }
    Ok(())
}

/// Runs the scenario; an `Err` names the invariant that broke.
pub(crate) fn run(opts: &Opts) -> Result<Outcome, String> {
    let start = Instant::now();
    let deadline = opts.deadline(start);
    let n = opts.processes.saturating_mul(10).max(1);
    let producers = opts.workers.max(2);
    let rounds = if opts.soak { u64::MAX } else { 300 };
    println!(
        "mpsc: {producers} producers + 1 consumer, {} items per producer per round, {}",
        count(n as u64),
        if opts.soak {
            "soak".to_string()
        } else {
            format!("up to {rounds} rounds")
        },
    );
    let mut rng = fastrand::Rng::with_seed(opts.seed);
    let drops: &'static [AtomicU8] =
        Box::leak((0..producers * n).map(|_| AtomicU8::new(0)).collect());
    let mut rx = Receiver::new();
    let mut totals = Totals::default();
    let mut done = 0u64;
    while done < rounds && (done == 0 || Instant::now() < deadline) {
        round(&mut rx, opts, done, n, drops, &mut rng, &mut totals)
            .map_err(|e| format!("round {done}: {e}"))?;
        done += 1;
        progress(totals.items);
    }
    println!(
        "mpsc: {done} rounds ({} complete, {} closed early, {} reset early, last generation {}), {} items: \
         {} drained, {} in leftovers, {} refused closed, {} refused stale",
        totals.endings[0],
        totals.endings[1],
        totals.endings[2],
        rx.generation(),
        count(totals.items),
        count(totals.drained),
        count(totals.leftovers),
        count(totals.refused_closed),
        count(totals.refused_stale),
    );
    Ok(Outcome {
        checked: "every item drained, left over or refused, and dropped, exactly once (close, reset, generations)",
        count: totals.items,
        unit: "items",
    })
}
