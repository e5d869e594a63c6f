//! What the sandbox's own pattern matching costs against Lua's C one on
//! ordinary patterns: the same Lua loops, timed with `os.clock` inside a
//! sandboxed process (the crate's matcher) and inside a plain `mlua` state
//! (Lua's). Run it in release:
//!
//! ```sh
//! cargo run --release -p stepsched-lua --example pattern_cost
//! ```

use stepsched::Builder;
use stepsched_lua::{LuaProcess, Sandbox, Script, Value};

/// Each case: a name and a Lua function body run `n` times on `text`
/// (about 10 KB of words, spaces and numbers); `bench` returns the
/// nanoseconds per run.
const BENCH: &str = r#"
local words = {}
for i = 1, 1700 do
  words[#words + 1] = ({"alpha", "be", "gamma", "delta", "x"})[i % 5 + 1]
  if i % 7 == 0 then words[#words + 1] = "  \t " .. i end
end
local text = table.concat(words, " ")
local CASES = {
  {"gsub('%s+', ' ') on 10 KB", 200, function() return text:gsub("%s+", " ") end},
  {"find('%d+', 9000) on 10 KB", 2000, function() return text:find("%d+", 9000) end},
  {"gmatch('%a+') word splitting of 10 KB", 200, function() local n = 0 for _ in text:gmatch("%a+") do n = n + 1 end return n end},
  {"find('x alpha be gamma delta', 5000, true)", 20000, function() return text:find("x alpha be gamma delta", 5000, true) end},
  {"match('(%w+)=(%w+)') on a short string", 200000, function() return ("key=value"):match("(%w+)=(%w+)") end},
  {"gsub('a', function) on 10 KB", 200, function() return text:gsub("a", function(c) return "A" end) end},
}
function bench()
  local out = {}
  for _, c in ipairs(CASES) do
    local name, n, f = c[1], c[2], c[3]
    for _ = 1, n // 10 do f() end
    local best = math.huge
    for _ = 1, 5 do
      local t = os.clock()
      for _ = 1, n do f() end
      best = math.min(best, (os.clock() - t) / n * 1e9)
    end
    out[#out + 1] = string.format("%s\t%.0f", name, best)
  end
  return table.concat(out, "\n")
end
"#;

fn main() {
    let lua = mlua::Lua::new();
    lua.load(BENCH).exec().expect("the bench loads");
    let bench: mlua::Function = lua.globals().get("bench").unwrap();
    let theirs: String = bench.call(()).unwrap();

    let s = Builder::<LuaProcess>::new().workers(1).build().unwrap();
    let sandbox = Sandbox::new().with_step_time(None);
    let script = Script::with_sandbox("bench.lua", BENCH, sandbox).unwrap();
    let h = s
        .submit(
            s.allocate_pid(),
            LuaProcess::new(script),
            "bench",
            Value::Nil,
        )
        .unwrap();
    let Ok(Value::Str(ours)) = h.join() else {
        panic!("the sandboxed bench failed")
    };
    s.shutdown(std::time::Duration::from_secs(10)).unwrap();

    println!(
        "{:<45} {:>12} {:>12} {:>8}",
        "case", "Lua C (ns)", "ours (ns)", "ours/C"
    );
    for (c, o) in theirs.lines().zip(ours.lines()) {
        let (name, c) = c.split_once('\t').unwrap();
        let o = o.split_once('\t').unwrap().1;
        let (c, o): (f64, f64) = (c.parse().unwrap(), o.parse().unwrap());
        println!("{name:<45} {c:>12.0} {o:>12.0} {:>8.2}", o / c);
    }
}
