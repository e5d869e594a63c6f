//! The sandbox's pattern matching (`string.find`, `match`, `gmatch`,
//! `gsub`, its own, not Lua's C code): the same results and errors as
//! Lua's on random subjects and patterns, and, unlike Lua's, stopped by
//! terminate, by shutdown and by the step's time budget inside one call
//! on a crafted pattern.

use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::select;
use stepsched::{Builder, Scheduler};
use stepsched_lua::{LuaProcess, Sandbox, Script, Value};

mod common;
use common::stops::{budget_stops, one_worker, shutdown_stops, start, terminate_stops};
use common::{HANG, done, table};

// ---------------------------------------------------------------------
// Differential: the sandbox against Lua's own functions.
// ---------------------------------------------------------------------

/// Runs one case (a table: `op`, `s`, `p`, and `init`, `plain`, `repl`
/// with `rkind`, `n` as the operation takes them) and shows its results,
/// or its error, as one string. The same source runs in the sandbox and
/// in a plain Lua state with Lua's own functions.
const HARNESS: &str = r##"
local function show(...)
  local t = table.pack(...)
  local o = {}
  for i = 1, t.n do
    local v = t[i]
    if type(v) == "string" then o[i] = string.format("%q", v)
    else o[i] = math.type(v) or tostring(v) end
    if math.type(v) then o[i] = o[i] .. ":" .. tostring(v) end
  end
  return table.concat(o, ", ")
end

local T = { a = "<A>", b = false, ["("] = 1.5, [" "] = true, [1] = "one", [3] = 7 }

local function F(...)
  local first = ...
  if first == "b" then return false end
  if first == "(" then return {} end
  if first == "]" then return 42 end
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  return "<" .. table.concat(parts, "|") .. ">"
end

local function run(c)
  if c.op == "find" then
    return string.find(c.s, c.p, c.init, c.plain)
  elseif c.op == "match" then
    return string.match(c.s, c.p, c.init)
  elseif c.op == "gmatch" then
    local out = {}
    local it = string.gmatch(c.s, c.p, c.init)
    for _ = 1, 200 do
      local r = table.pack(it())
      if r.n == 0 or r[1] == nil then break end
      out[#out + 1] = "{" .. show(table.unpack(r, 1, r.n)) .. "}"
    end
    return table.concat(out, " ")
  else
    local repl = c.repl
    if c.rkind == "table" then repl = T
    elseif c.rkind == "function" then repl = F
    elseif c.rkind == "number" then repl = 12
    elseif c.rkind == "bad" then repl = true end
    return string.gsub(c.s, c.p, repl, c.n)
  end
end

function main(c)
  return show(pcall(run, c))
end
"##;

/// A case of the differential test.
#[derive(Debug, Clone)]
struct Case {
    op: &'static str,
    s: String,
    p: String,
    init: Option<i64>,
    plain: Option<bool>,
    repl: String,
    rkind: &'static str,
    n: Option<i64>,
}

impl Case {
    fn to_value(&self) -> Value {
        let mut pairs = vec![
            ("op", Value::from(self.op)),
            ("s", Value::from(self.s.as_str())),
            ("p", Value::from(self.p.as_str())),
            ("repl", Value::from(self.repl.as_str())),
            ("rkind", Value::from(self.rkind)),
        ];
        if let Some(i) = self.init {
            pairs.push(("init", Value::Int(i)));
        }
        if let Some(b) = self.plain {
            pairs.push(("plain", Value::Bool(b)));
        }
        if let Some(n) = self.n {
            pairs.push(("n", Value::Int(n)));
        }
        table(pairs)
    }

    fn to_lua(&self, lua: &mlua::Lua) -> mlua::Result<mlua::Table> {
        let t = lua.create_table()?;
        t.set("op", self.op)?;
        t.set("s", self.s.as_str())?;
        t.set("p", self.p.as_str())?;
        t.set("repl", self.repl.as_str())?;
        t.set("rkind", self.rkind)?;
        t.set("init", self.init)?;
        t.set("plain", self.plain)?;
        t.set("n", self.n)?;
        Ok(t)
    }
}

/// Subjects: short strings of the bytes patterns treat specially, and a
/// few that classes tell apart.
fn subject() -> impl Strategy<Value = String> {
    prop::collection::vec(select(b"ab%.( )[]-A1\t".to_vec()), 0..=40)
        .prop_map(|v| v.into_iter().map(char::from).collect())
}

/// A single-character class.
fn atom() -> impl Strategy<Value = String> {
    let simple = select(vec![
        "a", "b", ".", " ", "A", "1", "%a", "%A", "%d", "%D", "%s", "%S", "%w", "%W", "%p", "%P",
        "%l", "%u", "%x", "%c", "%g", "%z", "%.", "%%", "%(", "%)", "%[", "%]", "%-", "]", ")",
    ])
    .prop_map(str::to_string);
    let element = select(vec![
        "a", "b", "a-c", "%a", "%s", "%d", ".", "(", "-", "%]", "%%", "]", "^", "A-Z", " ",
    ]);
    let set = (any::<bool>(), prop::collection::vec(element, 1..4))
        .prop_map(|(neg, els)| format!("[{}{}]", if neg { "^" } else { "" }, els.concat()));
    prop_oneof![4 => simple, 1 => set]
}

/// A pattern from Lua's grammar (balanced captures), at most a few
/// quantifiers so that Lua's own matcher ends quickly.
fn grammar_pattern() -> impl Strategy<Value = String> {
    let quantifier = select(vec!["", "", "", "*", "+", "-", "?"]);
    let leaf = prop_oneof![
        16 => (atom(), quantifier).prop_map(|(a, q)| a + q),
        2 => Just("()".to_string()),
        1 => select(vec!["%1", "%2", "()", "(a)", "(%a+)"]).prop_map(str::to_string),
        2 => select(vec!["%b()", "%bab", "%b[]", "%baa"]).prop_map(str::to_string),
        2 => select(vec!["%f[%a]", "%f[^a]", "%f[%s]", "%f[a-]", "%f[%z]"]).prop_map(str::to_string),
    ];
    let items = leaf.prop_recursive(3, 10, 4, |inner| {
        prop_oneof![
            3 => prop::collection::vec(inner.clone(), 1..4).prop_map(|v| v.concat()),
            1 => prop::collection::vec(inner.clone(), 0..3).prop_map(|v| format!("({})", v.concat())),
            // A capture, something, and the capture again.
            1 => (inner.clone(), inner).prop_map(|(a, b)| format!("({a}){b}%1")),
        ]
    });
    (any::<bool>(), items, any::<bool>())
        .prop_map(|(anchor, items, end)| {
            format!(
                "{}{items}{}",
                if anchor { "^" } else { "" },
                if end { "$" } else { "" }
            )
        })
        .prop_filter("few quantifiers", |p| {
            p.bytes().filter(|b| b"*+-?".contains(b)).count() <= 3
        })
}

/// Any short string of the bytes patterns give meaning to: mostly
/// malformed ones, for the errors.
fn raw_pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(select(b"ab%.()[]-^$*+?019bf".to_vec()), 0..12)
        .prop_map(|v| v.into_iter().map(char::from).collect())
        .prop_filter("few quantifiers", |p: &String| {
            p.bytes().filter(|b| b"*+-?".contains(b)).count() <= 3
        })
}

