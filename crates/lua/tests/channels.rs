//! The channels a script reaches the host's memory through are bounded:
//! the size of a value leaving a script (`send`, `yield_cmd`, `return`),
//! the queue of a process a script sends to, the messages a Lua process
//! has not received yet (under its own memory limit) and the key-value
//! store behind `kv_put`.
//!
//! Every wait is a join under the hang guard, or a channel read with the
//! same bound; nothing depends on timing.

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};

use stepsched::{Builder, Completer, Error, Scheduler};
use stepsched_lua::{
    DEFAULT_SEND_QUEUE_LIMIT, DEFAULT_STORE_LIMIT, DEFAULT_VALUE_LIMIT, KvStore, LuaCommand,
    LuaProcess, Sandbox, Script, Value, host_handlers, host_handlers_with_store_limit,
};

mod common;
use common::{HANG, done};

const LIMIT_MESSAGE: &str = "a value of more than 1048576 bytes (the sandbox's value limit)";

/// The completers of `never` yields, kept so that they never complete.
type Parked = Arc<Mutex<Vec<Completer<LuaProcess>>>>;

/// A scheduler with the host handlers (a store of `store_limit` bytes),
/// `noop` (completes at once) and `never` (keeps its completer in the
/// returned list and says so on `parked`).
fn scheduler(
    workers: usize,
    store_limit: Option<usize>,
    parked: Sender<()>,
) -> (Scheduler<LuaProcess>, KvStore, Parked) {
    let (b, kv) =
        host_handlers_with_store_limit(Builder::new().workers(workers), store_limit).unwrap();
    let kept: Parked = Arc::default();
    let keep = Arc::clone(&kept);
    let parked = Mutex::new(parked);
    let s = b
        .handler("noop", |_: LuaCommand, done: Completer<LuaProcess>| {
            done.complete(Ok(Value::Nil));
        })
        .handler(
            "never",
            move |_: LuaCommand, done: Completer<LuaProcess>| {
                keep.lock().unwrap().push(done);
                let _ = parked.lock().unwrap().send(());
            },
        )
        .build()
        .unwrap();
    (s, kv, kept)
}

/// Completes every parked `never` yield.
fn release(parked: &Parked) {
    let kept = std::mem::take(&mut *parked.lock().unwrap());
    for c in kept {
        c.complete(Ok(Value::Nil));
    }
}

fn run(s: &Scheduler<LuaProcess>, script: Arc<Script>, input: Value) -> Result<Value, Error> {
    let h = s
        .submit(s.allocate_pid(), LuaProcess::new(script), "main", input)
        .unwrap();
    done(h)
}

fn items(v: Value) -> Vec<Value> {
    let Value::Table(pairs) = v else {
        panic!("expected a table, got {v:?}")
    };
    let mut pairs: Vec<(i64, Value)> = pairs
        .into_iter()
        .map(|(k, v)| (i64::try_from(k).unwrap(), v))
        .collect();
    pairs.sort_by_key(|(k, _)| *k);
    pairs.into_iter().map(|(_, v)| v).collect()
}

fn text(v: &Value) -> &str {
    match v {
        Value::Str(s) => s,
        other => panic!("expected a string, got {other:?}"),
    }
}

#[test]
fn the_defaults_are_documented_ones() {
    let sandbox = Sandbox::new();
    assert_eq!(sandbox.value_limit(), Some(DEFAULT_VALUE_LIMIT));
    assert_eq!(DEFAULT_VALUE_LIMIT, 1 << 20);
    assert_eq!(sandbox.send_queue_limit(), Some(DEFAULT_SEND_QUEUE_LIMIT));
    assert_eq!(DEFAULT_SEND_QUEUE_LIMIT, 10_000);
    let (_b, kv) = host_handlers(Builder::<LuaProcess>::new().workers(1)).unwrap();
    assert_eq!(kv.limit(), Some(DEFAULT_STORE_LIMIT));
    assert_eq!(DEFAULT_STORE_LIMIT, 64 << 20);
}

