//! Ping-pong across two nodes, against raw async-nats request/reply, in
//! the same run on the same server.
//!
//! ```text
//! cargo run --release -p stepsched-nats --example pingpong [-- ROUND_TRIPS WINDOW [WINDOWED]] [--no-key]
//! cargo run --release -p stepsched-nats --example pingpong -- --alternate ROUNDS [--control] [ROUND_TRIPS WINDOW [WINDOWED]]
//! ```
//!
//! The nodes share a cluster key (every frame tagged with keyed BLAKE3);
//! `--no-key` runs them without one, to measure what the tag costs.
//!
//! Latency: round trips one at a time (a process on node 1 pings an echo
//! process on node 2, which answers through its link); raw: a
//! `Client::request` answered by a subscriber on a second connection.
//! Throughput: `WINDOW` pings in flight, round trips per second over
//! `WINDOWED` round trips (default: `ROUND_TRIPS`); raw: the same window of
//! publishes echoed by the second connection.
//!
//! `--alternate ROUNDS` runs the three side by side in one process: a
//! tagged pair of nodes, an untagged pair (another subject prefix) and the
//! raw clients, all started at once; each round measures the three in turn
//! (the order rotating from round to round), so every mode sees the same
//! load, and the summary gives the medians over the rounds and of the
//! per-round ratios. Defaults there: 2 000 one-at-a-time round trips and
//! 100 000 windowed ones per mode and round. On Linux it also gives the
//! CPU time and context switches per windowed round trip, of this process
//! and the server together (from `/proc`). `--control` makes the second
//! pair tagged too: two identical pairs, whose difference is the noise
//! the comparison cannot see through.

use std::sync::mpsc::{Receiver, Sender, channel};
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

/// What one batch of round trips measured.
struct Measured {
    /// Each one-at-a-time round trip.
    lat: Vec<Duration>,
    /// Windowed round trips per second.
    rate: f64,
    /// Per windowed round trip: CPU time (µs) and context switches of
    /// this process and the server (`None` where `/proc` is not there).
    cost: Option<(f64, f64)>,
}

impl Measured {
    fn mean(&self) -> Duration {
        self.lat.iter().sum::<Duration>() / self.lat.len() as u32
    }

    fn report(&mut self, name: &str, window: usize) {
        self.lat.sort_unstable();
        print!(
            "{name:<10} latency mean {:>6.1} us  p50 {:>6.1} us  p99 {:>6.1} us | window {window}: {:>8.0} round trips/s",
            self.mean().as_secs_f64() * 1e6,
            percentile(&self.lat, 0.5).as_secs_f64() * 1e6,
            percentile(&self.lat, 0.99).as_secs_f64() * 1e6,
            self.rate
        );
        match self.cost {
            Some((cpu, switches)) => {
                println!(" | per round trip {cpu:.2} us CPU, {switches:.2} context switches")
            }
            None => println!(),
        }
    }
}

/// Two nodes on one server: a collector on node 1, an echo on node 2.
struct Pair {
    a: Node<Proc>,
    b: Node<Proc>,
    me: Pid,
    echo: Pid,
    pongs: Receiver<u64>,
    /// The next number to send (each pong is checked against it in the
    /// one-at-a-time loop).
    next: u64,
}

/// How long a pong may take before the run fails.
const WAIT: Duration = Duration::from_secs(10);

impl Pair {
    fn start(server: &NatsServer, prefix: &str, tagged: bool) -> Pair {
        let start = |n| {
            let config = NodeConfig::new(n, server.url()).prefix(prefix);
            let config = if tagged {
                config.cluster_key("pingpong example cluster key, 32+ bytes")
            } else {
                config.insecure_no_cluster_key()
            };
            let node =
                Node::start(Scheduler::<Proc>::builder().workers(1), config).expect("node starts");
            node.announce().expect("node announced");
            node
        };
        let (a, b) = (start(1), start(2));
        assert!(a.wait_for(2, WAIT) && b.wait_for(1, WAIT));
        let echo = b.allocate_pid();
        b.scheduler()
            .submit(echo, Proc::Echo(b.link()), "run", ())
            .unwrap();
        let (tx, pongs) = channel();
        let me: Pid = a.allocate_pid();
        a.scheduler()
            .submit(me, Proc::Collect(tx), "run", ())
            .unwrap();
        let mut pair = Pair {
            a,
            b,
            me,
            echo,
            pongs,
            next: 0,
        };
        // Warm up.
        pair.latency(1000);
        pair
    }

    fn ping(&mut self) -> u64 {
        let n = self.next;
        self.next += 1;
        self.a.send_from(self.me, self.echo, n).unwrap();
        n
    }

    fn latency(&mut self, trips: usize) -> Vec<Duration> {
        let mut lat = Vec::with_capacity(trips);
        for _ in 0..trips {
            let t = Instant::now();
            let n = self.ping();
            assert_eq!(self.pongs.recv_timeout(WAIT).expect("pong"), n);
            lat.push(t.elapsed());
        }
        lat
    }

