//! Two nodes on one real `nats-server`, in one OS process: remote sends,
//! the errors a sender gets, bad frames, duplicates, leaving, and a
//! server that goes away.

mod common;

use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use common::{GUARD, KEY, Msg, Proc, collector, config, node, pair, seal, server};
use serde::Serialize;
use stepsched::Pid;
use stepsched_nats::{
    ConfirmError, DeadLetter, DeadReason, Membership, NatsServer, Node, NodeConfig, RemoteError,
    StartError,
};
use stepsched_relay::serde_pid::WirePid;

#[test]
fn a_remote_send_arrives_once_with_its_sender() {
    let server = server();
    let (a, b) = pair(&server);
    let (to, seen) = collector(&b);
    let from = a.allocate_pid();
    for n in 0..20_000 {
        a.send_from(from, to, Msg::Data(n)).unwrap();
    }
    // A confirmed send is ordered after the plain ones before it.
    assert_eq!(a.send_confirmed(None, to, Msg::Stop, GUARD), Ok(()));
    for n in 0..20_000 {
        let got = seen.recv_timeout(GUARD).expect("message");
        assert_eq!(
            got,
            (Some(from), to, Msg::Data(n)),
            "in order, once, with its sender"
        );
    }
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Stop));
    assert!(
        seen.recv_timeout(Duration::from_millis(50)).is_err(),
        "nothing more"
    );
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.sent, 20_000, "a confirmed send is not counted here");
    assert_eq!(sb.received, 20_001);
    assert_eq!((sb.duplicates, sb.gaps, sb.bad_frames), (0, 0, 0));
}

#[test]
fn ping_pong_across_nodes_through_processes() {
    let server = server();
    let (a, b) = pair(&server);
    let echo = b.allocate_pid();
    b.scheduler()
        .submit(echo, Proc::Echo(b.link()), "run", ())
        .unwrap();
    let (me, pongs) = collector(&a);
    for n in 0..50 {
        a.send_from(me, echo, Msg::Ping(n)).unwrap();
        let got = pongs.recv_timeout(GUARD).expect("pong");
        assert_eq!(got, (Some(echo), me, Msg::Pong(n)));
    }
}

#[test]
fn a_steps_own_send_and_the_schedulers_reach_other_nodes() {
    let server = server();
    let (a, b) = pair(&server);
    let echo = b.allocate_pid();
    b.scheduler()
        .submit(echo, Proc::StepEcho, "run", ())
        .unwrap();
    let (me, pongs) = collector(&a);
    for n in 0..50 {
        a.send_from(me, echo, Msg::Ping(n)).unwrap();
        let got = pongs.recv_timeout(GUARD).expect("pong");
        assert_eq!(got, (Some(echo), me, Msg::Pong(n)), "sent by Context::send");
    }
    // The scheduler's own send (no sender) goes the same way.
    a.scheduler().send(echo, Msg::Data(7)).unwrap();
    b.scheduler().send(me, Msg::Stop).unwrap();
    assert_eq!(pongs.recv_timeout(GUARD).unwrap(), (None, me, Msg::Stop));
    // An unknown node is an unknown PID to the scheduler's send.
    let err = a
        .scheduler()
        .send(Pid::new(9, 1), Msg::Data(1))
        .unwrap_err();
    assert!(err.is_unknown_pid(), "{err:?}");
}

#[test]
fn a_local_pid_goes_through_the_local_scheduler() {
    let server = server();
    let a = node(config(1, &server));
    let (to, seen) = collector(&a);
    a.send(to, Msg::Data(1)).unwrap();
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(1)));
    assert_eq!(a.stats().sent, 0, "nothing went over the wire");
    let err = a.send(Pid::new(1, 999), Msg::Data(2)).unwrap_err();
    assert!(
        matches!(err, RemoteError::Local(ref e) if e.is_unknown_pid()),
        "{err}"
    );
}

#[test]
fn an_unknown_node_is_an_error_both_ways() {
    let server = server();
    let a = node(config(1, &server));
    let err = a.send(Pid::new(9, 1), Msg::Data(1)).unwrap_err();
    assert!(matches!(err, RemoteError::UnknownNode(_)), "{err}");
    assert_eq!(err.into_package().payload, Msg::Data(1), "handed back");
    assert_eq!(
        a.send_confirmed(None, Pid::new(9, 1), Msg::Data(1), GUARD),
        Err(ConfirmError::NoResponders)
    );
}

