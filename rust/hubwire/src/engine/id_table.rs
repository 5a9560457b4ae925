//! The calls this side started, by id: a table indexed by the id itself.
//!
//! This side chooses its own call ids ([`CallTable::alloc_id`](super::calls::CallTable::alloc_id)),
//! so it chooses only ids whose slot is free. An id's slot is `(id / 2) mod
//! capacity` (one side's ids share a parity, so halving puts consecutive
//! ids in consecutive slots). Finding a call is then one index and one
//! compare: no hashing, no probing, no control bytes to keep. In a
//! `HashMap` the insert alone took ~5 % of a pipelining client's CPU
//! samples (`perf record`, 16 B calls on a Unix socket, window 256); this
//! table does a call in ~120 fewer instructions (callgrind, both sides;
//! bench/README.md round 11).
//!
//! The table doubles before it is half full, so at least half of the
//! slots are free whenever an id is chosen, and the next free one is
//! usually the next id's (calls finish roughly in the order they started).
//! It never shrinks: its size follows the most calls this side had in
//! flight at once, which `max_calls` bounds.

/// Values by call id, each id in its own slot (see the module doc).
pub(crate) struct IdTable<V> {
    slots: Vec<Option<(u32, V)>>,
    len: usize,
}

/// Slots of a new table: 8 calls in flight before it first grows.
const FIRST_SLOTS: usize = 16;

impl<V> Default for IdTable<V> {
    fn default() -> Self {
        IdTable { slots: empty(FIRST_SLOTS), len: 0 }
    }
}

fn empty<V>(n: usize) -> Vec<Option<(u32, V)>> {
    std::iter::repeat_with(|| None).take(n).collect()
}

impl<V> IdTable<V> {
    fn index(&self, id: u32) -> usize {
        (id as usize >> 1) & (self.slots.len() - 1)
    }

    /// Makes room for one more value: after this, at least half of the
    /// slots are free. Call before choosing the id to insert, since an
    /// id's slot depends on the table's size.
    pub(crate) fn reserve_one(&mut self) {
        if (self.len + 1) * 2 > self.slots.len() {
            let bigger = empty(self.slots.len() * 2);
            let old = std::mem::replace(&mut self.slots, bigger);
            // Two ids that share a slot in the larger table shared one in
            // the smaller: none do.
            for (id, v) in old.into_iter().flatten() {
                let i = self.index(id);
                debug_assert!(self.slots[i].is_none());
                self.slots[i] = Some((id, v));
            }
        }
    }

    /// Whether `id`'s slot is free, so that `id` may be inserted.
    pub(crate) fn is_free(&self, id: u32) -> bool {
        self.slots[self.index(id)].is_none()
    }

    /// Inserts `v` under `id`, whose slot must be free ([`IdTable::is_free`]).
    pub(crate) fn insert(&mut self, id: u32, v: V) {
        let i = self.index(id);
        assert!(self.slots[i].is_none(), "call id {id}: its slot is taken (ids must come from alloc_id)");
        self.slots[i] = Some((id, v));
        self.len += 1;
    }

    /// The value under `id`.
    pub(crate) fn get(&self, id: u32) -> Option<&V> {
        match &self.slots[self.index(id)] {
            Some((k, v)) if *k == id => Some(v),
            _ => None,
        }
    }

    /// Takes the value under `id` out.
    pub(crate) fn remove(&mut self, id: u32) -> Option<V> {
        let i = self.index(id);
        match &self.slots[i] {
            Some((k, _)) if *k == id => {
                self.len -= 1;
                self.slots[i].take().map(|(_, v)| v)
            }
            _ => None,
        }
    }

    /// How many values it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ids it holds, in no particular order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().flatten().map(|(id, _)| *id)
    }

    /// Takes every value out.
    pub(crate) fn take_all(&mut self) -> Vec<V> {
        self.len = 0;
        self.slots.iter_mut().filter_map(|s| s.take().map(|(_, v)| v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Picks the next free id from `next` on, as `alloc_id` does.
    fn next_free(t: &mut IdTable<u32>, next: &mut u32) -> u32 {
        t.reserve_one();
        loop {
            let id = *next;
            *next = next.wrapping_add(2);
            if t.is_free(id) {
                return id;
            }
        }
    }

    #[test]
    fn values_are_found_by_id_and_taken_out_once() {
        let mut t = IdTable::default();
        t.insert(1, 10);
        t.insert(3, 30);
        assert_eq!((t.get(1), t.get(3), t.get(5), t.len()), (Some(&10), Some(&30), None, 2));
        // 33 shares 1's slot in a 16-slot table, and is not 1.
        assert_eq!(t.get(33), None);
        assert_eq!(t.remove(33), None);
        assert!(!t.is_free(33));
        assert_eq!(t.remove(1), Some(10));
        assert_eq!((t.remove(1), t.len()), (None, 1));
        assert!(t.is_free(33));
        assert_eq!(t.take_all(), vec![30]);
        assert!(t.is_empty());
    }

    #[test]
    fn it_grows_before_half_full_and_keeps_every_value() {
        let (mut t, mut next) = (IdTable::default(), 1u32);
        let ids: Vec<u32> = (0..1000)
            .map(|n| {
                let id = next_free(&mut t, &mut next);
                t.insert(id, n);
                assert!(t.len() * 2 <= t.slots.len(), "over half full at {} values", t.len());
                id
            })
            .collect();
        assert_eq!(t.slots.len(), 2048);
        for (n, id) in ids.iter().enumerate() {
            assert_eq!(t.get(*id), Some(&(n as u32)));
        }
        let mut held: Vec<u32> = t.ids().collect();
        held.sort_unstable();
        let mut want = ids.clone();
        want.sort_unstable();
        assert_eq!(held, want);
    }

    #[test]
    fn a_slow_call_keeps_its_slot_and_later_ids_skip_it() {
        // 256 in flight, answered in order except one that never answers:
        // the ids go round the table and step over its slot, and no id is
        // given out twice while the slow one is held.
        let (mut t, mut next) = (IdTable::default(), 1u32);
        let slow = next_free(&mut t, &mut next);
        t.insert(slow, 0);
        let mut in_flight = std::collections::VecDeque::new();
        for n in 1..20_000u32 {
            let id = next_free(&mut t, &mut next);
            assert_ne!(id, slow);
            t.insert(id, n);
            in_flight.push_back(id);
            if in_flight.len() == 256 {
                let done = in_flight.pop_front().unwrap();
                assert!(t.remove(done).is_some());
            }
        }
        assert_eq!(t.get(slow), Some(&0));
        assert_eq!(t.len(), 256);
        assert_eq!(t.slots.len(), 1024, "the table settles at the size 256 in flight need");
    }

    #[test]
    fn ids_that_wrap_past_the_top_keep_their_slots() {
        let mut t = IdTable::default();
        let top = u32::MAX; // odd: the dialer's last id
        t.insert(top, 1);
        t.insert(1, 2);
        assert_eq!((t.get(top), t.get(1)), (Some(&1), Some(&2)));
        for _ in 0..10 {
            t.reserve_one();
            t.insert(next_free_from(&t, 3), 0);
        }
        assert_eq!((t.get(top), t.get(1)), (Some(&1), Some(&2)));
    }

    fn next_free_from(t: &IdTable<u32>, mut id: u32) -> u32 {
        while !t.is_free(id) {
            id = id.wrapping_add(2);
        }
        id
    }
}
