//! Randomness: [`SimRng`], and the streams every decision draws from.
//!
//! Each kind of decision has a stream of its own, seeded from the run's
//! seed and the kind's name by a fixed hash (FNV-1a over the name, mixed
//! with SplitMix64's finalizer): the same on every platform and in every
//! build, never `std`'s `RandomState`. The schedule and the faults that
//! concern one process (delay, reorder, short batch, the handler faults,
//! crash) have one stream per process too, seeded also from its PID and
//! from how many processes had that PID before it; the faults that concern the
//! whole simulation (terminate, shutdown) have one stream each. A draw
//! from one stream never moves another, so a fault that is off, or too
//! rare to fire, changes no other decision, and a process that does
//! nothing changes no other process's schedule.

use std::time::Duration;

use stepsched_process::Pid;

/// A small, seeded, portable random number generator (SplitMix64): the
/// simulator draws its decisions from such streams, and hands one to each
/// process ([`SimContextExt::with_rng`](crate::SimContextExt::with_rng))
/// and each handler ([`Completer::rng`](crate::Completer::rng)), and to the
/// test itself ([`Sim::rng`](crate::Sim::rng)). The same seed gives the
/// same numbers on every platform and in every version of this crate.
///
/// ```
/// use stepsched_sim::SimRng;
///
/// let mut a = SimRng::new(7);
/// let mut b = SimRng::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// let die = a.below(6);
/// assert!(die < 6);
/// assert!((0.0..1.0).contains(&a.f64()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRng {
    state: u64,
}

/// SplitMix64's increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finalizer: a bijective mix of 64 bits.
const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a (64 bits) of `name`.
const fn fnv1a(name: &str) -> u64 {
    let bytes = name.as_bytes();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

impl SimRng {
    /// A generator seeded with `seed`.
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        SimRng { state: seed }
    }

    /// A generator for the stream named `name` of a run seeded with
    /// `seed`: streams of different names are independent.
    #[must_use]
    pub const fn stream(seed: u64, name: &str) -> Self {
        SimRng::new(mix(seed ^ mix(fnv1a(name))))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix(self.state)
    }

    /// A number in `0..n`, uniformly (`0` if `n` is 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-and-shift, with rejection of the few values
        // that would bias it.
        let threshold = n.wrapping_neg() % n;
        loop {
            let wide = u128::from(self.next_u64()) * u128::from(n);
            if (wide as u64) >= threshold {
                return (wide >> 64) as u64;
            }
        }
    }

    /// An index in `0..len`, uniformly (`0` if `len` is 0).
    #[inline]
    pub fn index(&mut self, len: usize) -> usize {
        // usize fits in u64 on every supported platform, and the result
        // is below `len`.
        self.below(len as u64) as usize
    }

    /// A number in `0.0..1.0`, uniformly (53 random bits).
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `true` with probability `p`; draws nothing when `p` is not
    /// positive.
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.f64() < p
    }

    /// A duration of 1 ms to `max` (at least 1 ms), in whole milliseconds.
    pub fn millis_up_to(&mut self, max: Duration) -> Duration {
        let max = u64::try_from(max.as_millis()).unwrap_or(u64::MAX).max(1);
        Duration::from_millis(1 + self.below(max))
    }

    /// Shuffles `items` (Fisher-Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.index(i + 1));
        }
    }

    /// A sample of an exponential distribution (rate `ln 2`, in units of
    /// 2^-20), for the schedule's race (see [`Streams::key`]): `-log2(u)`
    /// of a uniform `u`, in integer arithmetic, the log approximated within
    /// 0.6 %: each ready process's chance to be next stays about as even as
    /// in a uniform draw among them.
    #[inline]
    fn exponential(&mut self) -> u64 {
        let x = self.next_u64() | 1;
        // x = 2^(63 - lz) * (1 + f), so -log2(x / 2^64) = 1 + lz - log2(1 + f),
        // with log2(1 + f) ~ f + c f (1 - f), c = 0.3466, f in 2^-32 units.
        let lz = x.leading_zeros();
        let f = (x << lz << 1) >> 32;
        let bend = (f * ((1 << 32) - f)) >> 32;
        let log = f + ((bend * 22_715) >> 16);
        ((u64::from(1 + lz) << 32) - log) >> 12
    }
}

/// A kind of decision, each with its own stream.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// Which ready process steps next.
    Schedule,
    /// The delay fault.
    Delay,
    /// The reorder fault.
    Reorder,
    /// The short-batch fault.
    ShortBatch,
    /// The handler-error fault.
    HandlerError,
    /// The handler-panic fault.
    HandlerPanic,
    /// The never-complete fault.
    NeverComplete,
    /// The process's own random numbers.
    Process,
    /// Its handlers' random numbers.
    Handler,
    /// The clock-skew fault: its clock's offset and drift, drawn once.
    Clock,
    /// The crash fault: whether it crashes after a step, and the delay
    /// of its restart.
    Crash,
    /// The keep-unsynced fault: which unsynced writes of its store a
    /// crash keeps.
    KeepUnsynced,
}

/// The number of per-process kinds.
const KINDS: usize = 12;

