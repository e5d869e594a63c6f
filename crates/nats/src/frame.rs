//! The wire format: one NATS message is one frame.
//!
//! Every frame on a node subject opens with a fixed 21-byte header, then a
//! postcard body:
//!
//! ```text
//! byte 0      kind        1 message, 2 dead-letter notice, 3 confirmed message, 4 reply, 5 probe,
//!                         6 credit, 7 credit request
//! bytes 1..5  origin      the sending node, u32 little-endian
//! bytes 5..13 incarnation the sending node's run, u64 little-endian (random per start)
//! bytes 13..21 sequence   per (origin, incarnation, destination), from 1; 0 = unsequenced
//! bytes 21..  body        postcard: Envelope (kinds 1, 3), Notice (kind 2), a status byte (kind 4),
//!                         the credited run's incarnation, u64 little-endian (kind 6)
//! ```
//!
//! A credit (kind 6) goes from a receiving node back to a sender: its
//! sequence field is the highest sequence number of that sender's run (the
//! incarnation in its body) up to which every message is *released*:
//! queued for a process that is not over the receive limit, undeliverable,
//! or lost. A credit request (kind 7) is a sequenced frame without a body
//! that a sender whose window is full queues behind its messages: the
//! receiver counts it like a message (so frames lost before it become
//! gaps) and answers with a credit at once.
//!
//! With a cluster key, every frame (membership frames and replies too)
//! ends with a 16-byte keyed BLAKE3 tag over all the bytes before it (the
//! key derived from the configured one with BLAKE3's key derivation); a
//! frame whose tag is missing or wrong is dropped before anything else
//! looks at it.
//!
//! Membership frames (on the members subject) are postcard [`Beat`]s.
//! Whatever does not decode is a bad frame: counted and dropped.

use serde::{Deserialize, Serialize};
use stepsched::Pid;
use stepsched_relay::serde_pid::WirePid;

/// A message for a process.
pub(crate) const KIND_MESSAGE: u8 = 1;
/// A message could not be delivered: sent back to its origin node.
pub(crate) const KIND_NOTICE: u8 = 2;
/// A message whose sender waits for a [`KIND_REPLY`].
pub(crate) const KIND_CONFIRMED: u8 = 3;
/// The answer to a [`KIND_CONFIRMED`] frame: one [`Status`] byte.
pub(crate) const KIND_REPLY: u8 = 4;

/// "Is this node number taken?": a request on a node subject, sent by a
/// starting node before it subscribes there; answered with a reply.
pub(crate) const KIND_PROBE: u8 = 5;

/// Flow control: releases a sender's messages up to a sequence number.
pub(crate) const KIND_CREDIT: u8 = 6;

/// Flow control: a sender with a full window asks for a credit.
pub(crate) const KIND_ASK: u8 = 7;

/// Length of the tag a cluster key adds at the end of every frame: the
/// first 128 bits of the keyed BLAKE3 output (a forger's chance per try
/// is 2<sup>-128</sup>).
pub(crate) const TAG: usize = 16;

/// The key frames are tagged with: BLAKE3's key derivation over the
/// configured key material, so any length of it gives a full 32-byte key.
pub(crate) type TagKey = [u8; 32];

/// Derives the tag key from the configured key material.
pub(crate) fn tag_key(material: &[u8]) -> TagKey {
    blake3::derive_key("stepsched-nats 2026-11 frame tag", material)
}

/// The tag of `frame` under `key`.
fn tag(key: &TagKey, frame: &[u8]) -> [u8; TAG] {
    // `keyed_hash` is the short-input fast path (a `Hasher` and its XOF
    // cost half as much again on a 32-byte frame).
    let full = blake3::keyed_hash(key, frame);
    let mut tag = [0; TAG];
    tag.copy_from_slice(&full.as_bytes()[..TAG]);
    tag
}

/// Appends the keyed BLAKE3 tag of `frame` under `key` (nothing without a
/// key).
pub(crate) fn seal(key: Option<&TagKey>, frame: &mut Vec<u8>) {
    if let Some(key) = key {
        let tag = tag(key, frame);
        frame.extend_from_slice(&tag);
    }
}

/// Checks and strips the tag of `bytes` under `key`, comparing in
/// constant time; `None` if it is missing or wrong. Without a key,
/// `bytes` as they are.
pub(crate) fn open<'a>(key: Option<&TagKey>, bytes: &'a [u8]) -> Option<&'a [u8]> {
    let Some(key) = key else {
        return Some(bytes);
    };
    let (frame, got) = bytes.split_at_checked(bytes.len().checked_sub(TAG)?)?;
    let want = tag(key, frame);
    // Every byte is compared whatever the first difference: the time
    // taken says nothing of how much of a forged tag was right.
    let diff = want.iter().zip(got).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    (std::hint::black_box(diff) == 0).then_some(frame)
}

/// Length of the header.
pub(crate) const HEADER: usize = 21;
/// Where the sequence number sits in the header.
pub(crate) const SEQ_AT: usize = 13;

