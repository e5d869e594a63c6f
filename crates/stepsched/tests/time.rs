//! Time under the real scheduler: `ContextExt::now` is monotonic and
//! `ContextExt::after` delivers its message (real time, from the timer
//! thread). Nothing here depends on how fast the machine is: a timer
//! fires at least its delay after it was set, and every wait has a guard.

#![cfg(not(stepsched_loom))]

use std::time::Duration;

use stepsched::{
    CancelToken, Context, ContextExt, Error, Events, Pid, Process, Scheduler, Status, StepOutput,
};

/// The hang guard of every join here.
const GUARD: Duration = Duration::from_secs(30);

/// Sets a timer of `delay` in its first step; when the timer's message
/// (from itself) comes, finishes with what its clock measured between
/// the two. Checks at each reading that its clock never went back.
struct Waiter {
    delay: Duration,
    start: Option<Duration>,
    last: Duration,
}

impl Process for Waiter {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = String;
    type Output = (Duration, u32);

    fn init(&mut self, cx: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        self.last = cx.now();
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, u32, ()>,
        out: &mut StepOutput<String, (Duration, u32)>,
    ) -> Result<(), Error> {
        let now = cx.now();
        if now < self.last {
            return Err(Error::failed("the clock went back"));
        }
        self.last = now;
        let Some(start) = self.start else {
            self.start = Some(now);
            cx.after(self.delay, 42)
                .map_err(|e| Error::failed(e.to_string()))?;
            out.set_status(Status::Idle);
            return Ok(());
        };
        for event in events {
            if event.sender() == Some(cx.pid())
                && let Some(&n) = event.message_data()
            {
                out.set_status(Status::Done((now - start, n)));
                return Ok(());
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

fn waiter(delay: Duration) -> Waiter {
    Waiter {
        delay,
        start: None,
        last: Duration::ZERO,
    }
}

#[test]
fn a_timer_delivers_its_message_from_the_process_itself() {
    let s = Scheduler::<Waiter>::builder().workers(2).build().unwrap();
    let delay = Duration::from_millis(20);
    let join = s
        .submit(s.allocate_pid(), waiter(delay), "run", ())
        .unwrap();
    let (waited, n) = join
        .join_timeout(GUARD)
        .unwrap_or_else(|_| panic!("the timer never delivered"))
        .unwrap();
    assert_eq!(n, 42);
    // At least the delay, by the process's own (monotonic) clock.
    assert!(waited >= delay, "{waited:?}");
}

#[test]
fn many_timers_deliver_in_any_order_of_setting() {
    // Longer timers set before shorter ones, across processes: each
    // delivers; the thread survives the messages of a process that ended.
    let s = Scheduler::<Waiter>::builder().workers(2).build().unwrap();
    let joins: Vec<_> = [30u64, 1, 20, 5, 0, 10]
        .into_iter()
        .map(|ms| {
            let w = waiter(Duration::from_millis(ms));
            (ms, s.submit(s.allocate_pid(), w, "run", ()).unwrap())
        })
        .collect();
    for (ms, join) in joins {
        let (waited, _) = join
            .join_timeout(GUARD)
            .unwrap_or_else(|_| panic!("the {ms} ms timer never delivered"))
            .unwrap();
        assert!(waited >= Duration::from_millis(ms), "{ms} ms: {waited:?}");
    }
}

#[test]
fn a_detached_context_reads_the_real_clock_and_refuses_timers() {
    let cancel = CancelToken::new();
    let cx: Context<'_, Waiter> = Context::detached(Pid::new(0, 9), &cancel);
    let a = cx.now();
    std::thread::sleep(Duration::from_millis(2));
    let b = cx.now();
    assert!(b >= a + Duration::from_millis(2), "{a:?} then {b:?}");
    let refused = cx.after(Duration::from_millis(1), 5).unwrap_err();
    assert!(refused.is_unknown_pid());
    assert_eq!(refused.into_package().payload, 5);
}
