//! Messages: to idle, blocked, unknown and finished processes; per-sender
//! FIFO without loss or duplicates; messages still queued when a process
//! completes are dropped (never stepped, never leaked); the relay
//! `Receiver` on `Handle`.
#![cfg(not(stepsched_loom))]

mod common;

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use common::*;
use stepsched::{
    Completer, Context, Error, Event, Events, Package, Process, Receiver, SendError, Status,
    StepOutput,
};

#[test]
fn send_to_an_idle_process() {
    let s = Builder::new().workers(2).build().unwrap();
    let probe = Probe::new();
    let h = s
        .submit(pid(1), idle_until_message(&probe), "main", 0)
        .unwrap();
    probe.wait_steps(1);
    s.send(pid(1), 11).unwrap();
    assert_eq!(join(h).unwrap(), 11);
    probe.wait_closed(1);
    assert_eq!(probe.steps(), 2);
}

#[test]
fn send_to_a_blocked_process_wakes_it() {
    let held: Arc<Mutex<Vec<Completer<FnProc>>>> = Arc::default();
    let stash = held.clone();
    let s = Builder::new()
        .workers(2)
        .handler("hold", move |_: Cmd, done: Completer<FnProc>| {
            stash.lock().unwrap().push(done)
        })
        .build()
        .unwrap();
    let probe = Probe::new();
    let mut first = true;
    let p = FnProc::new(&probe, move |events, out, _| {
        if std::mem::take(&mut first) {
            out.push_yield(1, cmd("hold", 0));
        }
        for e in events {
            if let Event::Message { data: m, .. } = e {
                out.set_status(Status::Done(m));
                return Ok(());
            }
        }
        out.set_status(Status::Yield);
        Ok(())
    });
    let h = s.submit(pid(2), p, "main", 0).unwrap();
    probe.wait_steps(1);
    s.send(pid(2), 12).unwrap();
    assert_eq!(join(h).unwrap(), 12);
    assert_eq!(probe.steps(), 2);
    assert_eq!(held.lock().unwrap().len(), 1);
}

#[test]
fn send_to_unknown_and_finished_hands_the_message_back() {
    let s = Builder::new().workers(1).build().unwrap();
    let err = s.send(pid(404), 5).unwrap_err();
    assert_eq!(err, SendError::UnknownPid(Package::new(pid(404), "", 5)));
    assert_eq!(err.into_payload(), 5);

    let probe = Probe::new();
    let h = s
        .submit(pid(3), done_at_once(&probe, 1), "main", 0)
        .unwrap();
    assert_eq!(join(h).unwrap(), 1);
    let err = s.send(pid(3), 6).unwrap_err();
    assert_eq!(err.pid(), pid(3));
    // A PID the test made itself, published: the scheduler keeps no
    // record of it.
    assert_eq!(err, SendError::UnknownPid(Package::new(pid(3), "", 6)));
    assert!(!s.contains(pid(3)));
}

