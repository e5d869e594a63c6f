//! A planted ordering bug (see `examples/lost_increment/counter.rs`),
//! found by searching seeds, and its fix found clean on the same seeds.

#[path = "../examples/lost_increment/counter.rs"]
mod counter;

use counter::final_count;

const SEEDS: u64 = 1000;

#[test]
fn the_lost_increment_is_found_within_1000_seeds() {
    let start = stepsched_sim::seed_from_env(0);
    let found = (start..start + SEEDS).find(|&seed| final_count(seed, false).0 != 2);
    let Some(seed) = found else {
        panic!("no lost increment in seeds {start}..{}", start + SEEDS);
    };
    let (count, trace) = final_count(seed, false);
    println!("lost increment at seed {seed} (STEPSCHED_SIM_SEED={seed}):\n{trace}");
    assert_eq!(count, 1, "seed {seed}");
    // Replaying the seed replays the bug.
    assert_eq!(final_count(seed, false), (count, trace));
}

#[test]
fn most_seeds_do_not_lose_the_increment() {
    let lost = (0..SEEDS)
        .filter(|&seed| final_count(seed, false).0 != 2)
        .count();
    assert!(lost > 0, "no seed lost the increment");
    assert!(
        lost < 100,
        "{lost} of {SEEDS} seeds lost it: the bug should need the rare delay"
    );
}

#[test]
fn the_fixed_counter_loses_nothing_on_any_seed() {
    for seed in 0..SEEDS {
        let (count, trace) = final_count(seed, true);
        assert_eq!(count, 2, "seed {seed}:\n{trace}");
    }
}