fn case() -> impl Strategy<Value = Case> {
    let pattern = prop_oneof![3 => grammar_pattern(), 1 => raw_pattern()];
    let repl = prop::collection::vec(select(b"ab%0123x".to_vec()), 0..6)
        .prop_map(|v| v.into_iter().map(char::from).collect::<String>());
    (
        select(vec!["find", "match", "gmatch", "gsub"]),
        subject(),
        pattern,
        prop::option::weighted(0.3, -45i64..45),
        prop::option::weighted(0.2, any::<bool>()),
        repl,
        select(vec![
            "string", "string", "string", "string", "string", "table", "table", "function",
            "function", "number", "bad",
        ]),
        prop::option::weighted(0.3, -1i64..4),
    )
        .prop_map(|(op, s, p, init, plain, repl, rkind, n)| Case {
            op,
            s,
            p,
            init,
            plain,
            repl,
            rkind,
            n,
        })
}

/// Lua's own functions, in a plain state.
fn lua_own() -> (mlua::Lua, mlua::Function) {
    let lua = mlua::Lua::new();
    lua.load(HARNESS)
        .set_name("@pattern.lua")
        .exec()
        .expect("the harness loads");
    let main: mlua::Function = lua.globals().get("main").unwrap();
    (lua, main)
}

fn ours(s: &Scheduler<LuaProcess>, script: &std::sync::Arc<Script>, case: &Case) -> String {
    let h = s
        .submit(
            s.allocate_pid(),
            LuaProcess::new(script.clone()),
            "main",
            case.to_value(),
        )
        .unwrap();
    match done(h) {
        Ok(Value::Str(out)) => out,
        other => panic!("the harness failed in the sandbox on {case:?}: {other:?}"),
    }
}

#[test]
fn the_sandbox_matches_as_lua_does() {
    let s: Scheduler<LuaProcess> = Builder::new().workers(1).build().unwrap();
    // No step budget: a slow case in a debug build is not a difference.
    let sandbox = Sandbox::new().with_step_time(None);
    let script = Script::with_sandbox("pattern.lua", HARNESS, sandbox).unwrap();
    let (lua, theirs) = lua_own();
    let config = ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(case in case())| {
        let want: String = theirs.call(case.to_lua(&lua).unwrap()).unwrap();
        let got = ours(&s, &script, &case);
        prop_assert_eq!(got, want, "{:?}", case);
    });
    s.shutdown(HANG).unwrap();
}