/// The fixed part of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: u8,
    pub(crate) origin: u32,
    pub(crate) incarnation: u64,
    pub(crate) seq: u64,
}

impl Header {
    /// Appends the header to `out`.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.push(self.kind);
        out.extend_from_slice(&self.origin.to_le_bytes());
        out.extend_from_slice(&self.incarnation.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
    }

    /// Splits `bytes` into a header and the body, or `None` if too short.
    pub(crate) fn read(bytes: &[u8]) -> Option<(Header, &[u8])> {
        let (head, body) = bytes.split_at_checked(HEADER)?;
        let u32_at = |i: usize| u32::from_le_bytes(head[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().expect("8 bytes"));
        Some((
            Header {
                kind: head[0],
                origin: u32_at(1),
                incarnation: u64_at(5),
                seq: u64_at(SEQ_AT),
            },
            body,
        ))
    }
}

/// Writes `seq` into an encoded frame's header.
pub(crate) fn set_seq(frame: &mut [u8], seq: u64) {
    frame[SEQ_AT..SEQ_AT + 8].copy_from_slice(&seq.to_le_bytes());
}

/// The body of a message frame, borrowed for encoding.
#[derive(Serialize)]
pub(crate) struct EnvelopeRef<'a, M> {
    pub(crate) from: Option<WirePid>,
    pub(crate) to: WirePid,
    pub(crate) topic: &'a str,
    pub(crate) payload: &'a M,
}

/// The body of a message frame, owned after decoding.
#[derive(Deserialize)]
pub(crate) struct Envelope<M> {
    pub(crate) from: Option<WirePid>,
    pub(crate) to: WirePid,
    pub(crate) topic: String,
    pub(crate) payload: M,
}

/// Why a message was not delivered (a notice, or a reply's status byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[repr(u8)]
pub(crate) enum Status {
    /// Queued for the process.
    Delivered = 0,
    /// The node knows no process with this PID.
    UnknownPid = 1,
    /// The process finished.
    Closed = 2,
    /// The frame did not decode on the receiving node.
    BadFrame = 3,
}

impl Status {
    pub(crate) fn from_byte(b: u8) -> Option<Status> {
        Some(match b {
            0 => Status::Delivered,
            1 => Status::UnknownPid,
            2 => Status::Closed,
            3 => Status::BadFrame,
            _ => return None,
        })
    }
}

/// The body of a notice: a message from `from` to `to` was not delivered.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Notice {
    pub(crate) from: Option<WirePid>,
    pub(crate) to: WirePid,
    pub(crate) status: Status,
}

/// A membership frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Beat {
    /// `node` (in its run `incarnation`) is up; sent at start and then
    /// every heartbeat interval, `beat` counting up from 1 within the run
    /// (a recorded heartbeat played back is older than the last one heard,
    /// and is ignored).
    Hello {
        node: u32,
        incarnation: u64,
        beat: u64,
    },
    /// `node` leaves the cluster.
    Bye { node: u32, incarnation: u64 },
}

/// Encodes a message frame (sequence 0; the writer sets it).
pub(crate) fn encode_message<M: Serialize>(
    kind: u8,
    origin: u32,
    incarnation: u64,
    from: Option<Pid>,
    to: Pid,
    topic: &str,
    payload: &M,
) -> Result<Vec<u8>, postcard::Error> {
    let mut out = Vec::with_capacity(HEADER + 32 + TAG);
    Header {
        kind,
        origin,
        incarnation,
        seq: 0,
    }
    .write(&mut out);
    let body = EnvelopeRef {
        from: from.map(WirePid),
        to: WirePid(to),
        topic,
        payload,
    };
    // A body longer than the guess has grown the buffer already; room for
    // the tag is made now, so that sealing never moves the frame.
    let mut out = postcard::to_extend(&body, out)?;
    out.reserve(TAG);
    Ok(out)
}

/// Decodes a whole body of type `T`: trailing bytes make it a bad frame.
pub(crate) fn decode_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Option<T> {
    match postcard::take_from_bytes::<T>(body) {
        Ok((value, [])) => Some(value),
        _ => None,
    }
}

/// The longest notice body: two PIDs (an option byte, then a u32 and a u64
/// varint each, 5 and 10 bytes at most) and the status byte.
const NOTICE_MAX: usize = 1 + 2 * (5 + 10) + 1;

/// Encodes a notice frame.
pub(crate) fn encode_notice(origin: u32, incarnation: u64, notice: &Notice) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + NOTICE_MAX + TAG);
    Header {
        kind: KIND_NOTICE,
        origin,
        incarnation,
        seq: 0,
    }
    .write(&mut out);
    postcard::to_extend(notice, out).expect("a notice always encodes")
}

/// Encodes a credit frame: `released` for the sender run `to_incarnation`.
pub(crate) fn encode_credit(
    origin: u32,
    incarnation: u64,
    to_incarnation: u64,
    released: u64,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + 8 + TAG);
    Header {
        kind: KIND_CREDIT,
        origin,
        incarnation,
        seq: released,
    }
    .write(&mut out);
    out.extend_from_slice(&to_incarnation.to_le_bytes());
    out
}

