//! Time under the simulator: `stepsched`'s `ContextExt::now` reads the
//! virtual clock (skewed per process by `Faults::clock_skew`), and
//! `ContextExt::after` delivers at a virtual time, written to the trace.

use std::time::Duration;

use stepsched::ContextExt;
use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};
use stepsched_sim::{Faults, Sim};

const MS: Duration = Duration::from_millis(1);

/// Reads its clock in `init` and in each step, sets a timer of `every`
/// after each reading until it has `rounds` readings after the first, and
/// finishes with them all.
struct Ticker {
    every: Duration,
    rounds: usize,
    readings: Vec<Duration>,
}

impl Process for Ticker {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = &'static str;
    type Output = Vec<Duration>;

    fn init(&mut self, cx: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        self.readings.push(cx.now());
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, u32, ()>,
        out: &mut StepOutput<&'static str, Vec<Duration>>,
    ) -> Result<(), Error> {
        let ticks = events.filter(|e| e.sender() == Some(cx.pid())).count();
        if ticks > 0 || self.readings.len() == 1 {
            if ticks > 0 {
                self.readings.push(cx.now());
            }
            if self.readings.len() > self.rounds {
                out.set_status(Status::Done(std::mem::take(&mut self.readings)));
                return Ok(());
            }
            cx.after(self.every, 7)
                .map_err(|e| Error::failed(e.to_string()))?;
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

fn ticker(every: Duration, rounds: usize) -> Ticker {
    Ticker {
        every,
        rounds,
        readings: Vec::new(),
    }
}

/// Runs one ticker (5 ms, 3 rounds) under `seed` and `faults`: its
/// readings, the final virtual time, the trace.
fn run_one(seed: u64, faults: Faults) -> (Vec<Duration>, Duration, Vec<String>) {
    let sim = Sim::<Ticker>::builder().seed(seed).faults(faults).build();
    let join = sim
        .submit(sim.allocate_pid(), ticker(5 * MS, 3), "main", ())
        .unwrap();
    let readings = join.join().unwrap();
    (readings, sim.now(), sim.trace())
}

#[test]
fn now_advances_with_virtual_time_and_timers_fire_on_time() {
    let (readings, end, trace) = run_one(1, Faults::default());
    assert_eq!(readings, vec![Duration::ZERO, 5 * MS, 10 * MS, 15 * MS]);
    assert_eq!(end, 15 * MS);
    let text = trace.join("\n");
    for line in [
        "t=0us <0.1> timer #1 +5000us",
        "t=5000us <0.1> timer #1 fired",
        "t=5000us <0.1> events=[m<0.1>] status=idle yields=[]",
        "t=10000us <0.1> timer #2 fired",
        "t=15000us <0.1> timer #3 fired",
    ] {
        assert!(trace.iter().any(|l| l == line), "no `{line}` in:\n{text}");
    }
}

#[test]
fn now_is_identical_across_replays() {
    let faults = Faults::default().clock_skew(3 * MS).clock_drift(1e-2);
    for seed in 0..20 {
        let a = run_one(seed, faults);
        let b = run_one(seed, faults);
        assert_eq!(a, b, "seed {seed}");
    }
}

#[test]
fn skew_offsets_each_clock_within_its_bound_and_is_traced_once() {
    let max = 4 * MS;
    let mut offsets = Vec::new();
    for seed in 0..50 {
        let (readings, _, trace) = run_one(seed, Faults::default().clock_skew(max));
        let skew = readings[0];
        assert!(skew <= max, "seed {seed}: {skew:?}");
        // An offset, no drift: the clock still counts virtual time.
        let expected: Vec<Duration> = (0..4u32).map(|i| skew + 5 * MS * i).collect();
        assert_eq!(readings, expected, "seed {seed}");
        let lines: Vec<&String> = trace.iter().filter(|l| l.contains("clock-skew")).collect();
        assert_eq!(lines.len(), 1, "seed {seed}: {lines:?}");
        let micros = skew.as_micros();
        assert_eq!(
            lines[0],
            &format!("t=0us <0.1> fault clock-skew +{micros}us")
        );
        offsets.push(skew);
    }
    offsets.sort();
    offsets.dedup();
    assert!(offsets.len() > 40, "the offsets vary: {offsets:?}");
}

#[test]
fn two_processes_read_different_clocks_at_the_same_virtual_time() {
    let sim = Sim::<Ticker>::builder()
        .seed(3)
        .faults(Faults::default().clock_skew(10 * MS))
        .build();
    let a = sim
        .submit(sim.allocate_pid(), ticker(5 * MS, 1), "main", ())
        .unwrap();
    let b = sim
        .submit(sim.allocate_pid(), ticker(5 * MS, 1), "main", ())
        .unwrap();
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    assert_ne!(a[0], b[0], "seed 3 draws two offsets");
    assert!(a[0].abs_diff(b[0]) <= 10 * MS);
    assert_eq!(a[1] - a[0], 5 * MS);
    assert_eq!(b[1] - b[0], 5 * MS);
}

#[test]
fn drift_makes_a_clock_run_fast_or_slow() {
    let faults = Faults::default().clock_drift(0.1);
    let mut rates = Vec::new();
    for seed in 0..10 {
        let (readings, _, trace) = run_one(seed, faults);
        assert!(
            trace
                .iter()
                .any(|l| l.contains("fault clock-skew +0us drift ")),
            "{trace:?}"
        );
        let measured = readings[3] - readings[0];
        assert!(measured >= 15 * MS * 9 / 10 && measured <= 15 * MS * 11 / 10);
        // Never backwards.
        assert!(readings.windows(2).all(|w| w[0] <= w[1]));
        rates.push(measured);
    }
    assert!(rates.iter().any(|&m| m != 15 * MS));
}

#[test]
fn a_timer_of_an_ended_process_reaches_nothing() {
    let sim = Sim::<Ticker>::builder().seed(5).build();
    let pid = sim.allocate_pid();
    let join = sim.submit(pid, ticker(5 * MS, 3), "main", ()).unwrap();
    // At 7 ms its second timer (set at 5 ms, due at 10 ms) is pending.
    let join = join.join_timeout(7 * MS).unwrap_err();
    sim.terminate(pid).unwrap();
    sim.run();
    assert_eq!(join.join(), Err(Error::Terminated));
    let trace = sim.trace();
    assert!(trace.iter().any(|l| l == "t=5000us <0.1> timer #2 +5000us"));
    assert!(
        !trace.iter().any(|l| l.contains("timer #2 fired")),
        "{trace:?}"
    );
}
