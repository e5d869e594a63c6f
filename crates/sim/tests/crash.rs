//! Crash and restart (the guide's "Crashes and durable state"): a storage
//! process that acknowledges a write before syncing it loses an
//! acknowledged value when it crashes in between; found within 1 000
//! seeds, replayed byte for byte; the fixed storage (sync, then
//! acknowledge) is clean on 10 000 seeds. And the durable store, restarts,
//! aimed faults, and the crash fault's own stream.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use stepsched_process::{Context, Error, Event, Events, Pid, Process, Status, StepOutput};
use stepsched_sim::{Faults, Sim, SimContextExt, check_determinism};

#[derive(Clone, Debug)]
enum Msg {
    /// Store `value` under `key`; `id` numbers the client's requests.
    Put { id: u64, key: String, value: u8 },
    /// Request `id` is stored.
    Ack { id: u64 },
}

enum Actor {
    /// Writes each put to its durable store and syncs it with an `fsync`
    /// (1 ms). `fixed`: acknowledges after the sync; else at once.
    /// `waiting`: the puts to acknowledge when the sync completes.
    Storage {
        fixed: bool,
        waiting: Vec<(Pid, u64)>,
    },
    /// Puts `left` values, one at a time, and puts one again when no ack
    /// came within the timeout; `acked` records what was acknowledged.
    Client {
        storage: Pid,
        name: char,
        id: u64,
        left: u64,
        acked: Rc<RefCell<BTreeMap<String, u8>>>,
    },
}

const CLIENTS: usize = 2;
const EACH: u64 = 3;
const TIMEOUT: Duration = Duration::from_millis(20);

fn failed(e: impl std::fmt::Display) -> Error {
    Error::failed(e.to_string())
}

/// The key of a client's request.
fn key(name: char, id: u64) -> String {
    format!("{name}{id}")
}

impl Process for Actor {
    type Input = ();
    type Message = Msg;
    type Response = ();
    type Command = &'static str;
    type Output = ();

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, Msg, ()>,
        out: &mut StepOutput<&'static str, ()>,
    ) -> Result<(), Error> {
        match self {
            Actor::Storage { fixed, waiting } => {
                let mut synced = false;
                for event in events {
                    match event {
                        Event::Message {
                            from: Some(from),
                            data: Msg::Put { id, key, value },
                        } => {
                            cx.with_store(|s| s.write(key, vec![value]))
                                .expect("a named process");
                            if *fixed {
                                waiting.push((from, id));
                            } else {
                                // The bug: acknowledged before it is synced.
                                cx.send(from, Msg::Ack { id }).map_err(failed)?;
                            }
                            out.push_yield(id, "fsync");
                        }
                        // A failed fsync (an injected handler error) syncs
                        // nothing; the next one will.
                        Event::Completion { result, .. } if result.is_ok() => {
                            cx.with_store(|s| s.sync()).expect("a named process");
                            synced = true;
                        }
                        _ => {}
                    }
                }
                if synced {
                    for (to, id) in waiting.drain(..) {
                        cx.send(to, Msg::Ack { id }).map_err(failed)?;
                    }
                }
                out.set_status(Status::Idle);
            }
            Actor::Client {
                storage,
                name,
                id,
                left,
                acked,
            } => {
                let mut first = true;
                let mut send = false;
                for event in events {
                    first = false;
                    match event {
                        Event::Message {
                            data: Msg::Ack { id: done },
                            ..
                        } if done == *id => {
                            acked.borrow_mut().insert(key(*name, *id), *id as u8);
                            *left -= 1;
                            if *left == 0 {
                                out.set_status(Status::Done(()));
                                return Ok(());
                            }
                            *id += 1;
                            send = true;
                        }
                        Event::Completion { tag, .. } if tag == *id => send = true,
                        _ => {}
                    }
                }
                if first || send {
                    let put = Msg::Put {
                        id: *id,
                        key: key(*name, *id),
                        value: *id as u8,
                    };
                    cx.send(*storage, put).map_err(failed)?;
                    out.push_yield(*id, "timeout");
                }
                out.set_status(Status::Idle);
            }
        }
        Ok(())
    }
}

/// Two clients putting three values each into a storage process that
/// crashes after a step with probability 5 % (restarted 1 to 10 ms
/// later): the acknowledged values the storage's durable store lost, and
/// the trace.
fn lost_writes(seed: u64, fixed: bool, trace: bool) -> (Vec<String>, String) {
    lost_writes_with(seed, fixed, trace, Faults::default().crash(0.05))
}

