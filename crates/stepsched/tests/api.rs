//! The facade's API: the one send error and its rule for finished PIDs,
//! comparable errors, `join_timeout`, `workers(0)`, `Completer::pid`, and
//! shutdown from a handle (from a handler, a step, another thread, async
//! code) with the scheduler dropped afterwards.

mod common;

use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::*;
use stepsched::{
    Completer, Error, Event, Handle, Package, Pid, Receiver, SendError, Shutdown, Status,
    SubmitError, TerminateError,
};

/// A process whose first step blocks until the test releases it, and
/// which then goes idle: terminated while in that step, it stays
/// registered until the test lets the step return.
fn held_in_step(probe: &Arc<Probe>) -> (FnProc, std::sync::mpsc::Receiver<()>, Arc<Barrier>) {
    let (entered, in_step) = channel();
    let go = Arc::new(Barrier::new(2));
    let release = go.clone();
    let p = FnProc::new(probe, move |_, out, _| {
        entered.send(()).unwrap();
        release.wait();
        out.set_status(Status::Idle);
        Ok(())
    });
    (p, in_step, go)
}

#[test]
fn an_allocated_pid_whose_process_finished_always_reads_closed() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let (p, in_step, go) = held_in_step(&probe);
    let pid = s.allocate_pid();
    let h = s.submit(pid, p, "main", 0).unwrap();
    in_step.recv().unwrap();
    s.terminate(pid).unwrap();
    // Completed, still registered (its step runs).
    assert!(s.contains(pid));
    assert_eq!(
        s.send(pid, 1),
        Err(SendError::Closed(Package::new(pid, "", 1)))
    );
    assert_eq!(s.terminate(pid), Err(TerminateError::AlreadyComplete(pid)));
    go.wait();
    assert_eq!(join(h), Err(Error::Terminated));
    // Published, unregistered: the same answers.
    assert!(!s.contains(pid));
    assert_eq!(
        s.send(pid, 2),
        Err(SendError::Closed(Package::new(pid, "", 2)))
    );
    assert_eq!(s.terminate(pid), Err(TerminateError::AlreadyComplete(pid)));
    let handle = s.handle();
    let err = Receiver::send(&handle, Package::new(pid, "t", 3).with_sender(pid)).unwrap_err();
    assert_eq!(
        err,
        SendError::Closed(Package::new(pid, "t", 3).with_sender(pid))
    );
}

#[test]
fn a_pid_made_by_the_caller_reads_closed_while_registered_then_unknown() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let (p, in_step, go) = held_in_step(&probe);
    let mine = Pid::new(5, 500);
    let h = s.submit(mine, p, "main", 0).unwrap();
    in_step.recv().unwrap();
    s.terminate(mine).unwrap();
    assert!(s.send(mine, 1).unwrap_err().is_closed());
    assert_eq!(
        s.terminate(mine),
        Err(TerminateError::AlreadyComplete(mine))
    );
    go.wait();
    assert!(join(h).unwrap_err().is_terminated());
    assert_eq!(
        s.send(mine, 2),
        Err(SendError::UnknownPid(Package::new(mine, "", 2)))
    );
    assert_eq!(s.terminate(mine), Err(TerminateError::UnknownPid(mine)));
    // Never allocated nor submitted: unknown. A number above every
    // allocated one, on this node, too.
    let taken = s.allocate_pid();
    let above = Pid::new(taken.node(), taken.number() + 1);
    assert!(s.send(above, 3).unwrap_err().is_unknown_pid());
    assert_eq!(s.terminate(above), Err(TerminateError::UnknownPid(above)));
    assert_eq!(s.send(taken, 4).unwrap_err().into_payload(), 4);
}

#[test]
fn the_facade_send_error_is_the_relay_one() {
    let s = Builder::new().workers(1).build().unwrap();
    let pid = Pid::new(1, 1);
    let err: stepsched::relay::SendError<i64> = s.send(pid, 9).unwrap_err();
    assert_eq!(err.pid(), pid);
    assert_eq!(err.into_package(), Package::new(pid, "", 9));
}

#[test]
fn results_compare_with_assert_eq() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let pid = s.allocate_pid();
    let h = s
        .submit(pid, idle_until_message(&probe), "main", 0)
        .unwrap();
    s.terminate(pid).unwrap();
    assert_eq!(h.join(), Err(Error::Terminated));
    let h = s
        .submit(s.allocate_pid(), done_at_once(&probe, 4), "main", 0)
        .unwrap();
    assert_eq!(join(h), Ok(4));
    let err = s
        .submit(s.allocate_pid(), done_at_once(&probe, 4), "nope", 0)
        .unwrap_err();
    assert!(matches!(err, SubmitError::Init(e) if e == Error::UnknownMethod("nope".into())));
}

