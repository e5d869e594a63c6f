//! What a client on the same NATS server can do to a cluster, with and
//! without a cluster key: forged sequence numbers, spoofed senders, forged
//! goodbyes. With the key each forgery is dropped and counted; without it
//! each one works (the README's "Security" section says so, and these
//! tests keep that statement true).

mod common;

use std::time::{Duration, Instant};

use common::{GUARD, KEY, Msg, Proc, collector, config, node, pair, seal, server};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use stepsched::{Pid, Scheduler};
use stepsched_nats::{Membership, NatsServer, Node, NodeConfig, StartError};
use stepsched_relay::serde_pid::WirePid;

/// A raw client on `server`, with a runtime to drive it: the attacker.
fn raw(server: &NatsServer) -> (tokio::runtime::Runtime, async_nats::Client) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(async_nats::connect(server.url())).unwrap();
    (rt, client)
}

/// A membership frame, as the documented layout has it.
#[derive(Serialize, Deserialize)]
enum Beat {
    Hello {
        node: u32,
        incarnation: u64,
        beat: u64,
    },
    Bye {
        node: u32,
        incarnation: u64,
    },
}

/// Node `node`'s incarnation, read from the public members subject (its
/// next heartbeat; the tag, if any, is not needed to read it).
fn incarnation_of(rt: &tokio::runtime::Runtime, client: &async_nats::Client, node: u32) -> u64 {
    rt.block_on(async {
        let mut sub = client.subscribe("t.members").await.unwrap();
        tokio::time::timeout(GUARD, async {
            loop {
                let m = sub.next().await.expect("members subject");
                if let Ok((
                    Beat::Hello {
                        node: n,
                        incarnation,
                        ..
                    },
                    _,
                )) = postcard::take_from_bytes::<Beat>(&m.payload)
                    && n == node
                {
                    return incarnation;
                }
            }
        })
        .await
        .expect("a heartbeat within the guard")
    })
}

/// An untagged message frame (kind 1) from `origin`'s run `incarnation`.
fn forged(
    origin: u32,
    incarnation: u64,
    seq: u64,
    from: Option<Pid>,
    to: Pid,
    msg: &Msg,
) -> Vec<u8> {
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
        from: from.map(WirePid),
        to: WirePid(to),
        topic: "",
        payload: msg,
    };
    postcard::to_extend(&body, out).unwrap()
}

fn publish(
    rt: &tokio::runtime::Runtime,
    client: &async_nats::Client,
    subject: &str,
    frames: Vec<Vec<u8>>,
) {
    rt.block_on(async {
        for f in frames {
            client.publish(subject.to_owned(), f.into()).await.unwrap();
        }
        // Written out; the server may still take another connection's
        // frames first, so the tests wait for these to be seen.
        client.flush().await.unwrap();
    });
}

/// Two nodes without a cluster key.
fn insecure_pair(server: &NatsServer) -> (Node<Proc>, Node<Proc>) {
    let cfg = |n| {
        NodeConfig::new(n, server.url())
            .prefix("t")
            .insecure_no_cluster_key()
    };
    let (a, b) = (node(cfg(1)), node(cfg(2)));
    assert!(a.wait_for(2, GUARD) && b.wait_for(1, GUARD));
    (a, b)
}

const GENUINE: u64 = 1_000;

/// Node 1 sends `GENUINE` numbered messages and a confirmed `Stop` to
/// `to`; returns what the collector got, in order.
fn genuine_stream(
    a: &Node<Proc>,
    to: Pid,
    seen: &std::sync::mpsc::Receiver<common::Seen>,
) -> Vec<Msg> {
    let from = a.allocate_pid();
    for n in 0..GENUINE {
        a.send_from(from, to, Msg::Data(n)).unwrap();
    }
    assert_eq!(a.send_confirmed(None, to, Msg::Stop, GUARD), Ok(()));
    let mut got = Vec::new();
    loop {
        let (_, _, msg) = seen.recv_timeout(GUARD).expect("the stream ends with Stop");
        let stop = msg == Msg::Stop;
        got.push(msg);
        if stop {
            return got;
        }
    }
}

#[test]
fn with_a_key_a_forged_sequence_number_moves_nothing() {
    let server = server();
    let (a, b) = pair(&server);
    let (to, seen) = collector(&b);
    let (rt, client) = raw(&server);
    let inc = incarnation_of(&rt, &client, 1);
    // Node 1's run, sequence 2^63: untagged, and tagged with a wrong key.
    let frame = forged(1, inc, 1 << 63, None, to, &Msg::Data(666));
    publish(
        &rt,
        &client,
        "t.node.2",
        vec![
            frame.clone(),
            seal(b"not the cluster key, 32 bytes!!!", frame),
        ],
    );
    // Both reached node 2 (and were dropped) before the genuine stream.
    wait_unauthenticated(&b, 2);
    let got = genuine_stream(&a, to, &seen);
    let want: Vec<Msg> = (0..GENUINE).map(Msg::Data).chain([Msg::Stop]).collect();
    assert_eq!(got, want, "every genuine message, in order, nothing forged");
    let s = b.stats();
    assert_eq!(s.unauthenticated, 2, "both forgeries seen and dropped");
    assert_eq!((s.duplicates, s.gaps, s.received), (0, 0, GENUINE + 1));
}

