//! The simulated network: delays in virtual time, reordering on a link
//! (and FIFO when asked), loss, duplication, scripted and random
//! partitions, each with its trace line; sends to processes that are not
//! live are still refused at once.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use stepsched_process::{Event, Pid, SendError, Status};
use stepsched_sim::{Network, Sim};

const MS: Duration = Duration::from_millis(1);

/// Records the data of every message it gets (with the time it got it);
/// never finishes.
fn sink(probe: &Rc<Probe>, got: &Rc<RefCell<Vec<u32>>>) -> FnProc {
    let got = Rc::clone(got);
    FnProc::new(probe, move |_, events, out| {
        for e in events {
            if let Event::Message { data, .. } = e {
                got.borrow_mut().push(data);
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    })
}

/// Sends `1..=n` to `to` in its first step, then `n + 1..` one each time
/// a `wait` yield (of `gap`) completes, `more` times; then finishes.
fn sender(probe: &Rc<Probe>, to: Pid, n: u32, more: u32) -> FnProc {
    let mut next = n + 1;
    let mut left = more;
    FnProc::new(probe, move |cx, events, out| {
        if events.is_empty() {
            for i in 1..=n {
                cx.send(to, i).unwrap();
            }
        } else {
            cx.send(to, next).unwrap();
            next += 1;
            left -= 1;
        }
        if left == 0 {
            out.set_status(Status::Done(0));
        } else {
            out.push_yield(1, "wait");
            out.set_status(Status::Yield);
        }
        Ok(())
    })
}

/// A sink and a sender of `n` (then `more`, 10 ms apart) on a simulator
/// with `network`: what the sink got, in order, and the trace.
fn run(seed: u64, network: Network, n: u32, more: u32) -> (Vec<u32>, Vec<String>) {
    run_on(seed, Some(network), n, more)
}

/// [`run`], with the network off when `network` is `None`.
fn run_on(seed: u64, network: Option<Network>, n: u32, more: u32) -> (Vec<u32>, Vec<String>) {
    let mut builder = Sim::builder().seed(seed);
    if let Some(network) = network {
        builder = builder.network(network);
    }
    let sim = builder
        .handler("wait", |_, done| {
            done.complete_after(10 * MS, Ok(0));
        })
        .build();
    let probe = Probe::new();
    let got = Rc::new(RefCell::new(Vec::new()));
    let to = submit(&sim, sink(&probe, &got)).pid();
    submit(&sim, sender(&probe, to, n, more));
    sim.run();
    let got = got.borrow().clone();
    (got, sim.trace())
}

#[test]
fn a_message_arrives_after_its_delay_in_virtual_time() {
    let net = Network::new().delay(5 * MS, 5 * MS);
    let (got, trace) = run(1, net, 1, 0);
    assert_eq!(got, [1]);
    assert!(
        trace.contains(&"t=0us net delay <0.2>-><0.1> #1 +5000us".to_owned()),
        "{trace:#?}"
    );
    assert!(
        trace.contains(&"t=5000us <0.1> events=[m<0.2>] status=idle yields=[]".to_owned()),
        "{trace:#?}"
    );
}

#[test]
fn independent_delays_reorder_a_link_and_fifo_keeps_its_order() {
    let net = Network::new().delay(MS, 10 * MS);
    let sorted = |v: &[u32]| v.windows(2).all(|w| w[0] < w[1]);
    let reordered = (0..20)
        .filter(|&seed| {
            let (got, _) = run(seed, net, 10, 0);
            assert_eq!(got.len(), 10, "seed {seed}: all arrive");
            !sorted(&got)
        })
        .count();
    assert!(reordered > 10, "only {reordered} of 20 seeds reordered");
    for seed in 0..20 {
        let (got, trace) = run(seed, net.fifo(true), 10, 0);
        assert_eq!(got, (1..=10).collect::<Vec<_>>(), "seed {seed}: {trace:#?}");
    }
}

#[test]
fn a_lost_message_never_arrives_and_a_duplicate_arrives_twice() {
    let (got, trace) = run(2, Network::new().loss(1.0), 3, 0);
    assert!(got.is_empty(), "{got:?}");
    for n in 1..=3 {
        let line = format!("t=0us net drop <0.2>-><0.1> #{n}");
        assert!(trace.contains(&line), "no `{line}`: {trace:#?}");
    }
    let (mut got, trace) = run(2, Network::new().duplicate(1.0), 3, 0);
    got.sort_unstable();
    assert_eq!(got, [1, 1, 2, 2, 3, 3]);
    assert!(trace.contains(&"t=0us net dup <0.2>-><0.1> #2".to_owned()));
}

#[test]
fn a_scripted_partition_drops_what_crosses_it_until_it_heals() {
    // One message every 10 ms, from 0 ms (1) to 40 ms (5); cut from 5 ms
    // to 25 ms: 2 and 3 (sent at 10 and 20 ms) are dropped.
    let sim = Sim::builder()
        .seed(3)
        .network(Network::new())
        .handler("wait", |_, done| {
            done.complete_after(10 * MS, Ok(0));
        })
        .build();
    let probe = Probe::new();
    let got = Rc::new(RefCell::new(Vec::new()));
    let to = submit(&sim, sink(&probe, &got)).pid();
    let from = sim.allocate_pid();
    sim.partition(&[from], &[to], 5 * MS, 25 * MS);
    let mut next = 1;
    let body = move |cx: &mut stepsched_process::Context<'_, FnProc>, _: Vec<Ev>, out: &mut Out| {
        cx.send(to, next).unwrap();
        next += 1;
        if next > 5 {
            out.set_status(Status::Done(0));
        } else {
            out.push_yield(1, "wait");
            out.set_status(Status::Yield);
        }
        Ok(())
    };
    sim.submit(from, FnProc::new(&probe, body), "main", 0)
        .unwrap();
    sim.run();
    assert_eq!(*got.borrow(), [1, 4, 5]);
    let trace = sim.trace();
    for line in [
        "t=0us net partition <0.2> | <0.1> from t=5000us heal t=25000us",
        "t=10000us net drop <0.2>-><0.1> #2 (partition)",
        "t=20000us net drop <0.2>-><0.1> #3 (partition)",
    ] {
        assert!(trace.contains(&line.to_owned()), "no `{line}`: {trace:#?}");
    }
}

#[test]
fn a_message_in_flight_when_a_partition_begins_is_dropped_on_arrival() {
    // Sent at 0 ms, arriving at 8 ms, inside the cut of 5 to 10 ms:
    // dropped; the next, sent at 10 ms (healed), arrives at 18 ms.
    let sim = Sim::builder()
        .network(Network::new().delay(8 * MS, 8 * MS))
        .handler("wait", |_, done| {
            done.complete_after(10 * MS, Ok(0));
        })
        .build();
    let probe = Probe::new();
    let got = Rc::new(RefCell::new(Vec::new()));
    let to = submit(&sim, sink(&probe, &got)).pid();
    let from = submit(&sim, sender(&probe, to, 1, 1)).pid();
    sim.partition(&[from], &[to], 5 * MS, 10 * MS);
    sim.run();
    assert_eq!(*got.borrow(), [2]);
    assert_eq!(sim.now(), 18 * MS);
    let trace = sim.trace();
    assert!(
        trace.contains(&"t=8000us net drop <0.2>-><0.1> #1 (partition)".to_owned()),
        "{trace:#?}"
    );
    // The host's link too, when the process is isolated.
    sim.isolate(&[to], 18 * MS, 30 * MS);
    sim.send(to, 3).unwrap();
    sim.run();
    assert_eq!(*got.borrow(), [2]);
    assert!(
        sim.trace()
            .contains(&"t=18000us net drop host-><0.1> #1 (partition)".to_owned())
    );
}

#[test]
fn a_random_partition_cuts_a_pair_for_a_drawn_time_then_heals() {
    // Every message starts a partition (the first is dropped); the next
    // message, 10 ms later, comes after it healed (2 to 5 ms) and starts
    // another.
    let net = Network::new().partitions(1.0, 2 * MS, 5 * MS);
    let (got, trace) = run(4, net, 1, 3);
    assert!(got.is_empty(), "{got:?}");
    let partitions: Vec<&String> = trace
        .iter()
        .filter(|l| l.contains("net partition <0.2> | <0.1> from t="))
        .collect();
    assert_eq!(partitions.len(), 4, "{trace:#?}");
    for line in partitions {
        let heal: u64 = line
            .rsplit("heal t=")
            .next()
            .and_then(|s| s.strip_suffix("us"))
            .and_then(|s| s.parse().ok())
            .unwrap();
        let from: u64 = line
            .split("from t=")
            .nth(1)
            .and_then(|s| s.split("us").next())
            .and_then(|s| s.parse().ok())
            .unwrap();
        assert!((2000..=5000).contains(&(heal - from)), "{line}");
    }
    // With partitions rare enough never to fire, everything arrives.
    let (got, _) = run(4, Network::new().partitions(1e-12, 2 * MS, 5 * MS), 1, 3);
    assert_eq!(got, [1, 2, 3, 4]);
}

#[test]
fn a_send_to_a_process_that_is_not_live_is_refused_at_once() {
    let sim = Sim::builder()
        .network(Network::new().delay(MS, MS).loss(1.0))
        .build();
    let probe = Probe::new();
    let done = submit(
        &sim,
        FnProc::new(&probe, |_, _, out| {
            out.set_status(Status::Done(0));
            Ok(())
        }),
    );
    sim.run();
    assert!(matches!(sim.send(done.pid(), 1), Err(SendError::Closed(_))));
    let stranger = Pid::new(0, 99);
    assert!(matches!(
        sim.send(stranger, 1),
        Err(SendError::UnknownPid(_))
    ));
}

#[test]
fn a_network_with_no_delay_and_no_faults_is_the_network_off() {
    for seed in 0..10 {
        let (got, trace) = run(seed, Network::new(), 5, 2);
        let (off, off_trace) = run_on(seed, None, 5, 2);
        assert_eq!(got, off);
        assert_eq!(trace, off_trace, "seed {seed}");
    }
}

/// Two senders to one sink, each sending `1..=3`: the first's link has a
/// network of its own (`Sim::link`), the second's has none (or the
/// simulator's, when `shared` is set): what the sink got and the trace.
fn two_links(seed: u64, own: Network, shared: Option<Network>) -> (Vec<u32>, Vec<String>) {
    let mut builder = Sim::builder().seed(seed);
    if let Some(network) = shared {
        builder = builder.network(network);
    }
    let sim = builder.build();
    let probe = Probe::new();
    let got = Rc::new(RefCell::new(Vec::new()));
    let to = submit(&sim, sink(&probe, &got)).pid();
    let slow = sim.allocate_pid();
    sim.link(slow, to, own);
    sim.submit(slow, sender(&probe, to, 3, 0), "main", 0)
        .unwrap();
    submit(&sim, sender(&probe, to, 3, 0));
    sim.run();
    let got = got.borrow().clone();
    (got, sim.trace())
}

#[test]
fn a_link_with_a_network_of_its_own_delays_and_loses_only_its_messages() {
    // Without a simulator network: only the configured link is delayed.
    let (got, trace) = two_links(1, Network::new().delay(7 * MS, 7 * MS), None);
    assert_eq!(got, [1, 2, 3, 1, 2, 3], "{trace:#?}");
    for n in 1..=3 {
        let line = format!("t=0us net delay <0.2>-><0.1> #{n} +7000us");
        assert!(trace.contains(&line), "no `{line}`: {trace:#?}");
    }
    assert!(!trace.iter().any(|l| l.contains("<0.3>->")), "{trace:#?}");

    // Over a simulator network with a delay of its own: the configured
    // link loses everything, the other link still has the shared delay.
    let shared = Network::new().delay(2 * MS, 2 * MS);
    let (got, trace) = two_links(1, Network::new().loss(1.0), Some(shared));
    assert_eq!(got, [1, 2, 3], "{trace:#?}");
    for n in 1..=3 {
        let lost = format!("t=0us net drop <0.2>-><0.1> #{n}");
        let late = format!("t=0us net delay <0.3>-><0.1> #{n} +2000us");
        assert!(trace.contains(&lost), "no `{lost}`: {trace:#?}");
        assert!(trace.contains(&late), "no `{late}`: {trace:#?}");
    }
}

#[test]
fn healing_ends_a_links_own_faults() {
    let sim = Sim::builder().seed(4).build();
    let probe = Probe::new();
    let got = Rc::new(RefCell::new(Vec::new()));
    let to = submit(&sim, sink(&probe, &got)).pid();
    let from = sim.allocate_pid();
    sim.link(from, to, Network::new().loss(1.0));
    sim.heal();
    sim.submit(from, sender(&probe, to, 2, 0), "main", 0)
        .unwrap();
    sim.run();
    assert_eq!(*got.borrow(), [1, 2], "{:#?}", sim.trace());
}