#[test]
fn join_timeout_hands_the_handle_back_until_the_result_is_there() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let pid = s.allocate_pid();
    let h = s
        .submit(pid, idle_until_message(&probe), "main", 0)
        .unwrap();
    probe.wait_steps(1);
    // Idle until a message that was not sent: the handle comes back.
    let h = h.join_timeout(Duration::ZERO).unwrap_err();
    let h = h.join_timeout(Duration::from_millis(1)).unwrap_err();
    assert_eq!(h.pid(), pid);
    assert!(!h.is_finished());
    // Sent from another thread while this one waits (or before: either
    // way the wait ends with the result, not at the time limit).
    let sender = s.handle();
    let t = std::thread::spawn(move || sender.send(pid, 8).unwrap());
    assert_eq!(h.join_timeout(HANG).unwrap(), Ok(8));
    t.join().unwrap();
    // A result published before the call: no wait at all. A terminate
    // that lands while the worker runs the process's first step leaves
    // the result to that worker, when the step returns (not to the
    // terminate): wait until it is published, for as long as it takes.
    let h2 = s
        .submit(s.allocate_pid(), idle_until_message(&probe), "main", 0)
        .unwrap();
    s.terminate(h2.pid()).unwrap();
    let deadline = Instant::now() + HANG;
    while !h2.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the terminated process never finished"
        );
        std::thread::yield_now();
    }
    assert_eq!(
        h2.join_timeout(Duration::ZERO).unwrap(),
        Err(Error::Terminated)
    );
}

#[test]
fn zero_workers_means_the_default_for_scheduler_and_pool() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let s = Builder::new().workers(0).build().unwrap();
    assert_eq!(s.workers(), cores);
    let pool = stepsched::pool::Pool::builder()
        .workers(0)
        .build(|_: (), _| {})
        .unwrap();
    assert_eq!(pool.workers(), cores);
    drop(pool);
    assert_eq!(Builder::new().workers(3).build().unwrap().workers(), 3);
}

#[test]
fn completer_knows_its_pid() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let s = Builder::new()
        .workers(1)
        .handler("who", move |_: Cmd, done: Completer<FnProc>| {
            record.lock().unwrap().push(done.pid());
            let n = done.pid().number() as i64;
            done.complete(Ok(n));
        })
        .build()
        .unwrap();
    let probe = Probe::new();
    let (report, seen_by) = channel();
    let a = s.allocate_pid();
    let b = Pid::new(3, 77);
    let ha = s
        .submit(
            a,
            yielder(&probe, vec![(1, cmd("who", 0))], report.clone()),
            "main",
            0,
        )
        .unwrap();
    let hb = s
        .submit(
            b,
            yielder(&probe, vec![(1, cmd("who", 0))], report),
            "main",
            0,
        )
        .unwrap();
    assert_eq!(join(ha), Ok(a.number() as i64));
    assert_eq!(join(hb), Ok(77));
    let _ = (seen_by.recv(), seen_by.recv());
    let mut pids = seen.lock().unwrap().clone();
    pids.sort();
    let mut want = vec![a, b];
    want.sort();
    assert_eq!(pids, want);
}

