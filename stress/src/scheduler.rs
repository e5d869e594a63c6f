//! The `scheduler` stress scenario: the whole scheduler under a random mix.
//!
//! Work processes run a random plan of rounds — yields of 1..=4 commands,
//! `Continue` steps — whose commands are completed by handlers at once, from
//! other threads, after a short random delay, or with an error. While
//! stepping they send messages to a few long-lived *sink* processes. A
//! driver thread terminates random work processes. At the end every sink is
//! told how many messages were accepted for it and finishes once it has
//! them all, and a last batch of processes blocked on commands that never
//! complete is cut short by a shutdown with a deadline.
//!
//! In `soak` mode rounds repeat, each with a fresh scheduler and the next
//! seed, until `--seconds` have passed.
//!
//! Invariants, each checked with a per-item ledger:
//! * every process completes exactly once (completion hook ledger), with the
//!   result its plan implies (or `Terminated`, for a terminated one), and is
//!   closed exactly once;
//! * no step of a process overlaps another step of the same process;
//! * every message accepted by `send` is delivered exactly once;
//! * shutdown returns before its deadline (plus a grace second) and
//!   force-closes the blocked processes.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stepsched::{
    Builder, Completer, Context, Error, Events, Handle, Pid, Process, Scheduler, Status, StepOutput,
};

use crate::Opts;
use crate::report::{Outcome, count, progress, secs};

/// How a handler completes a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Now,
    Thread,
    Delayed,
    Fail,
    Never,
}

/// A command: a name for dispatch, an argument, a completion mode.
#[derive(Clone, Debug)]
struct Cmd {
    arg: u64,
    mode: Mode,
}

impl stepsched::Command for Cmd {
    fn name(&self) -> &str {
        if self.mode == Mode::Never {
            "never"
        } else {
            "work"
        }
    }
}

/// Payloads: command results, messages, and the sinks' stop signal.
#[derive(Debug)]
enum Msg {
    Value(u64),
    Message(u64),
    Stop(u64),
}

#[derive(Clone, Debug)]
enum Round {
    Yield(Vec<Cmd>),
    Continue,
}

/// Shared ledgers and counters.
struct Ledger {
    closed: Vec<AtomicU8>,
    overlaps: AtomicUsize,
    wrong_results: AtomicUsize,
    accepted: Vec<AtomicU8>,
    delivered: Vec<AtomicU8>,
    next_message: AtomicU64,
    per_sink_accepted: Vec<AtomicU64>,
    stray_events: AtomicUsize,
}

impl Ledger {
    fn new(processes: usize, messages: usize, sinks: usize) -> Self {
        let zeros = |n: usize| (0..n).map(|_| AtomicU8::new(0)).collect::<Vec<_>>();
        Ledger {
            closed: zeros(processes),
            overlaps: AtomicUsize::new(0),
            wrong_results: AtomicUsize::new(0),
            accepted: zeros(messages),
            delivered: zeros(messages),
            next_message: AtomicU64::new(0),
            per_sink_accepted: (0..sinks).map(|_| AtomicU64::new(0)).collect(),
            stray_events: AtomicUsize::new(0),
        }
    }
}

/// The kinds of processes in the run.
enum Role {
    Work {
        rounds: Vec<Round>,
        next: usize,
        pending: usize,
        acc: u64,
        sink_pids: Vec<Pid>,
        rng: fastrand::Rng,
    },
    Sink {
        received: u64,
        expected: Option<u64>,
    },
    /// Yields one command that never completes, and ignores cancel.
    Blocked { yielded: bool },
}

struct StressProc {
    id: usize,
    role: Role,
    in_step: AtomicBool,
    ledger: Arc<Ledger>,
    handle: Handle<StressProc>,
}