#[test]
fn per_sender_fifo_without_loss_or_duplicates() {
    const SENDERS: i64 = 4;
    const EACH: i64 = 400;
    const TARGETS: u64 = 3;
    let s = Arc::new(Builder::new().workers(2).build().unwrap());
    let mut handles = Vec::new();
    let mut reports = Vec::new();
    for t in 0..TARGETS {
        let (tx, rx) = channel::<Vec<i64>>();
        reports.push(rx);
        let probe = Probe::new();
        let mut got = Vec::new();
        let p = FnProc::new(&probe, move |events, out, _| {
            for e in events {
                match e {
                    Event::Message { data: m, .. } => got.push(m),
                    other => return Err(Error::failed(format!("unexpected {other:?}"))),
                }
            }
            if got.len() as i64 == SENDERS * EACH {
                tx.send(std::mem::take(&mut got)).unwrap();
                out.set_status(Status::Done(0));
            } else {
                out.set_status(Status::Idle);
            }
            Ok(())
        });
        handles.push(s.submit(pid(100 + t), p, "main", 0).unwrap());
    }
    let barrier = Arc::new(Barrier::new(SENDERS as usize));
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let (s, barrier) = (s.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                for seq in 0..EACH {
                    for t in 0..TARGETS {
                        s.send(pid(100 + t), sender * 1_000_000 + seq).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in senders {
        t.join().unwrap();
    }
    for (h, rx) in handles.into_iter().zip(reports) {
        assert_eq!(join(h).unwrap(), 0);
        let got = rx.recv().unwrap();
        let mut next = [0i64; SENDERS as usize];
        for m in got {
            let (sender, seq) = ((m / 1_000_000) as usize, m % 1_000_000);
            assert_eq!(
                seq, next[sender],
                "sender {sender}: out of order, lost or duplicated"
            );
            next[sender] += 1;
        }
        assert_eq!(next, [EACH; SENDERS as usize]);
    }
}

/// A payload that records its drop in a ledger.
struct Tracked {
    id: u64,
    dropped: Arc<Ledger<u64>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.record(self.id);
    }
}

/// Finishes with the id of its first message; the step that sees it tells
/// the test and waits for a go-ahead before returning.
struct FirstMessage {
    in_step: Sender<()>,
    go: Arc<Barrier>,
    stepped: Arc<Ledger<u64>>,
}

impl Process for FirstMessage {
    type Input = ();
    type Message = Tracked;
    type Response = Tracked;
    type Command = &'static str;
    type Output = u64;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _cx: &mut Context<'_, Self>,
        events: Events<'_, Tracked>,
        out: &mut StepOutput<&'static str, u64>,
    ) -> Result<(), Error> {
        let mut first = None;
        for e in events {
            if let Event::Message { data: m, .. } = e {
                self.stepped.record(m.id);
                first.get_or_insert(m.id);
            }
        }
        match first {
            Some(id) => {
                self.in_step.send(()).unwrap();
                self.go.wait();
                out.set_status(Status::Done(id));
            }
            None => out.set_status(Status::Idle),
        }
        Ok(())
    }
}

#[test]
fn messages_queued_at_completion_are_dropped_not_stepped_nor_leaked() {
    let dropped = Ledger::new();
    let stepped = Ledger::new();
    let track = |id| Tracked {
        id,
        dropped: dropped.clone(),
    };
    let s = stepsched::Scheduler::<FirstMessage>::builder()
        .workers(1)
        .build()
        .unwrap();
    let (in_step, entered) = channel();
    let go = Arc::new(Barrier::new(2));
    let p = FirstMessage {
        in_step,
        go: go.clone(),
        stepped: stepped.clone(),
    };
    let h = s.submit(pid(9), p, "main", ()).unwrap();
    s.send(pid(9), track(1)).unwrap();
    entered.recv().unwrap();
    // The process is inside the step that will finish it: these are
    // accepted and queued, and never stepped.
    for id in 2..=5 {
        s.send(pid(9), track(id)).unwrap();
    }
    go.wait();
    assert_eq!(h.join().unwrap(), 1);
    let refused = match s.send(pid(9), track(6)) {
        Err(e) => e.into_payload(),
        Ok(()) => panic!("a finished process took a message"),
    };
    drop(refused);
    drop(s);
    stepped.assert_exactly_once([1]);
    dropped.assert_exactly_once(1..=6);
}

#[test]
fn the_relay_receiver_on_handle_delivers_and_errors() {
    let s = Builder::new().workers(2).build().unwrap();
    let probe = Probe::new();
    let h = s
        .submit(pid(20), idle_until_message(&probe), "main", 0)
        .unwrap();
    let handle = s.handle();
    let as_receiver: &dyn Receiver<i64> = &handle;
    as_receiver
        .send(Package::new(pid(20), "greet", 33).with_sender(pid(1)))
        .unwrap();
    assert_eq!(join(h).unwrap(), 33);

    let err = as_receiver
        .send(Package::new(pid(21), "greet", 34))
        .unwrap_err();
    assert!(err.is_unknown_pid());
    assert_eq!(err.pid(), pid(21));
    assert_eq!(err.into_package().payload, 34);

    let err = as_receiver
        .send(Package::new(pid(20), "late", 35))
        .unwrap_err();
    assert!(err.is_unknown_pid() || err.is_closed());
    let package = err.into_package();
    assert_eq!((package.payload, package.topic.as_ref()), (35, "late"));
}

#[test]
fn a_terminated_process_still_in_its_step_takes_no_messages() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let (entered, in_step) = channel();
    let go = Arc::new(Barrier::new(2));
    let release = go.clone();
    let p = FnProc::new(&probe, move |events, out, _| {
        assert!(events.is_empty(), "no message reaches a terminated process");
        entered.send(()).unwrap();
        release.wait();
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(pid(30), p, "main", 0).unwrap();
    in_step.recv().unwrap();
    s.terminate(pid(30)).unwrap();
    let err = s.send(pid(30), 1).unwrap_err();
    assert_eq!(err, SendError::Closed(Package::new(pid(30), "", 1)));
    let handle = s.handle();
    let err = Receiver::send(&handle, Package::new(pid(30), "t", 2)).unwrap_err();
    assert!(err.is_closed());
    assert_eq!(err.into_package().payload, 2);
    go.wait();
    assert!(matches!(join(h), Err(Error::Terminated)));
    assert_eq!(
        probe.counts(),
        Counts {
            inits: 1,
            steps: 1,
            closes: 1
        }
    );
}

/// `Handle::queued` counts the events a process has not taken: messages
/// sent while its step runs wait until its next step takes them.
#[test]
fn queued_counts_the_events_a_process_has_not_taken() {
    let s = Builder::new().workers(2).build().unwrap();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let mut taken = 0;
    let p = FnProc::new(&Probe::new(), move |events, out, _| {
        taken += events.len() as i64;
        if taken == 0 {
            // The first step holds its worker until the test releases it.
            entered_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(HANG);
        }
        out.set_status(if taken >= 5 {
            Status::Done(taken)
        } else {
            Status::Idle
        });
        Ok(())
    });
    let h = s.handle();
    let id = pid(1);
    assert_eq!(h.queued(id), None, "no process yet");
    let joined = s.submit(id, p, "main", 0).unwrap();
    entered_rx.recv_timeout(HANG).unwrap();
    assert_eq!(h.queued(id), Some(0));
    for i in 0..5 {
        s.send(id, i).unwrap();
    }
    assert_eq!(
        h.queued(id),
        Some(5),
        "five messages wait for the next step"
    );
    release_tx.send(()).unwrap();
    assert_eq!(join(joined), Ok(5));
    assert_eq!(h.queued(id), None, "the result is published: no process");
}
