//! What a step reaches through its context beyond send, spawn and
//! terminate (`ContextExt`): addresses stamped with its PID, spawns that
//! return an address, the shutdown; and groups of processes that know each
//! other's addresses before any of them runs (`Handle::submit_group`).
#![cfg(not(stepsched_loom))]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use stepsched::{
    CancelToken, Context, ContextExt, Error, Event, Pid, SendError, Status, SubmitError,
};

/// A process that records the sender of every message it gets in `seen`,
/// and finishes with the first message.
fn recorder(seen: &Arc<Mutex<Vec<Option<Pid>>>>) -> FnProc {
    let seen = seen.clone();
    FnProc::new(&Probe::new(), move |events, out, _| {
        for e in events {
            if let Event::Message { from, data } = e {
                seen.lock().unwrap().push(from);
                out.set_status(Status::Done(data));
                return Ok(());
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    })
}

#[test]
fn an_address_from_the_context_stamps_the_sender() {
    let s = Builder::new().workers(2).build().unwrap();
    let seen = Arc::default();
    let to = s.submit(pid(1), recorder(&seen), "main", 0).unwrap();
    let sender = FnProc::new(&Probe::new(), |_, out, cx| {
        let address = cx.address(pid(1)).expect("the recorder is live");
        assert_eq!(address.sender(), Some(cx.pid()));
        address.send(5)?;
        assert!(cx.address(pid(99)).is_none(), "no process has pid 99");
        out.set_status(Status::Done(0));
        Ok(())
    });
    let from = s.submit(pid(2), sender, "main", 0).unwrap();
    assert_eq!(join(from), Ok(0));
    assert_eq!(join(to), Ok(5));
    assert_eq!(*seen.lock().unwrap(), [Some(pid(2))]);
}

#[test]
fn a_spawned_child_is_sent_to_through_its_address_at_once() {
    let s = Builder::new().workers(2).build().unwrap();
    let seen = Arc::default();
    let child_seen = Arc::clone(&seen);
    let mut child = None;
    let parent = FnProc::new(&Probe::new(), move |events, out, cx| {
        match &child {
            None => {
                let to = cx.spawn_address(recorder(&child_seen), "main", 0)?;
                assert_eq!(to.sender(), Some(cx.pid()));
                to.send(7)?;
                child = Some(to);
                out.set_status(Status::Idle);
            }
            Some(to) => {
                let _ = events;
                let own = to.pid() == cx.pid();
                out.set_status(Status::Done(if own { 1 } else { 2 }));
            }
        }
        Ok(())
    });
    let p = s.submit(pid(1), parent, "main", 0).unwrap();
    // The parent waits (Idle) until the child has what it was sent.
    let until = std::time::Instant::now() + HANG;
    while seen.lock().unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "the child never got the message"
        );
        std::thread::yield_now();
    }
    assert_eq!(*seen.lock().unwrap(), [Some(pid(1))]);
    s.send(pid(1), 0).unwrap();
    assert_eq!(join(p), Ok(2), "the child has a PID of its own");
}

#[test]
fn a_spawn_whose_init_fails_hands_back_the_error() {
    let s = Builder::new().workers(1).build().unwrap();
    let parent = FnProc::new(&Probe::new(), |_, out, cx| {
        let child = done_at_once(&Probe::new(), 1);
        match cx.spawn_address(child, "fail", 0) {
            Err(SubmitError::Init(Error::Failed(_))) => out.set_status(Status::Done(1)),
            other => panic!("expected the child's init error, got {other:?}"),
        }
        Ok(())
    });
    assert_eq!(join(s.submit(pid(1), parent, "main", 0).unwrap()), Ok(1));
}

#[test]
fn a_step_starts_the_shutdown_through_its_context() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let waiter = s
        .submit(pid(2), idle_until_message(&probe), "main", 0)
        .unwrap();
    let stopper = FnProc::new(&Probe::new(), |_, out, cx| {
        let shutdown = cx
            .begin_shutdown(Duration::from_secs(10))
            .expect("a context of this scheduler");
        drop(shutdown);
        out.set_status(Status::Done(3));
        Ok(())
    });
    let stopper = s.submit(pid(1), stopper, "main", 0).unwrap();
    assert_eq!(join(stopper), Ok(3));
    // The shutdown sent the waiter its cancel event.
    assert_eq!(join(waiter), Err(Error::Cancelled));
    assert!(
        s.submit(pid(3), done_at_once(&probe, 0), "main", 0)
            .is_err()
    );
}