impl StressProc {
    fn on_event(&mut self, event: stepsched::Event<Msg>) -> Option<Result<(), Error>> {
        let ledger = &self.ledger;
        match event.kind() {
            stepsched::EventKind::Cancel if matches!(self.role, Role::Blocked { .. }) => {}
            stepsched::EventKind::Cancel => return Some(Err(Error::Cancelled)),
            stepsched::EventKind::Completion => {
                let failed = event.error().is_some();
                let value = match event.into_data() {
                    Some(Msg::Value(v)) => v,
                    _ if failed => 1000,
                    _ => {
                        ledger.stray_events.fetch_add(1, SeqCst);
                        0
                    }
                };
                if let Role::Work { pending, acc, .. } = &mut self.role {
                    *pending -= 1;
                    *acc += value;
                } else if !matches!(self.role, Role::Blocked { .. }) {
                    ledger.stray_events.fetch_add(1, SeqCst);
                }
            }
            stepsched::EventKind::Message => match event.into_data() {
                Some(Msg::Message(id)) => {
                    if ledger.delivered[id as usize].fetch_add(1, SeqCst) != 0 {
                        ledger.stray_events.fetch_add(1, SeqCst);
                    }
                    if let Role::Sink { received, .. } = &mut self.role {
                        *received += 1;
                    }
                }
                Some(Msg::Stop(n)) => {
                    if let Role::Sink { expected, .. } = &mut self.role {
                        *expected = Some(n);
                    }
                }
                _ => {
                    ledger.stray_events.fetch_add(1, SeqCst);
                }
            },
        }
        None
    }
}

impl Process for StressProc {
    type Input = ();
    type Message = Msg;
    type Response = Msg;
    type Command = Cmd;
    type Output = u64;

    fn init(&mut self, _: &Context<'_, Self>, method: &str, (): ()) -> Result<(), Error> {
        match method {
            "run" => Ok(()),
            other => Err(Error::UnknownMethod(other.into())),
        }
    }

    fn step(
        &mut self,
        _cx: &mut Context<'_, Self>,
        events: Events<'_, Msg>,
        out: &mut StepOutput<Cmd, u64>,
    ) -> Result<(), Error> {
        if self.in_step.swap(true, SeqCst) {
            self.ledger.overlaps.fetch_add(1, SeqCst);
        }
        let result = self.step_inner(events, out);
        self.in_step.store(false, SeqCst);
        result
    }

    fn close(&mut self) {
        self.ledger.closed[self.id].fetch_add(1, SeqCst);
    }
}

impl StressProc {
    fn step_inner(
        &mut self,
        events: Events<'_, Msg>,
        out: &mut StepOutput<Cmd, u64>,
    ) -> Result<(), Error> {
        for event in events {
            if let Some(r) = self.on_event(event) {
                return r;
            }
        }
        match &mut self.role {
            Role::Blocked { yielded } => {
                if !*yielded {
                    *yielded = true;
                    out.push_yield(
                        0,
                        Cmd {
                            arg: 0,
                            mode: Mode::Never,
                        },
                    );
                }
                out.set_status(Status::Yield);
            }
            Role::Sink {
                received, expected, ..
            } => match expected {
                Some(n) if *received >= *n => out.set_status(Status::Done(*received)),
                _ => out.set_status(Status::Idle),
            },
            Role::Work {
                rounds,
                next,
                pending,
                acc,
                sink_pids,
                rng,
            } => {
                // Now and then, message a sink.
                if !sink_pids.is_empty() && rng.u8(..) < 64 {
                    let sink = rng.usize(..sink_pids.len());
                    let id = self.ledger.next_message.fetch_add(1, SeqCst);
                    if (id as usize) < self.ledger.accepted.len() {
                        // Mark before sending: the sink may receive it at once.
                        self.ledger.accepted[id as usize].store(1, SeqCst);
                        match self.handle.send(sink_pids[sink], Msg::Message(id)) {
                            Ok(()) => {
                                self.ledger.per_sink_accepted[sink].fetch_add(1, SeqCst);
                            }
                            Err(_) => self.ledger.accepted[id as usize].store(0, SeqCst),
                        }
                    }
                }
                if *pending > 0 {
                    out.set_status(Status::Yield);
                    return Ok(());
                }
                if *next == rounds.len() {
                    out.set_status(Status::Done(*acc));
                    return Ok(());
                }
                match &rounds[*next] {
                    Round::Continue => out.set_status(Status::Continue),
                    Round::Yield(cmds) => {
                        for (tag, cmd) in cmds.iter().enumerate() {
                            out.push_yield(tag as u64, cmd.clone());
                        }
                        *pending = cmds.len();
                        out.set_status(Status::Yield);
                    }
                }
                *next += 1;
            }
        }
        Ok(())
    }
}