#[test]
fn without_a_key_a_forged_sequence_number_cuts_a_node_off() {
    let server = server();
    let (a, b) = insecure_pair(&server);
    let (to, seen) = collector(&b);
    let (rt, client) = raw(&server);
    let inc = incarnation_of(&rt, &client, 1);
    let frame = forged(1, inc, 1 << 63, None, to, &Msg::Data(666));
    publish(&rt, &client, "t.node.2", vec![frame]);
    // The forged one is delivered, before the genuine stream...
    assert_eq!(
        seen.recv_timeout(GUARD).unwrap(),
        (None, to, Msg::Data(666))
    );
    let got = genuine_stream(&a, to, &seen);
    // ...which it cuts off: every numbered message is dropped as a
    // duplicate. What the README says a keyless cluster allows.
    assert_eq!(got, [Msg::Stop]);
    assert_eq!(b.stats().duplicates, GENUINE);
}

#[test]
fn with_a_key_a_spoofed_sender_is_never_delivered() {
    let server = server();
    let (a, b) = pair(&server);
    let (to, seen) = collector(&b);
    let (rt, client) = raw(&server);
    let spoofed = Some(Pid::new(1, 2));
    let frames = (0..100)
        .map(|n| forged(1, 7, 0, spoofed, to, &Msg::Data(n)))
        .collect();
    publish(&rt, &client, "t.node.2", frames);
    wait_unauthenticated(&b, 100);
    assert_eq!(a.send_confirmed(None, to, Msg::Stop, GUARD), Ok(()));
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Stop));
    assert_eq!(b.stats().unauthenticated, 100);
    assert_eq!(b.stats().received, 1);
}

#[test]
fn without_a_key_a_spoofed_sender_is_delivered() {
    let server = server();
    let (_a, b) = insecure_pair(&server);
    let (to, seen) = collector(&b);
    let (rt, client) = raw(&server);
    let spoofed = Some(Pid::new(1, 2));
    publish(
        &rt,
        &client,
        "t.node.2",
        vec![forged(1, 7, 0, spoofed, to, &Msg::Data(1))],
    );
    assert_eq!(
        seen.recv_timeout(GUARD).unwrap(),
        (spoofed, to, Msg::Data(1)),
        "delivered as if from <1.2>"
    );
}

/// Waits (bounded) until `node` has counted `n` unauthenticated frames.
fn wait_unauthenticated(node: &Node<Proc>, n: u64) {
    let deadline = Instant::now() + GUARD;
    while node.stats().unauthenticated < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(node.stats().unauthenticated, n);
}

#[test]
fn with_a_key_a_forged_goodbye_is_ignored() {
    let server = server();
    let (_a, b) = pair(&server);
    let (rt, client) = raw(&server);
    let inc = incarnation_of(&rt, &client, 1);
    let bye = postcard::to_stdvec(&Beat::Bye {
        node: 1,
        incarnation: inc,
    })
    .unwrap();
    publish(&rt, &client, "t.members", vec![bye]);
    wait_unauthenticated(&b, 1);
    assert_eq!(b.membership(1), Membership::Up);
}

#[test]
fn without_a_key_a_forged_goodbye_takes_a_node_out() {
    let server = server();
    let (_a, b) = insecure_pair(&server);
    let (rt, client) = raw(&server);
    let inc = incarnation_of(&rt, &client, 1);
    let bye = postcard::to_stdvec(&Beat::Bye {
        node: 1,
        incarnation: inc,
    })
    .unwrap();
    publish(&rt, &client, "t.members", vec![bye]);
    assert_eq!(b.wait_until_down(1, GUARD), Membership::Left);
}

#[test]
fn a_node_without_a_chosen_key_or_with_a_short_one_does_not_start() {
    let server = server();
    let start = |config| Node::start(Scheduler::<Proc>::builder().workers(1), config);
    let err = start(NodeConfig::new(1, server.url())).unwrap_err();
    assert!(
        matches!(&err, StartError::Config(e) if e.contains("cluster key")),
        "{err}"
    );
    let err = start(NodeConfig::new(1, server.url()).cluster_key("short")).unwrap_err();
    assert!(
        matches!(&err, StartError::Config(e) if e.contains("16")),
        "{err}"
    );
    assert!(start(config(1, &server)).is_ok(), "a 32-byte key is fine");
}

#[test]
fn a_second_node_with_a_live_number_is_refused() {
    let server = server();
    let first = node(config(2, &server));
    let err = Node::start(Scheduler::<Proc>::builder().workers(1), config(2, &server)).unwrap_err();
    assert!(matches!(err, StartError::NodeTaken(2)), "{err}");
    // The first one still gets each message once.
    let a = node(config(1, &server));
    assert!(a.wait_for(2, GUARD));
    let (to, seen) = collector(&first);
    assert_eq!(a.send_confirmed(None, to, Msg::Stop, GUARD), Ok(()));
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Stop));
    assert_eq!(first.stats().received, 1);
}

