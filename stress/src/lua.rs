//! Lua processes (`stepsched-lua`): rounds of Lua senders each sending
//! numbered messages to a Lua collector, some of them sleeping on the shared
//! timer between sends. Ledgers: every message sent is received exactly once
//! (the collector raises a Lua error on a duplicate and counts its
//! receipts), and every process ends exactly once (a completion hook counts
//! ends, each `JoinHandle` is joined once).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use stepsched::Builder;
use stepsched_lua::{LuaProcess, Script, Value, host_handlers};

use crate::Opts;
use crate::report::{Outcome, count, progress};

const SCRIPT: &str = r#"
function sender(a)
  for i = 1, a.k do
    send(a.to, a.base + i)
    if i % 7 == 0 then yield_cmd("sleep", 0) end
  end
  return a.k
end
function collector(n)
  local seen = {}
  for _ = 1, n do
    local v = receive()
    if seen[v] then error("duplicate message " .. v) end
    seen[v] = true
  end
  return n
end
"#;

pub(crate) fn run(opts: &Opts) -> Result<Outcome, String> {
    let script = Script::new("stress.lua", SCRIPT).map_err(|e| e.to_string())?;
    let ended = Arc::new(AtomicU64::new(0));
    let hook = Arc::clone(&ended);
    let (builder, _kv) = host_handlers(
        Builder::<LuaProcess>::new()
            .workers(opts.workers)
            .on_complete(move |_, _| {
                hook.fetch_add(1, Ordering::Relaxed);
            }),
    )
    .map_err(|e| e.to_string())?;
    let s = builder.build().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let deadline = opts.deadline(start);
    let senders = (opts.processes / 10).max(2);
    let k: i64 = 20;
    let (mut rounds, mut submitted, mut messages) = (0u64, 0u64, 0u64);
    loop {
        let cpid = s.allocate_pid();
        let expected = senders as i64 * k;
        let ch = s
            .submit(
                cpid,
                LuaProcess::new(script.clone()),
                "collector",
                Value::Int(expected),
            )
            .map_err(|e| format!("submit collector: {e}"))?;
        let hs: Vec<_> = (0..senders)
            .map(|i| {
                let arg = Value::Table(vec![
                    (Value::from("to"), cpid.into()),
                    (Value::from("k"), Value::Int(k)),
                    (Value::from("base"), Value::Int(i as i64 * k)),
                ]);
                s.submit(
                    s.allocate_pid(),
                    LuaProcess::new(script.clone()),
                    "sender",
                    arg,
                )
                .map_err(|e| format!("submit sender: {e}"))
            })
            .collect::<Result<_, _>>()?;
        submitted += 1 + senders as u64;
        let mut sent = 0;
        for h in hs {
            match h.join() {
                Ok(Value::Int(n)) => sent += n,
                other => return Err(format!("round {rounds}: sender ended with {other:?}")),
            }
        }
        match ch.join() {
            Ok(Value::Int(n)) if n == sent && n == expected => {}
            other => {
                return Err(format!(
                    "round {rounds}: {sent} sent, collector ended with {other:?}"
                ));
            }
        }
        messages += sent as u64;
        progress(messages);
        rounds += 1;
        if Instant::now() >= deadline {
            break;
        }
    }
    s.shutdown(std::time::Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let ended = ended.load(Ordering::Relaxed);
    if ended != submitted {
        return Err(format!("{submitted} processes submitted, {ended} ends"));
    }
    println!(
        "lua: {rounds} rounds, {} Lua processes, {} messages",
        count(submitted),
        count(messages)
    );
    Ok(Outcome {
        checked: "every message received exactly once; every Lua process ends once",
        count: messages,
        unit: "messages",
    })
}
