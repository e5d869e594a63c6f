//! The sleep timer's thread ends with the scheduler's shutdown, while the
//! scheduler value still lives. Its own test binary: it reads program-wide
//! counts of timer threads.

use std::time::Duration;

use stepsched::Builder;
use stepsched_lua::{LuaProcess, Script, Value, host_handlers, timer_threads_running};

mod common;
use common::HANG;

#[test]
fn the_timer_thread_stops_at_shutdown_and_a_pending_sleep_is_cancelled() {
    let (b, _kv) = host_handlers(Builder::new().workers(1)).unwrap();
    let s = b.build().unwrap();
    assert_eq!(timer_threads_running(), 1);
    // An hour's sleep: only the shutdown ends this process.
    let src = Script::new(
        "nap.lua",
        "function main() yield_cmd('sleep', 3600000) return 1 end",
    )
    .unwrap();
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(src), "main", Value::Nil)
        .unwrap();
    while s.stats().blocked < 1 {
        std::thread::yield_now();
    }
    let report = s.shutdown(Duration::from_secs(30)).unwrap();
    assert_eq!(report.cancelled, 1);
    let r = h.join_timeout(HANG).expect("the process ended at shutdown");
    assert!(matches!(r, Err(ref e) if e.is_cancelled()), "{r:?}");
    // The scheduler is still alive; its timer thread is not.
    assert_eq!(timer_threads_running(), 0);
    drop(s);
    assert_eq!(timer_threads_running(), 0);
}
