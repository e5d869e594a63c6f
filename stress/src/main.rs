//! Stress scenarios for stepsched.
fn main() {}
