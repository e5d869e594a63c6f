//! Yields: completed in the handler, from another thread, late, out of
//! order, with errors; unknown commands, panicking handlers and dropped
//! completers; completers that outlive their process.
#![cfg(not(stepsched_loom))]

mod common;

use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::*;
use stepsched::{Completer, Error, Event, Status};

/// A command and its completer, kept for later.
type Work = (Cmd, Completer<FnProc>);

fn times_ten(c: Cmd, done: Completer<FnProc>) {
    done.complete(Ok(c.arg * 10));
}

fn sorted(mut seen: Seen) -> Seen {
    seen.sort_by_key(|(t, _)| *t);
    seen
}

fn three(name: &str) -> Vec<(u64, Cmd)> {
    vec![(1, cmd(name, 1)), (2, cmd(name, 2)), (3, cmd(name, 3))]
}

fn tens() -> Seen {
    vec![(1, Ok(10)), (2, Ok(20)), (3, Ok(30))]
}

#[test]
fn completed_synchronously_in_the_handler() {
    let s = Builder::new()
        .workers(2)
        .handler("x", times_ten)
        .build()
        .unwrap();
    let (tx, rx) = channel();
    let probe = Probe::new();
    let h = s
        .submit(pid(1), yielder(&probe, three("x"), tx), "main", 0)
        .unwrap();
    assert_eq!(join(h).unwrap(), 60);
    assert_eq!(sorted(rx.recv().unwrap()), tens());
    probe.wait_closed(1);
    assert_eq!(probe.overlaps(), 0);
}

#[test]
fn completed_from_another_thread_and_after_a_delay() {
    let s = Builder::new()
        .workers(2)
        .handler("thread", |c: Cmd, done: Completer<FnProc>| {
            thread::spawn(move || done.complete(Ok(c.arg * 10)));
        })
        .handler("late", |c: Cmd, done: Completer<FnProc>| {
            thread::spawn(move || {
                // The delay only makes the completion late; nothing
                // asserted depends on it.
                thread::sleep(Duration::from_millis(5));
                done.complete(Ok(c.arg * 10))
            });
        })
        .build()
        .unwrap();
    for name in ["thread", "late"] {
        let (tx, rx) = channel();
        let probe = Probe::new();
        let h = s
            .submit(
                s.allocate_pid(),
                yielder(&probe, three(name), tx),
                "main",
                0,
            )
            .unwrap();
        assert_eq!(join(h).unwrap(), 60, "{name}");
        assert_eq!(sorted(rx.recv().unwrap()), tens(), "{name}");
        probe.wait_closed(1);
    }
}

#[test]
fn completed_out_of_order_by_tag() {
    let stash: Arc<Mutex<Vec<Work>>> = Arc::default();
    let handler_stash = stash.clone();
    let s = Builder::new()
        .workers(2)
        .handler("held", move |c: Cmd, done: Completer<FnProc>| {
            let mut held = handler_stash.lock().unwrap();
            held.push((c, done));
            if held.len() == 4 {
                // All four are in: complete them last-first, elsewhere.
                let batch: Vec<_> = held.drain(..).rev().collect();
                thread::spawn(move || {
                    for (c, done) in batch {
                        assert!(done.complete(Ok(c.arg * 10)));
                    }
                });
            }
        })
        .build()
        .unwrap();
    let (tx, rx) = channel();
    let probe = Probe::new();
    let cmds = (1..=4).map(|t| (t, cmd("held", t as i64))).collect();
    let h = s
        .submit(pid(2), yielder(&probe, cmds, tx), "main", 0)
        .unwrap();
    assert_eq!(join(h).unwrap(), 100);
    let seen = rx.recv().unwrap();
    assert_eq!(sorted(seen.clone()).len(), 4);
    for (tag, r) in &seen {
        assert_eq!(r, &Ok(*tag as i64 * 10));
    }
}

#[test]
fn error_completions_reach_the_step() {
    let s = Builder::new()
        .workers(1)
        .handler("x", times_ten)
        .handler("bad", |c: Cmd, done: Completer<FnProc>| {
            done.complete(Err(Error::failed(format!("bad {}", c.arg))));
        })
        .build()
        .unwrap();
    let (tx, rx) = channel();
    let probe = Probe::new();
    let cmds = vec![(1, cmd("x", 1)), (2, cmd("bad", 2)), (3, cmd("nope", 3))];
    let h = s
        .submit(pid(3), yielder(&probe, cmds, tx), "main", 0)
        .unwrap();
    assert_eq!(join(h).unwrap(), 10);
    let seen = sorted(rx.recv().unwrap());
    assert_eq!(seen[0], (1, Ok(10)));
    assert_eq!(seen[1], (2, Err("process failed: bad 2".to_string())));
    let (tag, unknown) = &seen[2];
    assert_eq!(*tag, 3);
    assert!(
        unknown
            .as_ref()
            .unwrap_err()
            .contains("unknown command `nope`"),
        "{unknown:?}"
    );
}

