//! Addresses (a PID resolved once) and the bound on one step's batch: a
//! flooded process sees its messages in bounded batches, in order, each
//! once, and is never parked with messages left in its queue.
#![cfg(not(stepsched_loom))]

mod common;

use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use common::*;
use stepsched::{Event, SendError, Status};

/// The most events the scheduler hands one step from the queue.
const MAX_BATCH: usize = 256;

/// A process that, at its first step, tells the test it runs and waits
/// until the test has sent everything (so every message arrives while it
/// is Running); then it records each step's messages and finishes after
/// `total` of them, with their sum.
fn flooded(
    probe: &Arc<Probe>,
    total: usize,
    started: std::sync::mpsc::Sender<()>,
    go: std::sync::mpsc::Receiver<()>,
    batches: Arc<Mutex<Vec<Vec<i64>>>>,
) -> FnProc {
    let mut first = Some((started, go));
    let mut seen = 0;
    let mut sum = 0;
    FnProc::new(probe, move |events, out, _| {
        if let Some((started, go)) = first.take() {
            started.send(()).unwrap();
            go.recv().unwrap();
        }
        let got: Vec<i64> = events.into_iter().filter_map(Event::into_data).collect();
        seen += got.len();
        sum += got.iter().sum::<i64>();
        batches.lock().unwrap().push(got);
        out.set_status(if seen == total {
            Status::Done(sum)
        } else {
            Status::Idle
        });
        Ok(())
    })
}

#[test]
fn a_flooded_process_gets_bounded_batches_and_every_message() {
    const TOTAL: usize = 1_000;
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let (started_tx, started) = channel();
    let (go, go_rx) = channel();
    let batches = Arc::new(Mutex::new(Vec::new()));
    let h = s
        .submit(
            pid(1),
            flooded(&probe, TOTAL, started_tx, go_rx, batches.clone()),
            "main",
            0,
        )
        .unwrap();
    let to = h.address();
    started.recv().unwrap();
    for m in 0..TOTAL as i64 {
        to.send(m).unwrap();
    }
    go.send(()).unwrap();
    // All were queued before the second step: with no bound it would take
    // all 1 000 at once; with the bound, and without the rule that a run
    // which took a full batch does not park, the process would park with
    // 744 messages queued and never finish.
    let expected: i64 = (0..TOTAL as i64).sum();
    assert_eq!(join(h), Ok(expected));
    let batches = batches.lock().unwrap();
    let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    assert!(
        sizes.iter().all(|&n| n <= MAX_BATCH),
        "a batch above {MAX_BATCH}: {sizes:?}"
    );
    assert_eq!(sizes, [0, 256, 256, 256, 232]);
    let order: Vec<i64> = batches.iter().flatten().copied().collect();
    assert_eq!(order, (0..TOTAL as i64).collect::<Vec<_>>());
}

#[test]
fn an_address_sends_without_a_lookup_and_closes_with_its_process() {
    let s = Builder::new().workers(2).build().unwrap();
    let probe = Probe::new();
    let h = s
        .submit(pid(1), idle_until_message(&probe), "main", 0)
        .unwrap();
    let by_pid = s.address(pid(1)).expect("the process is live");
    let by_join = h.address();
    assert_eq!(by_pid, by_join);
    assert_eq!(by_pid.pid(), pid(1));
    assert!(!by_pid.is_closed());
    by_pid.send(42).unwrap();
    assert_eq!(join(h), Ok(42));
    assert!(by_join.is_closed());
    match by_join.send(7) {
        Err(SendError::Closed(package)) => {
            assert_eq!(package.to, pid(1));
            assert_eq!(package.payload, 7);
            assert_eq!(package.from, None);
        }
        other => panic!("expected Closed, got {other:?}"),
    }
    assert!(s.address(pid(1)).is_none());
}

#[test]
fn an_address_names_one_process_not_its_pid() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let first = s
        .submit(pid(1), idle_until_message(&probe), "main", 0)
        .unwrap();
    let old = first.address();
    s.send(pid(1), 1).unwrap();
    assert_eq!(join(first), Ok(1));
    // A new process under the same PID: the old address stays closed and
    // does not reach it.
    let second = s
        .submit(pid(1), idle_until_message(&probe), "main", 0)
        .unwrap();
    assert!(matches!(old.send(5), Err(SendError::Closed(_))));
    let new = s.address(pid(1)).unwrap();
    assert_ne!(old, new);
    new.send_from(pid(9), 2).unwrap();
    assert_eq!(join(second), Ok(2));
}

#[test]
fn a_sender_reaches_the_step_through_an_address() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let from = Arc::new(Mutex::new(None));
    let saw = from.clone();
    let h = s
        .submit(
            pid(1),
            FnProc::new(&probe, move |events, out, _| {
                match events.into_iter().next() {
                    Some(event) => {
                        *saw.lock().unwrap() = Some(event.sender());
                        out.set_status(Status::Done(0));
                    }
                    None => out.set_status(Status::Idle),
                }
                Ok(())
            }),
            "main",
            0,
        )
        .unwrap();
    h.address().send_from(pid(3), 1).unwrap();
    assert_eq!(join(h), Ok(0));
    assert_eq!(*from.lock().unwrap(), Some(Some(pid(3))));
}

/// Finishes at its first step; its `close` tells the test it runs and
/// waits for it, holding the process between its transition to Complete
/// and the close of its queue.
struct SlowClose {
    closing: std::sync::mpsc::Sender<()>,
    go: std::sync::mpsc::Receiver<()>,
}

impl stepsched::Process for SlowClose {
    type Input = ();
    type Message = i64;
    type Response = i64;
    type Command = String;
    type Output = i64;

    fn init(
        &mut self,
        _: &stepsched::Context<'_, Self>,
        _: &str,
        (): (),
    ) -> Result<(), stepsched::Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _: &mut stepsched::Context<'_, Self>,
        _: stepsched::Events<'_, i64>,
        out: &mut stepsched::StepOutput<String, i64>,
    ) -> Result<(), stepsched::Error> {
        out.set_status(Status::Done(1));
        Ok(())
    }

    fn close(&mut self) {
        self.closing.send(()).unwrap();
        self.go.recv().unwrap();
    }
}

/// Between a process's transition to Complete and the close of its queue
/// (its `close` still running), an address that reads closed refuses a
/// send, by address and by PID: whoever completes a process seals its
/// queue before the transition.
#[test]
fn an_address_that_reads_closed_refuses_while_the_process_is_closing() {
    let s = stepsched::Scheduler::<SlowClose>::builder()
        .workers(1)
        .build()
        .unwrap();
    let (closing_tx, closing) = channel();
    let (go, go_rx) = channel();
    let pid = s.allocate_pid();
    let h = s
        .submit(
            pid,
            SlowClose {
                closing: closing_tx,
                go: go_rx,
            },
            "main",
            (),
        )
        .unwrap();
    let to = h.address();
    // Make the queue before the process ends, so the seal must flag it.
    let _ = to.send(0);
    closing.recv().unwrap();
    assert!(to.is_closed(), "the process is Complete while it closes");
    assert!(
        matches!(to.send(7), Err(SendError::Closed(p)) if p.payload == 7),
        "a send after is_closed() was accepted"
    );
    assert!(
        s.send(pid, 8).is_err(),
        "a send by PID after is_closed() was accepted"
    );
    go.send(()).unwrap();
    assert_eq!(h.join(), Ok(1));
}
