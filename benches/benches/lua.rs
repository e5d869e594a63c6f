//! The cost of the Lua boundary: a yield round trip (a yield to a handler
//! that completes at once, and the resume) from a Lua process, beside the
//! same from a Rust process on the same scheduler (one worker, the same
//! handler); and the memory of an idle Lua process (waiting in `receive()`),
//! measured by a counting global allocator. The Lua processes run in the
//! default sandbox, with its memory limit and step budget on.
//!
//! ```sh
//! nice -n 19 cargo bench -p stepsched-benches --bench lua -- --quick
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use stepsched::{
    Builder, Completer, Context, Error, Events, Process, Scheduler, Status, StepOutput,
};
use stepsched_benches::CountingAlloc;
use stepsched_lua::{LuaCommand, LuaProcess, Script, Value};

// ---------------------------------------------------------------------------
// Counting allocator (shared with the stress run: `stepsched_benches`)

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

// ---------------------------------------------------------------------------
// One scheduler for both kinds of process

/// A Lua process, or a Rust process that yields `noop` a number of times.
enum Bench {
    Lua(LuaProcess),
    Rust { left: i64, tag: u64 },
}

impl Process for Bench {
    type Input = Value;
    type Message = Value;
    type Response = Value;
    type Command = LuaCommand;
    type Output = Value;

    fn init(&mut self, ctx: &Context<'_, Self>, method: &str, input: Value) -> Result<(), Error> {
        match self {
            Bench::Lua(p) => p.init_in(ctx, method, input),
            Bench::Rust { left, .. } => {
                *left = i64::try_from(input).map_err(Error::from_source)?;
                Ok(())
            }
        }
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, Value, Value>,
        out: &mut StepOutput<LuaCommand, Value>,
    ) -> Result<(), Error> {
        match self {
            Bench::Lua(p) => p.step_in(ctx, events, out),
            Bench::Rust { left, tag } => {
                for e in events {
                    e.into_result().transpose()?;
                }
                if *left == 0 {
                    out.set_status(Status::Done(Value::Nil));
                } else {
                    *left -= 1;
                    *tag += 1;
                    let command = LuaCommand {
                        name: "noop".into(),
                        args: Value::Nil,
                    };
                    out.push_yield(*tag, command);
                    out.set_status(Status::Yield);
                }
                Ok(())
            }
        }
    }
}

fn scheduler() -> Scheduler<Bench> {
    Builder::new()
        .workers(1)
        .handler("noop", |_: LuaCommand, done: Completer<Bench>| {
            done.complete(Ok(Value::Nil));
        })
        .build()
        .unwrap()
}

const LOOP: &str = "function main(n) for i = 1, n do yield_cmd('noop') end end
function idle() return receive() end";

fn yields(c: &mut Criterion) {
    let s = scheduler();
    let script = Script::new("bench.lua", LOOP).unwrap();
    let mut g = c.benchmark_group("lua/yield_round_trip");
    // One process yields `iters` times: the time per iteration is per yield.
    g.bench_function("lua", |b| {
        b.iter_custom(|iters| {
            let p = Bench::Lua(LuaProcess::new(script.clone()));
            let start = Instant::now();
            let h = s
                .submit(s.allocate_pid(), p, "main", Value::Int(iters as i64))
                .unwrap();
            black_box(h.join().unwrap());
            start.elapsed()
        })
    });
    g.bench_function("rust", |b| {
        b.iter_custom(|iters| {
            let p = Bench::Rust { left: 0, tag: 0 };
            let start = Instant::now();
            let h = s
                .submit(s.allocate_pid(), p, "main", Value::Int(iters as i64))
                .unwrap();
            black_box(h.join().unwrap());
            start.elapsed()
        })
    });
    g.finish();
    s.shutdown(Duration::from_secs(5)).unwrap();
}

criterion_group!(benches, yields);

/// Bytes per idle Lua process: its Lua state, the loaded script, its
/// coroutine and the scheduler's slot.
fn memory() {
    const N: usize = 1_000;
    let s = scheduler();
    let script = Script::new("bench.lua", LOOP).unwrap();
    // Allocations of every thread count: `init` runs here, and the
    // worker's first steps (to `receive()`) are waited for below through
    // `stats()`.
    let before = CountingAlloc::start();
    let hs: Vec<_> = (0..N)
        .map(|_| {
            let p = Bench::Lua(LuaProcess::new(script.clone()));
            s.submit(s.allocate_pid(), p, "idle", Value::Nil).unwrap()
        })
        .collect();
    while s.stats().idle < N {
        std::thread::yield_now();
    }
    let bytes = CountingAlloc::live().wrapping_sub(before);
    CountingAlloc::stop();
    println!(
        "memory: {N} idle Lua processes: {bytes} bytes, {} bytes per process",
        bytes / N
    );
    s.shutdown(Duration::from_secs(30)).unwrap();
    drop(hs);
}

fn main() {
    memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
