//! [`Network`]: the simulated network every send goes through, when the
//! builder turns it on ([`Builder::network`]) — a delay per message, loss,
//! duplication, the reordering independent delays bring, and partitions,
//! scripted ([`Sim::partition`], [`Sim::isolate`]) or random.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Duration;

use stepsched_process::{Command, Event, Package, Pid, Process, SendError};

use crate::rng::{self, SimRng};
use crate::state::{Inner, Origin, Shared, quietly_drop};
use crate::trace::{push_number, push_pid};
#[cfg(doc)]
use crate::{Builder, Faults, Sim};

/// What the simulated network does to the messages between processes:
/// turned on by [`Builder::network`] (off by default: a send is delivered
/// at once, in order, as it always was). Every send goes through it:
/// [`Context::send`](stepsched_process::Context::send) from a step, and
/// [`Sim::send`] from the test (the link from the host).
///
/// Each message on the link from `a` to `b` is numbered (`#1`, `#2`, ...)
/// and, in this order:
///
/// 1. may start a **random partition** of the pair ([`partition`](Self::partition),
///    between processes only): `a` and `b` cannot reach each other, both
///    ways, for a time drawn from [`min_partition`](Self::min_partition) to
///    [`max_partition`](Self::max_partition);
/// 2. is dropped if the link is cut now (a random or a scripted partition);
/// 3. is **lost** with probability [`loss`](Self::loss);
/// 4. is **duplicated** with probability [`duplicate`](Self::duplicate)
///    (the copy is a clone, delayed on its own);
/// 5. is **delayed** by a time drawn uniformly from
///    [`min_delay`](Self::min_delay) to [`max_delay`](Self::max_delay)
///    (whole microseconds). Delays are independent, so a later message can
///    overtake an earlier one on the same link — unless
///    [`fifo`](Self::fifo) is set, which holds each message back until
///    the previous one on its link has arrived (as over a TCP connection).
///    FIFO is off by default: reordering is one of the things a
///    simulated network is for.
///
/// A message that arrives while its link is cut is dropped too (it was in
/// flight when the partition began). A message for a process that has
/// ended by the time it arrives reaches nothing. A send to a process that
/// is not live is refused at once, as without the network; a lost message
/// is not: the sender cannot tell.
///
/// Each decision draws from a stream of its own per link (`net:delay`,
/// `net:loss`, `net:duplicate`, `net:partition`, seeded from the run's
/// seed and both ends' PIDs): a fault that is off, or too rare to fire,
/// changes no other decision, and the traffic of one link moves no draw
/// of another. With no delay and no faults, the network delivers as the
/// simulator does without it: the same trace, byte for byte.
///
/// Each injected event writes a trace line: `net delay <0.1>-><0.2> #3
/// +1500us`, `net drop <0.1>-><0.2> #3`, `net drop <0.1>-><0.2> #3
/// (partition)`, `net dup <0.1>-><0.2> #3`, `net partition <0.1> | <0.2>
/// from t=2000us heal t=9000us` (`host` names the test's end of a link).
///
/// ```
/// use std::time::Duration;
/// use stepsched_sim::Network;
///
/// let net = Network::new()
///     .delay(Duration::from_millis(1), Duration::from_millis(5))
///     .loss(0.01)
///     .duplicate(0.01)
///     .partitions(0.001, Duration::from_millis(10), Duration::from_millis(50));
/// assert!(!net.fifo);
/// assert_eq!(Network::default().loss, 0.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Network {
    /// The shortest delay of a message (zero by default).
    pub min_delay: Duration,
    /// The longest delay of a message (zero by default).
    pub max_delay: Duration,
    /// The probability that a message is lost.
    pub loss: f64,
    /// The probability that a message is delivered twice.
    pub duplicate: f64,
    /// Whether each link keeps its messages in order (off by default).
    pub fifo: bool,
    /// The probability that a message between two processes starts a
    /// partition of the two (the message is the first one dropped).
    pub partition: f64,
    /// The shortest random partition (10 ms by default).
    pub min_partition: Duration,
    /// The longest random partition (100 ms by default).
    pub max_partition: Duration,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            min_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            fifo: false,
            partition: 0.0,
            min_partition: Duration::from_millis(10),
            max_partition: Duration::from_millis(100),
        }
    }
}

impl Network {
    /// A network with no delay and no faults: it delivers every message at
    /// once, as the simulator does without a network.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Delays each message by `min` to `max` (in either order).
    #[must_use]
    pub fn delay(mut self, min: Duration, max: Duration) -> Self {
        self.min_delay = min.min(max);
        self.max_delay = min.max(max);
        self
    }

    /// Loses each message with probability `p`.
    #[must_use]
    pub fn loss(mut self, p: f64) -> Self {
        self.loss = p;
        self
    }