/// The same with `faults`.
fn lost_writes_with(seed: u64, fixed: bool, trace: bool, faults: Faults) -> (Vec<String>, String) {
    let (sim, acked, clients) = storage_run(seed, fixed, trace, faults);
    let report = sim.run();
    assert!(!report.step_limit_hit, "seed {seed}");
    for client in clients {
        assert_eq!(client.join(), Ok(()), "seed {seed}: every client finishes");
    }
    let store = sim.store("storage").expect("the storage's store");
    let lost = acked
        .borrow()
        .iter()
        .filter(|(key, value)| store.get(key) != Some(&[**value][..]))
        .map(|(key, _)| key.clone())
        .collect();
    (lost, sim.trace_text())
}

/// What the clients were acknowledged, by key.
type Acked = Rc<RefCell<BTreeMap<String, u8>>>;

/// The storage (`<0.1>`) and the clients (`<0.2>`, `<0.3>`) under `seed`
/// and `faults`, submitted, not run yet; what the clients were
/// acknowledged; their join handles.
fn storage_run(
    seed: u64,
    fixed: bool,
    trace: bool,
    faults: Faults,
) -> (Sim<Actor>, Acked, Vec<stepsched_sim::JoinHandle<Actor>>) {
    let sim = Sim::builder()
        .seed(seed)
        .faults(faults)
        .trace(trace)
        .max_steps(100_000)
        .factory("storage", move || {
            Ok(Actor::Storage {
                fixed,
                waiting: Vec::new(),
            })
        })
        .handler("fsync", |_, done| {
            done.complete_after(Duration::from_millis(1), Ok(()));
        })
        .handler("timeout", |_, done| {
            done.complete_after(TIMEOUT, Ok(()));
        })
        .build();
    let storage = sim.allocate_pid();
    sim.submit_named(storage, "storage", "main", ()).unwrap();
    let acked = Rc::new(RefCell::new(BTreeMap::new()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let client = Actor::Client {
                storage,
                name: char::from(b'a' + i as u8),
                id: 1,
                left: EACH,
                acked: Rc::clone(&acked),
            };
            sim.submit(sim.allocate_pid(), client, "main", ()).unwrap()
        })
        .collect();
    (sim, acked, clients)
}

/// The trace of the storage run under `seed` and `faults` (run to its
/// end, whatever happens).
fn trace_of(seed: u64, faults: Faults) -> String {
    let (sim, _, _) = storage_run(seed, false, true, faults);
    sim.run();
    sim.trace_text()
}

#[test]
fn a_crash_between_an_acknowledged_write_and_its_sync_is_found_and_replayed() {
    let failing: Vec<u64> = (0..1000)
        .filter(|&seed| !lost_writes(seed, false, false).0.is_empty())
        .collect();
    let first = *failing.first().expect("a seed of 1 000 loses a write");
    println!(
        "first failing seed {first}; {} of 1 000 fail",
        failing.len()
    );
    assert_eq!(first, 0);
    assert_eq!(failing.len(), 211);
    let (lost, trace) = lost_writes(first, false, true);
    let (again, replay) = lost_writes(first, false, true);
    assert_eq!(trace, replay, "the failing seed replays byte for byte");
    assert_eq!(lost, again);
    assert!(!lost.is_empty());
    // The storage acknowledged five writes and crashed before syncing
    // them; a client's next put, sent while it was down, was dropped.
    assert!(
        trace.contains("t=0us <0.1> fault crash lost=5 restart t=3000us\n"),
        "{trace}"
    );
    assert!(
        trace.contains("t=0us <0.1> dropped m<0.2> (down)\n"),
        "{trace}"
    );
    assert!(
        trace.contains("t=3000us <0.1> restart storage\n"),
        "{trace}"
    );
}

#[test]
fn syncing_before_acknowledging_loses_nothing_on_10_000_seeds() {
    for seed in 0..10_000 {
        let (lost, trace) = lost_writes(seed, true, false);
        assert!(lost.is_empty(), "seed {seed}: lost {lost:?}\n{trace}");
    }
}

#[test]
fn the_crash_run_is_deterministic() {
    for fixed in [false, true] {
        check_determinism(3, |seed| lost_writes(seed, fixed, true).1).unwrap();
    }
}

/// A process over a durable store: writes each message's key and value,
/// synced if it says so; ends at key "stop" with the keys it found in its
/// store when it started.
struct Disk {
    found: Vec<String>,
}

impl Process for Disk {
    type Input = ();
    /// Key, value, sync.
    type Message = (String, u8, bool);
    type Response = ();
    type Command = &'static str;
    type Output = Vec<String>;