    fn windowed(&mut self, trips: usize, window: usize) -> f64 {
        let t = Instant::now();
        for _ in 0..window {
            self.ping();
        }
        for _ in window..trips {
            self.pongs.recv_timeout(WAIT).expect("pong");
            self.ping();
        }
        for _ in 0..window {
            self.pongs.recv_timeout(WAIT).expect("pong");
        }
        trips as f64 / t.elapsed().as_secs_f64()
    }

    fn measure(&mut self, trips: usize, window: usize, windowed: usize) -> Measured {
        let lat = self.latency(trips);
        let before = usage();
        let rate = self.windowed(windowed, window);
        let cost = per_trip(before, usage(), windowed);
        Measured { lat, rate, cost }
    }

    fn stop(self) {
        let Pair { a, b, .. } = self;
        drop((a, b));
    }
}

/// Raw async-nats on the same server: two connections, a responder that
/// answers requests on `raw.req` and echoes `raw.echo` to `raw.back`.
struct Raw {
    rt: tokio::runtime::Runtime,
    requester: async_nats::Client,
    /// Taken in the runtime's context at drop (its unsubscribe is a task).
    back: Option<async_nats::Subscriber>,
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _in_runtime = self.rt.enter();
        self.back.take();
    }
}

impl Raw {
    fn start(server: &NatsServer) -> Raw {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (requester, back) = rt.block_on(async {
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
            // A request from the responder's own connection comes back
            // only once the server has its subscriptions (a flush does not
            // wait for that): the requester's first request cannot find
            // "no responders".
            responder.request("raw.req", payload()).await.unwrap();
            let back = requester.subscribe("raw.back").await.unwrap();
            requester.flush().await.unwrap();
            (requester, back)
        });
        let mut raw = Raw {
            rt,
            requester,
            back: Some(back),
        };
        // Warm up.
        raw.latency(1000);
        raw
    }

    fn latency(&mut self, trips: usize) -> Vec<Duration> {
        let requester = &self.requester;
        self.rt.block_on(async {
            let mut lat = Vec::with_capacity(trips);
            for _ in 0..trips {
                let t = Instant::now();
                requester.request("raw.req", payload()).await.unwrap();
                lat.push(t.elapsed());
            }
            lat
        })
    }

    fn windowed(&mut self, trips: usize, window: usize) -> f64 {
        let Raw {
            rt,
            requester,
            back,
        } = self;
        let back = back.as_mut().expect("present until drop");
        rt.block_on(async {
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
            trips as f64 / t.elapsed().as_secs_f64()
        })
    }

    fn measure(&mut self, trips: usize, window: usize, windowed: usize) -> Measured {
        let lat = self.latency(trips);
        let before = usage();
        let rate = self.windowed(windowed, window);
        let cost = per_trip(before, usage(), windowed);
        Measured { lat, rate, cost }
    }
}