#[test]
fn an_unknown_remote_pid_comes_back_as_a_dead_letter() {
    let server = server();
    let (letters_tx, letters) = channel();
    let a = node(config(1, &server).on_dead_letter(move |l| {
        let _ = letters_tx.send(l);
    }));
    let b = node(config(2, &server));
    assert!(a.wait_for(2, GUARD));
    let from = a.allocate_pid();
    let nobody = Pid::new(2, 999);
    a.send_from(from, nobody, Msg::Data(7)).unwrap();
    let letter = letters.recv_timeout(GUARD).expect("a dead letter");
    assert_eq!(
        letter,
        DeadLetter {
            from: Some(from),
            to: nobody,
            reason: DeadReason::UnknownPid
        }
    );
    assert_eq!(a.stats().dead_letters, 1);
    assert_eq!(b.stats().undeliverable, 1);
    // The same, answered synchronously.
    assert_eq!(
        a.send_confirmed(Some(from), nobody, Msg::Data(8), GUARD),
        Err(ConfirmError::UnknownPid)
    );
    // A finished process: Closed.
    let done = b.allocate_pid();
    b.scheduler()
        .submit(done, Proc::Once, "run", ())
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(
        a.send_confirmed(None, done, Msg::Data(9), GUARD),
        Err(ConfirmError::Closed)
    );
    a.send(done, Msg::Data(10)).unwrap();
    let letter = letters.recv_timeout(GUARD).expect("a dead letter");
    assert_eq!((letter.to, letter.reason), (done, DeadReason::Closed));
    // And a live one: delivered.
    let (live, seen) = collector(&b);
    assert_eq!(
        a.send_confirmed(Some(from), live, Msg::Data(11), GUARD),
        Ok(())
    );
    assert_eq!(
        seen.recv_timeout(GUARD).unwrap(),
        (Some(from), live, Msg::Data(11))
    );
}

/// A raw client on `server`, with a runtime to drive it.
fn raw(server: &NatsServer) -> (tokio::runtime::Runtime, async_nats::Client) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(async_nats::connect(server.url())).unwrap();
    (rt, client)
}

/// A message frame built by hand from the documented layout, tagged with
/// the tests' cluster key.
fn frame(origin: u32, incarnation: u64, seq: u64, to: Pid, msg: &Msg) -> Vec<u8> {
    seal(KEY, untagged(origin, incarnation, seq, to, msg))
}

/// The same without its tag.
fn untagged(origin: u32, incarnation: u64, seq: u64, to: Pid, msg: &Msg) -> Vec<u8> {
    #[derive(Serialize)]
    struct Envelope<'a> {
        from: Option<WirePid>,
        to: WirePid,
        topic: &'a str,
        payload: &'a Msg,
    }
    let mut out = vec![1];
    out.extend_from_slice(&origin.to_le_bytes());
    out.extend_from_slice(&incarnation.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    let body = Envelope {
        from: None,
        to: WirePid(to),
        topic: "",
        payload: msg,
    };
    postcard::to_extend(&body, out).unwrap()
}

