//! The exactly-once checker: many processes on two workers, random yields
//! completed at once, from other threads and out of order, messages from
//! two senders. No two steps of one process overlap, every completion and
//! message is seen exactly once and in order per sender, every process
//! completes once and is closed once.
#![cfg(not(stepsched_loom))]

mod common;

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use common::*;
use stepsched::{Completer, Error, Event, Status};

const PROCESSES: u64 = 300;
const SCENARIOS: u64 = 4;
const SENDERS: i64 = 2;
const MESSAGES: i64 = 40;
const FIN: i64 = 999_999;

/// xorshift64*: a small deterministic generator per process.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }
}

fn checked_process(probe: &Arc<Probe>, seed: u64) -> FnProc {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let rounds = 3 + rng.next(3);
    let mut round = 0;
    let mut waiting: Vec<u64> = Vec::new();
    let mut next_seq = [0i64; SENDERS as usize];
    let mut fins = 0;
    let mut sum = 0i64;
    FnProc::new(probe, move |events, out, _| {
        for e in events {
            match e {
                Event::Completion { tag, result } => {
                    let Some(i) = waiting.iter().position(|t| *t == tag) else {
                        return Err(Error::failed(format!("completion {tag} not awaited")));
                    };
                    waiting.swap_remove(i);
                    let v = result.map_err(|e| Error::failed(format!("tag {tag}: {e}")))?;
                    if v != tag as i64 * 2 {
                        return Err(Error::failed(format!("tag {tag} got {v}")));
                    }
                    sum += v;
                }
                Event::Message { data: m, .. } => {
                    let (sender, seq) = ((m / 1_000_000) as usize, m % 1_000_000);
                    if seq == FIN {
                        if next_seq[sender] != MESSAGES {
                            return Err(Error::failed(format!("FIN after {}", next_seq[sender])));
                        }
                        fins += 1;
                    } else if seq != next_seq[sender] {
                        return Err(Error::failed(format!(
                            "sender {sender}: got {seq}, expected {}",
                            next_seq[sender]
                        )));
                    } else {
                        next_seq[sender] += 1;
                    }
                }
                Event::Cancel => return Err(Error::failed("cancelled")),
            }
        }
        if !waiting.is_empty() {
            out.set_status(Status::Yield);
            return Ok(());
        }
        if round < rounds {
            // Now and then just ask to run again before the next round.
            if rng.next(4) == 0 {
                out.set_status(Status::Continue);
                return Ok(());
            }
            round += 1;
            for k in 0..1 + rng.next(3) {
                let tag = round * 10 + k;
                let name = ["inline", "thread", "shuffle"][rng.next(3) as usize];
                out.push_yield(tag, cmd(name, tag as i64));
                waiting.push(tag);
            }
            out.set_status(Status::Yield);
        } else if fins == SENDERS {
            out.set_status(Status::Done(sum));
        } else {
            out.set_status(Status::Idle);
        }
        Ok(())
    })
}

/// A command and its completer, handed to another thread.
type Work = (Cmd, Completer<FnProc>);

/// Completes what it receives from a pool of threads.
fn completer_threads(n: usize) -> (Sender<Work>, Vec<thread::JoinHandle<()>>) {
    let (tx, rx) = channel::<Work>();
    let rx = Arc::new(Mutex::new(rx));
    let threads = (0..n)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || {
                loop {
                    let next = rx.lock().unwrap().recv();
                    match next {
                        Ok((c, done)) => {
                            done.complete(Ok(c.arg * 2));
                        }
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    (tx, threads)
}

/// Collects whatever has arrived, then completes it in a shuffled order.
fn shuffler(rx: Receiver<Work>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut rng = Rng(7);
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            batch.extend(rx.try_iter());
            while !batch.is_empty() {
                let (c, done) = batch.swap_remove(rng.next(batch.len() as u64) as usize);
                done.complete(Ok(c.arg * 2));
            }
        }
    })
}

#[test]
fn every_process_steps_alone_and_completes_exactly_once() {
    for scenario in 0..SCENARIOS {
        run_scenario(scenario);
    }
}

fn run_scenario(scenario: u64) {
    let completed = Ledger::new();
    let (pool_tx, pool) = completer_threads(2);
    let (shuffle_tx, shuffle_rx) = channel();
    let shuffle = shuffler(shuffle_rx);
    let s = {
        let completed = completed.clone();
        let pool_tx = Mutex::new(pool_tx);
        let shuffle_tx = Mutex::new(shuffle_tx);
        Arc::new(
            Builder::new()
                .workers(2)
                .handler("inline", |c: Cmd, done: Completer<FnProc>| {
                    done.complete(Ok(c.arg * 2));
                })
                .handler("thread", move |c: Cmd, done: Completer<FnProc>| {
                    pool_tx.lock().unwrap().send((c, done)).unwrap();
                })
                .handler("shuffle", move |c: Cmd, done: Completer<FnProc>| {
                    shuffle_tx.lock().unwrap().send((c, done)).unwrap();
                })
                .on_complete(move |pid, _| completed.record(pid))
                .build()
                .unwrap(),
        )
    };
    let probes: Vec<_> = (0..PROCESSES).map(|_| Probe::new()).collect();
    let handles: Vec<_> = probes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            s.submit(
                pid(i as u64),
                checked_process(p, scenario * PROCESSES + i as u64),
                "main",
                0,
            )
            .unwrap()
        })
        .collect();
    let barrier = Arc::new(Barrier::new(SENDERS as usize));
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let (s, barrier) = (s.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                for seq in (0..MESSAGES).chain([FIN]) {
                    for p in 0..PROCESSES {
                        s.send(pid(p), sender * 1_000_000 + seq).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in senders {
        t.join().unwrap();
    }
    for (i, h) in handles.into_iter().enumerate() {
        let r = join(h);
        assert!(r.is_ok(), "process {i}: {r:?}");
    }
    for (i, p) in probes.iter().enumerate() {
        p.wait_closed(1);
        let c = p.counts();
        assert_eq!((c.inits, c.closes), (1, 1), "process {i}");
        assert_eq!(p.overlaps(), 0, "process {i}: two steps overlapped");
    }
    completed.assert_exactly_once((0..PROCESSES).map(pid));
    let stats = s.stats();
    assert_eq!(
        (stats.submitted, stats.completed, stats.failed),
        (PROCESSES, PROCESSES, 0)
    );
    let report = s.shutdown(std::time::Duration::from_secs(5)).unwrap();
    assert_eq!((report.cancelled, report.forced), (0, 0));
    // The last handle owns the handlers: dropping it closes their
    // channels, so the completer threads end (a leaked core would hang
    // here).
    drop(s);
    for t in pool {
        t.join().unwrap();
    }
    shuffle.join().unwrap();
}