/// A genuine (tagged) membership frame, as one recorded from the wire.
fn recorded(beat: &Beat) -> Vec<u8> {
    seal(KEY, postcard::to_stdvec(beat).unwrap())
}

/// A genuine heartbeat number `beat` of `node`'s run `incarnation`.
fn recorded_hello(node: u32, incarnation: u64, beat: u64) -> Vec<u8> {
    recorded(&Beat::Hello {
        node,
        incarnation,
        beat,
    })
}

/// Untagged junk: counted as unauthenticated once the node reads it, so
/// publishing it after other frames tells when those were read.
fn sentinel() -> Vec<u8> {
    vec![0xff; 8]
}

/// At least `n` heartbeats were ignored as played back (a node's own
/// first two heartbeats may also cross on the way and count).
fn assert_stale(node: &Node<Proc>, n: u64) {
    assert!(node.stats().stale_beats >= n, "{:?}", node.stats());
}

#[test]
fn a_recorded_heartbeat_played_back_neither_removes_nor_revives_a_node() {
    let server = server();
    let (_a, b) = pair(&server);
    let c = node(config(3, &server));
    assert!(b.wait_for(3, GUARD));
    let (rt, client) = raw(&server);
    let inc_a = incarnation_of(&rt, &client, 1);
    let inc_c = incarnation_of(&rt, &client, 3);

    // Node 1's first heartbeat again, then another run of node 1 saying
    // hello and goodbye (what recordings of an earlier run would give).
    publish(
        &rt,
        &client,
        "t.members",
        vec![
            recorded_hello(1, inc_a, 1),
            recorded_hello(1, inc_a ^ 1, 9),
            recorded(&Beat::Bye {
                node: 1,
                incarnation: inc_a ^ 1,
            }),
            sentinel(),
        ],
    );
    wait_unauthenticated(&b, 1);
    assert_eq!(b.membership(1), Membership::Up, "a live node taken out");
    assert_stale(&b, 2);

    // Node 3 leaves; its heartbeat, played back with any number, does not
    // bring it back.
    c.leave(GUARD).unwrap();
    assert_eq!(b.wait_until_down(3, GUARD), Membership::Left);
    publish(
        &rt,
        &client,
        "t.members",
        vec![recorded_hello(3, inc_c, u64::MAX), sentinel()],
    );
    wait_unauthenticated(&b, 2);
    assert_eq!(
        b.membership(3),
        Membership::Left,
        "a node that left revived"
    );
    assert_stale(&b, 3);
}

#[test]
fn a_bystander_on_the_clusters_subjects_does_not_hold_a_number() {
    let server = server();
    let (rt, client) = raw(&server);
    // A monitor on every subject of the prefix: it hears the start-up
    // question and never answers.
    let _watching = Watching(
        Some(rt.block_on(async {
            let sub = client.subscribe("t.>").await.unwrap();
            client.flush().await.unwrap();
            sub
        })),
        rt.handle().clone(),
    );
    let b = Node::start(Scheduler::<Proc>::builder().workers(1), config(2, &server))
        .expect("a listener that neither answers nor heartbeats holds no number");
    b.announce().unwrap();
    // And the node works: node 1 reaches it.
    let a = node(config(1, &server));
    assert!(a.wait_for(2, GUARD));
    let (to, seen) = collector(&b);
    assert_eq!(a.send_confirmed(None, to, Msg::Stop, GUARD), Ok(()));
    assert_eq!(seen.recv_timeout(GUARD).unwrap(), (None, to, Msg::Stop));
}

/// A subscription that unsubscribes on its client's runtime when dropped
/// (also while a failed test unwinds).
struct Watching(Option<async_nats::Subscriber>, tokio::runtime::Handle);

impl Drop for Watching {
    fn drop(&mut self) {
        let _in = self.1.enter();
        drop(self.0.take());
    }
}

#[test]
fn with_a_key_a_forged_answer_does_not_hold_a_number() {
    let server = server();
    // A client without the key answers every question on node 2's
    // subject, untagged.
    let url = server.url();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let forger = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let client = async_nats::connect(url).await.unwrap();
            let mut sub = client.subscribe("t.node.2").await.unwrap();
            client.flush().await.unwrap();
            ready_tx.send(()).unwrap();
            let mut answered = 0u32;
            let answer = async {
                while let Some(m) = sub.next().await {
                    if let Some(reply) = m.reply {
                        client.publish(reply, vec![4; 21].into()).await.unwrap();
                        client.flush().await.unwrap();
                        answered += 1;
                    }
                }
            };
            tokio::select! {
                () = answer => {}
                _ = stop_rx => {}
            }
            answered
        })
    });
    ready_rx.recv_timeout(GUARD).unwrap();
    let b = Node::start(Scheduler::<Proc>::builder().workers(1), config(2, &server))
        .expect("an untagged answer holds no number");
    stop_tx.send(()).unwrap();
    assert!(forger.join().unwrap() >= 1, "the forger was asked");
    drop(b);
}
