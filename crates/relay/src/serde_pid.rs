//! [`Pid`] as serde data, behind the `serde` feature.
//!
//! `Pid` is defined by `stepsched-process`, which has no serde dependency,
//! so the impls live here as helpers rather than on `Pid` itself:
//!
//! - the module's [`serialize`] and [`deserialize`] for a `Pid` field:
//!   `#[serde(with = "stepsched_relay::serde_pid")]`;
//! - [`option`] for an `Option<Pid>` field:
//!   `#[serde(with = "stepsched_relay::serde_pid::option")]`;
//! - [`WirePid`], a newtype that is `Serialize + Deserialize`, where a
//!   type rather than an attribute is needed (a map key, a generic).
//!
//! # Format
//!
//! In a binary format (postcard, bincode: `is_human_readable() == false`)
//! a PID is the pair `(node: u32, number: u64)`; postcard writes it as two
//! varints, 2 bytes for `<0.1>`. In a human-readable format (JSON, TOML)
//! it is the string `"<node.number>"` of its `Display` form, and parses
//! back with its `FromStr` (which also takes the bare `node.number`).
//!
//! # Examples
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use stepsched_relay::Pid;
//!
//! #[derive(Serialize, Deserialize, PartialEq, Debug)]
//! struct Envelope {
//!     #[serde(with = "stepsched_relay::serde_pid")]
//!     to: Pid,
//!     #[serde(with = "stepsched_relay::serde_pid::option")]
//!     from: Option<Pid>,
//! }
//!
//! let e = Envelope { to: Pid::new(2, 7), from: None };
//! let bytes = postcard::to_stdvec(&e).unwrap();
//! assert_eq!(bytes, [2, 7, 0]);
//! assert_eq!(postcard::from_bytes::<Envelope>(&bytes).unwrap(), e);
//! ```

use core::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeTuple, Serializer};
use serde::{Deserialize, Serialize};

use crate::Pid;

/// Serializes `pid`: `(node, number)` in a binary format, `"<node.number>"`
/// in a human-readable one.
///
/// # Errors
///
/// Whatever the serializer reports.
pub fn serialize<S: Serializer>(pid: &Pid, serializer: S) -> Result<S::Ok, S::Error> {
    if serializer.is_human_readable() {
        serializer.collect_str(pid)
    } else {
        let mut t = serializer.serialize_tuple(2)?;
        t.serialize_element(&pid.node())?;
        t.serialize_element(&pid.number())?;
        t.end()
    }
}

/// Deserializes a PID written by [`serialize`].
///
/// # Errors
///
/// Whatever the deserializer reports, or an invalid-value error for a
/// string that is not a PID.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Pid, D::Error> {
    if deserializer.is_human_readable() {
        deserializer.deserialize_str(PidVisitor)
    } else {
        deserializer.deserialize_tuple(2, PidVisitor)
    }
}

struct PidVisitor;

impl<'de> Visitor<'de> for PidVisitor {
    type Value = Pid;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a pid: `<node.number>` or a (node, number) pair")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Pid, E> {
        v.parse()
            .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Pid, A::Error> {
        let node: u32 = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let number: u64 = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok(Pid::new(node, number))
    }
}

/// The same format for an `Option<Pid>` field:
/// `#[serde(with = "stepsched_relay::serde_pid::option")]`.
pub mod option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::WirePid;
    use crate::Pid;

    /// Serializes `pid` as an option of [`super::serialize`]'s format.
    ///
    /// # Errors
    ///
    /// Whatever the serializer reports.
    pub fn serialize<S: Serializer>(pid: &Option<Pid>, serializer: S) -> Result<S::Ok, S::Error> {
        pid.map(WirePid).serialize(serializer)
    }

    /// Deserializes what [`serialize`] wrote.
    ///
    /// # Errors
    ///
    /// Whatever the deserializer reports.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Pid>, D::Error> {
        Ok(Option::<WirePid>::deserialize(deserializer)?.map(|w| w.0))
    }
}

/// A [`Pid`] that is `Serialize + Deserialize`, in the module's format.
///
/// ```
/// use stepsched_relay::Pid;
/// use stepsched_relay::serde_pid::WirePid;
///
/// let bytes = postcard::to_stdvec(&WirePid(Pid::new(1, 300))).unwrap();
/// assert_eq!(bytes, [1, 0xac, 0x02]);
/// let back: Pid = postcard::from_bytes::<WirePid>(&bytes).unwrap().into();
/// assert_eq!(back, Pid::new(1, 300));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WirePid(pub Pid);

impl From<Pid> for WirePid {
    fn from(pid: Pid) -> Self {
        WirePid(pid)
    }
}

impl From<WirePid> for Pid {
    fn from(wire: WirePid) -> Self {
        wire.0
    }
}

impl Serialize for WirePid {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize(&self.0, serializer)
    }
}

impl<'de> Deserialize<'de> for WirePid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize(deserializer).map(WirePid)
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Both {
        #[serde(with = "crate::serde_pid")]
        to: Pid,
        #[serde(with = "crate::serde_pid::option")]
        from: Option<Pid>,
    }

    #[test]
    fn postcard_round_trips_extremes() {
        for pid in [
            Pid::new(0, 0),
            Pid::new(0, 1),
            Pid::new(u32::MAX, u64::MAX),
            Pid::new(7, 1 << 40),
        ] {
            for from in [None, Some(pid), Some(Pid::new(3, 4))] {
                let v = Both { to: pid, from };
                let bytes = postcard::to_stdvec(&v).unwrap();
                assert_eq!(postcard::from_bytes::<Both>(&bytes).unwrap(), v);
            }
        }
    }

    #[test]
    fn binary_form_is_node_then_number() {
        // Swapping the two fields would still round-trip; the bytes show
        // the order.
        let bytes = postcard::to_stdvec(&WirePid(Pid::new(5, 9))).unwrap();
        assert_eq!(bytes, [5, 9]);
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        let bytes = postcard::to_stdvec(&WirePid(Pid::new(5, 1 << 20))).unwrap();
        for cut in 0..bytes.len() {
            assert!(postcard::from_bytes::<WirePid>(&bytes[..cut]).is_err());
        }
    }

    #[test]
    fn human_readable_visitor_parses_the_display_form() {
        let v: Result<Pid, de::value::Error> = PidVisitor.visit_str("<4.2>");
        assert_eq!(v.unwrap(), Pid::new(4, 2));
        let bad: Result<Pid, de::value::Error> = PidVisitor.visit_str("4-2");
        assert!(bad.is_err());
    }
}