#[test]
fn an_oversized_send_or_yield_cmd_is_a_catchable_error_at_the_scripts_line() {
    let (s, _kv, _parked) = scheduler(1, None, channel().0);
    let src = Script::new(
        "big.lua",
        r#"
        function main()
          local big = string.rep("x", 2 << 20)
          local ok1, e1 = pcall(function() send(self(), big) end)
          local ok2, e2 = pcall(function() yield_cmd("noop", big) end)
          -- Nested tables count as a whole: three strings of 400 000 bytes.
          local t = {string.rep("a", 400000), {string.rep("b", 400000), {string.rep("c", 400000)}}}
          local ok3, e3 = pcall(function() send(self(), t) end)
          -- The command's name counts too.
          local ok4, e4 = pcall(function() yield_cmd(big) end)
          -- The script goes on: a small value still crosses.
          send(self(), "small")
          local m = receive()
          yield_cmd("noop", string.rep("y", 1000))
          return {ok1, e1, ok2, e2, ok3, e3, ok4, e4, m}
        end
        "#,
    )
    .unwrap();
    let r = items(run(&s, src, Value::Nil).unwrap());
    for (i, line) in [(0, 4), (2, 5), (4, 8), (6, 10)] {
        assert_eq!(r[i], Value::Bool(false), "call {i} was not refused");
        let e = text(&r[i + 1]);
        assert!(
            e.starts_with(&format!("big.lua:{line}: ")) && e.contains(LIMIT_MESSAGE),
            "{e}"
        );
    }
    assert!(text(&r[1]).contains("send: "), "{}", text(&r[1]));
    assert!(text(&r[3]).contains("yield_cmd: "), "{}", text(&r[3]));
    assert_eq!(r[8], Value::from("small"));
}

#[test]
fn the_conversion_stops_at_the_limit_without_walking_the_rest() {
    let (s, _kv, _parked) = scheduler(1, None, channel().0);
    // The function at [2] cannot cross; the error is the limit, reached
    // at [1] (the array part is walked in order), not the function.
    let src = Script::new(
        "stop.lua",
        r#"
        function main()
          local ok, e = pcall(send, self(), {string.rep("x", 2 << 20), function() end})
          return e
        end
        "#,
    )
    .unwrap();
    let e = run(&s, src, Value::Nil).unwrap();
    assert!(text(&e).contains(LIMIT_MESSAGE), "{e:?}");
}

#[test]
fn an_oversized_return_fails_the_process_naming_the_limit() {
    let (s, _kv, _parked) = scheduler(1, None, channel().0);
    let src = Script::new(
        "ret.lua",
        "function main() return {string.rep('x', 2 << 20)} end",
    )
    .unwrap();
    match run(&s, src, Value::Nil) {
        Err(Error::Failed(m)) => {
            assert!(
                m.contains("ret.lua: return: ") && m.contains(LIMIT_MESSAGE),
                "{m}"
            );
        }
        other => panic!(
            "expected the value limit, got {:?}",
            other.map(|v| v.size())
        ),
    }
}

#[test]
fn the_value_limit_is_the_sandboxs_to_set() {
    let (s, _kv, _parked) = scheduler(1, None, channel().0);
    let src = "function main(n) return string.rep('x', n) end";
    let small = Sandbox::new().with_value_limit(Some(100));
    let tight = Script::with_sandbox("tight.lua", src, small).unwrap();
    // 32 bytes for the value, 68 for the string: exactly the limit.
    assert_eq!(
        run(&s, tight.clone(), Value::Int(68)).map(|v| v.size()),
        Ok(100)
    );
    let e = run(&s, tight, Value::Int(69))
        .map(|v| v.size())
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("a value of more than 100 bytes (the sandbox's value limit)"),
        "{e}"
    );
    let none = Sandbox::new().with_value_limit(None);
    let free = Script::with_sandbox("free.lua", src, none).unwrap();
    assert_eq!(
        run(&s, free, Value::Int(2 << 20)).map(|v| v.size()),
        Ok(VALUE_OVERHEAD_PLUS + (2 << 20))
    );
}

const VALUE_OVERHEAD_PLUS: usize = stepsched_lua::VALUE_OVERHEAD;

/// The sender's script: sends until a send fails (at most 1 000 times),
/// all in one step, and returns how many were sent and the error.
const FLOOD: &str = r#"
    function main(to)
      local n = 0
      while n < 1000 do
        local ok, e = pcall(function() send(to, n) end)
        if not ok then return {n, e} end
        n = n + 1
      end
      return {n, "no error"}
    end
"#;

#[test]
fn send_to_a_process_that_never_reads_stops_at_the_queue_limit() {
    // One worker: the receiver, parked in a yield no handler completes,
    // cannot be stepped while the sender's one step sends.
    let (parked_tx, parked_rx) = channel();
    let (s, _kv, parked) = scheduler(1, None, parked_tx);
    let receiver = Script::new("deaf.lua", "function main() yield_cmd('never') end").unwrap();
    let deaf = s.allocate_pid();
    let deaf_join = s
        .submit(deaf, LuaProcess::new(receiver), "main", Value::Nil)
        .unwrap();
    parked_rx
        .recv_timeout(HANG)
        .expect("the receiver never yielded");
    let sandbox = Sandbox::new().with_send_queue_limit(Some(100));
    let sender = Script::with_sandbox("flood.lua", FLOOD, sandbox).unwrap();
    let r = items(run(&s, sender, Value::from(deaf)).unwrap());
    assert_eq!(r[0], Value::Int(100), "{r:?}");
    let e = text(&r[1]);
    assert!(
        e.starts_with("flood.lua:5: send: ")
            && e.contains(&format!(
                "process {deaf} has 100 events queued, at the sandbox's send queue limit of 100"
            )),
        "{e}"
    );
    let queued = s.handle().queued(deaf).expect("the receiver is live");
    assert!(queued <= 101, "{queued} events queued");
    // Release the receiver: it ends on its own.
    release(&parked);
    assert_eq!(done(deaf_join), Ok(Value::Nil));
}