/// The result a work plan implies: each completed command adds `2 * arg`,
/// each failed one 1000.
fn expected(rounds: &[Round]) -> u64 {
    rounds
        .iter()
        .map(|r| match r {
            Round::Continue => 0,
            Round::Yield(cmds) => cmds
                .iter()
                .map(|c| {
                    if c.mode == Mode::Fail {
                        1000
                    } else {
                        2 * c.arg
                    }
                })
                .sum(),
        })
        .sum()
}

fn random_plan(rng: &mut fastrand::Rng) -> Vec<Round> {
    let n = rng.usize(1..=6);
    (0..n)
        .map(|_| {
            if rng.u8(..) < 40 {
                Round::Continue
            } else {
                let k = rng.usize(1..=4);
                Round::Yield(
                    (0..k)
                        .map(|_| Cmd {
                            arg: rng.u64(..1000),
                            mode: match rng.u8(..4) {
                                0 => Mode::Now,
                                1 => Mode::Thread,
                                2 => Mode::Delayed,
                                _ if rng.bool() => Mode::Fail,
                                _ => Mode::Now,
                            },
                        })
                        .collect(),
                )
            }
        })
        .collect()
}

type Work = (Completer<StressProc>, u64, Mode);

/// Runs the scenario: one round; in soak mode, rounds until `--seconds`
/// have passed.
pub(crate) fn run(opts: &Opts) -> Result<Outcome, String> {
    let start = Instant::now();
    let deadline = opts.deadline(start);
    let mut round_no = 0u64;
    let mut steps = 0u64;
    loop {
        round_no += 1;
        let seed = opts.seed.wrapping_add(round_no - 1);
        steps +=
            round(opts, seed, steps).map_err(|e| format!("round {round_no} (seed {seed}): {e}"))?;
        if !opts.soak || Instant::now() >= deadline {
            break;
        }
    }
    Ok(Outcome {
        checked: "every message delivered once; results match plans; terminate and shutdown end every process once (with the state cells of stepsched-process and the routing of stepsched-relay)",
        count: steps,
        unit: "steps",
    })
}