#[test]
fn a_process_forced_at_the_deadline_ends_cancelled() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    // Ignores its cancel event: forced when the deadline passes.
    let p = FnProc::new(&probe, |_, out, _| {
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(s.allocate_pid(), p, "main", 0).unwrap();
    probe.wait_steps(1);
    let report = s.shutdown(Duration::ZERO).unwrap();
    assert_eq!(report.forced, 1);
    let result = join(h);
    assert_eq!(result, Err(Error::Cancelled));
    assert!(result.unwrap_err().is_cancelled());
}

/// A scheduler whose handlers and steps can reach its handle.
fn with_handle(
    workers: usize,
    handlers: impl FnOnce(Builder, Arc<OnceLock<Handle<FnProc>>>) -> Builder,
) -> (Sched, Arc<OnceLock<Handle<FnProc>>>) {
    let cell = Arc::new(OnceLock::new());
    let s = handlers(Builder::new().workers(workers), cell.clone())
        .build()
        .unwrap();
    cell.set(s.handle()).unwrap();
    (s, cell)
}

/// A process that finishes with the first completion it gets, or ends
/// `Cancelled` on a cancel event without one.
fn yields_once(probe: &Arc<Probe>, name: &str) -> FnProc {
    let mut asked = false;
    let name = name.to_string();
    FnProc::new(probe, move |events, out, _| {
        let mut cancelled = false;
        for e in events {
            match e {
                Event::Completion { result, .. } => {
                    out.set_status(Status::Done(result?));
                    return Ok(());
                }
                Event::Cancel => cancelled = true,
                Event::Message { .. } => {}
            }
        }
        if cancelled {
            return Err(Error::Cancelled);
        }
        if !asked {
            asked = true;
            out.push_yield(1, cmd(&name, 0));
        }
        out.set_status(Status::Yield);
        Ok(())
    })
}

#[test]
fn shutdown_from_a_handler_on_the_only_worker() {
    let (shutdowns, started) = channel::<Shutdown>();
    let shutdowns = Mutex::new(shutdowns);
    let (s, _cell) = with_handle(1, |b, cell| {
        b.handler("stop", move |_: Cmd, done: Completer<FnProc>| {
            let handle = cell.get().expect("set after build");
            // Returns at once: this worker is one the shutdown joins.
            let shutdown = handle.begin_shutdown(HANG);
            shutdowns.lock().unwrap().send(shutdown).unwrap();
            done.complete(Ok(1));
        })
    });
    let probe = Probe::new();
    let waiting = Probe::new();
    let other = s
        .submit(s.allocate_pid(), idle_until_message(&waiting), "main", 0)
        .unwrap();
    waiting.wait_steps(1);
    let stopper = s
        .submit(s.allocate_pid(), yields_once(&probe, "stop"), "main", 0)
        .unwrap();
    let shutdown = started.recv_timeout(HANG).expect("the handler ran");
    let report = shutdown.wait();
    assert!(report.workers_joined, "{report:?}");
    assert_eq!(report.forced, 0, "nobody waited out the deadline");
    assert_eq!(join(stopper), Ok(1));
    assert_eq!(join(other), Err(Error::Cancelled));
    assert!(matches!(
        s.submit(s.allocate_pid(), done_at_once(&probe, 1), "main", 0),
        Err(SubmitError::Stopping(_))
    ));
    // The scheduler's own shutdown, and its drop, find it done.
    let nothing_more = s.shutdown(HANG).unwrap();
    assert_eq!((nothing_more.cancelled, nothing_more.forced), (0, 0));
    assert!(nothing_more.workers_joined);
    drop(s);
}

#[test]
fn shutdown_from_a_step_on_a_worker() {
    let (s, cell) = with_handle(1, |b, _| b);
    let probe = Probe::new();
    let (tx, started) = channel::<Shutdown>();
    let tx = Mutex::new(tx);
    let mut first = true;
    let p = FnProc::new(&probe, move |events, out, _| {
        if events.iter().any(Event::is_cancel) {
            return Err(Error::Cancelled);
        }
        if std::mem::take(&mut first) {
            // Returns at once, though this worker is one it joins.
            let shutdown = cell.get().unwrap().begin_shutdown(HANG);
            tx.lock().unwrap().send(shutdown).unwrap();
        }
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(s.allocate_pid(), p, "main", 0).unwrap();
    let report = started.recv_timeout(HANG).expect("the step ran").wait();
    assert_eq!((report.cancelled, report.forced), (1, 0));
    assert!(report.workers_joined);
    assert_eq!(join(h), Err(Error::Cancelled));
}

#[test]
fn shutdown_from_another_thread_while_the_scheduler_lives() {
    let s = Builder::new().workers(2).build().unwrap();
    let probe = Probe::new();
    let h = s
        .submit(s.allocate_pid(), idle_until_message(&probe), "main", 0)
        .unwrap();
    probe.wait_steps(1);
    let handle = s.handle();
    let report = std::thread::spawn(move || handle.begin_shutdown(HANG).wait())
        .join()
        .unwrap();
    assert_eq!((report.cancelled, report.forced), (1, 0));
    assert!(report.workers_joined);
    assert_eq!(join(h), Err(Error::Cancelled));
    // Later calls, of either kind, report nothing more.
    let again = s.handle().begin_shutdown(HANG);
    assert!(again.is_done());
    assert_eq!(again.wait(), s.shutdown(HANG).unwrap());
    assert_eq!(s.shutdown(HANG).unwrap().cancelled, 0);
}

#[test]
fn shutdown_awaited_by_a_simple_executor() {
    let s = Builder::new().workers(2).build().unwrap();
    let probe = Probe::new();
    let h = s
        .submit(s.allocate_pid(), idle_until_message(&probe), "main", 0)
        .unwrap();
    probe.wait_steps(1);
    let handle = s.handle();
    let report = block_on(async move { handle.begin_shutdown(HANG).await });
    assert_eq!((report.cancelled, report.forced), (1, 0));
    assert!(report.workers_joined);
    assert_eq!(block_on(h), Err(Error::Cancelled));
    let later = block_on(s.handle().begin_shutdown(Duration::ZERO));
    let nothing_more = later;
    assert_eq!((nothing_more.cancelled, nothing_more.forced), (0, 0));
    assert!(nothing_more.workers_joined);
}

#[test]
fn dropping_the_scheduler_after_a_handle_shutdown_waits_for_it() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    // Ignores cancel: forced at the (zero) deadline.
    let p = FnProc::new(&probe, |_, out, _| {
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(s.allocate_pid(), p, "main", 0).unwrap();
    probe.wait_steps(1);
    let shutdown = s.handle().begin_shutdown(Duration::ZERO);
    drop(s);
    // The drop returned only once the shutdown had finished.
    assert!(shutdown.is_done());
    assert_eq!(
        h.join_timeout(Duration::ZERO).unwrap(),
        Err(Error::Cancelled)
    );
    let report = shutdown.wait();
    assert_eq!((report.cancelled, report.forced), (1, 1));
    if report.workers_joined {
        assert_eq!(probe.closes(), 1);
    }
}