/// Decodes a credit frame's body: the credited run's incarnation.
pub(crate) fn decode_credit(body: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(body.try_into().ok()?))
}

/// Encodes a credit request (sequence 0; the writer sets it).
pub(crate) fn encode_ask(origin: u32, incarnation: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + TAG);
    Header {
        kind: KIND_ASK,
        origin,
        incarnation,
        seq: 0,
    }
    .write(&mut out);
    out
}

/// Encodes a reply frame.
pub(crate) fn encode_reply(origin: u32, incarnation: u64, status: Status) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + 1 + TAG);
    Header {
        kind: KIND_REPLY,
        origin,
        incarnation,
        seq: 0,
    }
    .write(&mut out);
    out.push(status as u8);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_seq_lands_in_place() {
        let mut frame = encode_message(
            KIND_MESSAGE,
            7,
            0xdead_beef,
            None,
            Pid::new(2, 3),
            "t",
            &5u32,
        )
        .unwrap();
        set_seq(&mut frame, 42);
        let (h, body) = Header::read(&frame).unwrap();
        assert_eq!(
            h,
            Header {
                kind: KIND_MESSAGE,
                origin: 7,
                incarnation: 0xdead_beef,
                seq: 42
            }
        );
        let env: Envelope<u32> = decode_body(body).unwrap();
        assert_eq!(
            (env.to.0, env.from, env.topic.as_str(), env.payload),
            (Pid::new(2, 3), None, "t", 5)
        );
    }

    #[test]
    fn short_and_trailing_bytes_are_refused() {
        assert!(Header::read(&[1; HEADER - 1]).is_none());
        let frame = encode_message(
            KIND_MESSAGE,
            1,
            1,
            Some(Pid::new(1, 1)),
            Pid::new(2, 3),
            "",
            &5u32,
        )
        .unwrap();
        let (_, body) = Header::read(&frame).unwrap();
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(decode_body::<Envelope<u32>>(&longer).is_none());
        for cut in 0..body.len() {
            assert!(decode_body::<Envelope<u32>>(&body[..cut]).is_none());
        }
    }

    #[test]
    fn a_tag_opens_only_under_its_key_and_unchanged() {
        let key = tag_key(&[7; 32]);
        let other = tag_key(&[8; 32]);
        let mut frame = encode_reply(1, 2, Status::Delivered);
        let plain = frame.clone();
        seal(Some(&key), &mut frame);
        assert_eq!(frame.len(), plain.len() + TAG);
        assert_eq!(open(Some(&key), &frame), Some(&plain[..]));
        assert_eq!(open(Some(&other), &frame), None);
        assert_eq!(open(Some(&key), &plain), None);
        assert_eq!(open(Some(&key), &frame[..TAG - 1]), None);
        for i in 0..frame.len() {
            let mut flipped = frame.clone();
            flipped[i] ^= 1;
            assert_eq!(open(Some(&key), &flipped), None, "byte {i}");
        }
        assert_eq!(open(None, &plain), Some(&plain[..]));
    }

    #[test]
    fn sealing_fits_the_tag_in_the_frames_own_buffer() {
        // Tagging costs one keyed hash per frame and nothing else: every
        // encoder leaves room for the tag, so the seal neither allocates
        // nor copies the frame (the writer seals each message it sends),
        // whatever the PIDs and the payload.
        let key = tag_key(&[7; 32]);
        let notice = Notice {
            from: Some(WirePid(Pid::new(u32::MAX, u64::MAX))),
            to: WirePid(Pid::new(u32::MAX, u64::MAX)),
            status: Status::Closed,
        };
        let big = Pid::new(u32::MAX, u64::MAX);
        let message = |topic: &str, payload: &[u8]| {
            encode_message(KIND_MESSAGE, 1, 2, Some(big), big, topic, &payload).unwrap()
        };
        let mut frames = vec![
            message("", &[]),
            message("topic", &u64::MAX.to_le_bytes()),
            encode_notice(1, 2, &notice),
            encode_credit(1, 2, 3, u64::MAX),
            encode_ask(1, 2),
            encode_reply(1, 2, Status::Delivered),
        ];
        // Payloads around the first guess (32 body bytes) and past it.
        frames.extend((0..300).map(|n| message("t", &vec![9; n])));
        for mut frame in frames {
            let (at, room) = (frame.as_ptr(), frame.capacity());
            let len = frame.len();
            seal(Some(&key), &mut frame);
            assert_eq!(frame.len(), len + TAG);
            assert_eq!(
                (frame.as_ptr(), frame.capacity()),
                (at, room),
                "kind {} moved to a new buffer",
                frame[0]
            );
            assert!(open(Some(&key), &frame).is_some());
        }
    }

    #[test]
    fn status_bytes_round_trip() {
        for s in [
            Status::Delivered,
            Status::UnknownPid,
            Status::Closed,
            Status::BadFrame,
        ] {
            assert_eq!(Status::from_byte(s as u8), Some(s));
        }
        assert_eq!(Status::from_byte(9), None);
    }
}
