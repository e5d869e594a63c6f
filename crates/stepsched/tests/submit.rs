//! Submitting: entry points, init failures, duplicate PIDs, the process
//! limit (exact under concurrent submits), stats.
#![cfg(not(stepsched_loom))]

mod common;

use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use common::*;
use stepsched::{Context, Error, Events, Process, Status, StepOutput, SubmitError};

/// Two entry points that do different things, plus unknown ones refused.
struct Calc {
    mode: Option<&'static str>,
    input: i64,
    closes: Arc<Mutex<usize>>,
}

impl Process for Calc {
    type Input = i64;
    type Message = i64;
    type Response = i64;
    type Command = Cmd;
    type Output = i64;

    fn init(&mut self, _: &Context<'_, Self>, method: &str, input: i64) -> Result<(), Error> {
        self.mode = Some(match method {
            "double" => "double",
            "negate" => "negate",
            other => return Err(Error::UnknownMethod(other.to_string())),
        });
        self.input = input;
        Ok(())
    }

    fn step(
        &mut self,
        _cx: &mut Context<'_, Self>,
        _: Events<'_, i64>,
        out: &mut StepOutput<Cmd, i64>,
    ) -> Result<(), Error> {
        let v = match self.mode {
            Some("double") => self.input * 2,
            Some("negate") => -self.input,
            _ => return Err(Error::failed("stepped without init")),
        };
        out.set_status(Status::Done(v));
        Ok(())
    }

    fn close(&mut self) {
        *self.closes.lock().unwrap() += 1;
    }
}

#[test]
fn entry_points_select_behaviour_and_unknown_is_refused() {
    let closes = Arc::new(Mutex::new(0));
    let calc = || Calc {
        mode: None,
        input: 0,
        closes: closes.clone(),
    };
    let s = stepsched::Scheduler::<Calc>::builder()
        .workers(2)
        .build()
        .unwrap();
    let a = s.submit(s.allocate_pid(), calc(), "double", 21).unwrap();
    let b = s.submit(s.allocate_pid(), calc(), "negate", 5).unwrap();
    assert_eq!(a.join().unwrap(), 42);
    assert_eq!(b.join().unwrap(), -5);

    let pid = s.allocate_pid();
    let err = s.submit(pid, calc(), "triple", 1).unwrap_err();
    assert!(
        matches!(err, SubmitError::Init(Error::UnknownMethod(ref m)) if m == "triple"),
        "{err:?}"
    );
    assert!(err.into_process().is_none());
    assert!(!s.contains(pid), "nothing is registered for a failed init");
    // Two completed processes and the refused one: each closed once.
    assert_eq!(*closes.lock().unwrap(), 3);
    let stats = s.stats();
    assert_eq!((stats.submitted, stats.completed, stats.failed), (2, 2, 0));
    assert_eq!(stats.live, 0);
}

#[test]
fn init_failure_and_panic_close_and_register_nothing() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let pid = pid(1);
    let err = s
        .submit(pid, done_at_once(&probe, 1), "fail", 0)
        .unwrap_err();
    assert!(
        matches!(err, SubmitError::Init(Error::Failed(_))),
        "{err:?}"
    );
    let err = s
        .submit(pid, done_at_once(&probe, 1), "panic", 0)
        .unwrap_err();
    assert!(
        matches!(err, SubmitError::Init(Error::Panicked(ref m)) if m.contains("init exploded")),
        "{err:?}"
    );
    assert_eq!(
        probe.counts(),
        Counts {
            inits: 2,
            steps: 0,
            closes: 2
        }
    );
    assert!(!s.contains(pid));
    assert_eq!(s.stats().live, 0);
    // The PID is free: a good process takes it.
    let h = s.submit(pid, done_at_once(&probe, 9), "main", 0).unwrap();
    assert_eq!(join(h).unwrap(), 9);
    probe.wait_closed(3);
}

