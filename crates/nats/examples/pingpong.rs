//! Ping-pong across two nodes, against raw async-nats request/reply, in
//! the same run on the same server.
//!
//! ```text
//! cargo run --release -p stepsched-nats --example pingpong [-- ROUND_TRIPS WINDOW] [--no-key]
//! ```
//!
//! The nodes share a cluster key (every frame tagged with keyed BLAKE3);
//! `--no-key` runs them without one, to measure what the tag costs.
//!
//! Latency: round trips one at a time (a process on node 1 pings an echo
//! process on node 2, which answers through its link); raw: a
//! `Client::request` answered by a subscriber on a second connection.
//! Throughput: `WINDOW` pings in flight, round trips per second; raw: the
//! same window of publishes echoed by the second connection.

use std::sync::mpsc::{Sender, channel};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use stepsched::{Context, Error, Events, Pid, Process, Scheduler, Status, StepOutput};
use stepsched_nats::{Link, NatsServer, Node, NodeConfig};

enum Proc {
    /// Answers every message with the same number, to its sender.
    Echo(Link<Proc>),
    /// Hands every number it gets to the driver.
    Collect(Sender<u64>),
}

impl Process for Proc {
    type Input = ();
    type Message = u64;
    type Response = ();
    type Command = String;
    type Output = ();

    fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, u64, ()>,
        out: &mut StepOutput<String, ()>,
    ) -> Result<(), Error> {
        let me = cx.pid();
        for event in events {
            if event.is_cancel() {
                return Err(Error::Cancelled);
            }
            let from = event.sender();
            let Some(n) = event.into_message() else {
                continue;
            };
            match self {
                Proc::Echo(link) => {
                    if let Some(from) = from {
                        link.send_from(me, from, n)
                            .map_err(|e| Error::failed(e.to_string()))?;
                    }
                }
                Proc::Collect(tx) => {
                    let _ = tx.send(n);
                }
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn report(name: &str, mut lat: Vec<Duration>, window: usize, trips: usize, took: Duration) {
    lat.sort_unstable();
    let mean = lat.iter().sum::<Duration>() / lat.len() as u32;
    println!(
        "{name:<10} latency mean {:>6.1} us  p50 {:>6.1} us  p99 {:>6.1} us | window {window}: {:>8.0} round trips/s",
        mean.as_secs_f64() * 1e6,
        percentile(&lat, 0.5).as_secs_f64() * 1e6,
        percentile(&lat, 0.99).as_secs_f64() * 1e6,
        trips as f64 / took.as_secs_f64()
    );
}

fn main() {
    let no_key = std::env::args().any(|a| a == "--no-key");
    let mut args = std::env::args().skip(1).filter(|a| a != "--no-key");
    let trips: usize = args
        .next()
        .map_or(20_000, |a| a.parse().expect("ROUND_TRIPS"));
    let window: usize = args.next().map_or(256, |a| a.parse().expect("WINDOW"));
    let server = NatsServer::start().unwrap_or_else(|e| panic!("{e}"));
    println!("nats-server at {}; {trips} round trips", server.url());

    // --- stepsched-nats: two nodes, an echo on node 2.
    println!(
        "frames {}",
        if no_key {
            "untagged (--no-key)"
        } else {
            "tagged (keyed BLAKE3, cluster key)"
        }
    );
    let start = |n| {
        let config = NodeConfig::new(n, server.url()).prefix("bench");
        let config = if no_key {
            config.insecure_no_cluster_key()
        } else {
            config.cluster_key("pingpong example cluster key, 32+ bytes")
        };
        let node =
            Node::start(Scheduler::<Proc>::builder().workers(1), config).expect("node starts");
        node.announce().expect("node announced");
        node
    };
    let (a, b) = (start(1), start(2));
    assert!(a.wait_for(2, Duration::from_secs(10)) && b.wait_for(1, Duration::from_secs(10)));
    let echo = b.allocate_pid();
    b.scheduler()
        .submit(echo, Proc::Echo(b.link()), "run", ())
        .unwrap();
    let (tx, pongs) = channel();
    let me: Pid = a.allocate_pid();
    a.scheduler()
        .submit(me, Proc::Collect(tx), "run", ())
        .unwrap();
    let wait = Duration::from_secs(10);
    // Warm up, then one at a time.
    for n in 0..1000 {
        a.send_from(me, echo, n).unwrap();
        pongs.recv_timeout(wait).expect("pong");
    }
    let mut lat = Vec::with_capacity(trips);
    for n in 0..trips as u64 {
        let t = Instant::now();
        a.send_from(me, echo, n).unwrap();
        assert_eq!(pongs.recv_timeout(wait).expect("pong"), n);
        lat.push(t.elapsed());
    }
    let t = Instant::now();
    for n in 0..window as u64 {
        a.send_from(me, echo, n).unwrap();
    }
    for n in window as u64..trips as u64 {
        pongs.recv_timeout(wait).expect("pong");
        a.send_from(me, echo, n).unwrap();
    }
    for _ in 0..window {
        pongs.recv_timeout(wait).expect("pong");
    }
    report("stepsched", lat, window, trips, t.elapsed());
    drop((a, b));

    // --- raw async-nats on the same server: two connections.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let url = server.url();
        let requester = async_nats::connect(&url).await.unwrap();
        let responder = async_nats::connect(&url).await.unwrap();
        let mut requests = responder.subscribe("raw.req").await.unwrap();
        let mut echoes = responder.subscribe("raw.echo").await.unwrap();
        let answers = responder.clone();
        tokio::spawn(async move {
            while let Some(m) = requests.next().await {
                if let Some(reply) = m.reply {
                    let _ = answers.publish(reply, m.payload).await;
                }
            }
        });
        let echo_back = responder.clone();
        tokio::spawn(async move {
            while let Some(m) = echoes.next().await {
                let _ = echo_back.publish("raw.back", m.payload).await;
            }
        });
        let payload = || 7u64.to_le_bytes().to_vec().into();
        // A request from the responder's own connection comes back only
        // once the server has its subscriptions (a flush does not wait for
        // that): the requester's first request cannot find "no responders".
        responder.request("raw.req", payload()).await.unwrap();
        for _ in 0..1000 {
            requester.request("raw.req", payload()).await.unwrap();
        }
        let mut lat = Vec::with_capacity(trips);
        for _ in 0..trips {
            let t = Instant::now();
            requester.request("raw.req", payload()).await.unwrap();
            lat.push(t.elapsed());
        }
        let mut back = requester.subscribe("raw.back").await.unwrap();
        requester.flush().await.unwrap();
        let t = Instant::now();
        for _ in 0..window {
            requester.publish("raw.echo", payload()).await.unwrap();
        }
        for _ in window..trips {
            back.next().await.expect("echo");
            requester.publish("raw.echo", payload()).await.unwrap();
        }
        for _ in 0..window {
            back.next().await.expect("echo");
        }
        report("raw nats", lat, window, trips, t.elapsed());
    });
}