    /// Delivers each message twice with probability `p`.
    #[must_use]
    pub fn duplicate(mut self, p: f64) -> Self {
        self.duplicate = p;
        self
    }

    /// Keeps each link's messages in order (`true`), or lets independent
    /// delays reorder them (`false`, the default).
    #[must_use]
    pub fn fifo(mut self, on: bool) -> Self {
        self.fifo = on;
        self
    }

    /// With probability `p` per message between two processes, cuts the
    /// pair apart for `min` to `max` (in either order) of virtual time.
    #[must_use]
    pub fn partitions(mut self, p: f64, min: Duration, max: Duration) -> Self {
        self.partition = p;
        self.min_partition = min.min(max);
        self.max_partition = min.max(max);
        self
    }
}

/// A duration drawn uniformly from `min..=max`, in whole microseconds (no
/// draw when they are equal).
fn draw(rng: &mut SimRng, min: Duration, max: Duration) -> Duration {
    let lo = u64::try_from(min.as_micros()).unwrap_or(u64::MAX);
    let hi = u64::try_from(max.as_micros()).unwrap_or(u64::MAX);
    if hi <= lo {
        return min;
    }
    Duration::from_micros(lo + rng.below((hi - lo).saturating_add(1)))
}

/// One direction of the link between two ends: its streams, its count of
/// messages, and the arrival of its last one (for FIFO).
struct Link {
    delay: SimRng,
    loss: SimRng,
    duplicate: SimRng,
    partition: SimRng,
    sent: u64,
    last: Duration,
}

impl Link {
    fn new(seed: u64, from: Option<Pid>, to: Pid) -> Self {
        Link {
            delay: rng::link_stream(seed, rng::NET_DELAY, from, to),
            loss: rng::link_stream(seed, rng::NET_LOSS, from, to),
            duplicate: rng::link_stream(seed, rng::NET_DUPLICATE, from, to),
            partition: rng::link_stream(seed, rng::NET_PARTITION, from, to),
            sent: 0,
            last: Duration::ZERO,
        }
    }
}

/// A fast hasher for link keys (four integers): a multiply-rotate mix,
/// enough for a map that is never iterated.
#[derive(Default)]
pub(crate) struct LinkHasher(u64);

impl Hasher for LinkHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(23) ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// A link's key: the sender (node + 1, or 0 for the host; number) and the
/// receiver (node, number).
type LinkKey = (u64, u64, u64, u64);

fn key(from: Option<Pid>, to: Pid) -> LinkKey {
    let (fnode, fnum) = from.map_or((0, 0), |p| (u64::from(p.node()) + 1, p.number()));
    (fnode, fnum, u64::from(to.node()), to.number())
}

/// A message on its way: ordered by arrival, then by when it was sent.
pub(crate) struct Flight<M> {
    at: Duration,
    seq: u64,
    from: Option<Pid>,
    to: Pid,
    n: u64,
    payload: M,
}

impl<M> PartialEq for Flight<M> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<M> Eq for Flight<M> {}
impl<M> PartialOrd for Flight<M> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<M> Ord for Flight<M> {
    /// Reversed: the max-heap pops the earliest arrival first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The other side of a partition.
pub(crate) enum Side {
    /// These processes.
    Pids(Vec<Pid>),
    /// Every end not on the first side, the host included.
    Rest,
}

/// A partition: no message crosses between `a` and `b` (either way) from
/// `from` until `until`.
pub(crate) struct Cut {
    a: Vec<Pid>,
    b: Side,
    from: Duration,
    until: Duration,
}

impl Cut {
    fn active(&self, t: Duration) -> bool {
        self.from <= t && t < self.until
    }

    fn separates(&self, x: Option<Pid>, y: Pid) -> bool {
        let in_a = |p: Option<Pid>| p.is_some_and(|p| self.a.contains(&p));
        let in_b = |p: Option<Pid>| match &self.b {
            Side::Pids(b) => p.is_some_and(|p| b.contains(&p)),
            Side::Rest => !in_a(p),
        };
        (in_a(x) && in_b(Some(y))) || (in_a(Some(y)) && in_b(x))
    }
}

/// The network's state: its links, the messages in flight, the
/// partitions.
pub(crate) struct NetState<M> {
    links: HashMap<LinkKey, Link, BuildHasherDefault<LinkHasher>>,
    /// Links with a network of their own ([`Sim::link`](crate::Sim::link)).
    configs: HashMap<LinkKey, Network, BuildHasherDefault<LinkHasher>>,
    flights: BinaryHeap<Flight<M>>,
    seq: u64,
    cuts: Vec<Cut>,
}

impl<M> Default for NetState<M> {
    fn default() -> Self {
        NetState {
            links: HashMap::default(),
            configs: HashMap::default(),
            flights: BinaryHeap::new(),
            seq: 0,
            cuts: Vec::new(),
        }
    }
}

impl<M> NetState<M> {
    /// Whether a partition separates `from` and `to` at `t`.
    fn cut(&self, from: Option<Pid>, to: Pid, t: Duration) -> bool {
        self.cuts
            .iter()
            .any(|c| c.active(t) && c.separates(from, to))
    }

