//! A/B groups (the seed's section 19): a session's group is a pure function of its id and
//! project, `murmur3(sessionId + ":" + projectId) % 100`, so the app, the worker and the
//! metrics agree without storing anything first. 5 % control (no injection), 10 % passive
//! only (system prompt and initial message), 85 % full.
//!
//! The hash is MurmurHash3 x86 32-bit with seed 0 over the UTF-8 bytes, the same as the
//! `murmurhash` npm package (2.x) the seed calls: `murmurhash("hello") === 613153351`.

use serde::{Deserialize, Serialize};

/// Which memory injection a session gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AbGroup {
    /// No injection (5 %): the baseline the metrics compare against.
    #[serde(rename = "control")]
    Control,
    /// Passive injection only: system prompt and initial message (10 %).
    #[serde(rename = "passive")]
    PassiveOnly,
    /// All four injection tiers (85 %).
    #[serde(rename = "full")]
    Full,
}

impl AbGroup {
    /// The stored / JS string.
    pub fn as_str(self) -> &'static str {
        match self {
            AbGroup::Control => "control",
            AbGroup::PassiveOnly => "passive",
            AbGroup::Full => "full",
        }
    }

    /// Whether the session receives injections mid-session (step injection, tool-result
    /// augmentation).
    pub fn active_injection(self) -> bool {
        self == AbGroup::Full
    }
}

/// The group of a session in a project.
pub fn assign(session_id: &str, project_id: &str) -> AbGroup {
    let key = format!("{session_id}:{project_id}");
    match murmur3_32(key.as_bytes(), 0) % 100 {
        0..=4 => AbGroup::Control,
        5..=14 => AbGroup::PassiveOnly,
        _ => AbGroup::Full,
    }
}

/// MurmurHash3, x86 32-bit.
pub fn murmur3_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &b) in tail.iter().enumerate() {
            k |= u32::from(b) << (8 * i);
        }
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_murmurhash_npm_package() {
        // Values printed by `require('murmurhash')(s)` (murmurhash 2.0.1).
        assert_eq!(murmur3_32(b"hello", 0), 613_153_351);
        assert_eq!(murmur3_32(b"", 0), 0);
        assert_eq!(
            murmur3_32(b"The quick brown fox jumps over the lazy dog", 0),
            776_992_547
        );
        assert_eq!(murmur3_32("héllo".as_bytes(), 0), 3_164_577_896);
        assert_eq!(murmur3_32(b"session-1:default", 0) % 100, 68);
        assert_eq!(murmur3_32(b"s-42:proj", 0) % 100, 49);
    }

    #[test]
    fn groups_split_five_ten_eighty_five() {
        let mut counts = [0u32; 3];
        for i in 0..20_000 {
            let g = assign(&format!("session-{i}"), "p");
            counts[g as usize] += 1;
        }
        // Binomial spread at n = 20,000 is well under 1 point.
        assert!((800..1200).contains(&counts[0]), "{counts:?}");
        assert!((1700..2300).contains(&counts[1]), "{counts:?}");
        assert!((16_500..17_500).contains(&counts[2]), "{counts:?}");
    }
}
