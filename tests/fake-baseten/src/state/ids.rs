//! Ids handed out by the fake, shaped like the platform's.

use std::collections::BTreeSet;

/// Ids like the platform's: short, lower-case alphanumeric, no hyphens (the
/// inference host `model-{id}-{env}` relies on that).
#[derive(Debug)]
pub(super) struct IdGen {
    state: u64,
    used: BTreeSet<String>,
}

impl IdGen {
    pub(super) fn new(seed: u64) -> Self {
        Self {
            state: seed ^ 0x5eed_ba5e_7e11_0000,
            used: BTreeSet::new(),
        }
    }

    pub(super) fn next(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        loop {
            // splitmix64 step
            self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let mut id = String::with_capacity(len);
            // A letter first keeps ids from looking like numbers in YAML/JSON.
            id.push(ALPHABET[10 + (z % 26) as usize] as char);
            z /= 26;
            for _ in 1..len {
                id.push(ALPHABET[(z % 36) as usize] as char);
                z /= 36;
            }
            if self.used.insert(id.clone()) {
                return id;
            }
        }
    }

    pub(super) fn reserve(&mut self, id: &str) {
        self.used.insert(id.to_string());
    }
}
