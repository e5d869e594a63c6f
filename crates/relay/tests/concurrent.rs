//! Concurrent tests of the public API with per-item ledgers: every message
//! is delivered exactly once or handed back exactly once, every route life
//! is removed exactly once, every allocated PID is unique.
//!
//! No test waits on time: threads meet at barriers and spin only on
//! conditions another running thread is bound to make true.

use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use stepsched_relay::{Package, Pid, PidAllocator, Receiver, RoutingTable, SendError};

/// An inbox that can be closed; closing and delivering exclude each other,
/// so after `close` returns nothing more is accepted.
struct Inbox {
    pid: Pid,
    state: Mutex<InboxState>,
}

struct InboxState {
    open: bool,
    got: Vec<u64>,
}

impl Inbox {
    fn new(pid: Pid, open: bool) -> Arc<Self> {
        Arc::new(Self {
            pid,
            state: Mutex::new(InboxState {
                open,
                got: Vec::new(),
            }),
        })
    }

    fn close(&self) {
        self.state.lock().unwrap().open = false;
    }
}

impl Receiver<u64> for Inbox {
    fn send(&self, package: Package<u64>) -> Result<(), SendError<u64>> {
        assert_eq!(package.to, self.pid, "routed to the wrong inbox");
        let mut state = self.state.lock().unwrap();
        if !state.open {
            return Err(SendError::Closed(package));
        }
        state.got.push(package.payload);
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Delivered,
    UnknownPid,
    Closed,
}

/// Senders race registrations, closes and compare-before-delete removals of
/// reused PIDs. Ledger: each message id ends in exactly one inbox or exactly
/// one error, the error hands back that very package, and the deterministic
/// routes (always open, always closed, never registered) give the expected
/// outcome.
#[test]
fn send_register_unregister_ledger() {
    const CHURN_PIDS: u64 = 16; // numbers 0..16: registered and removed in lives
    const OPEN: Pid = Pid::new(0, 100); // registered open throughout
    const CLOSED: Pid = Pid::new(0, 101); // registered closed throughout
    const NOWHERE: Pid = Pid::new(0, 102); // never registered
    const SENDERS: u64 = 2;
    const PER_SENDER: u64 = 4_000;
    const LIVES: usize = 60;

    let table: RoutingTable<Arc<Inbox>> = RoutingTable::new();
    let open = Inbox::new(OPEN, true);
    table.register(OPEN, Arc::clone(&open)).unwrap();
    let closed = Inbox::new(CLOSED, false);
    table.register(CLOSED, Arc::clone(&closed)).unwrap();

    let target_of = |id: u64| match id % 20 {
        17 => OPEN,
        18 => CLOSED,
        19 => NOWHERE,
        n => Pid::new(0, n % CHURN_PIDS),
    };

    let barrier = Barrier::new(2 + SENDERS as usize);
    let (every_life, errors) = thread::scope(|s| {
        // Two lifecycle threads, each owning half of the churned PIDs.
        let lifecycles: Vec<_> = (0..2_u64)
            .map(|half| {
                let (table, barrier) = (&table, &barrier);
                s.spawn(move || {
                    let mut lives = Vec::new();
                    barrier.wait();
                    for life in 0..LIVES {
                        let pid = Pid::new(0, half + 2 * (life as u64 % (CHURN_PIDS / 2)));
                        let inbox = Inbox::new(pid, true);
                        table.register(pid, Arc::clone(&inbox)).unwrap();
                        // A second registration of a live PID is refused.
                        let dup = Inbox::new(pid, true);
                        let refused = table.register(pid, Arc::clone(&dup)).unwrap_err();
                        assert!(Arc::ptr_eq(&refused.into_target(), &dup));
                        // Complete: close the inbox, then remove only our route.
                        inbox.close();
                        let removed = table.unregister_if_same(pid, &inbox).unwrap();
                        assert!(Arc::ptr_eq(&removed, &inbox));
                        lives.push(inbox);
                    }
                    lives
                })
            })
            .collect();
        let senders: Vec<_> = (0..SENDERS)
            .map(|t| {
                let (table, barrier) = (&table, &barrier);
                s.spawn(move || {
                    let mut errors = Vec::new();
                    barrier.wait();
                    for id in t * PER_SENDER..(t + 1) * PER_SENDER {
                        let to = target_of(id);
                        let package = Package::new(to, "n", id).with_sender(Pid::new(9, t));
                        if let Err(err) = table.send(package) {
                            let outcome = if err.is_closed() {
                                Outcome::Closed
                            } else {
                                Outcome::UnknownPid
                            };
                            let back = err.into_package();
                            assert_eq!((back.to, back.payload), (to, id), "not the same package");
                            assert_eq!(back.from, Some(Pid::new(9, t)));
                            errors.push((id, outcome));
                        }
                    }
                    errors
                })
            })
            .collect();
        let lives: Vec<Arc<Inbox>> = lifecycles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let errors: Vec<(u64, Outcome)> = senders
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        (lives, errors)
    });

    // Ledger of every message id.
    let total = SENDERS * PER_SENDER;
    let mut ledger: HashMap<u64, Outcome> = HashMap::new();
    let mut record = |id: u64, outcome: Outcome| {
        assert!(id < total, "unknown id {id}");
        if let Some(first) = ledger.insert(id, outcome) {
            panic!("id {id} seen twice: {first:?} and {outcome:?}");
        }
    };
    for inbox in every_life.iter().chain([&open, &closed]) {
        for &id in &inbox.state.lock().unwrap().got {
            assert_eq!(target_of(id), inbox.pid);
            record(id, Outcome::Delivered);
        }
    }
    for (id, outcome) in errors {
        record(id, outcome);
    }
    assert_eq!(
        ledger.len() as u64,
        total,
        "some ids neither delivered nor handed back"
    );

    // Routes that did not change must give the same outcome every time.
    for (&id, &outcome) in &ledger {
        let expected = match target_of(id) {
            OPEN => Outcome::Delivered,
            CLOSED => Outcome::Closed,
            NOWHERE => Outcome::UnknownPid,
            _ => continue,
        };
        assert_eq!(outcome, expected, "id {id}");
    }
    // Every life removed its own route; only the two fixed routes remain.
    assert_eq!(every_life.len(), 2 * LIVES);
    let mut left = table.pids();
    left.sort();
    assert_eq!(left, [OPEN, CLOSED]);
}

/// Many threads take turns holding one PID. Each life must be removed by
/// its own `unregister_if_same` and never by a stale handle of an earlier
/// life (pitfall 6 of the reference). Ledger: each life removed exactly once.
#[test]
fn compare_before_delete_under_reuse() {
    const THREADS: usize = 4;
    const LIVES: usize = 200;
    let pid = Pid::new(0, 1);
    let table: RoutingTable<Arc<(usize, usize)>> = RoutingTable::new();
    let barrier = Barrier::new(THREADS);

    let removed: Vec<(usize, usize)> = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (table, barrier) = (&table, &barrier);
                s.spawn(move || {
                    let mut stale: Vec<Arc<(usize, usize)>> = Vec::new();
                    let mut removed = Vec::new();
                    barrier.wait();
                    for life in 0..LIVES {
                        let mine = Arc::new((t, life));
                        let mut offer = Arc::clone(&mine);
                        // The holder removes its route without waiting on
                        // anyone, so this loop always ends.
                        while let Err(err) = table.register(pid, offer) {
                            offer = err.into_target();
                            thread::yield_now();
                        }
                        // Stale handles of earlier lives never match the
                        // live route, whoever holds it.
                        for old in &stale {
                            assert!(table.unregister_if_same(pid, old).is_none());
                        }
                        let got = table
                            .unregister_if_same(pid, &mine)
                            .expect("own route gone");
                        assert!(Arc::ptr_eq(&got, &mine));
                        removed.push(*got);
                        stale.push(mine);
                        if stale.len() > 8 {
                            stale.remove(0);
                        }
                    }
                    removed
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });

    let mut removed = removed;
    removed.sort_unstable();
    let expected: Vec<(usize, usize)> = (0..THREADS)
        .flat_map(|t| (0..LIVES).map(move |l| (t, l)))
        .collect();
    assert_eq!(removed, expected);
    assert!(table.is_empty());
}

/// Concurrent `allocate` on one allocator: exactly the numbers `1..=N`.
#[test]
fn allocator_hands_out_each_number_once() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 5_000;
    let pids = PidAllocator::new(1);
    let barrier = Barrier::new(THREADS);
    let mut all: Vec<Pid> = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    (0..PER_THREAD).map(|_| pids.allocate()).collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    all.sort_unstable();
    let expected: Vec<Pid> = (1..=(THREADS * PER_THREAD) as u64)
        .map(|n| Pid::new(1, n))
        .collect();
    assert_eq!(all, expected);
}
