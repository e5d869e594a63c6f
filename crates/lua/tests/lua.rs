//! Lua processes on a stepsched scheduler.

use std::time::Duration;

use stepsched::{
    Builder, Completer, Context, Error, Event, Events, Pid, Process, Scheduler, Status, StepOutput,
    SubmitError,
};
use stepsched_lua::{LuaCommand, LuaProcess, Sandbox, Script, Value, host_handlers};

mod common;
use common::{done, script, table};

fn lua_only(workers: usize) -> Scheduler<LuaProcess> {
    let (b, _kv) = host_handlers(Builder::new().workers(workers)).unwrap();
    b.handler("noop", |_: LuaCommand, done: Completer<LuaProcess>| {
        done.complete(Ok(Value::Nil));
    })
    .handler("fail", |_: LuaCommand, done: Completer<LuaProcess>| {
        done.complete(Err(Error::failed("the handler said no")));
    })
    .build()
    .unwrap()
}

#[test]
fn ping_pong_between_two_lua_processes() {
    let s = lua_only(2);
    let src = script("ping_pong.lua", include_str!("scripts/ping_pong.lua"));
    let pong_pid = s.allocate_pid();
    let pong = s
        .submit(pong_pid, LuaProcess::new(src.clone()), "pong", Value::Nil)
        .unwrap();
    let ping = s
        .submit(
            s.allocate_pid(),
            LuaProcess::new(src),
            "ping",
            table(vec![("peer", pong_pid.into()), ("limit", Value::Int(100))]),
        )
        .unwrap();
    // Ping receives the odd numbers, pong the even ones up to 100.
    assert_eq!(done(ping), Ok(Value::Int(101)));
    assert_eq!(done(pong), Ok(Value::Int(51)));
}

#[test]
fn yield_cmd_reaches_a_handler_and_a_handler_error_is_a_lua_error() {
    let s = lua_only(1);
    let src = script(
        "cmd.lua",
        r#"
        function main()
          kv_put = function(k, v) return yield_cmd("kv_put", {k, v}) end
          assert(yield_cmd("kv_put", {"a", 41}) == nil)
          local v = yield_cmd("kv_get", "a")
          local ok, err = pcall(yield_cmd, "fail")
          assert(not ok and string.find(err, "the handler said no"), err)
          yield_cmd("sleep", 1)
          return v + 1
        end
        "#,
    );
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(src), "main", Value::Nil)
        .unwrap();
    assert_eq!(done(h), Ok(Value::Int(42)));
}

#[test]
fn unknown_method_is_an_init_error() {
    let s = lua_only(1);
    let src = script("m.lua", "function main() return 1 end");
    match s.submit(s.allocate_pid(), LuaProcess::new(src), "nope", Value::Nil) {
        Err(SubmitError::Init(Error::UnknownMethod(m))) => assert_eq!(m, "nope"),
        other => panic!("expected UnknownMethod, got {:?}", other.map(|h| h.pid())),
    }
}

#[test]
fn a_lua_error_names_the_script_and_line() {
    let s = lua_only(1);
    let src = script(
        "boom.lua",
        "function main()\n  local x = 1\n  error('boom')\nend",
    );
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(src), "main", Value::Nil)
        .unwrap();
    let e = done(h).unwrap_err().to_string();
    assert!(e.contains("boom.lua:3:") && e.contains("boom"), "{e}");
}

#[test]
fn a_syntax_error_names_the_script_and_line() {
    let e = Script::new("bad.lua", "function main()\n  return +\nend")
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.lua:"), "{e}");
}

#[test]
fn terminate_stops_a_loop_through_yields() {
    let s = lua_only(1);
    let src = script(
        "loop.lua",
        "function main() while true do yield_cmd('noop') end end",
    );
    let pid = s.allocate_pid();
    let h = s
        .submit(pid, LuaProcess::new(src), "main", Value::Nil)
        .unwrap();
    s.terminate(pid).unwrap();
    assert_eq!(done(h), Err(Error::Terminated));
}

#[test]
fn terminate_stops_a_pure_cpu_loop() {
    let (b, _kv) = host_handlers(Builder::new().workers(1)).unwrap();
    let s = b
        .handler("noop", |_: LuaCommand, done: Completer<LuaProcess>| {
            done.complete(Ok(Value::Nil));
        })
        .build()
        .unwrap();
    // No step budget: only the terminate ends the loop.
    let src = Script::with_sandbox(
        "spin.lua",
        "function main() yield_cmd('noop') local i = 0 while true do i = i + 1 end end",
        Sandbox::new().with_step_time(None),
    )
    .unwrap();
    let pid = s.allocate_pid();
    let h = s
        .submit(pid, LuaProcess::new(src), "main", Value::Nil)
        .unwrap();
    // The handler completes at once, so the worker steps the process again
    // right away: once two steps have begun, the second is in the loop,
    // which only the instruction-count hook can leave.
    while s.stats().steps < 2 {
        std::thread::yield_now();
    }
    s.terminate(pid).unwrap();
    assert_eq!(done(h), Err(Error::Terminated));
    // The worker is free again: another process runs to its end.
    let seven = script("seven.lua", "function main() return 7 end");
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(seven), "main", Value::Nil)
        .unwrap();
    assert_eq!(done(h), Ok(Value::Int(7)));
}

#[test]
fn shutdown_cancels_processes_waiting_in_receive() {
    let s = lua_only(2);
    let src = script(
        "wait.lua",
        "function main() local m = receive() return m end",
    );
    let hs: Vec<_> = (0..10)
        .map(|_| {
            s.submit(
                s.allocate_pid(),
                LuaProcess::new(src.clone()),
                "main",
                Value::Nil,
            )
            .unwrap()
        })
        .collect();
    s.shutdown(Duration::from_secs(30)).unwrap();
    for h in hs {
        let r = done(h);
        assert!(matches!(r, Err(ref e) if e.is_cancelled()), "{r:?}");
    }
}