/// The names the per-process streams are seeded from, by [`Kind`].
const NAMES: [&str; KINDS] = [
    "schedule",
    "fault:delay",
    "fault:reorder",
    "fault:short-batch",
    "fault:handler-error",
    "fault:handler-panic",
    "fault:never-complete",
    "process",
    "handler",
    "fault:clock-skew",
    "fault:crash",
    "fault:keep-unsynced",
];

/// The names of the network's streams, one set per link (see
/// [`link_stream`]).
pub(crate) const NET_DELAY: &str = "net:delay";
/// The loss fault's stream of a link.
pub(crate) const NET_LOSS: &str = "net:loss";
/// The duplication fault's stream of a link.
pub(crate) const NET_DUPLICATE: &str = "net:duplicate";
/// The random partition's stream of a link.
pub(crate) const NET_PARTITION: &str = "net:partition";

/// The stream named `name` of the link from `from` (`None`: the host) to
/// `to`, in a run seeded with `seed`: each link's decisions are its own,
/// so traffic on one link moves no draw of another.
pub(crate) fn link_stream(seed: u64, name: &str, from: Option<Pid>, to: Pid) -> SimRng {
    let from = from.map_or(0, |p| mix(u64::from(p.node()) ^ mix(p.number())) | 1);
    let to = mix(u64::from(to.node()) ^ mix(to.number()));
    let salt = mix(mix(from) ^ to.rotate_left(17));
    SimRng::new(mix(SimRng::stream(seed, name).state ^ salt))
}

/// The streams of the whole simulation.
pub(crate) const TERMINATE: &str = "fault:terminate";
/// The shutdown fault's stream.
pub(crate) const SHUTDOWN: &str = "fault:shutdown";
/// Swarm testing's stream: which kinds of fault a run keeps.
pub(crate) const SWARM: &str = "swarm";

/// One process's streams, one per [`Kind`]; and its clock, drawn from
/// one of them.
pub(crate) struct Streams {
    rngs: [SimRng; KINDS],
    /// The offset of its clock from virtual time (the clock-skew fault).
    pub(crate) skew: Duration,
    /// The drift of its clock, in parts per billion of virtual time.
    pub(crate) drift_ppb: i64,
}

impl Streams {
    /// The streams of the process that is the `incarnation`-th (from 0) to
    /// run under `pid`, in a run seeded with `seed`.
    pub(crate) fn new(seed: u64, pid: Pid, incarnation: u64) -> Self {
        let salt = mix(mix(u64::from(pid.node()) ^ mix(pid.number())) ^ incarnation);
        Streams {
            rngs: NAMES.map(|name| SimRng::new(mix(SimRng::stream(seed, name).state ^ salt))),
            skew: Duration::ZERO,
            drift_ppb: 0,
        }
    }

    /// The stream of `kind`.
    #[inline]
    pub(crate) fn get(&mut self, kind: Kind) -> &mut SimRng {
        &mut self.rngs[kind as usize]
    }

    /// The process's clock at virtual time `now`: `now` plus its skew,
    /// plus its drift (`now` times the drift rate, rounded down): never
    /// below zero, and never going backwards as `now` advances.
    pub(crate) fn clock(&self, now: Duration) -> Duration {
        if self.drift_ppb == 0 {
            return now + self.skew;
        }
        let ns = now.as_nanos() as i128;
        let drifted = ns * (1_000_000_000 + i128::from(self.drift_ppb)) / 1_000_000_000;
        let total = u128::try_from(drifted.max(0)).unwrap_or(0) + self.skew.as_nanos();
        Duration::from_nanos(u64::try_from(total).unwrap_or(u64::MAX))
    }

    /// The key of the process in the ready queue, which steps the process
    /// with the smallest key first: `now` (the key of the step being
    /// taken) plus an exponential sample from the schedule stream. As in
    /// a race of exponential clocks, each ready process is equally likely
    /// to be next, whatever the others drew before (the draws are
    /// memoryless), and one process's draws never move another's keys.
    #[inline]
    pub(crate) fn key(&mut self, now: u64) -> u64 {
        now.saturating_add(self.get(Kind::Schedule).exponential())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_portable() {
        // Fixed values: a change here changes every seed's replay.
        let mut rng = SimRng::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn below_stays_below_and_covers_the_range() {
        let mut rng = SimRng::new(3);
        let mut seen = [0u32; 6];
        for _ in 0..6000 {
            seen[rng.below(6) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.below(1), 0);
    }

    #[test]
    fn the_exponential_race_picks_each_of_three_about_evenly() {
        // Three processes always ready, each redrawing its key after its
        // step: each should take about a third of the steps.
        let mut streams: Vec<Streams> = (1..=3)
            .map(|n| Streams::new(9, Pid::new(0, n), 0))
            .collect();
        let mut keys: Vec<u64> = streams.iter_mut().map(|s| s.key(0)).collect();
        let mut steps = [0u32; 3];
        for _ in 0..30_000 {
            let (i, &now) = keys.iter().enumerate().min_by_key(|(_, k)| **k).unwrap();
            steps[i] += 1;
            keys[i] = streams[i].key(now);
        }
        assert!(
            steps.iter().all(|&n| (9_400..10_600).contains(&n)),
            "{steps:?}"
        );
    }
}
