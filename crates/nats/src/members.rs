//! The membership table: which nodes are up, by their heartbeats.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_nats::Subject;

/// What this node knows of another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// Never heard of.
    Unknown,
    /// A heartbeat arrived within the member timeout.
    Up,
    /// Its heartbeats stopped for longer than the member timeout.
    Unreachable,
    /// It said goodbye.
    Left,
}

#[derive(Debug)]
struct Member {
    incarnation: u64,
    /// The number of the last heartbeat taken from this run.
    beat: u64,
    last_seen: Instant,
    /// When a heartbeat of another run was last set aside while this one
    /// was still heard: a node restarted without a goodbye. Once this run
    /// falls silent, the node counts as up while that one is recent, so a
    /// restart shows no gap before its next heartbeat is taken.
    other_seen: Option<Instant>,
    left: bool,
    subject: Subject,
}

/// The table, read on every remote send, written by the membership task.
#[derive(Debug)]
pub(crate) struct Members {
    table: RwLock<HashMap<u32, Member>>,
    timeout: Duration,
    /// Bumped on every change, for `wait_for`.
    changed: Mutex<u64>,
    changed_cv: Condvar,
}

/// What a heartbeat changed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The node was up already, same run.
    Again,
    /// New, back after a silence or a goodbye, or restarted: answer it.
    Fresh,
    /// Ignored: no newer than the last heartbeat of the same run, from a
    /// run that said goodbye, or from another run while the current one is
    /// still heard (what a recorded heartbeat played back looks like).
    Stale,
}

impl Members {
    pub(crate) fn new(timeout: Duration) -> Self {
        Members {
            table: RwLock::new(HashMap::new()),
            timeout,
            changed: Mutex::new(0),
            changed_cv: Condvar::new(),
        }
    }

    /// The subject to reach `node` on, if it is up; else its state.
    pub(crate) fn route(&self, node: u32, now: Instant) -> Result<Subject, Membership> {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        match table.get(&node) {
            None => Err(Membership::Unknown),
            Some(m) if m.left => Err(Membership::Left),
            Some(m)
                if now.saturating_duration_since(m.last_seen) > self.timeout
                    && m.other_seen
                        .is_none_or(|t| now.saturating_duration_since(t) > self.timeout) =>
            {
                Err(Membership::Unreachable)
            }
            Some(m) => Ok(m.subject.clone()),
        }
    }

    pub(crate) fn state(&self, node: u32) -> Membership {
        match self.route(node, Instant::now()) {
            Ok(_) => Membership::Up,
            Err(state) => state,
        }
    }

    /// Records heartbeat number `beat` of `node` in run `incarnation`.
    ///
    /// A run is taken at its word only while it is newer than what was
    /// heard: within a run the numbers must go up, a run that said goodbye
    /// stays gone, and another run of the node replaces the current one
    /// only once that one has said goodbye or been silent for the member
    /// timeout (a node that restarts is seen within a timeout). So a
    /// heartbeat recorded earlier and played back, even with its valid
    /// tag, neither brings back a node that left nor moves a live node to
    /// an old run whose goodbye could then be played back too.
    pub(crate) fn hello(
        &self,
        node: u32,
        incarnation: u64,
        beat: u64,
        subject: impl FnOnce() -> Subject,
    ) -> Seen {
        let now = Instant::now();
        let seen = {
            let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
            match table.get_mut(&node) {
                Some(m) => {
                    let silent = now.saturating_duration_since(m.last_seen) > self.timeout;
                    if m.incarnation == incarnation {
                        if m.left || beat <= m.beat {
                            return Seen::Stale;
                        }
                    } else if !m.left && !silent {
                        m.other_seen = Some(now);
                        return Seen::Stale;
                    }
                    let fresh = m.left || m.incarnation != incarnation || silent;
                    m.incarnation = incarnation;
                    m.beat = beat;
                    m.last_seen = now;
                    m.left = false;
                    m.other_seen = None;
                    if fresh { Seen::Fresh } else { Seen::Again }
                }
                None => {
                    table.insert(
                        node,
                        Member {
                            incarnation,
                            beat,
                            last_seen: now,
                            left: false,
                            other_seen: None,
                            subject: subject(),
                        },
                    );
                    Seen::Fresh
                }
            }
        };
        if seen == Seen::Fresh {
            self.bump();
        }
        seen
    }

    /// Records a goodbye of `node`; one from an older run is ignored.
    pub(crate) fn bye(&self, node: u32, incarnation: u64) {
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = table.get_mut(&node)
            && m.incarnation == incarnation
        {
            m.left = true;
            drop(table);
            self.bump();
        }
    }

