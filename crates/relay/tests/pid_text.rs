//! Property tests of the text form of `Pid` and of its ordering.

use proptest::prelude::*;
use stepsched_relay::Pid;

proptest! {
    /// `Display` then `FromStr` gives the same `Pid`, with and without the
    /// angle brackets.
    #[test]
    fn display_parse_round_trip(node in any::<u32>(), number in any::<u64>()) {
        let pid = Pid::new(node, number);
        let text = pid.to_string();
        prop_assert_eq!(text.parse::<Pid>(), Ok(pid));
        prop_assert_eq!(text.trim_start_matches('<').trim_end_matches('>').parse::<Pid>(), Ok(pid));
        prop_assert_eq!(format!("{pid:?}"), text);
    }

    /// Parsing arbitrary text never panics, and whatever parses prints back
    /// to a string that parses to the same `Pid`.
    #[test]
    fn parse_is_total(text in "\\PC{0,24}") {
        if let Ok(pid) = text.parse::<Pid>() {
            prop_assert_eq!(pid.to_string().parse::<Pid>(), Ok(pid));
        }
    }

    /// Near-misses of the text form are refused.
    #[test]
    fn malformed_is_refused(node in any::<u32>(), number in any::<u64>(), junk in "[^0-9.]") {
        let candidates = [
            format!("<{node}{junk}{number}>"),
            format!("<{node}.{number}{junk}>"),
            format!("<{junk}{node}.{number}>"),
            format!("<{node}.{number}"),
            format!("{node}.{number}>"),
        ];
        for candidate in candidates {
            prop_assert!(candidate.parse::<Pid>().is_err(), "{:?} parsed", candidate);
        }
    }

    /// `Ord` is the order of `(node, number)`.
    #[test]
    fn order_is_node_then_number(a in any::<(u32, u64)>(), b in any::<(u32, u64)>()) {
        prop_assert_eq!(Pid::new(a.0, a.1).cmp(&Pid::new(b.0, b.1)), a.cmp(&b));
    }
}
