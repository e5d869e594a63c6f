//! The memory limit: a script that allocates without end fails with an
//! error naming the limit, its neighbour on the same scheduler completes,
//! and the host's memory (counted by this binary's global allocator, which
//! every Lua state allocates through) grows by about the limit, no more.
//! In its own test binary: it counts the program's allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use stepsched::Builder;
use stepsched_lua::{LuaProcess, Sandbox, Script, Value, host_handlers};

mod common;
use common::done;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting live bytes and their peak.
struct Counting;

fn grew(by: usize) {
    // Relaxed: counters read after the work they count, through `join`.
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments
// and only counts the sizes on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const LIMIT: usize = 16 << 20;

#[test]
fn a_memory_bomb_fails_with_the_limit_and_its_neighbour_completes() {
    let (b, _kv) = host_handlers(Builder::<LuaProcess>::new().workers(2)).unwrap();
    let s = b.build().unwrap();
    let neighbour = Script::new(
        "neighbour.lua",
        "function main() local n = receive() return n * 2 end",
    )
    .unwrap();
    let npid = s.allocate_pid();
    let nh = s
        .submit(npid, LuaProcess::new(neighbour), "main", Value::Nil)
        .unwrap();

    let sandbox = Sandbox::new().with_memory_limit(Some(LIMIT));
    // The bomb, with an end: 256 strings of 1 MiB, so that without
    // a limit it finishes (at 256 MiB) instead of taking the machine.
    let bounded = "function main() local t = {} while #t < 256 do t[#t+1] = string.rep('x', 1 << 20) end return #t end";
    // And without one.
    let endless =
        "function main() local t = {} while true do t[#t+1] = string.rep('x', 1e6) end end";
    for (name, src) in [("bounded.lua", bounded), ("endless.lua", endless)] {
        let bomb = Script::with_sandbox(name, src, sandbox.clone()).unwrap();
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let h = s
            .submit(s.allocate_pid(), LuaProcess::new(bomb), "main", Value::Nil)
            .unwrap();
        let r = done(h);
        let grown = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        let e = r.expect_err("the bomb was stopped").to_string();
        assert!(
            e.contains(name) && e.contains(&format!("memory limit of {LIMIT} bytes")),
            "{e}"
        );
        // The state held at most the limit; the rest is the process's
        // own bookkeeping and the other threads' small allocations.
        assert!(
            grown < LIMIT + (8 << 20),
            "{name}: the host grew by {grown} bytes under a limit of {LIMIT}"
        );
    }

    // A script may catch the memory error, as any Lua error; the limit
    // holds either way.
    let caught = Script::with_sandbox(
        "caught.lua",
        "function main() local ok, e = pcall(function() local t = {} while true do t[#t+1] = string.rep('x', 1e6) end end) return e end",
        sandbox,
    )
    .unwrap();
    let h = s
        .submit(
            s.allocate_pid(),
            LuaProcess::new(caught),
            "main",
            Value::Nil,
        )
        .unwrap();
    assert_eq!(done(h), Ok(Value::from("not enough memory")));

    s.send(npid, Value::Int(21)).unwrap();
    assert_eq!(done(nh), Ok(Value::Int(42)));
    let report = s.shutdown(common::HANG).unwrap();
    assert!(report.workers_joined);
}