    fn init(&mut self, cx: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        self.found = cx
            .with_store(|s| s.keys())
            .unwrap_or_else(|| vec!["(no store)".to_owned()]);
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, (String, u8, bool), ()>,
        out: &mut StepOutput<&'static str, Vec<String>>,
    ) -> Result<(), Error> {
        for (key, value, sync) in events.into_iter().filter_map(Event::into_message) {
            if key == "stop" {
                out.set_status(Status::Done(std::mem::take(&mut self.found)));
                return Ok(());
            }
            let written = cx.with_store(|s| {
                s.write(key, vec![value]);
                if sync {
                    s.sync();
                }
            });
            if written.is_none() {
                return Err(Error::failed("no store"));
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

fn disk_sim() -> Sim<Disk> {
    Sim::builder()
        .factory("disk", || Ok(Disk { found: Vec::new() }))
        .build()
}

#[test]
fn a_crash_loses_the_unsynced_writes_and_keeps_the_synced_ones() {
    let sim = disk_sim();
    let pid = sim.allocate_pid();
    let join = sim.submit_named(pid, "disk", "main", ()).unwrap();
    sim.send(pid, ("a".into(), 1, true)).unwrap();
    sim.send(pid, ("b".into(), 2, false)).unwrap();
    sim.run();
    let store = sim.store("disk").unwrap();
    assert_eq!(
        (store.get("a"), store.get("b")),
        (Some(&[1][..]), Some(&[2][..]))
    );
    assert_eq!(store.unsynced(), 1);

    assert!(sim.crash(pid, Duration::from_millis(5)));
    assert!(!sim.is_live(pid));
    let store = sim.store("disk").unwrap();
    assert_eq!((store.get("a"), store.get("b")), (Some(&[1][..]), None));
    // Down: a message is accepted and dropped.
    sim.send(pid, ("c".into(), 3, true)).unwrap();
    assert!(!sim.crash(pid, Duration::ZERO), "not live: no crash");
    sim.run();
    assert_eq!(sim.now(), Duration::from_millis(5));
    // Restarted under the same PID: reachable, and its `init` found what
    // was synced.
    assert!(sim.is_live(pid));
    sim.send(pid, ("d".into(), 4, true)).unwrap();
    sim.send(pid, ("stop".into(), 0, false)).unwrap();
    assert_eq!(join.join(), Ok(vec!["a".to_owned()]));
    let store = sim.store("disk").unwrap();
    assert_eq!(store.keys(), ["a", "d"]);
    let trace = sim.trace_text();
    assert!(
        trace.contains("t=0us <0.1> crash (requested) lost=1 restart t=5000us\n"),
        "{trace}"
    );
    assert!(trace.contains("t=0us <0.1> dropped m (down)\n"), "{trace}");
    assert!(trace.contains("t=5000us <0.1> restart disk\n"), "{trace}");
}

#[test]
fn a_process_not_started_by_name_has_no_store_and_does_not_crash() {
    let sim = disk_sim();
    let pid = sim.allocate_pid();
    let join = sim
        .submit(pid, Disk { found: Vec::new() }, "main", ())
        .unwrap();
    sim.run();
    assert!(!sim.crash(pid, Duration::ZERO), "not named: no crash");
    sim.send(pid, ("stop".into(), 0, false)).unwrap();
    assert_eq!(join.join(), Ok(vec!["(no store)".to_owned()]));
    assert_eq!(sim.store("disk"), None);
    let pid = sim.allocate_pid();
    let unknown = sim.submit_named(pid, "nothing", "main", ()).unwrap_err();
    assert!(unknown.to_string().contains("nothing"), "{unknown}");
}

#[test]
fn the_crash_fault_writes_its_line_and_restarts_within_the_delay() {
    let (_, trace) = lost_writes(0, false, true);
    let crash = trace
        .lines()
        .find(|l| l.contains(" fault crash "))
        .expect("seed 0 crashes");
    // t=<now>us <0.1> fault crash lost=<n> restart t=<at>us
    let number = |s: &str| s.trim_end_matches("us").parse::<u64>().unwrap();
    let words: Vec<&str> = crash.split(' ').collect();
    let now = number(words[0].trim_start_matches("t="));
    let at = number(words[6].trim_start_matches("t="));
    assert_eq!(words[1], "<0.1>");
    assert!((now + 1000..=now + 10_000).contains(&at), "{crash}");
    let restart = format!("t={at}us <0.1> restart storage");
    assert!(trace.contains(&restart), "{trace}");
}

/// Every fault line of `trace` (`fault ...`), with what it is about.
fn fault_lines(trace: &str) -> Vec<&str> {
    trace.lines().filter(|l| l.contains(" fault ")).collect()
}

#[test]
fn aimed_faults_hit_only_their_target() {
    let every = Faults {
        delay: 0.3,
        reorder: 0.3,
        short_batch: 0.3,
        handler_error: 0.1,
        ..Faults::default()
    };
    // At the storage (<0.1>) only.
    let mut kinds = BTreeMap::new();
    for seed in 0..20 {
        let trace = trace_of(seed, every.crash(0.05).only_process("storage"));
        for line in fault_lines(&trace) {
            assert!(line.contains(" <0.1> fault "), "seed {seed}: {line}");
            *kinds
                .entry(line.split(' ').nth(3).unwrap().to_owned())
                .or_insert(0) += 1;
        }
    }
    for kind in ["delay", "reorder", "handler-error", "crash"] {
        assert!(kinds.contains_key(kind), "{kind} fired: {kinds:?}");
    }
    // Not aimed at the storage: the clients' faults only.
    let mut any = false;
    for seed in 0..20 {
        let trace = trace_of(seed, every.crash(0.05).only_process("client"));
        assert!(
            fault_lines(&trace).is_empty(),
            "clients are not named\n{trace}"
        );
        let trace = trace_of(seed, every);
        any |= fault_lines(&trace).iter().any(|l| !l.contains(" <0.1> "));
    }
    assert!(any, "unaimed, the faults hit the clients too");
    // At the "fsync" yields only (the storage's): never at "timeout"s.
    let mut hit = 0;
    for seed in 0..20 {
        let trace = trace_of(seed, every.only_handler("fsync"));
        for line in fault_lines(&trace) {
            if line.contains("handler-error") {
                assert!(line.contains(" fsync#"), "seed {seed}: {line}");
                hit += 1;
            }
            if line.contains("fault delay") {
                assert!(line.contains(" <0.1> "), "seed {seed}: {line}");
            }
        }
    }
    assert!(hit > 0, "the fsync yields were hit");
}

#[test]
fn the_crash_fault_moves_no_other_decision() {
    let others = Faults {
        delay: 0.2,
        reorder: 0.3,
        short_batch: 0.2,
        ..Faults::default()
    };
    for seed in 0..50 {
        // Crash on but too rare to fire: the same trace as crash off.
        let off = trace_of(seed, others);
        assert_eq!(trace_of(seed, others.crash(1e-12)), off, "seed {seed}");
        // The other way: the others too rare to fire, the crashes as
        // with them off.
        let rare = Faults {
            delay: 1e-12,
            reorder: 1e-12,
            short_batch: 1e-12,
            ..Faults::default()
        };
        let crashes = trace_of(seed, Faults::default().crash(0.05));
        assert_eq!(trace_of(seed, rare.crash(0.05)), crashes, "seed {seed}");
        // With both, every line before the first crash is as without
        // crashes.
        let both = trace_of(seed, others.crash(0.05));
        let before: Vec<&str> = both.lines().take_while(|l| !l.contains("crash")).collect();
        assert_eq!(
            before[..],
            off.lines().collect::<Vec<_>>()[..before.len()],
            "seed {seed}"
        );
    }
}

/// Writes `a` then `b` unsynced to a named disk, crashes it: which of the
/// two the store kept, and the crash's trace line.
fn torn(seed: u64, keep: f64) -> ((bool, bool), String) {
    let sim = Sim::builder()
        .seed(seed)
        .faults(Faults::default().keep_unsynced(keep))
        .factory("disk", || Ok(Disk { found: Vec::new() }))
        .build();
    let pid = sim.allocate_pid();
    sim.submit_named(pid, "disk", "main", ()).unwrap();
    sim.send(pid, ("a".into(), 1, false)).unwrap();
    sim.send(pid, ("b".into(), 2, false)).unwrap();
    sim.run();
    assert!(sim.crash(pid, Duration::from_millis(5)));
    let store = sim.store("disk").unwrap();
    let kept = (store.get("a").is_some(), store.get("b").is_some());
    let line = sim
        .trace()
        .into_iter()
        .find(|l| l.contains("crash (requested)"))
        .expect("a crash line");
    (kept, line)
}

#[test]
fn a_crash_may_keep_some_unsynced_writes_out_of_order() {
    // Off: both lost, and the line is as before.
    let (kept, line) = torn(0, 0.0);
    assert_eq!(kept, (false, false));
    assert_eq!(
        line,
        "t=0us <0.1> crash (requested) lost=2 restart t=5000us"
    );
    // Always: both kept.
    let (kept, line) = torn(0, 1.0);
    assert_eq!(kept, (true, true));
    assert_eq!(
        line,
        "t=0us <0.1> crash (requested) lost=0 kept=2 restart t=5000us"
    );
    // Half: every subset within a few seeds, the later write without the
    // earlier one among them; each seed replays.
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let (kept, line) = torn(seed, 0.5);
        assert_eq!(torn(seed, 0.5), (kept, line.clone()), "seed {seed}");
        let n = usize::from(kept.0) + usize::from(kept.1);
        assert!(
            line.contains(&format!("lost={} kept={n} ", 2 - n)),
            "{line}"
        );
        seen.insert(kept);
    }
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(seen.contains(&(false, true)), "b kept without a");
}
