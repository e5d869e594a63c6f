//! What a process costs the allocator: a process that is sent one message
//! and ends on it makes its slot and its event queue, one allocation each
//! (the queue's shared state, consumer state and first block are one
//! allocation, reached through one word of the slot).
//!
//! A counting global allocator (this test binary only) counts every
//! allocation of every thread; the routing table, the run queues and the
//! workers' buffers allocate now and then as they grow, so the test counts
//! over many processes after a warm-up and bounds the average.
#![cfg(not(stepsched_loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use stepsched::{Context, Error, Events, Process, Scheduler, Status, StepOutput};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Ends on its first message, with the message.
struct Sink;

impl Process for Sink {
    type Input = ();
    type Message = u64;
    type Response = u64;
    type Command = &'static str;
    type Output = u64;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _: &mut Context<'_, Self>,
        events: Events<'_, u64>,
        out: &mut StepOutput<&'static str, u64>,
    ) -> Result<(), Error> {
        for event in events {
            if let Some(m) = event.into_data() {
                out.set_status(Status::Done(m));
                return Ok(());
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

/// Runs `n` processes one after the other: submit, send one message, join.
fn run(s: &Scheduler<Sink>, n: u64) {
    for m in 0..n {
        let pid = s.allocate_pid();
        let handle = s.submit(pid, Sink, "run", ()).expect("submit");
        s.send(pid, m).expect("the process is live");
        assert_eq!(handle.join().expect("completes"), m);
    }
}

#[test]
fn a_process_sent_one_message_costs_its_slot_and_its_queue() {
    let s = Scheduler::<Sink>::builder()
        .workers(1)
        .build()
        .expect("start the scheduler");
    // Warm up what grows once: the routing table, the run queues, the
    // worker's buffers.
    run(&s, 2_000);
    const N: u64 = 10_000;
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    run(&s, N);
    let per = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / N as f64;
    eprintln!("{per:.3} allocations per process");
    // Two each (slot, queue), and a little for what still grows.
    assert!(
        per < 2.5,
        "{per:.3} allocations per process, more than its slot and its queue"
    );
}
