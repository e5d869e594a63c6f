//! The `pool` stress scenario.
//!
//! Rounds until the time budget is spent (one round at least; in `--quick`
//! mode a few small ones). Each round starts a `stepsched_pool::Pool` with
//! `--workers` workers and runs a forest of item trees: the roots are
//! submitted from outside by two submitter threads, and every item queues
//! its children (heap order inside its tree) through a path chosen from the
//! round's seed — its own deque, another worker's inbox, the global queue,
//! or `Pool::submit` from inside a worker. One item in 512 panics on
//! purpose.
//!
//! Three of four rounds end gracefully (`shutdown`, or dropping the pool);
//! every fourth calls `shutdown_now` while the submitters are still going.
//! Every item carries a per-id ledger entry for its creation, its runs and
//! its drop, checked after the round:
//!
//! * every created item is dropped exactly once (nothing leaked or freed
//!   twice) and runs at most once;
//! * after a graceful end, every id of the forest was created and ran
//!   exactly once, and the pool's counters agree (items run = ids, panics =
//!   panicking ids);
//! * after `shutdown_now`, items refused at submission come back to the
//!   submitter, and nothing runs twice.
//!
//! A summary line of the summed per-worker counters (of the rounds that
//! joined their workers before reading them) ends the scenario.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Once, OnceLock, Weak};
use std::thread;
use std::time::Instant;

use stepsched_pool::{Pool, WorkerContext, WorkerStats};

use crate::Opts;
use crate::report::{Outcome, count, progress};

/// One item: an id whose drop is recorded.
struct Item {
    id: u32,
    round: Arc<Round>,
}

impl Item {
    fn new(id: u32, round: &Arc<Round>) -> Item {
        round.created[id as usize].fetch_add(1, Ordering::Relaxed);
        Item {
            id,
            round: round.clone(),
        }
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        self.round.dropped[self.id as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// The plan and the ledgers of one round.
struct Round {
    seed: u64,
    /// Items in the forest.
    items: u32,
    /// Items per tree; tree `t` holds ids `t * tree .. (t + 1) * tree`.
    tree: u32,
    created: Vec<AtomicU8>,
    ran: Vec<AtomicU8>,
    dropped: Vec<AtomicU8>,
    /// The pool, for `Pool::submit` from inside a worker.
    pool: OnceLock<Weak<Pool<Item>>>,
}

impl Round {
    /// A reproducible random number for `(seed, id, salt)`, whichever
    /// worker asks and when: the first output of a generator seeded by
    /// them (a stateless draw, since items run in any order).
    fn hash(&self, id: u32, salt: u64) -> u64 {
        fastrand::Rng::with_seed(self.seed ^ (u64::from(id) << 8) ^ salt).u64(..)
    }

    fn panics(&self, id: u32) -> bool {
        self.hash(id, 1).is_multiple_of(512)
    }

    /// Runs one item: records it, queues its children, maybe panics.
    fn run(self: &Arc<Self>, item: Item, ctx: &WorkerContext<Item>) {
        let id = item.id;
        self.ran[id as usize].fetch_add(1, Ordering::Relaxed);
        let tree_start = id - id % self.tree;
        let local = id - tree_start;
        for child in [2 * local + 1, 2 * local + 2] {
            if child >= self.tree || tree_start + child >= self.items {
                continue;
            }
            let child = Item::new(tree_start + child, self);
            match self.hash(child.id, 2) % 8 {
                0 => {
                    let worker = (self.hash(child.id, 3) % ctx.workers() as u64) as usize;
                    if let Err(e) = ctx.submit_to(worker, child) {
                        panic!("submit_to a valid worker failed: {e}");
                    }
                }
                1 => ctx.inject(child),
                2 => match self.pool.get().and_then(Weak::upgrade) {
                    // From inside a worker this is a local push, accepted
                    // even while the pool shuts down.
                    Some(pool) => {
                        if pool.submit(child).is_err() {
                            panic!("a worker's own submit was refused");
                        }
                    }
                    None => ctx.push(child),
                },
                _ => ctx.push(child),
            }
        }
        drop(item);
        if self.panics(id) {
            panic!("deliberate stress panic in item {id}");
        }
    }
}

/// Silences the deliberate panics (every other panic still reports).
fn quiet_deliberate_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let deliberate = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|s| s.starts_with("deliberate stress panic"));
            if !deliberate {
                default(info);
            }
        }));
    });
}

/// How a round ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Shutdown,
    Drop,
    ShutdownNow,
}

/// Totals over all rounds.
#[derive(Default)]
struct Totals {
    rounds: u64,
    forced: u64,
    items: u64,
    refused: u64,
    dropped_unrun: u64,
    stats: WorkerStats,
}