#[test]
fn a_lua_receivers_unreceived_messages_count_against_its_memory_limit() {
    // Messages that wake a Lua process while it waits for a command move
    // out of the scheduler's queue into its mailbox: there they are in its
    // Lua state, under its memory limit, not in the host.
    let (parked_tx, parked_rx) = channel();
    let (s, _kv, parked) = scheduler(2, None, parked_tx);
    let sandbox = Sandbox::new().with_memory_limit(Some(2 << 20));
    let receiver = Script::with_sandbox(
        "busy.lua",
        "function main() yield_cmd('never') return 'released' end",
        sandbox,
    )
    .unwrap();
    let busy = s.allocate_pid();
    let busy_join = s
        .submit(busy, LuaProcess::new(receiver), "main", Value::Nil)
        .unwrap();
    parked_rx
        .recv_timeout(HANG)
        .expect("the receiver never yielded");
    // 100 messages of 64 KiB: 6.4 MB, three times its limit. Sends after
    // it failed are refused; whichever way the steps fall, it has taken
    // every message sent before its end.
    let chunk = "x".repeat(64 << 10);
    let mut sent = 0;
    for _ in 0..100 {
        if s.send(busy, Value::from(chunk.as_str())).is_ok() {
            sent += 1;
        }
    }
    release(&parked);
    match done(busy_join) {
        Err(Error::Failed(m)) => assert!(
            m.contains(
                "busy.lua: the memory limit of 2097152 bytes was exceeded by messages it had not received"
            ),
            "{m}"
        ),
        other => panic!("expected the memory limit after {sent} messages, got {other:?}"),
    }
}

#[test]
fn a_script_that_fills_the_store_gets_the_limit() {
    let (s, kv, _parked) = scheduler(1, Some(10_000), channel().0);
    let src = Script::new(
        "fill.lua",
        r#"
        function main()
          local n = 0
          while n < 1000 do
            local ok, e = pcall(function() yield_cmd("kv_put", {"key" .. n, string.rep("v", 100)}) end)
            if not ok then return {n, e} end
            n = n + 1
          end
          return {n, "no error"}
        end
        "#,
    )
    .unwrap();
    let r = items(run(&s, src, Value::Nil).unwrap());
    // Each entry: 4 or 5 bytes of key, 32 + 100 of value.
    let Value::Int(n) = r[0] else { panic!("{r:?}") };
    assert!((60..80).contains(&n), "{n} puts: {r:?}");
    let e = text(&r[1]);
    assert!(
        e.starts_with("fill.lua:5: ") && e.contains("more than its limit of 10000 bytes"),
        "{e}"
    );
    assert!(kv.bytes() <= 10_000, "{}", kv.bytes());
    assert_eq!(kv.len(), n as usize);
    // A nil value removes its key and frees its bytes.
    let before = kv.bytes();
    let src = Script::new(
        "free.lua",
        "function main() yield_cmd('kv_put', {'key0', nil}) return yield_cmd('kv_get', 'key0') end",
    )
    .unwrap();
    assert_eq!(run(&s, src, Value::Nil), Ok(Value::Nil));
    assert_eq!(kv.bytes(), before - (4 + 32 + 100));
}

#[test]
fn replacing_a_key_counts_the_difference() {
    // 1 000 bytes: room for two entries of 1 + 32 + 400 bytes, not three.
    let (s, kv, _parked) = scheduler(1, Some(1_000), channel().0);
    let src = Script::new(
        "replace.lua",
        r#"
        function main()
          local put = function(k, v) return yield_cmd("kv_put", {k, v}) end
          put("a", string.rep("x", 400))
          for i = 1, 10 do put("a", string.rep("y", 400)) end
          put("b", string.rep("z", 400))
          local ok, e = pcall(put, "c", string.rep("w", 400))
          -- A smaller value in place of a larger one frees the difference.
          put("a", "")
          put("c", string.rep("w", 300))
          return {ok, e, yield_cmd("kv_get", "c")}
        end
        "#,
    )
    .unwrap();
    let r = items(run(&s, src, Value::Nil).unwrap());
    assert_eq!(r[0], Value::Bool(false), "the third key was stored");
    assert!(
        text(&r[1]).contains("the store would hold 1299 bytes, more than its limit of 1000 bytes"),
        "{}",
        text(&r[1])
    );
    assert_eq!(r[2], Value::from("w".repeat(300)));
    assert_eq!(kv.bytes(), (1 + 32) + (1 + 32 + 400) + (1 + 32 + 300));
}
