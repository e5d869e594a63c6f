//! Property: any [`Value`] a Lua table can hold crosses into Lua and back
//! unchanged, as a process's input returned as its result, and through a
//! message a Lua process receives and sends back.

use proptest::prelude::*;
use stepsched::{Builder, Scheduler};
use stepsched_lua::{LuaProcess, Script, Value};

mod common;
use common::HANG;

/// Scalars, excluding what a Lua value cannot hold unchanged: NaN (not
/// equal to itself).
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        any::<f64>()
            .prop_filter("NaN is not equal to itself", |f| !f.is_nan())
            .prop_map(Value::Num),
        ".{0,12}".prop_map(Value::Str),
    ]
}

/// Tables nest up to four levels. Keys are strings or integers, distinct
/// (a Lua table holds one value per key); values are never nil (a nil
/// value is no entry in Lua).
fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 48, 6, |inner| {
        prop::collection::vec(
            (
                prop_oneof![
                    any::<i64>().prop_map(Value::Int),
                    "[a-z]{0,6}".prop_map(Value::Str)
                ],
                inner,
            ),
            0..6,
        )
        .prop_map(|mut pairs| {
            pairs.sort_by_key(|(k, _)| format!("{k:?}"));
            pairs.dedup_by_key(|(k, _)| format!("{k:?}"));
            Value::Table(pairs)
        })
    })
}

/// The same value with every table's pairs in one order (Lua's `next`
/// order is not the order of insertion).
fn sorted(v: Value) -> Value {
    match v {
        Value::Table(pairs) => {
            let mut pairs: Vec<_> = pairs.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            pairs.sort_by_key(|(k, _)| format!("{k:?}"));
            Value::Table(pairs)
        }
        other => other,
    }
}

fn scheduler() -> Scheduler<LuaProcess> {
    Builder::new().workers(2).build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_value_round_trips_as_input_and_result(v in value()) {
        let s = scheduler();
        let echo = Script::new("echo.lua", "function main(v) return v end").unwrap();
        let h = s.submit(s.allocate_pid(), LuaProcess::new(echo), "main", v.clone()).unwrap();
        let got = h.join_timeout(HANG).expect("no hang").expect("the echo ends well");
        prop_assert_eq!(sorted(got), sorted(v));
    }

    #[test]
    fn a_value_round_trips_through_messages(v in value()) {
        let s = scheduler();
        // The echo sends every message back to its sender; the asker sends
        // its input to the echo and returns what comes back.
        let echo = Script::new(
            "echo.lua",
            "function main() while true do local m, from = receive() send(from, m) end end",
        )
        .unwrap();
        let ask = Script::new(
            "ask.lua",
            "function main(a) send(a.to, a.v) local m = receive() return m end",
        )
        .unwrap();
        let echo_pid = s.allocate_pid();
        let eh = s.submit(echo_pid, LuaProcess::new(echo), "main", Value::Nil).unwrap();
        let input = Value::Table(vec![
            (Value::from("to"), Value::from(echo_pid.to_string())),
            (Value::from("v"), v.clone()),
        ]);
        let h = s.submit(s.allocate_pid(), LuaProcess::new(ask), "main", input).unwrap();
        let got = h.join_timeout(HANG).expect("no hang").expect("the asker ends well");
        s.terminate(echo_pid).unwrap();
        prop_assert!(eh.join_timeout(HANG).expect("no hang").is_err());
        prop_assert_eq!(sorted(got), sorted(v));
    }
}