#[test]
fn panicking_handler_and_dropped_completer_become_error_completions() {
    let s = Builder::new()
        .workers(1)
        .handler("x", times_ten)
        .handler("panic", |_: Cmd, _: Completer<FnProc>| {
            panic!("handler exploded")
        })
        .handler("forget", |_: Cmd, done: Completer<FnProc>| drop(done))
        .handler("forget-later", |_: Cmd, done: Completer<FnProc>| {
            thread::spawn(move || drop(done));
        })
        .build()
        .unwrap();
    let (tx, rx) = channel();
    let probe = Probe::new();
    let cmds = vec![
        (1, cmd("panic", 0)),
        (2, cmd("forget", 0)),
        (3, cmd("forget-later", 0)),
        (4, cmd("x", 4)),
    ];
    let h = s
        .submit(pid(4), yielder(&probe, cmds, tx), "main", 0)
        .unwrap();
    assert_eq!(join(h).unwrap(), 40);
    let seen = sorted(rx.recv().unwrap());
    assert!(
        matches!(&seen[0], (1, Err(m)) if m.contains("panicked")),
        "{seen:?}"
    );
    assert!(
        matches!(&seen[1], (2, Err(m)) if m.contains("dropped its completer")),
        "{seen:?}"
    );
    assert!(
        matches!(&seen[2], (3, Err(m)) if m.contains("dropped its completer")),
        "{seen:?}"
    );
    assert_eq!(seen[3], (4, Ok(40)));
    // The one worker lives on and runs later processes.
    for i in 0..5 {
        let (tx, rx) = channel();
        let p = Probe::new();
        let cmds = vec![(9, cmd("panic", 0)), (10, cmd("x", i))];
        let h = s
            .submit(s.allocate_pid(), yielder(&p, cmds, tx), "main", 0)
            .unwrap();
        assert_eq!(join(h).unwrap(), i * 10);
        assert_eq!(rx.recv().unwrap().len(), 2);
    }
    assert_eq!(s.stats().workers.len(), 1);
}

#[test]
fn a_completer_used_after_its_process_ended_returns_false() {
    let stash: Arc<Mutex<Vec<Completer<FnProc>>>> = Arc::default();
    let held = stash.clone();
    let s = Builder::new()
        .workers(2)
        .handler("hold", move |_: Cmd, done: Completer<FnProc>| {
            held.lock().unwrap().push(done)
        })
        .build()
        .unwrap();
    let probe = Probe::new();
    // Yields twice, then finishes at its first message.
    let p = FnProc::new(&probe, {
        let mut first = true;
        move |events, out, _| {
            if first {
                first = false;
                out.push_yield(1, cmd("hold", 0));
                out.push_yield(2, cmd("hold", 0));
            }
            for e in events {
                if let Event::Message { data: m, .. } = e {
                    out.set_status(Status::Done(m));
                    return Ok(());
                }
            }
            out.set_status(Status::Yield);
            Ok(())
        }
    });
    let h = s.submit(pid(5), p, "main", 0).unwrap();
    probe.wait_steps(1);
    s.send(pid(5), 8).unwrap();
    assert_eq!(join(h).unwrap(), 8);
    probe.wait_closed(1);
    let steps = probe.steps();
    let mut completers = std::mem::take(&mut *stash.lock().unwrap());
    assert_eq!(completers.len(), 2);
    let dropped = completers.pop().unwrap();
    assert!(!completers.pop().unwrap().complete(Ok(1)));
    drop(dropped);
    assert_eq!(probe.steps(), steps, "nothing ran the ended process");
    assert_eq!(probe.closes(), 1);
}

