//! Searches seeds for the lost increment of a planted ordering bug (see
//! `counter.rs`) and prints the first seed that loses it, with its trace;
//! then checks the fixed counter on the same seeds.
//!
//! ```sh
//! cargo run -p stepsched-sim --example lost_increment
//! STEPSCHED_SIM_SEED=500 cargo run -p stepsched-sim --example lost_increment
//! ```

mod counter;

use counter::final_count;

fn main() {
    let start = stepsched_sim::seed_from_env(0);
    let seeds = start..start + 1000;
    match seeds.clone().find(|&seed| final_count(seed, false).0 != 2) {
        Some(seed) => {
            let (count, trace) = final_count(seed, false);
            println!("seed {seed}: the counter ends at {count}, not 2\n{trace}");
        }
        None => println!("no seed in {seeds:?} loses an increment"),
    }
    let lost = seeds
        .clone()
        .filter(|&seed| final_count(seed, true).0 != 2)
        .count();
    println!(
        "the fixed counter loses an increment on {lost} of {} seeds",
        seeds.count()
    );
}