#[test]
fn a_function_cannot_be_sent() {
    let s = lua_only(1);
    let src = script(
        "fn.lua",
        r#"
        function main()
          local ok, err = pcall(send, self(), function() end)
          assert(not ok)
          local ok2, err2 = pcall(yield_cmd, "noop", {f = tostring})
          assert(not ok2)
          return err .. " | " .. err2
        end
        "#,
    );
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(src), "main", Value::Nil)
        .unwrap();
    let Ok(Value::Str(e)) = done(h) else {
        panic!("expected a message")
    };
    assert!(e.matches("function cannot cross").count() == 2, "{e}");
}

#[test]
fn returning_a_function_is_an_error_not_a_panic() {
    let s = lua_only(1);
    let src = script("ret.lua", "function main() return tostring end");
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(src), "main", Value::Nil)
        .unwrap();
    let e = done(h).unwrap_err().to_string();
    assert!(e.contains("ret.lua") && e.contains("function"), "{e}");
}

#[test]
fn values_round_trip() {
    let s = lua_only(1);
    let src = script("echo.lua", "function main(v) return v end");
    let v = table(vec![
        ("b", Value::Bool(true)),
        ("i", Value::Int(-7)),
        ("f", Value::Num(1.5)),
        ("s", Value::from("hé")),
        ("t", table(vec![("deep", Value::Int(1))])),
    ]);
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(src), "main", v.clone())
        .unwrap();
    let Ok(Value::Table(mut got)) = done(h) else {
        panic!()
    };
    let Value::Table(mut want) = v else { panic!() };
    let key = |p: &(Value, Value)| format!("{:?}", p.0);
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got, want);
}

#[test]
fn too_deep_a_table_is_refused() {
    let s = lua_only(1);
    let src = script(
        "deep.lua",
        "function main() local t = {} ; t.self = t ; return t end",
    );
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(src), "main", Value::Nil)
        .unwrap();
    let e = done(h).unwrap_err().to_string();
    assert!(e.contains("deeper than"), "{e}");
}

/// Lua and Rust processes on one scheduler: the Lua variant delegates.
#[derive(Debug)]
enum Mixed {
    Lua(LuaProcess),
    /// Answers every message with the number doubled.
    Doubler,
}

impl Process for Mixed {
    type Input = Value;
    type Message = Value;
    type Response = Value;
    type Command = LuaCommand;
    type Output = Value;

    fn init(&mut self, ctx: &Context<'_, Self>, method: &str, input: Value) -> Result<(), Error> {
        match self {
            Mixed::Lua(p) => p.init_in(ctx, method, input),
            Mixed::Doubler => Ok(()),
        }
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, Value, Value>,
        out: &mut StepOutput<LuaCommand, Value>,
    ) -> Result<(), Error> {
        match self {
            Mixed::Lua(p) => p.step_in(ctx, events, out),
            Mixed::Doubler => {
                for e in events {
                    match e {
                        Event::Message {
                            from: Some(from),
                            data: Value::Int(n),
                        } => {
                            let _ = ctx.send(from, Value::Int(n * 2));
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                        _ => {}
                    }
                }
                out.set_status(Status::Idle);
                Ok(())
            }
        }
    }
}

#[test]
fn a_lua_process_talks_to_a_rust_process() {
    let (b, _kv) = host_handlers(Builder::<Mixed>::new().workers(2)).unwrap();
    let s = b.build().unwrap();
    let doubler = s.allocate_pid();
    let dh = s
        .submit(doubler, Mixed::Doubler, "main", Value::Nil)
        .unwrap();
    let src = script(
        "client.lua",
        r#"
        function main(peer)
          local total = 0
          for i = 1, 10 do
            send(peer, i)
            local r, from = receive()
            assert(from == peer, tostring(from))
            total = total + r
          end
          return total
        end
        "#,
    );
    let h = s
        .submit(
            s.allocate_pid(),
            Mixed::Lua(LuaProcess::new(src)),
            "main",
            doubler.into(),
        )
        .unwrap();
    assert_eq!(done(h), Ok(Value::Int(110)));
    s.terminate(doubler).unwrap();
    assert_eq!(done(dh), Err(Error::Terminated));
}

#[test]
fn dropping_the_scheduler_with_a_sleep_pending_ends_the_process() {
    let s = lua_only(1);
    let src = script(
        "long.lua",
        "function main() yield_cmd('sleep', 3600000) return 1 end",
    );
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(src), "main", Value::Nil)
        .unwrap();
    s.shutdown(Duration::from_secs(30)).unwrap();
    assert!(done(h).is_err());
    drop(s);
}

#[allow(dead_code)]
fn _pid_is_a_string(p: Pid) -> Value {
    p.into()
}

#[test]
fn a_bare_coroutine_yield_is_an_error_naming_it() {
    let s = lua_only(1);
    for (arg, shown) in [("'bogus'", "\"bogus\""), ("1", "Integer(1)")] {
        let src = script(
            "bare.lua",
            &format!("function main() coroutine.yield({arg}) return 1 end"),
        );
        let h = s
            .submit(s.allocate_pid(), LuaProcess::new(src), "main", Value::Nil)
            .unwrap();
        let e = done(h).unwrap_err().to_string();
        assert!(
            e.contains("bare.lua") && e.contains(shown) && e.contains("outside yield_cmd"),
            "{e}"
        );
    }
}