/// One round of the scenario with its own scheduler, seeded by `seed`;
/// returns the steps it ran (`before`: the steps of earlier rounds, for
/// the progress figure).
fn round(opts: &Opts, seed: u64, before: u64) -> Result<u64, String> {
    let processes = opts.processes.max(10);
    let sinks = 4usize;
    let total = processes + sinks + 16;
    let ledger = Arc::new(Ledger::new(total, processes * 4, sinks));
    let completions: Arc<Vec<AtomicU8>> = Arc::new((0..total).map(|_| AtomicU8::new(0)).collect());

    // Threads that complete commands later.
    let (work_tx, work_rx) = std_mpsc::channel::<Work>();
    let work_rx = Arc::new(Mutex::new(work_rx));
    let completers: Vec<_> = (0..2u64)
        .map(|i| {
            let rx = work_rx.clone();
            std::thread::spawn(move || {
                // Seeded too: the delays are part of the plan (which
                // completion comes first is still the threads' race).
                let mut rng =
                    fastrand::Rng::with_seed(seed ^ (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                loop {
                    let job = rx.lock().unwrap().recv();
                    let Ok((completer, arg, mode)) = job else {
                        break;
                    };
                    if mode == Mode::Delayed {
                        std::thread::sleep(Duration::from_micros(rng.u64(..200)));
                    }
                    completer.complete(Ok(Msg::Value(2 * arg)));
                }
            })
        })
        .collect();
    let work_tx = Mutex::new(work_tx);
    let never: Arc<Mutex<Vec<Completer<StressProc>>>> = Arc::new(Mutex::new(Vec::new()));

    let never2 = never.clone();
    let pid_index: Arc<Mutex<std::collections::HashMap<Pid, usize>>> = Arc::default();
    let pid_index2 = pid_index.clone();
    let completions2 = completions.clone();
    let scheduler: Scheduler<StressProc> = Builder::new()
        .workers(opts.workers)
        .handler(
            "work",
            move |cmd: Cmd, done: Completer<StressProc>| match cmd.mode {
                Mode::Now => {
                    done.complete(Ok(Msg::Value(2 * cmd.arg)));
                }
                Mode::Fail => {
                    done.complete(Err(Error::failed("stress failure")));
                }
                _ => {
                    let _ = work_tx.lock().unwrap().send((done, cmd.arg, cmd.mode));
                }
            },
        )
        .handler("never", move |_cmd: Cmd, done: Completer<StressProc>| {
            never2.lock().unwrap().push(done);
        })
        .on_complete(move |pid, _result| {
            if let Some(&i) = pid_index2.lock().unwrap().get(&pid) {
                completions2[i].fetch_add(1, SeqCst);
            }
        })
        .build()
        .map_err(|e| format!("build: {e}"))?;
    let handle = scheduler.handle();

    let mut rng = fastrand::Rng::with_seed(seed);
    let new_proc = |id: usize, role: Role| StressProc {
        id,
        role,
        in_step: AtomicBool::new(false),
        ledger: ledger.clone(),
        handle: handle.clone(),
    };
    let submit = |id: usize, role: Role| {
        let pid = handle.allocate_pid();
        pid_index.lock().unwrap().insert(pid, id);
        handle
            .submit(pid, new_proc(id, role), "run", ())
            .map_err(|e| format!("submit {id}: {e}"))
    };

    // Sinks.
    let mut sink_joins = Vec::new();
    for s in 0..sinks {
        sink_joins.push(submit(
            processes + s,
            Role::Sink {
                received: 0,
                expected: None,
            },
        )?);
    }
    let sink_pids: Vec<Pid> = sink_joins.iter().map(|j| j.pid()).collect();

    // Work processes, with a terminator running beside the submissions.
    let mut joins = Vec::with_capacity(processes);
    let mut plans = Vec::with_capacity(processes);
    let (term_tx, term_rx) = std_mpsc::channel::<Pid>();
    let terminated = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let terminator = {
        let handle = handle.clone();
        let terminated = terminated.clone();
        std::thread::spawn(move || {
            let mut count = 0usize;
            while let Ok(pid) = term_rx.recv() {
                if handle.terminate(pid).is_ok() {
                    terminated.lock().unwrap().insert(pid);
                    count += 1;
                }
            }
            count
        })
    };
    let progress_every = Duration::from_millis(500);
    let mut last_progress = Instant::now();
    for id in 0..processes {
        let rounds = random_plan(&mut rng);
        plans.push(expected(&rounds));
        let role = Role::Work {
            rounds,
            next: 0,
            pending: 0,
            acc: 0,
            sink_pids: sink_pids.clone(),
            rng: fastrand::Rng::with_seed(seed ^ id as u64),
        };
        let join = submit(id, role)?;
        if rng.u8(..) < 8 {
            let _ = term_tx.send(join.pid());
        }
        joins.push(join);
        if last_progress.elapsed() >= progress_every {
            last_progress = Instant::now();
            progress(before + handle.stats().steps);
        }
    }
    drop(term_tx);
    let terminates = terminator.join().map_err(|_| "terminator panicked")?;

    // Every work process completes with its plan's result, or Terminated.
    let terminated = terminated.lock().unwrap().clone();
    for (id, join) in joins.into_iter().enumerate() {
        let pid = join.pid();
        match join.join() {
            Ok(v) if v == plans[id] => {}
            Err(Error::Terminated) if terminated.contains(&pid) => {}
            other => {
                ledger.wrong_results.fetch_add(1, SeqCst);
                if ledger.wrong_results.load(SeqCst) < 5 {
                    println!("process {id}: expected {}, got {other:?}", plans[id]);
                }
            }
        }
    }
    // Sinks: tell each how many messages were accepted for it.
    for (s, pid) in sink_pids.iter().enumerate() {
        let n = ledger.per_sink_accepted[s].load(SeqCst);
        handle
            .send(*pid, Msg::Stop(n))
            .map_err(|e| format!("stop sink {s}: {e}"))?;
    }
    for (s, join) in sink_joins.into_iter().enumerate() {
        match join.join() {
            Ok(n) if n == ledger.per_sink_accepted[s].load(SeqCst) => {}
            other => return Err(format!("sink {s} finished with {other:?}")),
        }
    }
    let stats = handle.stats();
    progress(before + stats.steps);

    // Shutdown with processes blocked on commands that never complete.
    let blocked_base = processes + sinks;
    let mut blocked = Vec::new();
    for b in 0..16 {
        blocked.push(submit(blocked_base + b, Role::Blocked { yielded: false })?);
    }
    let deadline = Duration::from_millis(if opts.quick { 200 } else { 500 });
    let t = Instant::now();
    let report = scheduler.shutdown(deadline).map_err(|e| e.to_string())?;
    let shutdown_took = t.elapsed();
    for join in blocked {
        match join.join() {
            Err(Error::Cancelled) => {}
            other => {
                return Err(format!(
                    "blocked process ended with {other:?}, expected Cancelled"
                ));
            }
        }
    }
    drop(scheduler);
    drop(handle);
    never.lock().unwrap().clear();

    // Invariants.
    let mut breaches = Vec::new();
    let overlaps = ledger.overlaps.load(SeqCst);
    if overlaps != 0 {
        breaches.push(format!("{overlaps} overlapping steps"));
    }
    let wrong = ledger.wrong_results.load(SeqCst);
    if wrong != 0 {
        breaches.push(format!("{wrong} wrong results"));
    }
    for id in 0..total {
        let c = completions[id].load(SeqCst);
        let cl = ledger.closed[id].load(SeqCst);
        if c != 1 {
            breaches.push(format!("process {id} completed {c} times"));
        }
        if cl != 1 {
            breaches.push(format!("process {id} closed {cl} times"));
        }
        if breaches.len() > 10 {
            break;
        }
    }
    let sent = ledger
        .next_message
        .load(SeqCst)
        .min(ledger.accepted.len() as u64) as usize;
    let mut accepted = 0usize;
    for id in 0..sent {
        let a = ledger.accepted[id].load(SeqCst);
        let d = ledger.delivered[id].load(SeqCst);
        accepted += a as usize;
        if a == 1 && d != 1 {
            breaches.push(format!("message {id} accepted but delivered {d} times"));
        }
        if a == 0 && d != 0 {
            breaches.push(format!("message {id} refused but delivered"));
        }
    }
    let stray = ledger.stray_events.load(SeqCst);
    if stray != 0 {
        breaches.push(format!("{stray} unexpected events"));
    }
    if shutdown_took > deadline + Duration::from_secs(1) {
        breaches.push(format!(
            "shutdown took {shutdown_took:?} for a {deadline:?} deadline"
        ));
    }
    if report.forced < 16 {
        breaches.push(format!(
            "shutdown forced {} processes, expected at least 16",
            report.forced
        ));
    }

    let steals: u64 = stats.workers.iter().map(|w| w.items_stolen).sum();
    let parks: u64 = stats.workers.iter().map(|w| w.parks).sum();
    println!(
        "scheduler: {total} processes, {} steps, {} messages, {terminates} terminates, {steals} steals, {parks} parks; shutdown in {} (forced {})",
        count(stats.steps),
        count(accepted as u64),
        secs(shutdown_took),
        report.forced,
    );
    // The completer threads end once the scheduler (holding the channel)
    // is gone; they are not joined.
    drop(completers);
    if breaches.is_empty() {
        Ok(stats.steps)
    } else {
        Err(breaches.join("; "))
    }
}
