//! Fan-out: a parent process yields one command per item; the handler
//! hands each to a small pool of plain threads, which complete them in
//! whatever order they finish; the parent sums the results.
//!
//! ```sh
//! cargo run -p stepsched --example fan_out
//! ```

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;

use stepsched::{Command, Context, Error, Event, Events, Process, Scheduler, Status, StepOutput};

/// The command: square this number.
struct Square(i64);

impl Command for Square {
    fn name(&self) -> &str {
        "square"
    }
}

/// Yields `square(i)` for each `i` in its input, finishes with the sum.
#[derive(Default)]
struct Parent {
    items: Vec<i64>,
    yielded: bool,
    waiting: usize,
    sum: i64,
}

impl Process for Parent {
    type Input = Vec<i64>;
    type Message = i64;
    type Response = i64;
    type Command = Square;
    type Output = i64;

    fn init(&mut self, _: &Context<'_, Self>, method: &str, input: Vec<i64>) -> Result<(), Error> {
        if method != "sum_of_squares" {
            return Err(Error::UnknownMethod(method.to_string()));
        }
        self.items = input;
        Ok(())
    }

    fn step(
        &mut self,
        _cx: &mut Context<'_, Self>,
        events: Events<'_, i64>,
        out: &mut StepOutput<Square, i64>,
    ) -> Result<(), Error> {
        // First step: one yield per item, the item's index as its tag.
        if !std::mem::replace(&mut self.yielded, true) {
            for (tag, item) in self.items.iter().enumerate() {
                out.push_yield(tag as u64, Square(*item));
                self.waiting += 1;
            }
        }
        for event in events {
            match event {
                Event::Completion { tag, result } => {
                    let squared = result?;
                    let item = self.items[tag as usize];
                    assert_eq!(squared, item * item, "tag {tag}");
                    self.sum += squared;
                    self.waiting -= 1;
                }
                Event::Cancel => return Err(Error::Cancelled),
                Event::Message { .. } => {}
            }
        }
        if self.waiting == 0 {
            out.set_status(Status::Done(self.sum));
        } else {
            out.set_status(Status::Yield);
        }
        Ok(())
    }
}

/// One unit of work for the thread pool.
type Job = Box<dyn FnOnce() + Send>;

fn main() {
    const ITEMS: i64 = 1_000;
    const THREADS: usize = 4;

    // A small thread pool fed by a channel.
    let (jobs, queue) = mpsc::channel::<Job>();
    let queue = Arc::new(Mutex::new(queue));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let queue = queue.clone();
            thread::spawn(move || {
                while let Ok(job) = queue.lock().expect("queue").recv() {
                    job();
                }
            })
        })
        .collect();

    let jobs = Mutex::new(jobs);
    let scheduler = Scheduler::<Parent>::builder()
        .workers(2)
        .handler("square", move |Square(n), done| {
            let job: Job = Box::new(move || {
                done.complete(Ok(n * n));
            });
            jobs.lock().expect("jobs").send(job).expect("the pool runs");
        })
        .build()
        .expect("workers");

    let pid = scheduler.allocate_pid();
    let join = scheduler
        .submit(
            pid,
            Parent::default(),
            "sum_of_squares",
            (1..=ITEMS).collect(),
        )
        .expect("submit");
    let sum = join.join().expect("the parent finishes");
    let expected: i64 = (1..=ITEMS).map(|n| n * n).sum();
    println!("sum of squares of 1..={ITEMS}: {sum}");
    assert_eq!(sum, expected);

    // Dropping the scheduler drops the handler and with it the channel's
    // sender, so the pool's threads end.
    drop(scheduler);
    for t in threads {
        t.join().expect("pool thread");
    }
}