#[test]
fn duplicate_pid_is_refused_and_the_live_process_is_untouched() {
    let s = Builder::new().workers(2).build().unwrap();
    let first = Probe::new();
    let second = Probe::new();
    let pid = pid(5);
    let h = s
        .submit(pid, idle_until_message(&first), "main", 0)
        .unwrap();
    let err = s
        .submit(pid, idle_until_message(&second), "main", 0)
        .unwrap_err();
    assert!(
        matches!(err, SubmitError::DuplicatePid(p, _) if p == pid),
        "{err:?}"
    );
    assert!(err.into_process().is_some());
    // The refused one was initialized and closed, never stepped.
    assert_eq!(
        second.counts(),
        Counts {
            inits: 1,
            steps: 0,
            closes: 1
        }
    );
    s.send(pid, 3).unwrap();
    assert_eq!(join(h).unwrap(), 3);
    first.wait_closed(1);
}

#[test]
fn max_processes_is_exact_under_concurrent_submits() {
    const THREADS: usize = 4;
    const EACH: usize = 25;
    const LIMIT: usize = 13;
    let s = Arc::new(
        Builder::new()
            .workers(2)
            .max_processes(LIMIT)
            .build()
            .unwrap(),
    );
    let probe = Probe::new();
    let barrier = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (s, probe, barrier) = (s.clone(), probe.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                let mut ok = Vec::new();
                let mut limited = 0;
                for _ in 0..EACH {
                    match s.submit(s.allocate_pid(), idle_until_message(&probe), "main", 0) {
                        Ok(h) => ok.push(h),
                        Err(SubmitError::LimitReached(_)) => limited += 1,
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                }
                (ok, limited)
            })
        })
        .collect();
    let mut handles = Vec::new();
    let mut limited = 0;
    for t in threads {
        let (ok, l) = t.join().unwrap();
        handles.extend(ok);
        limited += l;
    }
    assert_eq!(handles.len(), LIMIT);
    assert_eq!(limited, THREADS * EACH - LIMIT);
    // Refused submits never ran init.
    assert_eq!(probe.counts().inits, LIMIT);
    assert_eq!(s.stats().live, LIMIT);

    // Finish three: three more fit, then the limit holds again.
    for h in handles.drain(..3) {
        s.send(h.pid(), 1).unwrap();
        assert_eq!(join(h).unwrap(), 1);
    }
    for _ in 0..3 {
        handles.push(
            s.submit(s.allocate_pid(), idle_until_message(&probe), "main", 0)
                .unwrap(),
        );
    }
    let err = s
        .submit(s.allocate_pid(), idle_until_message(&probe), "main", 0)
        .unwrap_err();
    assert!(matches!(err, SubmitError::LimitReached(_)), "{err:?}");
    for h in handles {
        s.send(h.pid(), 2).unwrap();
        assert_eq!(join(h).unwrap(), 2);
    }
    probe.wait_closed(LIMIT + 3);
}

#[test]
fn stats_count_submitted_completed_failed_and_workers() {
    let s = Builder::new().workers(3).build().unwrap();
    let probe = Probe::new();
    let mut ok = Vec::new();
    for i in 0..10 {
        ok.push(
            s.submit(s.allocate_pid(), done_at_once(&probe, i), "main", 0)
                .unwrap(),
        );
    }
    let failing = FnProc::new(&probe, |_, _, _| Err(Error::failed("no")));
    let bad = s.submit(s.allocate_pid(), failing, "main", 0).unwrap();
    let idle = s
        .submit(s.allocate_pid(), idle_until_message(&probe), "main", 0)
        .unwrap();
    for (i, h) in ok.into_iter().enumerate() {
        assert_eq!(join(h).unwrap(), i as i64);
    }
    assert!(matches!(join(bad), Err(Error::Failed(_))));
    // Wait until the idle process has parked: its first step is done.
    probe.wait_steps(12);
    let stats = s.stats();
    assert_eq!(stats.workers.len(), 3);
    assert_eq!(stats.submitted, 12);
    assert_eq!(stats.completed, 10);
    assert_eq!(stats.failed, 1);
    assert_eq!(stats.live, 1);
    assert!(stats.steps >= 12);
    assert!(stats.workers.iter().map(|w| w.items_run).sum::<u64>() >= 12);
    s.terminate(idle.pid()).unwrap();
    assert!(matches!(join(idle), Err(Error::Terminated)));
    let stats = s.stats();
    assert_eq!(stats.submitted, stats.completed + stats.failed);
    assert_eq!(stats.live, 0);
}