#[test]
fn cases_beyond_the_random_ones_match_too() {
    let s: Scheduler<LuaProcess> = Builder::new().workers(1).build().unwrap();
    let sandbox = Sandbox::new().with_step_time(None);
    let script = Script::with_sandbox("pattern.lua", HARNESS, sandbox).unwrap();
    let (lua, theirs) = lua_own();
    let long = "a".repeat(300);
    let base = Case {
        op: "find",
        s: String::new(),
        p: String::new(),
        init: None,
        plain: None,
        repl: String::new(),
        rkind: "string",
        n: None,
    };
    let cases = [
        // The depth limit, on either side of it.
        ("find", long.as_str(), "a?".repeat(199)),
        ("find", long.as_str(), "a?".repeat(200)),
        ("find", long.as_str(), format!("(){}", "a?".repeat(199))),
        ("find", long.as_str(), "a-".repeat(200) + "$"),
        ("match", long.as_str(), "a*".repeat(250) + "$"),
        // Too many captures.
        ("find", "a", "()".repeat(32)),
        ("find", "a", "()".repeat(33)),
        ("match", "a", "(".repeat(40)),
        // Long plain and patterned searches.
        ("find", long.as_str(), "a".repeat(299) + "b"),
        ("find", long.as_str(), "a".repeat(300)),
        ("gsub", long.as_str(), "a".repeat(7)),
        ("gmatch", "one two  three", "%a+".to_string()),
        ("gsub", "hello world", "(%w+) (%w+)".to_string()),
        ("find", "a\0b", "%z".to_string()),
        // A range ending in `%` leaves the next `%` to escape the `]`.
        ("match", "]", "[^.-%%]".to_string()),
        ("match", "]", "[.-%%]".to_string()),
        ("match", "%", "[.-%%]".to_string()),
        ("find", "a\u{b}b", "%s".to_string()),
        ("gsub", "x = 1, y = 22", "(%w+) = (%w+)".to_string()),
    ];
    for (op, subject, p) in cases {
        let case = Case {
            op,
            s: subject.to_string(),
            p,
            repl: "%2=%1".to_string(),
            ..base.clone()
        };
        let want: String = theirs.call(case.to_lua(&lua).unwrap()).unwrap();
        assert_eq!(ours(&s, &script, &case), want, "{case:?}");
    }
    s.shutdown(HANG).unwrap();
}

// ---------------------------------------------------------------------
// The budget: one call on a crafted pattern is stopped inside.
// ---------------------------------------------------------------------

/// One call each, on a pattern that keeps Lua's own matcher busy for far
/// longer than [`HANG`] (hours to years): only a check inside the call
/// stops it. Each body ends with `return 1`, which none reaches.
const CALLS: [(&str, &str); 8] = [
    (
        "find, backtracking",
        "local s = string.rep('a', 1e5) s:find('.-.-.-.-b') return 1",
    ),
    (
        "match, backtracking",
        "local s = string.rep('a', 1e5) s:match('(.-)(.-)(.-)(.-)b') return 1",
    ),
    (
        "gmatch, backtracking",
        "local s = string.rep('a', 1e5) for _ in s:gmatch('.-.-.-.-b') do end return 1",
    ),
    (
        "gsub, backtracking",
        "local s = string.rep('a', 1e5) s:gsub('a*a*a*a*b', '') return 1",
    ),
    (
        "a plain find, quadratic",
        "local s = string.rep('a', 1 << 24) s:find(string.rep('a', 1 << 19) .. 'b', 1, true) return 1",
    ),
    (
        "%b, quadratic",
        "local s = string.rep('(', 1 << 22) s:find('%b()') return 1",
    ),
    (
        "a back-reference",
        "local s = string.rep('a', 1e5) s:find('(a*)%1%1b') return 1",
    ),
    (
        "gsub of empty matches with a long replacement",
        "local s = string.rep('a', 1 << 18) s:gsub('', string.rep('%0', 1 << 18)) return 1",
    ),
];

#[test]
fn terminate_stops_a_crafted_pattern_inside_its_call() {
    terminate_stops(&CALLS, "call.lua");
}

#[test]
fn shutdown_stops_a_crafted_pattern_and_reports_it_cancelled() {
    shutdown_stops(&CALLS, "call.lua");
}

#[test]
fn the_step_budget_stops_a_crafted_pattern() {
    budget_stops(&CALLS, "call.lua");
}

#[test]
fn pcall_does_not_swallow_the_stop() {
    // The budget's error inside a pattern call is raised again after the
    // pcall that caught it, as for a loop.
    let s = one_worker();
    let sandbox = Sandbox::new().with_step_time(Some(Duration::from_millis(20)));
    let body = "local s = string.rep('a', 1e5) \
                while true do pcall(string.find, s, '.-.-.-.-b') end";
    let (_, h) = start(&s, sandbox, "call.lua", body);
    let e = done(h).unwrap_err().to_string();
    assert!(e.contains("time budget of 20ms"), "{e}");
}
