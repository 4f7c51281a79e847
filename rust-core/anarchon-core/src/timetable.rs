//! The timetable of one scheduler: every job's next slot in a min-heap keyed
//! by fire time (slot + jitter), so a wake-up costs O(k log n) for k due jobs,
//! whatever the number of jobs that are not due.
//!
//! A job may be taken a little before its fire time (its `lead_ms`, at most a
//! quarter of the gap to its next slot): the scheduler claims it ahead and
//! starts the handler at `fire_at` (docs/scaling.md, "Claiming ahead").

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::jitter::jitter_ms;
use crate::schedule::Schedule;

/// One `(job, slot)` that is due, with the time its instance should claim it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub job: String,
    pub slot: i64,
    pub fire_at: i64,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    slot: i64,
    fire_at: i64,
    /// When the slot is taken: `fire_at` less the job's lead.
    take_at: i64,
    following: Option<i64>,
}

#[derive(Debug)]
struct Entry {
    name: String,
    schedule: Schedule,
    jitter_ms: i64,
    lead_ms: i64,
    generation: u64,
    pending: Option<Pending>,
}

/// Heap key: (take_at, slot, entry index, generation). Entries whose
/// generation no longer matches are stale (job removed or replaced) and are
/// dropped when they reach the top.
type HeapKey = Reverse<(i64, i64, usize, u64)>;

/// The next slot of every job of one instance.
#[derive(Debug)]
pub struct Timetable {
    instance_id: String,
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
    by_name: HashMap<String, usize>,
    heap: BinaryHeap<HeapKey>,
    next_generation: u64,
}

impl Timetable {
    pub fn new(instance_id: impl Into<String>) -> Self {
        Self {
            instance_id: instance_id.into(),
            entries: Vec::new(),
            free: Vec::new(),
            by_name: HashMap::new(),
            heap: BinaryHeap::new(),
            next_generation: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn contains(&self, job: &str) -> bool {
        self.by_name.contains_key(job)
    }

    fn pending_for(
        &self,
        job: &str,
        schedule: &Schedule,
        jitter: i64,
        lead: i64,
        slot: Option<i64>,
    ) -> Option<Pending> {
        let slot = slot?;
        let following = schedule.next_after(slot);
        let gap = following.map_or(i64::MAX, |f| f.saturating_sub(slot));
        let delay = jitter_ms(&self.instance_id, job, slot, jitter, gap);
        // The delay is below half the gap to the next slot, so this only
        // saturates for a last slot within `jitter` of i64::MAX: it
        // then fires at i64::MAX, the latest instant there is.
        let fire_at = slot.saturating_add(delay);
        Some(Pending {
            slot,
            fire_at,
            take_at: fire_at.saturating_sub(lead.clamp(0, gap / 4)),
            following,
        })
    }

    /// Add a job, or replace the job of the same name.
    ///
    /// Its first slot is the latest one in `[now_ms - lookback_ms, now_ms]`
    /// (a slot still inside `max_late` is claimed normally), else the first
    /// slot after `now_ms`. Each slot is taken `lead_ms` before its fire time
    /// (at most a quarter of the gap to the slot after it; 0: at its fire time).
    pub fn add(
        &mut self,
        job: &str,
        schedule: Schedule,
        jitter_ms: i64,
        now_ms: i64,
        lookback_ms: i64,
        lead_ms: i64,
    ) {
        self.remove(job);
        let first = schedule
            .latest_between(now_ms.saturating_sub(lookback_ms.max(0)), now_ms)
            .or_else(|| schedule.next_after(now_ms));
        let pending = self.pending_for(job, &schedule, jitter_ms, lead_ms, first);
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1);
        let entry = Entry {
            name: job.to_owned(),
            schedule,
            jitter_ms,
            lead_ms,
            generation,
            pending,
        };
        let index = match self.free.pop() {
            Some(index) => {
                self.entries[index] = Some(entry);
                index
            }
            None => {
                self.entries.push(Some(entry));
                self.entries.len() - 1
            }
        };
        self.by_name.insert(job.to_owned(), index);
        if let Some(p) = pending {
            self.heap
                .push(Reverse((p.take_at, p.slot, index, generation)));
        }
    }

    /// Remove a job; true if it was there.
    pub fn remove(&mut self, job: &str) -> bool {
        let Some(index) = self.by_name.remove(job) else {
            return false;
        };
        self.entries[index] = None;
        self.free.push(index);
        if self.heap.len() > 64 && self.heap.len() > 2 * self.by_name.len() {
            self.compact();
        }
        true
    }

    fn compact(&mut self) {
        let entries = &self.entries;
        self.heap.retain(|Reverse((_, _, index, generation))| {
            matches!(&entries[*index], Some(e) if e.generation == *generation)
        });
    }

    fn is_live(&self, index: usize, generation: u64) -> bool {
        matches!(&self.entries[index], Some(e) if e.generation == generation)
    }

    /// The next `(slot, fire_at)` of a job.
    pub fn next_of(&self, job: &str) -> Option<(i64, i64)> {
        let index = *self.by_name.get(job)?;
        let p = self.entries[index].as_ref()?.pending?;
        Some((p.slot, p.fire_at))
    }

    /// The earliest time any job is to be taken (its fire time less its lead), for the next wake-up.
    pub fn next_wakeup(&mut self) -> Option<i64> {
        while let Some(Reverse((take_at, _, index, generation))) = self.heap.peek().copied() {
            if self.is_live(index, generation) {
                return Some(take_at);
            }
            self.heap.pop();
        }
        None
    }

    /// Every `(job, slot)` to be taken at or before `now_ms` (its fire time
    /// less its lead), in that order, at most `limit`; each returned job moves
    /// on to its next slot.
    pub fn due(&mut self, now_ms: i64, limit: usize) -> Vec<Due> {
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(Reverse((take_at, slot, index, generation))) = self.heap.peek().copied()
            else {
                break;
            };
            if !self.is_live(index, generation) {
                self.heap.pop();
                continue;
            }
            if take_at > now_ms {
                break;
            }
            self.heap.pop();
            let Some(entry) = self.entries[index].take() else {
                continue;
            };
            let fire_at = entry.pending.map_or(take_at, |p| p.fire_at);
            let following = entry.pending.and_then(|p| p.following);
            let pending = self.pending_for(
                &entry.name,
                &entry.schedule,
                entry.jitter_ms,
                entry.lead_ms,
                following,
            );
            out.push(Due {
                job: entry.name.clone(),
                slot,
                fire_at,
            });
            if let Some(p) = pending {
                self.heap
                    .push(Reverse((p.take_at, p.slot, index, generation)));
            }
            self.entries[index] = Some(Entry { pending, ..entry });
        }
        out
    }

