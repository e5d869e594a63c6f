//! Flow control: a sender may have at most a window of messages in flight
//! to a node, and that node withholds their release while the receiving
//! process is over its receive limit, so a lagging process bounds what its
//! senders can queue for it.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use stepsched_nats::RemoteError;

const WINDOW: u64 = 64;
const LIMIT: usize = 16;

#[test]
fn a_lagging_process_holds_its_senders_to_a_window() {
    let server = server();
    let a = node(
        config(1, &server)
            .window(WINDOW)
            .send_timeout(Duration::from_millis(20)),
    );
    let b = node(config(2, &server).receive_limit(LIMIT));
    assert!(a.wait_for(2, GUARD) && b.wait_for(1, GUARD));

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