    /// Every node ever heard of, with its state, in node order.
    pub(crate) fn snapshot(&self) -> Vec<(u32, Membership)> {
        let now = Instant::now();
        let nodes: Vec<u32> = {
            let table = self.table.read().unwrap_or_else(|e| e.into_inner());
            table.keys().copied().collect()
        };
        let mut out: Vec<(u32, Membership)> = nodes
            .into_iter()
            .map(|n| (n, self.route(n, now).map_or_else(|s| s, |_| Membership::Up)))
            .collect();
        out.sort_unstable_by_key(|(n, _)| *n);
        out
    }

    fn bump(&self) {
        let mut changed = self.changed.lock().unwrap_or_else(|e| e.into_inner());
        *changed += 1;
        self.changed_cv.notify_all();
    }

    /// Waits until `node`'s state satisfies `want`, or `timeout` passes;
    /// returns the last state seen.
    pub(crate) fn wait_until(
        &self,
        node: u32,
        timeout: Duration,
        want: impl Fn(Membership) -> bool,
    ) -> Membership {
        let deadline = Instant::now() + timeout;
        let mut changed = self.changed.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let state = self.state(node);
            let now = Instant::now();
            if want(state) || now >= deadline {
                return state;
            }
            // A peer going silent changes no counter: its state flips with
            // time alone, so wake at least every 50 ms to look again.
            let wait = (deadline - now).min(Duration::from_millis(50));
            changed = self
                .changed_cv
                .wait_timeout(changed, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject() -> Subject {
        Subject::from("x.node.1")
    }

    #[test]
    fn hello_bye_and_restart() {
        let m = Members::new(Duration::from_secs(3600));
        assert_eq!(m.state(1), Membership::Unknown);
        assert_eq!(m.hello(1, 10, 1, subject), Seen::Fresh);
        assert_eq!(m.hello(1, 10, 2, subject), Seen::Again);
        assert_eq!(m.state(1), Membership::Up);
        m.bye(1, 9); // an older run's goodbye
        assert_eq!(m.state(1), Membership::Up);
        m.bye(1, 10);
        assert_eq!(m.state(1), Membership::Left);
        assert_eq!(m.hello(1, 11, 1, subject), Seen::Fresh);
        assert_eq!(m.state(1), Membership::Up);
        assert_eq!(m.snapshot(), [(1, Membership::Up)]);
    }

    #[test]
    fn a_heartbeat_played_back_is_ignored() {
        let m = Members::new(Duration::from_secs(3600));
        assert_eq!(m.hello(1, 10, 5, subject), Seen::Fresh);
        // The same run's earlier (or the same) heartbeat.
        assert_eq!(m.hello(1, 10, 4, subject), Seen::Stale);
        assert_eq!(m.hello(1, 10, 5, subject), Seen::Stale);
        // Another run's, while this one is heard: its goodbye, played
        // next, must not take the live node out.
        assert_eq!(m.hello(1, 9, 7, subject), Seen::Stale);
        m.bye(1, 9);
        assert_eq!(m.state(1), Membership::Up);
        // A run that said goodbye stays gone, whatever its numbers.
        m.bye(1, 10);
        assert_eq!(m.hello(1, 10, 6, subject), Seen::Stale);
        assert_eq!(m.state(1), Membership::Left);
    }

    #[test]
    fn a_restart_without_a_goodbye_shows_no_gap() {
        let m = Members::new(Duration::from_secs(1));
        let quiet = Members::new(Duration::from_secs(1));
        assert_eq!(m.hello(1, 10, 1, subject), Seen::Fresh);
        quiet.hello(1, 10, 1, subject);
        // Both old runs were last heard before `old`.
        let old = Instant::now();
        while Instant::now() < old + Duration::from_millis(50) {
            std::hint::spin_loop();
        }
        // The new run is heard, at least 50 ms later, while the old one is
        // still within its time.
        assert_eq!(m.hello(1, 11, 1, subject), Seen::Stale);
        // Past the old run's time, within the new run's: up on its word.
        let later = old + Duration::from_millis(1001);
        assert!(m.route(1, later).is_ok());
        // Without the new run's heartbeat, it would not be.
        assert_eq!(quiet.route(1, later), Err(Membership::Unreachable));
    }

    #[test]
    fn a_new_run_replaces_a_silent_one() {
        let m = Members::new(Duration::from_millis(1));
        assert_eq!(m.hello(1, 10, 1, subject), Seen::Fresh);
        let silent = Instant::now() + Duration::from_millis(50);
        while Instant::now() < silent {
            std::thread::yield_now();
        }
        assert_eq!(m.hello(1, 11, 1, subject), Seen::Fresh);
        assert_eq!(m.state(1), Membership::Up);
    }

    #[test]
    fn silence_makes_a_node_unreachable() {
        let m = Members::new(Duration::from_secs(1));
        m.hello(1, 10, 1, subject);
        let later = Instant::now() + Duration::from_secs(2);
        assert_eq!(m.route(1, later), Err(Membership::Unreachable));
        assert!(m.route(1, Instant::now()).is_ok());
    }
}