/// Runs the scenario; an `Err` names the invariant that broke.
pub(crate) fn run(opts: &Opts) -> Result<Outcome, String> {
    quiet_deliberate_panics();
    let start = Instant::now();
    let deadline = opts.deadline(start);
    let max_rounds = if opts.quick { 8 } else { u64::MAX };
    let mut seeds = fastrand::Rng::with_seed(opts.seed);
    let mut totals = Totals::default();
    loop {
        let seed = seeds.u64(..);
        let end = match totals.rounds % 4 {
            3 => End::ShutdownNow,
            2 => End::Drop,
            _ => End::Shutdown,
        };
        round(opts, seed, end, &mut totals)
            .map_err(|e| format!("round {} (seed {seed}, {end:?}): {e}", totals.rounds))?;
        totals.rounds += 1;
        progress(totals.items);
        if Instant::now() >= deadline || totals.rounds >= max_rounds {
            break;
        }
    }
    let s = totals.stats;
    println!(
        "pool: {} rounds ({} forced) on {} workers: {} items run, {} refused at shutdown, \
         {} dropped unrun; worker counters (of the rounds not ended by a drop): run {}, stolen {}, steal attempts {}, global pops {}, \
         inbox pops {}, parks {}, spins {}, panics {}",
        totals.rounds,
        totals.forced,
        opts.workers,
        count(totals.items),
        count(totals.refused),
        count(totals.dropped_unrun),
        count(s.items_run),
        count(s.items_stolen),
        count(s.steal_attempts),
        count(s.global_pops),
        count(s.inbox_pops),
        count(s.parks),
        count(s.spins),
        s.panics,
    );
    Ok(Outcome {
        checked: "every item run exactly once (none twice in forced rounds), panics contained, shutdown drops the rest",
        count: totals.items,
        unit: "items",
    })
}

fn round(opts: &Opts, seed: u64, end: End, totals: &mut Totals) -> Result<(), String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let items = opts.processes.clamp(1, 1 << 20) as u32 * rng.u32(4..=16);
    let tree = rng.u32(1..=256);
    let round = Arc::new(Round {
        seed,
        items,
        tree,
        created: (0..items).map(|_| AtomicU8::new(0)).collect(),
        ran: (0..items).map(|_| AtomicU8::new(0)).collect(),
        dropped: (0..items).map(|_| AtomicU8::new(0)).collect(),
        pool: OnceLock::new(),
    });
    let r = round.clone();
    let pool = Arc::new(
        Pool::builder()
            .workers(opts.workers)
            .build(move |item: Item, ctx: &WorkerContext<Item>| r.run(item, ctx))
            .map_err(|e| format!("cannot start the pool: {e}"))?,
    );
    // `Pool::submit` from inside a worker needs a handle to the pool. Not
    // in `Drop` rounds: a worker holding an upgraded handle could make its
    // own drop the last one, and the round would end before the pool.
    if end != End::Drop && round.pool.set(Arc::downgrade(&pool)).is_err() {
        unreachable!("set once");
    }

    // Two submitters split the roots; each returns how many were refused.
    let roots: Vec<u32> = (0..items).step_by(tree as usize).collect();
    let submitters: Vec<_> = (0..2)
        .map(|s| {
            let pool = pool.clone();
            let round = round.clone();
            let mine: Vec<u32> = roots.iter().copied().skip(s).step_by(2).collect();
            thread::spawn(move || {
                let mut refused = 0u64;
                for id in mine {
                    let item = Item::new(id, &round);
                    if pool.submit(item).is_err() {
                        refused += 1; // the item came back and is dropped here
                    }
                }
                refused
            })
        })
        .collect();

    if end == End::ShutdownNow {
        pool.shutdown_now();
    }
    let mut refused = 0;
    for s in submitters {
        refused += s.join().map_err(|_| "a submitter panicked".to_string())?;
    }
    match end {
        End::Shutdown => pool.shutdown(),
        End::ShutdownNow => pool.shutdown_now(),
        End::Drop => {}
    }
    // Final once the workers are joined; `Drop` rounds join in the drop.
    let stats = (end != End::Drop).then(|| {
        pool.stats()
            .iter()
            .fold(WorkerStats::default(), |acc, s| acc.merged(s))
    });
    // The last strong reference: for `End::Drop` this shuts the pool down.
    drop(pool);

    // Ledger checks.
    let mut ran_total = 0u64;
    let mut panicking = 0u64;
    let mut unrun = 0u64;
    for id in 0..items {
        let i = id as usize;
        let created = round.created[i].load(Ordering::Relaxed);
        let ran = round.ran[i].load(Ordering::Relaxed);
        let dropped = round.dropped[i].load(Ordering::Relaxed);
        if created > 1 {
            return Err(format!("item {id} created {created} times"));
        }
        if dropped != created {
            return Err(format!(
                "item {id} created {created} times but dropped {dropped} times"
            ));
        }
        if ran > created {
            return Err(format!("item {id} ran {ran} times (created {created})"));
        }
        if end != End::ShutdownNow && ran != 1 {
            return Err(format!("item {id} ran {ran} times after a graceful end"));
        }
        if ran == 1 && round.panics(id) {
            panicking += 1;
        }
        if created == 1 && ran == 0 {
            unrun += 1;
        }
        ran_total += u64::from(ran);
    }
    if let Some(stats) = &stats {
        if stats.items_run != ran_total {
            return Err(format!(
                "counters say {} items ran, the ledger {ran_total}",
                stats.items_run
            ));
        }
        if stats.panics != panicking {
            return Err(format!(
                "counters say {} panics, the ledger {panicking}",
                stats.panics
            ));
        }
    }
    if end != End::ShutdownNow && refused != 0 {
        return Err(format!("{refused} submissions refused before shutdown"));
    }

    totals.forced += u64::from(end == End::ShutdownNow);
    totals.items += ran_total;
    totals.refused += refused;
    totals.dropped_unrun += unrun;
    if let Some(stats) = stats {
        totals.stats = totals.stats.merged(&stats);
    }
    Ok(())
}
