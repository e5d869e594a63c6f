//! Deque benchmarks.
fn main() {}
