//! The trace: one line per submit, step, end, termination and shutdown,
//! written by hand (no formatter) so a traced step stays cheap.

use std::time::Duration;

use stepsched_process::{Event, Pid, Process};

use crate::state::Shared;

/// Appends the line of an injected fault to `trace`: `t=<now>us <pid>
/// fault <what>`, then what `detail` writes.
pub(crate) fn push_fault(
    trace: &mut String,
    now: Duration,
    pid: Pid,
    what: &str,
    detail: impl FnOnce(&mut String),
) {
    stamp(trace, now, pid);
    trace.push_str(" fault ");
    trace.push_str(what);
    detail(trace);
    trace.push('\n');
}

/// Writes `t=<microseconds>us <pid>`, the start of a trace line.
pub(crate) fn stamp(line: &mut String, now: Duration, pid: Pid) {
    line.push_str("t=");
    push_number(line, u64::try_from(now.as_micros()).unwrap_or(u64::MAX));
    line.push_str("us ");
    push_pid(line, pid);
}

/// Writes `n` in decimal (what `write!` does, without its formatter: the
/// trace writes several numbers per step).
pub(crate) fn push_number(line: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        line.push(char::from(d));
    }
}

/// Writes `pid` as its `Display` does: `<node.number>`.
pub(crate) fn push_pid(line: &mut String, pid: Pid) {
    line.push('<');
    push_number(line, pid.node().into());
    line.push('.');
    push_number(line, pid.number());
    line.push('>');
}

/// Appends a short form of `event` to a trace line: `m<0.1>` (a message
/// from process `<0.1>`), `m` (from outside), `c3` / `c3!` (completion of
/// tag 3, ok / failed), `x` (cancel).
pub(crate) fn describe<M, R>(line: &mut String, event: &Event<M, R>) {
    match event {
        Event::Message {
            from: Some(from), ..
        } => {
            line.push('m');
            push_pid(line, *from);
        }
        Event::Message { from: None, .. } => line.push('m'),
        Event::Completion { tag, result } => {
            line.push('c');
            push_number(line, *tag);
            if result.is_err() {
                line.push('!');
            }
        }
        _ => line.push('x'),
    }
}

impl<P: Process> Shared<P> {
    /// Ends a trace line with `tail` and records it (if tracing).
    pub(crate) fn trace_line(&self, mut line: String, tail: &str) {
        if self.tracing {
            line.push_str(tail);
            let mut inner = self.inner.borrow_mut();
            inner.push_line(&line);
            // Kept for the next step's line.
            line.clear();
            inner.line = line;
        }
    }
}