#[test]
fn a_stale_completer_never_reaches_a_new_process_with_the_same_pid() {
    let stash: Arc<Mutex<Vec<Completer<FnProc>>>> = Arc::default();
    let held = stash.clone();
    let (dispatched, was_dispatched) = channel();
    let s = Builder::new()
        .workers(2)
        .handler("hold", move |_: Cmd, done: Completer<FnProc>| {
            held.lock().unwrap().push(done);
            let _ = dispatched.send(());
        })
        .build()
        .unwrap();
    let pid = pid(6);
    // P1 blocks on a yield that is never completed; terminate it.
    let (tx, _rx) = channel();
    let old = Probe::new();
    let h1 = s
        .submit(pid, yielder(&old, vec![(1, cmd("hold", 0))], tx), "main", 0)
        .unwrap();
    // Once the yield reached its handler (a terminate before that would
    // leave it undispatched, and nothing stashed).
    was_dispatched.recv().unwrap();
    s.terminate(pid).unwrap();
    assert!(matches!(join(h1), Err(Error::Terminated)));
    old.wait_closed(1);

    // P2 takes the same PID and records every event it gets.
    let got: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = got.clone();
    let new = Probe::new();
    let p2 = FnProc::new(&new, move |events, out, _| {
        for e in events {
            log.lock().unwrap().push(format!("{e:?}"));
            if let Event::Message { data: m, .. } = e {
                out.set_status(Status::Done(m));
                return Ok(());
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    });
    let h2 = s.submit(pid, p2, "main", 0).unwrap();
    new.wait_steps(1);
    let stale = stash.lock().unwrap().pop().unwrap();
    assert!(!stale.complete(Ok(99)), "a stale completion is refused");
    s.send(pid, 4).unwrap();
    assert_eq!(join(h2).unwrap(), 4);
    assert_eq!(*got.lock().unwrap(), ["Message { from: None, data: 4 }"]);
    assert_eq!(old.counts().steps, 1);
}

/// A result that counts its drops: it is dropped when its process's slot
/// is freed (nobody takes it), so the count says how many slots were.
struct Freed(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Freed {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Yields `left` more times, cycling through the commands `at_once`,
/// `forget` and `later`, then ends with a [`Freed`].
struct Cycler {
    left: u32,
    freed: Arc<std::sync::atomic::AtomicUsize>,
}

impl stepsched::Process for Cycler {
    type Input = ();
    type Message = ();
    type Response = ();
    type Command = &'static str;
    type Output = Freed;

    fn init(&mut self, _: &stepsched::Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _: &mut stepsched::Context<'_, Self>,
        events: stepsched::Events<'_, (), ()>,
        out: &mut stepsched::StepOutput<&'static str, Freed>,
    ) -> Result<(), Error> {
        drop(events);
        if self.left == 0 {
            out.set_status(Status::Done(Freed(self.freed.clone())));
            return Ok(());
        }
        self.left -= 1;
        let command = ["at_once", "forget", "later", "at_once"][self.left as usize % 4];
        out.push_yield(u64::from(self.left), command);
        out.set_status(Status::Yield);
        Ok(())
    }
}

#[test]
fn every_slot_is_freed_whichever_way_its_completers_end() {
    // Completers completed at once hand their reference to the slot back to
    // the run that dispatched them, for its next completer; the run
    // releases what it holds when it ends. A reference kept or released
    // twice shows here: a slot never freed keeps its result, a slot freed
    // early is a use after free (which the counts, or the allocator, see).
    let freed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s = stepsched::Scheduler::<Cycler>::builder()
        .workers(2)
        .handler("at_once", |_: &'static str, done: Completer<Cycler>| {
            done.complete(Ok(()));
        })
        .handler("forget", |_: &'static str, done: Completer<Cycler>| {
            drop(done)
        })
        .handler("later", |_: &'static str, done: Completer<Cycler>| {
            thread::spawn(move || done.complete(Ok(())));
        })
        .build()
        .unwrap();
    const PROCESSES: usize = 200;
    let handles: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let process = Cycler {
                left: 50,
                freed: freed.clone(),
            };
            s.submit(s.allocate_pid(), process, "main", ()).unwrap()
        })
        .collect();
    // Each process ends with a `Freed` left in its slot: the join handles
    // are dropped unjoined, after every process has ended.
    let deadline = std::time::Instant::now() + HANG;
    for handle in &handles {
        while !handle.is_finished() {
            assert!(std::time::Instant::now() < deadline, "hung");
            thread::yield_now();
        }
    }
    drop(handles);
    drop(s);
    assert_eq!(
        freed.load(std::sync::atomic::Ordering::SeqCst),
        PROCESSES,
        "every slot is freed once"
    );
}