#[test]
fn bad_frames_are_counted_and_dropped() {
    let server = server();
    let b = node(config(2, &server));
    let (to, seen) = collector(&b);
    let (rt, client) = raw(&server);
    rt.block_on(async {
        for garbage in [&b"\xff\xff"[..], &[1; 21], &[0xee; 64], b""] {
            // Untagged: dropped before they are read.
            client
                .publish("t.node.2", garbage.to_vec().into())
                .await
                .unwrap();
            // Tagged with the cluster key: read, and found wanting.
            client
                .publish("t.node.2", seal(KEY, garbage.to_vec()).into())
                .await
                .unwrap();
        }
        // A well-formed frame whose payload is not a `Msg`.
        let mut wrong = untagged(5, 1, 0, to, &Msg::Data(1));
        wrong.truncate(wrong.len() - 1);
        client
            .publish("t.node.2", seal(KEY, wrong).into())
            .await
            .unwrap();
        // A frame for another node's pid on this node's subject.
        let stray = frame(5, 1, 0, Pid::new(3, 1), &Msg::Data(1));
        client.publish("t.node.2", stray.into()).await.unwrap();
        // Then a good one: from one connection, NATS keeps the order, so
        // when it arrives the bad ones have been read.
        client
            .publish("t.node.2", frame(5, 1, 0, to, &Msg::Data(42)).into())
            .await
            .unwrap();
        client.flush().await.unwrap();
    });
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(42)));
    let stats = b.stats();
    assert_eq!(stats.unauthenticated, 4, "four untagged garbage frames");
    assert_eq!(
        stats.bad_frames, 5,
        "four tagged garbage frames and a truncated one"
    );
    assert_eq!(stats.misrouted, 1);
    // `received` is counted once the scheduler took the message, which
    // may be after the process has it: wait for it, with a bound.
    wait_received(&b, 1);
    // The members listener counts its garbage too (it reads on its own
    // subscription, so wait for it with a bound).
    rt.block_on(async {
        client
            .publish("t.members", seal(KEY, b"\x07garbage".to_vec()).into())
            .await
            .unwrap();
        client
            .publish("t.members", b"\x07garbage".to_vec().into())
            .await
            .unwrap();
        client.flush().await.unwrap();
    });
    let deadline = Instant::now() + GUARD;
    while (b.stats().bad_frames < 6 || b.stats().unauthenticated < 5) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!((b.stats().bad_frames, b.stats().unauthenticated), (6, 5));
}

#[test]
fn a_repeated_sequence_number_is_dropped_and_a_skipped_one_counted() {
    let server = server();
    let b = node(config(2, &server));
    let (to, seen) = collector(&b);
    let (rt, client) = raw(&server);
    rt.block_on(async {
        for (inc, seq, n) in [(1, 1, 1), (1, 1, 2), (1, 3, 3), (1, 2, 4), (2, 1, 5)] {
            let f = frame(5, inc, seq, to, &Msg::Data(n));
            client.publish("t.node.2", f.into()).await.unwrap();
        }
        client.flush().await.unwrap();
    });
    // Seq 1, then 3 (2 skipped), then a new run (incarnation 2) from 1.
    for n in [1, 3, 5] {
        assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(n)));
    }
    wait_received(&b, 3);
    let stats = b.stats();
    assert_eq!((stats.received, stats.duplicates, stats.gaps), (3, 2, 1));
}

#[test]
fn a_node_that_leaves_is_seen_leaving() {
    let server = server();
    let (a, b) = pair(&server);
    b.leave(GUARD).unwrap();
    assert_eq!(a.wait_until_down(2, GUARD), Membership::Left);
    let err = a.send(Pid::new(2, 1), Msg::Data(1)).unwrap_err();
    assert!(matches!(err, RemoteError::Left(_)), "{err}");
    let err = b.send(Pid::new(1, 1), Msg::Data(1)).unwrap_err();
    assert!(matches!(err, RemoteError::Disconnected(_)), "{err}");
    // A new run of node 2 is welcomed back.
    drop(b);
    let b = node(config(2, &server));
    assert!(a.wait_for(2, GUARD));
    let (to, seen) = collector(&b);
    a.send(to, Msg::Data(2)).unwrap();
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(2)));
}

#[test]
fn no_server_means_an_error_at_start_not_a_hang() {
    // A port nobody listens on: bind one, learn it, let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = NodeConfig::new(1, format!("nats://127.0.0.1:{port}"))
        .connect_timeout(Duration::from_secs(1))
        .insecure_no_cluster_key();
    let err = Node::start(stepsched::Scheduler::<Proc>::builder().workers(1), config).unwrap_err();
    assert!(matches!(err, StartError::Connect(_)), "{err}");
}

