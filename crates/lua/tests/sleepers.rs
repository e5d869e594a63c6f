//! 10 000 Lua processes sleep a random few milliseconds each and report to
//! a collector: every one completes, and every sleep goes through the one
//! timer thread of the scheduler. In its own test binary, so the program-wide
//! count of timer threads sees no other test's scheduler.

use stepsched::{Builder, Scheduler};
use stepsched_lua::{LuaProcess, Value, host_handlers, timer_threads_started};

mod common;
use common::{done, script, table};

fn lua_only(workers: usize) -> Scheduler<LuaProcess> {
    let (b, _kv) = host_handlers(Builder::new().workers(workers)).unwrap();
    b.build().unwrap()
}

#[test]
fn ten_thousand_sleepers_share_one_timer() {
    let s = lua_only(2);
    assert_eq!(timer_threads_started(), 1);
    let src = script(
        "sleeper.lua",
        r#"
        function collector(n)
          local seen, sum = 0, 0
          while seen < n do
            local v = receive()
            seen = seen + 1
            sum = sum + v
          end
          return sum
        end
        function sleeper(arg)
          yield_cmd("sleep", arg.ms)
          send(arg.to, arg.i)
          return arg.i
        end
        "#,
    );
    const N: i64 = 10_000;
    let cpid = s.allocate_pid();
    let ch = s
        .submit(
            cpid,
            LuaProcess::new(src.clone()),
            "collector",
            Value::Int(N),
        )
        .unwrap();
    let hs: Vec<_> = (1..=N)
        .map(|i| {
            let arg = table(vec![
                ("ms", Value::Int(fastrand::i64(0..5))),
                ("to", cpid.into()),
                ("i", Value::Int(i)),
            ]);
            s.submit(
                s.allocate_pid(),
                LuaProcess::new(src.clone()),
                "sleeper",
                arg,
            )
            .unwrap()
        })
        .collect();
    for (i, h) in (1..=N).zip(hs) {
        assert_eq!(done(h), Ok(Value::Int(i)));
    }
    assert_eq!(done(ch), Ok(Value::Int(N * (N + 1) / 2)));
    // Every sleep went through the one timer thread of this scheduler.
    assert_eq!(timer_threads_started(), 1);
}
