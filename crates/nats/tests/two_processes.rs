//! Two schedulers in two OS processes (the `stepsched-nats-node` binary,
//! run twice) on one real `nats-server`: 100 000 messages each way with a
//! per-message ledger, the same across a server restart, and a node that
//! crashes.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use common::{GUARD, KEY, Msg, config, node, server};
use stepsched::Pid;
use stepsched_nats::{Membership, RemoteError};

const COUNT: u64 = 100_000;
/// The whole run's hang guard.
const RUN: Duration = Duration::from_secs(120);

/// A running `stepsched-nats-node`, killed on drop.
struct NodeProcess {
    child: std::process::Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    node: u32,
}

impl NodeProcess {
    fn spawn(url: &str, node: u32, peer: u32, extra: &[&str]) -> NodeProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stepsched-nats-node"))
            .args([
                "--url",
                url,
                "--node",
                &node.to_string(),
                "--peer",
                &peer.to_string(),
            ])
            .args(["--count", &COUNT.to_string()])
            .args(["--cluster-key", std::str::from_utf8(KEY).unwrap()])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn stepsched-nats-node");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        NodeProcess {
            child,
            stdin,
            lines,
            node,
        }
    }

    /// Waits for the next line starting with `prefix`.
    fn expect(&self, prefix: &str) -> String {
        let deadline = Instant::now() + RUN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(_) => panic!("node {} printed no {prefix} line", self.node),
            }
        }
    }

    fn go(&mut self) {
        writeln!(self.stdin, "go").expect("the node reads stdin");
    }

    fn ledger(&self) -> HashMap<String, u64> {
        let line = self.expect("LEDGER");
        println!("{line}");
        line.split_whitespace()
            .skip(1)
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.parse().expect("a number")))
            .collect()
    }

    fn exits_cleanly(mut self) {
        let deadline = Instant::now() + RUN;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "node {} exited with {status}", self.node);
                return;
            }
            assert!(Instant::now() < deadline, "node {} did not exit", self.node);
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The invariants of a ledger pair, whatever failed in between: every
/// message a sender had accepted was delivered once or counted lost (by
/// the receiver, and the sender was told the same number); none arrived
/// twice, unsent, or at the wrong process.
fn check(mine: &HashMap<String, u64>, theirs: &HashMap<String, u64>) {
    assert_eq!(
        mine["accepted"] + mine["refused"],
        COUNT,
        "every send answered"
    );
    assert_eq!(
        theirs["delivered_in"] + theirs["lost_in"],
        mine["accepted"],
        "every accepted message delivered or lost"
    );
    assert_eq!(
        mine["lost"], theirs["lost_in"],
        "the sender is told its losses"
    );
    assert_eq!(theirs["dup_in"], 0, "no message delivered twice");
    assert_eq!(theirs["stray_in"], 0, "no refused message delivered");
    assert_eq!(
        theirs["misdirected_in"], 0,
        "no message at the wrong process"
    );
    assert_eq!(theirs["bad_frames"], 0);
}

#[test]
fn a_hundred_thousand_messages_each_way_arrive_exactly_once() {
    let server = server();
    let a = NodeProcess::spawn(&server.url(), 1, 2, &[]);
    let b = NodeProcess::spawn(&server.url(), 2, 1, &[]);
    let (la, lb) = (a.ledger(), b.ledger());
    check(&la, &lb);
    check(&lb, &la);
    for l in [&la, &lb] {
        assert_eq!(l["accepted"], COUNT);
        assert_eq!(l["delivered_in"], COUNT, "nothing failed: nothing lost");
        assert_eq!((l["lost"], l["gaps"], l["duplicates"]), (0, 0, 0));
    }
    a.exits_cleanly();
    b.exits_cleanly();
}

#[test]
fn a_server_restart_midway_loses_some_and_duplicates_none() {
    let mut server = server();
    let mut a = NodeProcess::spawn(&server.url(), 1, 2, &["--outage"]);
    let mut b = NodeProcess::spawn(&server.url(), 2, 1, &["--outage"]);
    a.expect("HALF");
    b.expect("HALF");
    server.kill();
    a.go();
    b.go();
    a.expect("OUTAGE");
    b.expect("OUTAGE");
    server.restart().expect("the server comes back");
    a.go();
    b.go();
    let (la, lb) = (a.ledger(), b.ledger());
    check(&la, &lb);
    check(&lb, &la);
    for l in [&la, &lb] {
        assert!(l["refused"] > 0, "each sender saw the outage");
    }
    a.exits_cleanly();
    b.exits_cleanly();
}

#[test]
fn a_crashed_node_becomes_unreachable() {
    let server = server();
    let mut here = config(1, &server);
    here = here.prefix("pair");
    let a = node(here);
    let crashing = NodeProcess::spawn(&server.url(), 7, 1, &["--idle"]);
    crashing.expect("READY");
    assert!(a.wait_for(7, GUARD));
    a.send(Pid::new(7, 1), Msg::Data(1)).expect("node 7 is up");
    let mut crashing = crashing;
    crashing.child.kill().unwrap(); // SIGKILL: no goodbye
    crashing.child.wait().unwrap();
    let killed = Instant::now();
    assert_eq!(a.wait_until_down(7, GUARD), Membership::Unreachable);
    println!(
        "node 7 unreachable {:?} after the kill (member timeout {:?})",
        killed.elapsed(),
        a.config().member_timeout_value()
    );
    let err = a.send(Pid::new(7, 1), Msg::Data(2)).unwrap_err();
    assert!(matches!(err, RemoteError::Unreachable(_)), "{err}");
}

#[test]
fn a_second_process_with_a_live_node_number_refuses_to_start() {
    let server = server();
    let first = NodeProcess::spawn(&server.url(), 2, 1, &["--idle"]);
    first.expect("READY");
    // The same number again, in another OS process. Its stdin is closed,
    // so were it to start it would exit 0 at once (`--idle`).
    let second = Command::new(env!("CARGO_BIN_EXE_stepsched-nats-node"))
        .args([
            "--url",
            &server.url(),
            "--node",
            "2",
            "--peer",
            "1",
            "--idle",
        ])
        .args(["--cluster-key", std::str::from_utf8(KEY).unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run stepsched-nats-node");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "a second node 2 started");
    assert!(
        stderr.contains("node number 2 is already taken"),
        "a clear error: {stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&second.stdout).contains("READY"),
        "it never announced itself"
    );
    // The first one is untouched: still up as node 2.
    let mut here = config(1, &server);
    here = here.prefix("pair");
    let a = node(here);
    assert!(a.wait_for(2, GUARD));
}
