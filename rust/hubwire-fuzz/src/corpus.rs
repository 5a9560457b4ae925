//! The inputs worth mutating further: the seeds, and every input whose
//! outcome signature was new. Bounded: past [`MAX_ENTRIES`] a new input
//! replaces a random old one, so a long run keeps its memory flat.

use std::collections::HashSet;

use crate::rng::Rng;

/// The most inputs kept.
pub const MAX_ENTRIES: usize = 8192;

/// Inputs and the outcomes seen so far.
#[derive(Default)]
pub struct Corpus {
    entries: Vec<Vec<u8>>,
    seen: HashSet<u64>,
}

impl Corpus {
    /// Records an input's outcome; keeps the input if the outcome is new.
    /// Returns whether it was kept.
    pub fn offer(&mut self, input: &[u8], outcome: u64, rng: &mut Rng) -> bool {
        if !self.seen.insert(outcome) {
            return false;
        }
        if self.entries.len() < MAX_ENTRIES {
            self.entries.push(input.to_vec());
        } else {
            let at = rng.below(self.entries.len());
            self.entries[at] = input.to_vec();
        }
        true
    }

    /// A random input to mutate (empty if there is none yet).
    pub fn pick(&self, rng: &mut Rng) -> &[u8] {
        if self.entries.is_empty() {
            return &[];
        }
        &self.entries[rng.below(self.entries.len())]
    }

    /// Inputs kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing was kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Distinct outcomes seen.
    pub fn outcomes(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_new_outcomes_only_and_stays_bounded() {
        let (mut c, mut rng) = (Corpus::default(), Rng::new(1));
        assert!(c.offer(b"a", 1, &mut rng));
        assert!(!c.offer(b"b", 1, &mut rng));
        assert_eq!(c.len(), 1);
        for i in 2..(MAX_ENTRIES as u64 + 100) {
            c.offer(&i.to_le_bytes(), i, &mut rng);
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        assert_eq!(c.outcomes(), MAX_ENTRIES + 99);
    }
}