    /// Whether partitions, or links with a network of their own, have
    /// been set (a send must go through the network to see them).
    pub(crate) fn has_cuts(&self) -> bool {
        !self.cuts.is_empty() || !self.configs.is_empty()
    }

    /// Gives the link from `from` to `to` a network of its own.
    pub(crate) fn configure(&mut self, from: Option<Pid>, to: Pid, network: Network) {
        self.configs.insert(key(from, to), network);
    }

    /// When the next message arrives.
    pub(crate) fn next_arrival(&self) -> Option<Duration> {
        self.flights.peek().map(|f| f.at)
    }

    /// Whether messages are in flight.
    pub(crate) fn in_flight(&self) -> bool {
        !self.flights.is_empty()
    }

    /// Ends every partition at `now`, and the faults of links with a
    /// network of their own (healing; their delays stay).
    pub(crate) fn heal(&mut self, now: Duration) {
        for cut in &mut self.cuts {
            cut.until = cut.until.min(now);
        }
        self.cuts.retain(|c| c.until > c.from);
        for config in self.configs.values_mut() {
            config.loss = 0.0;
            config.duplicate = 0.0;
            config.partition = 0.0;
        }
    }

    /// Takes every message in flight (to drop them).
    pub(crate) fn take_flights(&mut self) -> BinaryHeap<Flight<M>> {
        std::mem::take(&mut self.flights)
    }
}

/// Writes an end of a link: its PID, or `host`.
fn push_end(line: &mut String, end: Option<Pid>) {
    match end {
        Some(pid) => push_pid(line, pid),
        None => line.push_str("host"),
    }
}

/// Appends a network line to `trace`: `t=<now>us net <what> <from>-><to>
/// #<n>`, then what `detail` writes.
fn push_net(
    trace: &mut String,
    now: Duration,
    what: &str,
    (from, to, n): (Option<Pid>, Pid, u64),
    detail: impl FnOnce(&mut String),
) {
    trace.push_str("t=");
    push_number(trace, micros(now));
    trace.push_str("us net ");
    trace.push_str(what);
    trace.push(' ');
    push_end(trace, from);
    trace.push_str("->");
    push_pid(trace, to);
    trace.push_str(" #");
    push_number(trace, n);
    detail(trace);
    trace.push('\n');
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Appends the line of a partition to `trace`.
fn push_partition(trace: &mut String, now: Duration, cut: &Cut) {
    let list = |trace: &mut String, pids: &[Pid]| {
        for (i, pid) in pids.iter().enumerate() {
            if i > 0 {
                trace.push(',');
            }
            push_pid(trace, *pid);
        }
    };
    trace.push_str("t=");
    push_number(trace, micros(now));
    trace.push_str("us net partition ");
    list(trace, &cut.a);
    trace.push_str(" | ");
    match &cut.b {
        Side::Pids(b) => list(trace, b),
        Side::Rest => trace.push_str("rest"),
    }
    trace.push_str(" from t=");
    push_number(trace, micros(cut.from));
    trace.push_str("us heal t=");
    push_number(trace, micros(cut.until));
    trace.push_str("us\n");
}

impl<P: Process + 'static> Shared<P>
where
    P::Command: Command,
{
    /// Sends `package` over the network (on, or with partitions set): the
    /// receiver must be live now; then the message may be dropped,
    /// duplicated and delayed, as [`Network`] says.
    pub(crate) fn send_over_net(
        &self,
        inner: &mut Inner<P>,
        package: Package<P::Message>,
    ) -> Result<(), SendError<P::Message>> {
        let Package {
            from,
            to,
            topic,
            payload,
        } = package;
        if inner.live.get(&to).is_none_or(|e| e.terminated) {
            if inner.down(to) {
                let event = match from {
                    Some(from) => Event::message_from(from, payload),
                    None => Event::message(payload),
                };
                self.drop_down(inner, to, event);
                return Ok(());
            }
            let mut package = Package::new(to, topic, payload);
            package.from = from;
            return Err(if inner.known(to) {
                SendError::Closed(package)
            } else {
                SendError::UnknownPid(package)
            });
        }
        let mut config = match inner.net.configs.get(&key(from, to)) {
            Some(own) => *own,
            None => self.network.get().unwrap_or_default(),
        };
        if self.faults.get().only_process.is_some() {
            let aimed = |pid: Option<Pid>| {
                pid.and_then(|p| inner.live.get(&p))
                    .is_some_and(|e| e.aimed)
            };
            if !aimed(from) && !aimed(Some(to)) {
                config.loss = 0.0;
                config.duplicate = 0.0;
                config.partition = 0.0;
            }
        }
        let now = inner.now;
        let tracing = self.tracing;
        let Inner { net, trace, .. } = inner;
        if !net.cuts.is_empty() {
            net.cuts.retain(|c| c.until > now);
        }
        let seed = self.seed;
        let link = net
            .links
            .entry(key(from, to))
            .or_insert_with(|| Link::new(seed, from, to));
        link.sent += 1;
        let id = (from, to, link.sent);
        if let Some(sender) = from
            && link.partition.chance(config.partition)
        {
            let span = draw(
                &mut link.partition,
                config.min_partition,
                config.max_partition,
            );
            let cut = Cut {
                a: vec![sender],
                b: Side::Pids(vec![to]),
                from: now,
                until: now + span,
            };
            if tracing {
                push_partition(trace, now, &cut);
            }
            net.cuts.push(cut);
        }
        if net.cut(from, to, now) {
            if tracing {
                push_net(trace, now, "drop", id, |l| l.push_str(" (partition)"));
            }
            quietly_drop(payload);
            return Ok(());
        }
        let link = net.links.get_mut(&key(from, to)).expect("inserted above");
        if link.loss.chance(config.loss) {
            if tracing {
                push_net(trace, now, "drop", id, |_| {});
            }
            quietly_drop(payload);
            return Ok(());
        }
        let copy = match self.clone_message.get() {
            Some(clone) if link.duplicate.chance(config.duplicate) => {
                if tracing {
                    push_net(trace, now, "dup", id, |_| {});
                }
                Some(clone(&payload))
            }
            _ => None,
        };
        for payload in std::iter::once(payload).chain(copy) {
            let link = inner
                .net
                .links
                .get_mut(&key(from, to))
                .expect("inserted above");
            let mut at = now + draw(&mut link.delay, config.min_delay, config.max_delay);
            if config.fifo {
                at = at.max(link.last);
                link.last = at;
            }
            if at == now {
                let (origin, event) = match from {
                    Some(from) => (Origin::Process(from), Event::message_from(from, payload)),
                    None => (Origin::Host, Event::message(payload)),
                };
                if let Err(event) = inner.push_event(to, origin, event) {
                    quietly_drop(event);
                }
            } else {
                let net = &mut inner.net;
                if tracing {
                    push_net(&mut inner.trace, now, "delay", id, |l| {
                        l.push_str(" +");
                        push_number(l, micros(at - now));
                        l.push_str("us");
                    });
                }
                net.seq += 1;
                let seq = net.seq;
                net.flights.push(Flight {
                    at,
                    seq,
                    from,
                    to,
                    n: id.2,
                    payload,
                });
            }
        }
        Ok(())
    }

    /// Delivers the messages due at `at` (the clock), in the order they
    /// arrive; a message whose link is cut now is dropped. What reached
    /// nothing is added to `dropped`.
    pub(crate) fn arrive(&self, inner: &mut Inner<P>, at: Duration, dropped: &mut Vec<P::Message>) {
        while inner.net.flights.peek().is_some_and(|f| f.at <= at) {
            let f = inner.net.flights.pop().expect("peeked");
            if inner.net.cut(f.from, f.to, inner.now) {
                if self.tracing {
                    push_net(
                        &mut inner.trace,
                        inner.now,
                        "drop",
                        (f.from, f.to, f.n),
                        |l| {
                            l.push_str(" (partition)");
                        },
                    );
                }
                dropped.push(f.payload);
                continue;
            }
            let (origin, event) = match f.from {
                Some(from) => (Origin::Process(from), Event::message_from(from, f.payload)),
                None => (Origin::Host, Event::message(f.payload)),
            };
            if let Err(event) = inner.push_event(f.to, origin, event) {
                dropped.extend(event.into_message());
            }
        }
    }

    /// Adds a scripted partition: no message crosses between `a` and `b`
    /// from `from` until `until`.
    pub(crate) fn add_cut(&self, a: Vec<Pid>, b: Side, from: Duration, until: Duration) {
        let mut inner = self.inner.borrow_mut();
        let cut = Cut { a, b, from, until };
        if self.tracing {
            let now = inner.now;
            push_partition(&mut inner.trace, now, &cut);
        }
        if until > from {
            inner.net.cuts.push(cut);
        }
    }
}
