//! Shutdown with cancel events and a deadline: one process reacts to the
//! cancel event and finishes on its own, one ignores it and is forced at
//! the deadline. Both join handles resolve; the report says what happened.
//!
//! The host shuts down with the blocking `Scheduler::shutdown`, which
//! refuses (`ShutdownError::OnWorker`) on one of the scheduler's own
//! workers; a step starts the same shutdown with `cx.begin_shutdown(d)`
//! (`ContextExt`), which returns at once.
//!
//! ```sh
//! cargo run -p stepsched --example shutdown
//! ```

use std::time::{Duration, Instant};

use stepsched::{Context, Error, Event, Events, NoCommand, Process, Scheduler, Status, StepOutput};

/// Waits for messages, counting them. `polite` processes finish with
/// their count when cancelled; `stubborn` ones ignore the cancel event.
struct Counter {
    polite: bool,
    seen: u64,
}

impl Process for Counter {
    type Input = ();
    type Message = u64;
    /// A counter never yields: no command, and (by convention) the message
    /// type as the response type.
    type Response = Self::Message;
    type Command = NoCommand;
    type Output = u64;

    fn init(&mut self, _: &Context<'_, Self>, method: &str, (): ()) -> Result<(), Error> {
        self.polite = match method {
            "polite" => true,
            "stubborn" => false,
            other => return Err(Error::UnknownMethod(other.to_string())),
        };
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, u64>,
        out: &mut StepOutput<NoCommand, u64>,
    ) -> Result<(), Error> {
        for event in events {
            match event {
                Event::Message { .. } => self.seen += 1,
                // Shutdown also cancels the process's token
                // (`ctx.is_cancelled()`), for work outside the step.
                Event::Cancel if self.polite => {
                    assert!(ctx.is_cancelled());
                    out.set_status(Status::Done(self.seen));
                    return Ok(());
                }
                _ => {}
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }

    fn close(&mut self) {
        println!(
            "closing a {} counter",
            if self.polite { "polite" } else { "stubborn" }
        );
    }
}

fn main() {
    let scheduler = Scheduler::<Counter>::builder()
        .workers(2)
        .build()
        .expect("workers");
    let polite_pid = scheduler.allocate_pid();
    let stubborn_pid = scheduler.allocate_pid();
    let polite = scheduler
        .submit(
            polite_pid,
            Counter {
                polite: true,
                seen: 0,
            },
            "polite",
            (),
        )
        .expect("submit");
    let stubborn = scheduler
        .submit(
            stubborn_pid,
            Counter {
                polite: false,
                seen: 0,
            },
            "stubborn",
            (),
        )
        .expect("submit");
    for i in 0..3 {
        scheduler.send(polite_pid, i).expect("send");
        scheduler.send(stubborn_pid, i).expect("send");
    }

    let deadline = Duration::from_millis(200);
    let started = Instant::now();
    let report = scheduler
        .shutdown(deadline)
        .expect("not on one of the scheduler's workers");
    println!(
        "shutdown took {:?} (deadline {deadline:?})",
        started.elapsed()
    );
    println!("{report:?}");
    assert_eq!((report.cancelled, report.forced), (2, 1));

    // The polite one finished on its own (the three messages may or may
    // not all have been stepped before the cancel event).
    let seen = polite.join().expect("the polite counter finishes");
    println!("polite counter: Ok({seen})");
    // The stubborn one was forced at the deadline.
    let forced = stubborn.join();
    println!("stubborn counter: {forced:?}");
    assert!(matches!(forced, Err(Error::Cancelled)));
}