#[test]
fn a_context_of_no_scheduler_finds_nothing() {
    let cancel = CancelToken::new();
    let cx: Context<'_, FnProc> = Context::detached(pid(1), &cancel);
    assert!(cx.handle().is_none());
    assert!(cx.address(pid(2)).is_none());
    assert!(cx.begin_shutdown(Duration::ZERO).is_none());
    let child = done_at_once(&Probe::new(), 0);
    assert!(matches!(
        cx.spawn_address(child, "main", 0),
        Err(SubmitError::Stopping(_))
    ));
}

/// A ring of members, each passing the token on less one; the member that
/// gets it at zero finishes with 100 plus its index and tells its
/// successor to stop (a message of -1), which passes that on and finishes
/// with its index.
fn ring_member(members: &stepsched::Members<'_, FnProc>) -> (FnProc, i64) {
    let next = members.address((members.me() + 1) % members.len());
    assert_eq!(next.sender(), Some(members.pid()));
    let me = members.me() as i64;
    let step = move |events: Vec<Event<i64>>,
                     out: &mut stepsched::StepOutput<Cmd, i64>,
                     _: &mut Context<'_, FnProc>| {
        for e in events {
            let Event::Message { from, data } = e else {
                continue;
            };
            assert!(from.is_some(), "a member's address stamps its sender");
            if data <= 0 {
                // The successor may have stopped already.
                let _ = next.send(-1);
                out.set_status(Status::Done(if data == 0 { 100 + me } else { me }));
                return Ok(());
            }
            next.send(data - 1)?;
        }
        out.set_status(Status::Idle);
        Ok(())
    };
    (FnProc::new(&Probe::new(), step), me)
}

#[test]
fn a_group_knows_each_others_addresses_before_it_runs() {
    let s = Builder::new().workers(2).build().unwrap();
    let mut ring = s.submit_group(3, "main", ring_member).unwrap();
    assert_eq!(ring.len(), 3);
    // From member 0, seven hops: the token stops at member 7 % 3 = 1.
    // (The test thread has no PID of its own: it stamps one to check that
    // the members' own addresses stamp theirs.)
    ring[0].address().with_sender(pid(999)).send(7).unwrap();
    let results: Vec<_> = ring.drain(..).map(join).collect();
    assert_eq!(results, [Ok(0), Ok(101), Ok(2)]);
}

#[test]
fn a_message_sent_before_the_group_starts_waits_for_its_first_step() {
    let s = Builder::new().workers(1).build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut first = None;
    let group = s
        .submit_group(2, "main", |members| {
            if members.me() == 0 {
                first = Some(members.pid());
                // Member 1 is not made yet, let alone started.
                members.address(1).send(42).unwrap();
                (done_at_once(&Probe::new(), 0), 0)
            } else {
                (recorder(&seen), 0)
            }
        })
        .unwrap();
    let mut group = group.into_iter();
    assert_eq!(join(group.next().unwrap()), Ok(0));
    assert_eq!(join(group.next().unwrap()), Ok(42));
    assert_eq!(*seen.lock().unwrap(), [first]);
}

#[test]
fn a_group_whose_init_fails_starts_no_member() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let kept = Arc::new(Mutex::new(Vec::new()));
    let k = kept.clone();
    // A group that starts: three processes that finish at once.
    for j in s
        .submit_group(3, "main", |members| {
            k.lock().unwrap().push(members.address(members.me()));
            (done_at_once(&probe, 0), 0)
        })
        .unwrap()
    {
        assert_eq!(join(j), Ok(0));
    }
    // A group whose entry point every init refuses (`FnProc` fails its
    // init for "fail"): the first init fails, the rest never run.
    let err = s
        .submit_group(3, "fail", |members| {
            k.lock().unwrap().push(members.address(members.me()));
            (done_at_once(&probe, 0), 0)
        })
        .unwrap_err();
    assert!(matches!(err, SubmitError::Init(Error::Failed(_))));
    let kept = kept.lock().unwrap();
    for address in &kept[3..] {
        assert!(
            matches!(address.send(1), Err(SendError::Closed(_))),
            "a member of a failed group takes no message"
        );
    }
    // Three closes for the first group, one for the failed group's first
    // member (initialized, then closed); the other two were dropped.
    let counts = probe.wait("closes", |c| c.closes >= 4);
    assert_eq!((counts.inits, counts.steps, counts.closes), (4, 3, 4));
}