    /// How many jobs are due by `now_ms`, found by looking at every job: the
    /// cost a timetable without a heap would pay (for benchmarks).
    pub fn scan_due_count(&self, now_ms: i64) -> usize {
        self.entries
            .iter()
            .flatten()
            .filter(|e| e.pending.is_some_and(|p| p.fire_at <= now_ms))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interval::Every;

    fn every(ms: i64) -> Schedule {
        Schedule::Every(Every::new(ms, 0).unwrap())
    }

    #[test]
    fn returns_due_jobs_in_order_and_advances() {
        let mut t = Timetable::new("i");
        t.add("a", every(1_000), 0, 500, 0, 0);
        t.add("b", every(3_000), 0, 500, 0, 0);
        assert_eq!(t.next_wakeup(), Some(1_000));
        assert!(t.due(999, usize::MAX).is_empty());
        let due = t.due(3_000, usize::MAX);
        let pairs: Vec<(&str, i64)> = due.iter().map(|d| (d.job.as_str(), d.slot)).collect();
        assert_eq!(
            pairs,
            vec![("a", 1_000), ("a", 2_000), ("a", 3_000), ("b", 3_000)]
        );
        assert_eq!(t.next_wakeup(), Some(4_000));
        assert_eq!(t.next_of("b"), Some((6_000, 6_000)));
    }

    #[test]
    fn lookback_picks_latest_recent_slot() {
        let mut t = Timetable::new("i");
        t.add("a", every(1_000), 0, 5_500, 2_000, 0);
        assert_eq!(t.next_of("a"), Some((5_000, 5_000)));
        t.add("b", every(10_000), 0, 5_500, 2_000, 0);
        assert_eq!(t.next_of("b"), Some((10_000, 10_000)));
    }

    #[test]
    fn remove_and_replace() {
        let mut t = Timetable::new("i");
        t.add("a", every(1_000), 0, 1, 0, 0);
        t.add("b", every(1_000), 0, 1, 0, 0);
        assert!(t.remove("a"));
        assert!(!t.remove("a"));
        let due: Vec<String> = t
            .due(1_000, usize::MAX)
            .into_iter()
            .map(|d| d.job)
            .collect();
        assert_eq!(due, vec!["b".to_owned()]);
        t.add("b", every(5_000), 0, 1_000, 0, 0);
        assert_eq!(t.len(), 1);
        assert_eq!(t.next_wakeup(), Some(5_000));
        assert!(t.due(4_999, usize::MAX).is_empty());
    }

    #[test]
    fn jitter_delays_fire_but_keeps_slot() {
        let mut t = Timetable::new("i");
        t.add("a", every(10_000), 2_000, 1, 0, 0);
        let (slot, fire_at) = t.next_of("a").unwrap();
        assert_eq!(slot, 10_000);
        assert!((10_000..12_000).contains(&fire_at));
        let due = t.due(fire_at, usize::MAX);
        assert_eq!(
            due,
            vec![Due {
                job: "a".into(),
                slot: 10_000,
                fire_at
            }]
        );
    }

    #[test]
    fn limit_bounds_one_call() {
        let mut t = Timetable::new("i");
        for i in 0..100 {
            t.add(&format!("j{i}"), every(1_000), 0, 1, 0, 0);
        }
        assert_eq!(t.due(1_000, 30).len(), 30);
        assert_eq!(t.due(1_000, usize::MAX).len(), 70);
        assert_eq!(t.scan_due_count(1_000), 0);
        assert_eq!(t.scan_due_count(2_000), 100);
    }

    #[test]
    fn extreme_times_do_not_overflow() {
        let mut t = Timetable::new("i");
        t.add("a", every(1), 0, i64::MAX - 2, i64::MAX, 0);
        assert_eq!(t.next_of("a"), Some((i64::MAX - 2, i64::MAX - 2)));
        let slots: Vec<i64> = t.due(i64::MAX, 10).into_iter().map(|d| d.slot).collect();
        assert_eq!(slots, vec![i64::MAX - 2, i64::MAX - 1, i64::MAX]);
        assert_eq!(t.next_wakeup(), None);
        assert!(t.due(i64::MAX, 10).is_empty());
        // A last slot with a jitter past i64::MAX fires at i64::MAX.
        t.add("b", every(i64::MAX), i64::MAX, i64::MAX - 1, 0, 0);
        let (slot, fire_at) = t.next_of("b").unwrap();
        assert_eq!(slot, i64::MAX);
        assert_eq!(fire_at, i64::MAX);
        // From i64::MIN with any lookback, the first slot is found.
        t.add("c", every(1_000), i64::MIN, i64::MIN, i64::MAX, 0);
        assert_eq!(
            t.next_of("c"),
            Some((-9_223_372_036_854_775_000, -9_223_372_036_854_775_000))
        );
        t.add("d", every(1_000), 0, i64::MIN, i64::MIN, 0);
        assert_eq!(
            t.next_of("d").map(|p| p.0),
            Some(-9_223_372_036_854_775_000)
        );
        assert_eq!(t.scan_due_count(i64::MIN), 0);
        assert_eq!(t.scan_due_count(i64::MAX), 3);
    }

    #[test]
    fn many_removals_compact_heap() {
        let mut t = Timetable::new("i");
        for i in 0..1_000 {
            t.add(&format!("j{i}"), every(1_000), 0, 1, 0, 0);
        }
        for i in 0..990 {
            t.remove(&format!("j{i}"));
        }
        assert!(t.heap.len() <= 2 * 1_000);
        assert_eq!(t.due(1_000, usize::MAX).len(), 10);
    }

    #[test]
    fn lead_takes_slots_early_but_keeps_their_fire_time() {
        let mut t = Timetable::new("i");
        // every 10 s with a 1 s lead: taken at 9 s, fires at 10 s.
        t.add("a", every(10_000), 0, 1, 0, 1_000);
        // every 1 s: the lead is capped at a quarter of the gap (250 ms).
        t.add("b", every(1_000), 0, 1, 0, 1_000);
        assert_eq!(t.next_wakeup(), Some(750));
        assert!(t.due(749, 10).is_empty());
        let due = t.due(750, 10);
        assert_eq!(
            due,
            vec![Due {
                job: "b".into(),
                slot: 1_000,
                fire_at: 1_000
            }]
        );
        assert_eq!(t.next_of("b"), Some((2_000, 2_000)));
        let slots: Vec<(String, i64, i64)> = t
            .due(9_000, 100)
            .into_iter()
            .map(|d| (d.job, d.slot, d.fire_at))
            .collect();
        assert!(slots.contains(&("a".into(), 10_000, 10_000)));
        assert!(!slots.iter().any(|(_, slot, _)| *slot > 10_000));
        // A negative lead means none.
        t.add("c", every(1_000), 0, 1, 0, -5);
        assert_eq!(t.next_of("c"), Some((1_000, 1_000)));
        assert!(t.due(999, 10).iter().all(|d| d.job != "c"));
    }
}