/// CPU time (clock ticks) and context switches (voluntary and not) of
/// every thread of this process and of its children (the server), from
/// `/proc` (Linux); `None` elsewhere.
fn usage() -> Option<(u64, u64)> {
    let tasks = |pid: &str| -> Vec<String> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|dir| {
                dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let me = std::process::id().to_string();
    let mut pids = vec![me.clone()];
    for tid in tasks(&me) {
        if let Ok(children) = std::fs::read_to_string(format!("/proc/{me}/task/{tid}/children")) {
            pids.extend(children.split_whitespace().map(String::from));
        }
    }
    let (mut ticks, mut switches) = (0, 0);
    for pid in &pids {
        for tid in tasks(pid) {
            let dir = format!("/proc/{pid}/task/{tid}");
            let Ok(stat) = std::fs::read_to_string(format!("{dir}/stat")) else {
                continue;
            };
            // utime and stime: fields 14 and 15, counted after the
            // parenthesised name (which may hold spaces).
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            ticks += fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
            let status = std::fs::read_to_string(format!("{dir}/status")).unwrap_or_default();
            switches += status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    (pids.len() > 1).then_some((ticks, switches))
}

/// CPU µs and context switches per round trip between two [`usage`]s
/// (clock ticks taken as 10 ms, Linux's `USER_HZ`).
fn per_trip(
    before: Option<(u64, u64)>,
    after: Option<(u64, u64)>,
    trips: usize,
) -> Option<(f64, f64)> {
    let ((t0, s0), (t1, s1)) = (before?, after?);
    let trips = trips as f64;
    Some((
        (t1 - t0) as f64 * 10_000.0 / trips,
        (s1 - s0) as f64 / trips,
    ))
}

/// An 8-byte payload (the client's payload type, inferred).
fn payload<T: From<Vec<u8>>>() -> T {
    7u64.to_le_bytes().to_vec().into()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn range(v: &[f64]) -> (f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// The three modes side by side, `rounds` times (see the module docs).
/// With `control`, the second pair is tagged too: what two identical
/// pairs differ by is the noise floor of the comparison.
fn alternate(
    server: &NatsServer,
    rounds: usize,
    (trips, window, windowed): (usize, usize, usize),
    control: bool,
) {
    let second = if control { "tagged B" } else { "untagged" };
    let names = ["raw nats", "tagged", second];
    let mut tagged = Pair::start(server, "tagged", true);
    let mut other = Pair::start(server, "plain", control);
    let mut raw = Raw::start(server);
    // [mode][round]: latency mean (µs), round trips/s, and per windowed
    // round trip CPU µs and context switches.
    let mut lat = [vec![], vec![], vec![]];
    let mut rate = [vec![], vec![], vec![]];
    let mut cpu = [vec![], vec![], vec![]];
    let mut switches = [vec![], vec![], vec![]];
    for round in 0..rounds {
        for k in 0..3 {
            let mode = (round + k) % 3;
            let m = match mode {
                0 => raw.measure(trips, window, windowed),
                1 => tagged.measure(trips, window, windowed),
                _ => other.measure(trips, window, windowed),
            };
            lat[mode].push(m.mean().as_secs_f64() * 1e6);
            rate[mode].push(m.rate);
            if let Some((c, s)) = m.cost {
                cpu[mode].push(c);
                switches[mode].push(s);
            }
        }
        print!("round {:>2}:", round + 1);
        for mode in 0..3 {
            print!(
                " | {} {:.1} us {:.0}/s",
                names[mode], lat[mode][round], rate[mode][round]
            );
            if let Some(c) = cpu[mode].get(round) {
                print!(" {c:.2} us CPU");
            }
        }
        println!();
    }
    let per_round = |a: &[f64], b: &[f64]| median(a.iter().zip(b).map(|(x, y)| x / y).collect());
    println!("medians over {rounds} rounds (min-max):");
    for mode in 0..3 {
        let (lo, hi) = range(&lat[mode]);
        let (rlo, rhi) = range(&rate[mode]);
        print!(
            "{:<10} latency mean {:>6.1} us ({lo:.1}-{hi:.1}) | window {window}: {:>8.0} round trips/s ({rlo:.0}-{rhi:.0})",
            names[mode],
            median(lat[mode].clone()),
            median(rate[mode].clone()),
        );
        if cpu[mode].len() == rounds {
            print!(
                " | per round trip {:.2} us CPU, {:.2} context switches",
                median(cpu[mode].clone()),
                median(switches[mode].clone())
            );
        }
        println!();
    }
    print!(
        "per-round ratios, median: tagged/{second} latency {:.3}, round trips/s {:.3}",
        per_round(&lat[1], &lat[2]),
        per_round(&rate[1], &rate[2]),
    );
    if cpu.iter().all(|c| c.len() == rounds) {
        print!(", CPU per round trip {:.3}", per_round(&cpu[1], &cpu[2]));
    }
    println!(
        "; tagged/raw round trips/s {:.3}, {second}/raw {:.3}",
        per_round(&rate[1], &rate[0]),
        per_round(&rate[2], &rate[0]),
    );
    tagged.stop();
    other.stop();
}

fn main() {
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    let no_key = argv.iter().any(|a| a == "--no-key");
    let control = argv.iter().any(|a| a == "--control");
    argv.retain(|a| a != "--no-key" && a != "--control");
    let rounds = argv.iter().position(|a| a == "--alternate").map(|i| {
        argv.remove(i);
        if i < argv.len() {
            argv.remove(i).parse::<usize>().expect("ROUNDS")
        } else {
            panic!("--alternate takes a number of rounds")
        }
    });
    let mut args = argv.into_iter();
    let trips: usize = args
        .next()
        .map_or(if rounds.is_some() { 2_000 } else { 20_000 }, |a| {
            a.parse().expect("ROUND_TRIPS")
        });
    let window: usize = args.next().map_or(256, |a| a.parse().expect("WINDOW"));
    let windowed: usize = args
        .next()
        .map_or(if rounds.is_some() { 100_000 } else { trips }, |a| {
            a.parse().expect("WINDOWED")
        });
    let server = NatsServer::start().unwrap_or_else(|e| panic!("{e}"));
    println!(
        "nats-server at {}; {trips} round trips, {windowed} windowed",
        server.url()
    );
    if let Some(rounds) = rounds {
        alternate(&server, rounds, (trips, window, windowed), control);
        return;
    }

    // --- stepsched-nats: two nodes, an echo on node 2.
    println!(
        "frames {}",
        if no_key {
            "untagged (--no-key)"
        } else {
            "tagged (keyed BLAKE3, cluster key)"
        }
    );
    let mut pair = Pair::start(&server, "bench", !no_key);
    pair.measure(trips, window, windowed)
        .report("stepsched", window);
    pair.stop();

    // --- raw async-nats on the same server: two connections.
    Raw::start(&server)
        .measure(trips, window, windowed)
        .report("raw nats", window);
}
