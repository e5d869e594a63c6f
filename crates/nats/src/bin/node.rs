//! `stepsched-nats-node`: one node of a two-node ledger run, for trying
//! the node layer by hand and for the two-process tests.
//!
//! ```text
//! stepsched-nats-node --url nats://127.0.0.1:4222 --node 1 --peer 2 --count 100000
//! stepsched-nats-node --url nats://127.0.0.1:4222 --node 2 --peer 1 --count 100000
//! ```
//!
//! Each node runs a sink process at `<node.1>`, waits for its peer, sends
//! `count` numbered messages to the peer's sink (sender `<node.2>`), then
//! a confirmed end marker listing which sends were accepted. The sink
//! counts every number it gets, checks that it was addressed to it and
//! came from the peer's sender, and when the peer's end marker arrives it
//! works out what was delivered, lost, duplicated or misdirected and
//! tells the peer how many of its messages were lost. Each node prints
//! one `LEDGER key=value ...` line and exits 0.
//!
//! The cluster key (the same on both nodes) is `--cluster-key TEXT` or the
//! `STEPSCHED_CLUSTER_KEY` environment variable (at least 16 bytes);
//! `--insecure` runs without one, on a trusted server only.
//! `--user NAME --password PASS`, `--token T`, `--nkey SEED`,
//! `--creds FILE`, `--tls-ca PEM`, `--tls-cert PEM --tls-key PEM` and
//! `--require-tls` are the server credentials and TLS (see the README,
//! "Security").
//!
//! `--outage` makes the run wait for the driver (lines on stdin) around a
//! server restart: after half the messages it prints `HALF` and waits for
//! a line (the server is being killed; by hand: kill it, then press
//! Enter), sends until a send is refused, prints `OUTAGE` and waits for a
//! line (the server is back: start it, press Enter). `--idle` only joins
//! the cluster and waits for stdin to close (a node to crash).

use std::io::BufRead;
use std::process::ExitCode;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use stepsched::{Context, Error, Events, Pid, Process, Scheduler, Status, StepOutput};
use stepsched_nats::{Node, NodeConfig};

const WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Serialize, Deserialize)]
enum Wire {
    /// Readiness probe.
    Hello,
    /// Message number `seq` from `from` for `to`.
    Data {
        seq: u32,
        #[serde(with = "stepsched_relay::serde_pid")]
        from: Pid,
        #[serde(with = "stepsched_relay::serde_pid")]
        to: Pid,
    },
    /// The sender is done; bit `i` set when send `i` was accepted.
    End { accepted: Vec<u8> },
    /// The receiver's count of the sender's lost messages.
    Lost { lost: u64 },
}

#[derive(Default)]
struct Ledger {
    counts: Vec<u8>,
    misdirected: u64,
    end: Option<Vec<u8>>,
    lost_reported: Option<u64>,
}

struct Sink {
    peer: u32,
    ledger: Arc<Mutex<Ledger>>,
    signal: Sender<&'static str>,
}

impl Process for Sink {
    type Input = ();
    type Message = Wire;
    type Response = ();
    type Command = String;
    type Output = ();

    fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, Wire, ()>,
        out: &mut StepOutput<String, ()>,
    ) -> Result<(), Error> {
        let me = cx.pid();
        let mut ledger = self.ledger.lock().unwrap();
        for event in events {
            if event.is_cancel() {
                return Err(Error::Cancelled);
            }
            let sender = event.sender();
            match event.into_message() {
                Some(Wire::Data { seq, from, to }) => {
                    let right = to == me && sender == Some(from) && from == Pid::new(self.peer, 2);
                    match ledger.counts.get_mut(seq as usize) {
                        Some(c) if right => *c = c.saturating_add(1),
                        _ => ledger.misdirected += 1,
                    }
                }
                Some(Wire::End { accepted }) => {
                    ledger.end = Some(accepted);
                    let _ = self.signal.send("end");
                }
                Some(Wire::Lost { lost }) => {
                    ledger.lost_reported = Some(lost);
                    let _ = self.signal.send("lost");
                }
                Some(Wire::Hello) | None => {}
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

struct Args {
    url: String,
    node: u32,
    peer: u32,
    count: u32,
    outage: bool,
    idle: bool,
    key: Option<String>,
    insecure: bool,
    user: Option<String>,
    password: Option<String>,
    token: Option<String>,
    nkey: Option<String>,
    creds: Option<String>,
    tls_ca: Option<String>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    require_tls: bool,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        url: String::new(),
        node: 1,
        peer: 2,
        count: 100_000,
        outage: false,
        idle: false,
        key: std::env::var("STEPSCHED_CLUSTER_KEY").ok(),
        insecure: false,
        user: None,
        password: None,
        token: None,
        nkey: None,
        creds: None,
        tls_ca: None,
        tls_cert: None,
        tls_key: None,
        require_tls: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => a.url = value()?,
            "--node" => a.node = value()?.parse().map_err(|e| format!("--node: {e}"))?,
            "--peer" => a.peer = value()?.parse().map_err(|e| format!("--peer: {e}"))?,
            "--count" => a.count = value()?.parse().map_err(|e| format!("--count: {e}"))?,
            "--outage" => a.outage = true,
            "--idle" => a.idle = true,
            "--cluster-key" => a.key = Some(value()?),
            "--insecure" => a.insecure = true,
            "--user" => a.user = Some(value()?),
            "--password" => a.password = Some(value()?),
            "--token" => a.token = Some(value()?),
            "--nkey" => a.nkey = Some(value()?),
            "--creds" => a.creds = Some(value()?),
            "--tls-ca" => a.tls_ca = Some(value()?),
            "--tls-cert" => a.tls_cert = Some(value()?),
            "--tls-key" => a.tls_key = Some(value()?),
            "--require-tls" => a.require_tls = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.url.is_empty() {
        return Err("--url is required".into());
    }
    Ok(a)
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stepsched-nats-node: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Waits for the driver's next line on stdin.
fn wait_line(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> Result<(), String> {
    match lines.next() {
        Some(Ok(_)) => Ok(()),
        _ => Err("stdin closed".into()),
    }
}

fn wait_signal(rx: &Receiver<&'static str>, want: &str) -> Result<(), String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(s) if s == want => return Ok(()),
            Ok(_) => {}
            Err(_) => return Err(format!("no `{want}` from the peer within {WAIT:?}")),
        }
    }
}

fn run() -> Result<(), String> {
    let a = args()?;
    let mut config = NodeConfig::new(a.node, &a.url).prefix("pair");
    config = match (&a.key, a.insecure) {
        (Some(key), _) => config.cluster_key(key),
        (None, true) => config.insecure_no_cluster_key(),
        (None, false) => config,
    };
    if let (Some(user), Some(password)) = (&a.user, &a.password) {
        config = config.user_password(user, password);
    }
    if let Some(token) = &a.token {
        config = config.token(token);
    }
    if let Some(seed) = &a.nkey {
        config = config.nkey(seed);
    }
    if let Some(path) = &a.creds {
        config = config.credentials_file(path);
    }
    if let Some(pem) = &a.tls_ca {
        config = config.tls_root_certificates(pem);
    }
    if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
        config = config.tls_client_certificate(cert, key);
    }
    config = config.require_tls(a.require_tls);
    let node =
        Node::start(Scheduler::<Sink>::builder().workers(1), config).map_err(|e| e.to_string())?;
    let ledger = Arc::new(Mutex::new(Ledger {
        counts: vec![0; a.count as usize],
        ..Ledger::default()
    }));
    let (signal, signals) = channel();
    let sink = node.allocate_pid();
    let me = node.allocate_pid();
    node.scheduler()
        .submit(
            sink,
            Sink {
                peer: a.peer,
                ledger: ledger.clone(),
                signal,
            },
            "run",
            (),
        )
        .map_err(|e| e.to_string())?;
    // The sink exists: now peers may learn of this node.
    node.announce().map_err(|e| e.to_string())?;
    println!("READY {sink}");
    let mut stdin = std::io::stdin().lock().lines();
    if a.idle {
        while let Some(Ok(_)) = stdin.next() {}
        return Ok(());
    }
    if !node.wait_for(a.peer, WAIT) {
        return Err(format!("node {} never appeared", a.peer));
    }
    let peer_sink = Pid::new(a.peer, 1);
    confirm(&node, me, peer_sink, || Wire::Hello)?;

    let mut accepted = vec![0u8; (a.count as usize).div_ceil(8)];
    let (mut ok, mut refused) = (0u64, 0u64);
    let mut outage_seen = false;
    let start = Instant::now();
    for seq in 0..a.count {
        if a.outage && seq == a.count / 2 {
            println!("HALF");
            wait_line(&mut stdin)?;
            // The driver killed the server: wait for the client to notice.
            let deadline = Instant::now() + WAIT;
            while node.is_connected() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let msg = Wire::Data {
            seq,
            from: me,
            to: peer_sink,
        };
        if node.send_from(me, peer_sink, msg).is_ok() {
            accepted[seq as usize / 8] |= 1 << (seq % 8);
            ok += 1;
        } else {
            refused += 1;
            if a.outage && !outage_seen {
                outage_seen = true;
                println!("OUTAGE");
                wait_line(&mut stdin)?;
                // The server is back: wait until we and the peer are.
                let deadline = Instant::now() + WAIT;
                while !node.is_connected() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if !node.wait_for(a.peer, WAIT) {
                    return Err(format!("node {} did not come back", a.peer));
                }
            }
        }
    }
    node.flush(WAIT).map_err(|e| format!("flush: {e}"))?;
    let send_time = start.elapsed();
    let end = accepted.clone();
    confirm(&node, me, peer_sink, || Wire::End {
        accepted: end.clone(),
    })?;

    // The peer's end marker: everything of its that will arrive has.
    wait_signal(&signals, "end")?;
    let (delivered, lost, dup, stray, misdirected) = {
        let l = ledger.lock().unwrap();
        let theirs = l.end.as_ref().expect("signalled");
        let (mut delivered, mut lost, mut dup, mut stray) = (0u64, 0u64, 0u64, 0u64);
        for (i, &c) in l.counts.iter().enumerate() {
            let was_accepted = theirs.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0);
            match (was_accepted, c) {
                (true, 0) => lost += 1,
                (true, 1) => delivered += 1,
                (true, _) => dup += 1,
                (false, 0) => {}
                (false, _) => stray += 1,
            }
        }
        (delivered, lost, dup, stray, l.misdirected)
    };
    confirm(&node, me, peer_sink, || Wire::Lost { lost })?;
    wait_signal(&signals, "lost")?;
    let my_lost = ledger.lock().unwrap().lost_reported.expect("signalled");
    let s = node.stats();
    println!(
        "LEDGER node={} count={} accepted={ok} refused={refused} lost={my_lost} \
         delivered_in={delivered} lost_in={lost} dup_in={dup} stray_in={stray} \
         misdirected_in={misdirected} gaps={} duplicates={} bad_frames={} slow_consumer={} send_ms={}",
        a.node,
        a.count,
        s.gaps,
        s.duplicates,
        s.bad_frames,
        s.slow_consumer,
        send_time.as_millis()
    );
    // Stay until the peer has our report too (it confirmed it), then go.
    node.shutdown(Duration::from_secs(2))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Sends a message built by `make` with confirmation, retrying until the
/// peer's sink takes it (at most `WAIT`).
fn confirm(node: &Node<Sink>, me: Pid, to: Pid, make: impl Fn() -> Wire) -> Result<(), String> {
    let deadline = Instant::now() + WAIT;
    loop {
        match node.send_confirmed(Some(me), to, make(), Duration::from_secs(2)) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(format!("to {to}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}
