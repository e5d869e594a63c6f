//! Flow control: a sender may have at most a window of messages in flight
//! to a node, and that node withholds their release while the receiving
//! process is over its receive limit, so a lagging process bounds what its
//! senders can queue for it.

mod common;

use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use common::*;
use stepsched::Package;
use stepsched_nats::RemoteError;

const WINDOW: u64 = 64;
const LIMIT: usize = 16;

/// Node 1 (window `WINDOW`, send timeout `send_timeout`) and node 2
/// (receive limit `LIMIT`), each aware of the other.
fn windowed_pair(
    server: &stepsched_nats::NatsServer,
    send_timeout: Duration,
) -> (stepsched_nats::Node<Proc>, stepsched_nats::Node<Proc>) {
    let a = node(config(1, server).window(WINDOW).send_timeout(send_timeout));
    let b = node(config(2, server).receive_limit(LIMIT));
    assert!(a.wait_for(2, GUARD) && b.wait_for(1, GUARD));
    (a, b)
}

#[test]
fn a_lagging_process_holds_its_senders_to_a_window() {
    let server = server();
    let (a, b) = windowed_pair(&server, Duration::from_millis(20));

    // A process on node 2 that holds its (only) worker in its first step.
    let gate = Arc::new(Gate::default());
    let slow = b.allocate_pid();
    b.scheduler()
        .submit(slow, Proc::Gate(gate.clone()), "run", ())
        .unwrap();
    a.send(slow, Msg::Data(0)).unwrap();
    gate.wait_entered();

    // A fast sender: every message from here on waits in the queue.
    let mut accepted = 0u64;
    let mut busy = false;
    for n in 1..=10_000 {
        match a.send(slow, Msg::Data(n)) {
            Ok(()) => accepted += 1,
            Err(RemoteError::Busy(_)) => {
                busy = true;
                break;
            }
            Err(e) => panic!("send {n}: {e}"),
        }
    }
    assert!(
        busy,
        "{accepted} messages accepted for a process that takes none"
    );
    // Released: at most the messages that found the queue under the limit
    // (those up to LIMIT + 1 queued); in flight beyond that: one window.
    let bound = LIMIT as u64 + 1 + WINDOW;
    assert!(
        accepted <= bound,
        "{accepted} messages accepted, more than the limit and a window ({bound})"
    );
    // Everything accepted reaches the queue, and nothing more (the first
    // message waits there too if the step began before it arrived).
    let deadline = Instant::now() + GUARD;
    let whole = |q: Option<usize>| q == Some(accepted as usize) || q == Some(accepted as usize + 1);
    while !whole(b.handle().queued(slow)) {
        assert!(
            Instant::now() < deadline,
            "queued {:?}, accepted {accepted}",
            b.handle().queued(slow)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(a.stats().window_full >= 1);
    assert!(b.stats().withheld >= 1);

    // The process catches up: its releases reopen the window.
    gate.open();
    let deadline = Instant::now() + GUARD;
    loop {
        match a.send(slow, Msg::Data(0)) {
            Ok(()) => break,
            Err(RemoteError::Busy(_)) => assert!(
                Instant::now() < deadline,
                "the window never reopened after the process caught up"
            ),
            Err(e) => panic!("{e}"),
        }
    }
    let deadline = Instant::now() + GUARD;
    while b.handle().queued(slow) != Some(0) {
        assert!(Instant::now() < deadline, "the process never caught up");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(a.stats().credits >= 1);
}

/// `deliver_within` waits for the window for its own time, not the send
/// timeout: zero answers `Busy` at once while the window is shut, and a long
/// timeout waits until the lagging process catches up and its node
/// releases the window, and only then sends.
#[test]
fn deliver_within_waits_for_a_lagging_receiver_to_catch_up() {
    let server = server();
    // No send timeout: whatever waits below waits for its own timeout.
    let (a, b) = windowed_pair(&server, Duration::ZERO);

    // A process on node 2 held in its first step, its queue over the limit
    // (local messages, outside flow control) before any remote message
    // comes: every remote message is withheld, so node 2 releases none and
    // the window shuts after exactly one window of them, until the process
    // catches up.
    let gate = Arc::new(Gate::default());
    let slow = b.allocate_pid();
    b.scheduler()
        .submit(slow, Proc::Gate(gate.clone()), "run", ())
        .unwrap();
    b.send(slow, Msg::Data(0)).unwrap();
    gate.wait_entered();
    for _ in 0..=LIMIT {
        b.send(slow, Msg::Data(0)).unwrap();
    }
    // Held: from here on only remote messages change the queue.
    let before = b.handle().queued(slow).unwrap();
    assert!(before > LIMIT);

    let mut accepted = 0u64;
    loop {
        match a.send(slow, Msg::Data(1)) {
            Ok(()) => accepted += 1,
            Err(RemoteError::Busy(_)) => break,
            Err(e) => panic!("send {accepted}: {e}"),
        }
        assert!(
            accepted <= 10_000,
            "{accepted} messages accepted for a process that takes none"
        );
    }
    assert_eq!(accepted, WINDOW, "messages accepted before the window shut");
    let full = before + WINDOW as usize;
    let deadline = Instant::now() + GUARD;
    while b.handle().queued(slow) != Some(full) {
        assert!(
            Instant::now() < deadline,
            "queued {:?}, expected {full}",
            b.handle().queued(slow)
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    // A zero timeout: the window is shut, so Busy at once.
    match a.deliver_within(Package::new(slow, "", Msg::Data(2)), Duration::ZERO) {
        Err(RemoteError::Busy(_)) => {}
        other => panic!("a zero timeout on a shut window answered {other:?}"),
    }

    // A long timeout waits, on another thread, until the gate opens.
    let shut = a.stats().window_full;
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let sent = a.deliver_within(Package::new(slow, "", Msg::Data(3)), GUARD);
            // Only the process catching up can release the window, and it
            // takes nothing before the gate opens.
            (sent, gate.is_open())
        });
        // The waiter found the window shut (or returned: see below).
        let deadline = Instant::now() + GUARD;
        while a.stats().window_full == shut && !waiter.is_finished() {
            assert!(
                Instant::now() < deadline,
                "the waiter never found the window shut"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Nothing more reached the process while it lagged.
        assert_eq!(b.handle().queued(slow), Some(full));
        gate.open();
        let (sent, open) = waiter.join().unwrap();
        assert!(sent.is_ok(), "deliver_within with a long timeout: {sent:?}");
        assert!(open, "deliver_within sent before the process caught up");
    });

    // It reached the process, which took everything; the refused ones
    // never left.
    let deadline = Instant::now() + GUARD;
    while b.stats().received <= WINDOW || b.handle().queued(slow) != Some(0) {
        assert!(
            Instant::now() < deadline,
            "received {}, queued {:?}",
            b.stats().received,
            b.handle().queued(slow)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(b.stats().received, WINDOW + 1);
}

/// A receiver that keeps up, but slowly (one permit at a time, given by the
/// test only while its queue is over the limit, or once the sender is
/// done): a fast sender that waits for the window never gets more than the
/// receive limit and one window queued for it, and every message arrives
/// once, in order.
#[test]
fn a_slow_receiver_bounds_what_its_sender_queues() {
    const N: u64 = 3_000;
    let server = server();
    // No send timeout: the sender waits for the window (which it must
    // find full: the receiver takes nothing until its queue is over the
    // limit) for `deliver_within`'s own timeout.
    let (a, b) = windowed_pair(&server, Duration::ZERO);

    let meter = Arc::new(Meter::default());
    let (tx, rx) = channel();
    let pid = b.allocate_pid();
    b.scheduler()
        .submit(pid, Proc::Metered(meter.clone(), tx), "run", ())
        .unwrap();

    // Queued before the process caught up: at most the limit (and the
    // message that went over it); in flight beyond that: one window.
    let bound = LIMIT + 1 + WINDOW as usize;
    let mut peak = 0;
    let (done_tx, done) = channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let sent = (1..=N).try_for_each(|n| {
                a.deliver_within(Package::new(pid, "", Msg::Data(n)), GUARD)
                    .map_err(|e| format!("message {n}: {e}"))
            });
            done_tx.send(sent).unwrap();
        });
        let mut sent = false;
        let mut next = 1;
        let deadline = Instant::now() + GUARD;
        while next <= N {
            let queued = b.handle().queued(pid).expect("the process is alive");
            peak = peak.max(queued);
            assert!(
                queued <= bound,
                "{queued} messages queued for the process, more than the limit and a window ({bound})"
            );
            if let Ok(result) = done.try_recv() {
                result.unwrap_or_else(|e| panic!("{e}"));
                sent = true;
            }
            // Over the limit (so the release of the rest is withheld): one
            // more message taken.
            if queued > LIMIT || sent {
                meter.grant(1);
            }
            while let Ok((_, to, msg)) = rx.try_recv() {
                assert_eq!((to, msg), (pid, Msg::Data(next)), "out of order");
                next += 1;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {N} messages taken",
                next - 1
            );
            std::thread::sleep(Duration::from_micros(100));
        }
        if !sent {
            done.recv_timeout(GUARD)
                .unwrap()
                .unwrap_or_else(|e| panic!("{e}"));
        }
    });
    // The receiver did lag: its queue went over the limit (the first permit
    // waits for that; the sender cannot finish before it).
    assert!(peak > LIMIT, "the queue peaked at {peak}");
    // Nothing more, nothing twice.
    assert!(rx.try_recv().is_err());
    assert_eq!(b.stats().duplicates, 0);
    assert_eq!(b.handle().queued(pid), Some(0));
}