#[test]
fn a_group_over_the_limit_is_handed_back_whole() {
    let s = Builder::new().workers(1).max_processes(2).build().unwrap();
    let probe = Probe::new();
    match s.submit_group(3, "main", |_| (done_at_once(&probe, 0), 0)) {
        Err(SubmitError::LimitReached(back)) => assert_eq!(back.len(), 3),
        other => panic!("expected LimitReached, got {:?}", other.map(|v| v.len())),
    }
    assert_eq!(probe.counts().inits, 0, "nothing was initialized");
    // The places were given back: a group of two fits.
    let two = s
        .submit_group(2, "main", |_| (done_at_once(&probe, 9), 0))
        .unwrap();
    for j in two {
        assert_eq!(join(j), Ok(9));
    }
}

/// An inner process kind: counts down by messaging itself, then asks to
/// be upgraded once (to a counter that starts again at `again`), then
/// finishes with how many messages it sent in all.
struct Countdown {
    left: u32,
    again: u32,
    sent: u32,
}

impl stepsched::Process for Countdown {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = stepsched::NoCommand;
    type Output = u32;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: stepsched::Events<'_, u32, ()>,
        out: &mut stepsched::StepOutput<stepsched::NoCommand, u32>,
    ) -> Result<(), Error> {
        for e in events {
            assert_eq!(
                e.sender(),
                Some(cx.pid()),
                "the inner context stamps the PID"
            );
        }
        if self.left > 0 {
            self.left -= 1;
            cx.send(cx.pid(), 0)?;
            self.sent += 1;
            out.set_status(Status::Idle);
        } else if self.again > 0 {
            let next = Countdown {
                left: self.again,
                again: 0,
                sent: self.sent,
            };
            cx.upgrade(next, "run", ());
        } else {
            out.set_status(Status::Done(self.sent));
        }
        Ok(())
    }
}

/// The one process type of the scheduler: an enum of kinds, each handed
/// a context of its own type.
enum Kind {
    Countdown(Countdown),
}

impl From<Countdown> for Kind {
    fn from(c: Countdown) -> Self {
        Kind::Countdown(c)
    }
}

impl stepsched::Process for Kind {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = stepsched::NoCommand;
    type Output = u32;

    fn init(&mut self, cx: &Context<'_, Self>, method: &str, input: ()) -> Result<(), Error> {
        match self {
            Kind::Countdown(c) => cx.inner(|cx| c.init(cx, method, input)),
        }
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: stepsched::Events<'_, u32, ()>,
        out: &mut stepsched::StepOutput<stepsched::NoCommand, u32>,
    ) -> Result<(), Error> {
        match self {
            Kind::Countdown(c) => cx.inner_mut(|cx| c.step(cx, events, out)),
        }
    }
}

#[test]
fn an_inner_process_sends_and_upgrades_through_the_outer_context() {
    let s = stepsched::Scheduler::<Kind>::builder()
        .workers(2)
        .build()
        .unwrap();
    let kind = Kind::Countdown(Countdown {
        left: 3,
        again: 2,
        sent: 0,
    });
    let join = s.submit(s.allocate_pid(), kind, "run", ()).unwrap();
    // 3 counting down, then 2 more after the upgrade.
    assert_eq!(join.join(), Ok(5));
}

/// A group one of whose PIDs is taken (by a process submitted under a PID
/// the caller chose) is refused whole: every member handed back,
/// initialized and closed, none left registered, every place given back.
#[test]
fn a_group_with_a_taken_pid_is_handed_back_and_gives_its_places_back() {
    let s = Builder::new().workers(1).max_processes(4).build().unwrap();
    let probe = Probe::new();
    let last = s.allocate_pid();
    // The group's second member will get this PID.
    let taken = Pid::new(last.node(), last.number() + 2);
    let squatter = s
        .submit(taken, idle_until_message(&probe), "main", 0)
        .unwrap();
    match s.submit_group(3, "main", |_| (done_at_once(&probe, 0), 0)) {
        Err(SubmitError::DuplicatePid(pid, back)) => {
            assert_eq!(pid, taken);
            assert_eq!(back.len(), 3, "every member is handed back");
        }
        other => panic!("expected DuplicatePid, got {:?}", other.map(|v| v.len())),
    }
    let first = Pid::new(last.node(), last.number() + 1);
    assert!(!s.contains(first), "the member routed first was unrouted");
    assert_eq!(
        probe.counts().inits,
        4,
        "the squatter and the three members"
    );
    assert_eq!(probe.counts().closes, 3, "the three members were closed");
    // Three places are free again beside the squatter's.
    let three = s
        .submit_group(3, "main", |_| (done_at_once(&probe, 1), 0))
        .unwrap();
    for j in three {
        assert_eq!(join(j), Ok(1));
    }
    s.send(taken, 9).unwrap();
    assert_eq!(join(squatter), Ok(9));
}