#[test]
fn a_server_that_goes_away_gives_errors_then_comes_back() {
    let mut server = server();
    let (a, b) = pair(&server);
    let (to, seen) = collector(&b);
    a.send(to, Msg::Data(1)).unwrap();
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(1)));

    server.kill();
    let deadline = Instant::now() + GUARD;
    while a.is_connected() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!a.is_connected(), "the client noticed the server is gone");
    let err = a.send(to, Msg::Data(2)).unwrap_err();
    assert!(matches!(err, RemoteError::Disconnected(_)), "{err}");
    let short = Duration::from_millis(300);
    assert!(a.send_confirmed(None, to, Msg::Data(3), short).is_err());
    assert_eq!(
        a.flush(short),
        Err(ConfirmError::Timeout),
        "no server to answer the ping"
    );

    server.restart().unwrap();
    assert!(a.wait_for(2, GUARD), "node 2 heard again after the restart");
    let deadline = Instant::now() + GUARD;
    // Node 2's subscription comes back with its reconnection: confirm.
    let mut last = Err(ConfirmError::Timeout);
    while last.is_err() && Instant::now() < deadline {
        last = a.send_confirmed(None, to, Msg::Data(4), Duration::from_secs(1));
    }
    assert_eq!(last, Ok(()));
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(4)));
    assert_eq!(b.stats().duplicates, 0);
}

#[test]
fn gaps_stay_true_across_a_receiver_restart() {
    let server = server();
    let (a, b) = pair(&server);
    let (to, seen) = collector(&b);
    for n in 0..500 {
        a.send(to, Msg::Data(n)).unwrap();
    }
    assert_eq!(a.send_confirmed(None, to, Msg::Stop, GUARD), Ok(()));
    for n in 0..500 {
        assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(n)));
    }
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Stop));
    // Node 2 restarts; node 1 goes on numbering its frames to node 2.
    drop(b);
    assert_eq!(a.wait_until_down(2, GUARD), Membership::Left);
    let b = node(config(2, &server));
    assert!(a.wait_for(2, GUARD));
    let (to, seen) = collector(&b);
    for n in 0..100 {
        a.send(to, Msg::Data(n)).unwrap();
    }
    assert_eq!(a.send_confirmed(None, to, Msg::Stop, GUARD), Ok(()));
    for n in 0..100 {
        assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(n)));
    }
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Stop));
    // Nothing was lost: the 500 frames the earlier run got are not gaps.
    let s = b.stats();
    assert_eq!((s.received, s.gaps, s.duplicates), (101, 0, 0));
}

#[test]
fn a_node_is_announced_only_when_its_host_says_so() {
    let server = server();
    let a = node(config(1, &server));
    let b = Node::start(
        stepsched::Scheduler::<Proc>::builder().workers(1),
        config(2, &server),
    )
    .expect("node 2 starts");
    // The host submits what peers will send to before announcing.
    let (to, seen) = collector(&b);
    // Node 2 hears node 1's heartbeats; node 1 has not heard of node 2,
    // which has published none.
    assert!(b.wait_for(1, GUARD));
    assert_eq!(a.membership(2), Membership::Unknown);
    let err = a.send(to, Msg::Data(1)).unwrap_err();
    assert!(matches!(err, RemoteError::UnknownNode(_)), "{err}");
    b.announce().expect("announced");
    assert!(a.wait_for(2, GUARD));
    a.send(to, Msg::Data(2)).unwrap();
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(2)));
    assert_eq!(a.stats().dead_letters, 0);
}

#[test]
fn alternating_two_runs_of_a_sender_never_delivers_a_frame_twice() {
    let server = server();
    let b = node(config(2, &server));
    let (to, seen) = collector(&b);
    let (rt, client) = raw(&server);
    // Genuine (tagged) frames of two runs, 1 and 2, of node 5, as a
    // recorder would replay them: run 1's first frame comes back after a
    // frame of run 2.
    rt.block_on(async {
        for (inc, seq, n) in [(1, 1, 1), (2, 1, 2), (1, 1, 1), (2, 1, 2), (1, 2, 3)] {
            let f = frame(5, inc, seq, to, &Msg::Data(n));
            client.publish("t.node.2", f.into()).await.unwrap();
        }
        client.flush().await.unwrap();
    });
    for n in [1, 2, 3] {
        assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Data(n)));
    }
    wait_received(&b, 3);
    let stats = b.stats();
    assert_eq!((stats.received, stats.duplicates, stats.gaps), (3, 2, 0));
}

/// Waits (bounded) until `node` has counted `n` received messages.
fn wait_received(node: &Node<Proc>, n: u64) {
    let deadline = Instant::now() + GUARD;
    while node.stats().received < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(node.stats().received, n);
}
