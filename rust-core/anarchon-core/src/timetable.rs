//! The timetable of one scheduler: every job's next slot in a min-heap keyed
//! by fire time (slot + jitter), so a wake-up costs O(k log n) for k due jobs,
//! whatever the number of jobs that are not due.
//!
//! A job may be taken a little before its fire time (its `lead_ms`, at most a
//! quarter of the gap to its next slot): the scheduler claims it ahead and
//! starts the handler at `fire_at` (docs/scaling.md, "Claiming ahead").
//!
//! A job may also fire a fixed `delay_ms` after its slot (plus its jitter):
//! the stagger of an instance that is not the job's first candidate. The
//! slot itself is unchanged; only when it fires and is taken moves
//! (docs/engine.md, "Delays and rendezvous ranking").

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::error::ScheduleError;
use crate::jitter::jitter_ms;
use crate::schedule::Schedule;

/// The longest delay a job may fire after its slot: one day, whatever its
/// period (a delay may exceed the period; the slots still fire in order).
pub const MAX_DELAY_MS: i64 = 86_400_000;

/// How the slots of one job are timed, in ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    /// Bound of the deterministic jitter (below half the gap to the next slot).
    pub jitter_ms: i64,
    /// How long before its fire time a slot is taken (at most a quarter of
    /// the gap to the next slot; 0 or less: at its fire time).
    pub lead_ms: i64,
    /// A fixed delay after slot + jitter, `0..=MAX_DELAY_MS`.
    pub delay_ms: i64,
}

impl Timing {
    fn check(&self) -> Result<(), ScheduleError> {
        if (0..=MAX_DELAY_MS).contains(&self.delay_ms) {
            Ok(())
        } else {
            Err(ScheduleError::in_field(
                format!(
                    "delay_ms must be from 0 to {MAX_DELAY_MS} (one day), got {}",
                    self.delay_ms
                ),
                "delay_ms",
            ))
        }
    }
}

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
    timing: Timing,
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
        timing: Timing,
        slot: Option<i64>,
    ) -> Option<Pending> {
        let slot = slot?;
        let following = schedule.next_after(slot);
        let gap = following.map_or(i64::MAX, |f| f.saturating_sub(slot));
        Some(self.timed(job, timing, slot, following, gap))
    }

    /// When `slot` fires and is taken. Jitter and delay are both
    /// non-negative, so the sum only overflows for a slot within a day and a
    /// jitter of i64::MAX: it then fires at i64::MAX, the latest instant there is.
    fn timed(
        &self,
        job: &str,
        timing: Timing,
        slot: i64,
        following: Option<i64>,
        gap: i64,
    ) -> Pending {
        let jitter = jitter_ms(&self.instance_id, job, slot, timing.jitter_ms, gap);
        let fire_at = slot
            .checked_add(jitter)
            .and_then(|t| t.checked_add(timing.delay_ms))
            .unwrap_or(i64::MAX);
        Pending {
            slot,
            fire_at,
            take_at: fire_at.saturating_sub(timing.lead_ms.clamp(0, gap / 4)),
            following,
        }
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
        let timing = Timing {
            jitter_ms,
            lead_ms,
            delay_ms: 0,
        };
        self.insert(job, schedule, timing, now_ms, lookback_ms);
    }

    /// [`add`](Self::add) with every slot firing `timing.delay_ms` after its
    /// slot and jitter. The first slot is chosen by its slot, as in `add`
    /// (the look-back is not stretched by the delay), so it may fire after
    /// `now_ms` although it lies before. A delay outside `0..=MAX_DELAY_MS`
    /// is refused (field `delay_ms`) and leaves the timetable unchanged.
    pub fn add_timed(
        &mut self,
        job: &str,
        schedule: Schedule,
        timing: Timing,
        now_ms: i64,
        lookback_ms: i64,
    ) -> Result<(), ScheduleError> {
        timing.check()?;
        self.insert(job, schedule, timing, now_ms, lookback_ms);
        Ok(())
    }

    fn insert(
        &mut self,
        job: &str,
        schedule: Schedule,
        timing: Timing,
        now_ms: i64,
        lookback_ms: i64,
    ) {
        self.remove(job);
        let first = schedule
            .latest_between(now_ms.saturating_sub(lookback_ms.max(0)), now_ms)
            .or_else(|| schedule.next_after(now_ms));
        let pending = self.pending_for(job, &schedule, timing, first);
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1);
        let entry = Entry {
            name: job.to_owned(),
            schedule,
            timing,
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
        self.compact_if_stale();
        true
    }

    /// Drop the stale heap keys once they are more than half the heap.
    fn compact_if_stale(&mut self) {
        if self.heap.len() > 64 && self.heap.len() > 2 * self.by_name.len() {
            self.compact();
        }
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

    /// Change the delay of a job, keeping its next slot: that slot and the
    /// ones after it fire `delay_ms` after slot + jitter (a slot whose new
    /// fire time has passed is due at once). False if there is no such job;
    /// a delay outside `0..=MAX_DELAY_MS` is refused (field `delay_ms`).
    pub fn set_delay(&mut self, job: &str, delay_ms: i64) -> Result<bool, ScheduleError> {
        let Some(&index) = self.by_name.get(job) else {
            Timing {
                delay_ms,
                ..Timing::default()
            }
            .check()?;
            return Ok(false);
        };
        let Some(entry) = self.entries[index].as_ref() else {
            return Ok(false);
        };
        let timing = Timing {
            delay_ms,
            ..entry.timing
        };
        timing.check()?;
        if timing == entry.timing {
            return Ok(true);
        }
        let pending = entry.pending.map(|p| {
            let gap = p.following.map_or(i64::MAX, |f| f.saturating_sub(p.slot));
            self.timed(job, timing, p.slot, p.following, gap)
        });
        // A new generation: the heap key of the old fire time becomes stale.
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1);
        if let Some(entry) = self.entries[index].as_mut() {
            entry.timing = timing;
            entry.generation = generation;
            entry.pending = pending;
        }
        if let Some(p) = pending {
            self.heap
                .push(Reverse((p.take_at, p.slot, index, generation)));
        }
        self.compact_if_stale();
        Ok(true)
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
            let pending = self.pending_for(&entry.name, &entry.schedule, entry.timing, following);
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

    fn delayed(jitter_ms: i64, lead_ms: i64, delay_ms: i64) -> Timing {
        Timing {
            jitter_ms,
            lead_ms,
            delay_ms,
        }
    }

    #[test]
    fn delay_moves_fire_time_but_keeps_slot() {
        let mut t = Timetable::new("i");
        t.add_timed("a", every(10_000), delayed(0, 0, 3_000), 1, 0)
            .unwrap();
        assert_eq!(t.next_of("a"), Some((10_000, 13_000)));
        assert_eq!(t.next_wakeup(), Some(13_000));
        assert!(t.due(12_999, 10).is_empty());
        assert_eq!(t.scan_due_count(12_999), 0);
        assert_eq!(t.scan_due_count(13_000), 1);
        assert_eq!(
            t.due(13_000, 10),
            vec![Due {
                job: "a".into(),
                slot: 10_000,
                fire_at: 13_000
            }]
        );
        assert_eq!(t.next_of("a"), Some((20_000, 23_000)));
    }

    #[test]
    fn zero_delay_is_plain_add() {
        let mut plain = Timetable::new("web-1");
        let mut timed = Timetable::new("web-1");
        for (i, period) in [1_000, 7_000, 60_000, 3_600_000].into_iter().enumerate() {
            let job = format!("j{i}");
            plain.add(&job, every(period), 2_000, 123_456, 5_000, 700);
            timed
                .add_timed(&job, every(period), delayed(2_000, 700, 0), 123_456, 5_000)
                .unwrap();
        }
        for _ in 0..50 {
            assert_eq!(plain.next_wakeup(), timed.next_wakeup());
            let now = plain.next_wakeup().unwrap();
            assert_eq!(plain.due(now, 3), timed.due(now, 3));
        }
    }

    #[test]
    fn delay_adds_to_jitter_and_lead_is_taken_from_the_delayed_time() {
        let mut plain = Timetable::new("i");
        let mut timed = Timetable::new("i");
        plain.add("a", every(10_000), 2_000, 1, 0, 1_000);
        timed
            .add_timed("a", every(10_000), delayed(2_000, 1_000, 4_000), 1, 0)
            .unwrap();
        for _ in 0..20 {
            let (slot, fire_at) = plain.next_of("a").unwrap();
            assert_eq!(timed.next_of("a"), Some((slot, fire_at + 4_000)));
            let wake = plain.next_wakeup().unwrap();
            assert_eq!(wake, fire_at - 1_000);
            assert_eq!(timed.next_wakeup(), Some(wake + 4_000));
            assert!(timed.due(wake + 3_999, 10).is_empty());
            assert_eq!(timed.due(wake + 4_000, 10)[0].fire_at, fire_at + 4_000);
            plain.due(wake, 10);
        }
    }

    #[test]
    fn delay_longer_than_the_period_keeps_slots_in_order() {
        let mut t = Timetable::new("i");
        t.add_timed("a", every(1_000), delayed(400, 0, 2_500), 1, 0)
            .unwrap();
        let due = t.due(10_000, 100);
        let slots: Vec<i64> = due.iter().map(|d| d.slot).collect();
        assert_eq!(slots, (1..=7).map(|n| n * 1_000).collect::<Vec<_>>());
        for d in &due {
            assert!((d.slot + 2_500..d.slot + 2_900).contains(&d.fire_at));
        }
    }

    #[test]
    fn lookback_chooses_by_slot_not_by_delayed_fire_time() {
        let mut t = Timetable::new("i");
        // 5 000 is in [3 500, 5 500]; it fires at 8 000, after now.
        t.add_timed("a", every(1_000), delayed(0, 0, 3_000), 5_500, 2_000)
            .unwrap();
        assert_eq!(t.next_of("a"), Some((5_000, 8_000)));
        // Without a look-back the first slot is the next one, delayed.
        t.add_timed("b", every(1_000), delayed(0, 0, 3_000), 5_500, 0)
            .unwrap();
        assert_eq!(t.next_of("b"), Some((6_000, 9_000)));
    }

    #[test]
    fn delay_out_of_range_is_refused() {
        let mut t = Timetable::new("i");
        t.add("a", every(1_000), 0, 1, 0, 0);
        for bad in [-1, MAX_DELAY_MS + 1, i64::MIN, i64::MAX] {
            let err = t
                .add_timed("a", every(5_000), delayed(0, 0, bad), 1, 0)
                .unwrap_err();
            assert_eq!(err.field.as_deref(), Some("delay_ms"));
            assert_eq!(
                t.set_delay("a", bad).unwrap_err().field.as_deref(),
                Some("delay_ms")
            );
            assert!(t.set_delay("missing", bad).is_err());
        }
        // The refused add left the job as it was.
        assert_eq!(t.next_of("a"), Some((1_000, 1_000)));
        t.add_timed("b", every(1_000), delayed(0, 0, MAX_DELAY_MS), 1, 0)
            .unwrap();
        assert_eq!(t.next_of("b"), Some((1_000, 1_000 + MAX_DELAY_MS)));
    }

    #[test]
    fn delay_near_i64_max_fires_at_i64_max() {
        let mut t = Timetable::new("i");
        t.add_timed(
            "a",
            every(1),
            delayed(0, 0, MAX_DELAY_MS),
            i64::MAX - 2,
            i64::MAX,
        )
        .unwrap();
        assert_eq!(t.next_of("a"), Some((i64::MAX - 2, i64::MAX)));
        let slots: Vec<i64> = t.due(i64::MAX, 10).into_iter().map(|d| d.slot).collect();
        assert_eq!(slots, vec![i64::MAX - 2, i64::MAX - 1, i64::MAX]);
        assert_eq!(t.next_wakeup(), None);
        t.add_timed(
            "b",
            every(i64::MAX),
            delayed(i64::MAX, i64::MAX, MAX_DELAY_MS),
            i64::MAX - 1,
            0,
        )
        .unwrap();
        let (slot, fire_at) = t.next_of("b").unwrap();
        assert_eq!((slot, fire_at), (i64::MAX, i64::MAX));
        t.add_timed(
            "c",
            every(1_000),
            delayed(0, i64::MAX, MAX_DELAY_MS),
            i64::MIN,
            i64::MAX,
        )
        .unwrap();
        assert_eq!(
            t.next_of("c"),
            Some((
                -9_223_372_036_854_775_000,
                -9_223_372_036_854_775_000 + MAX_DELAY_MS
            ))
        );
    }

    #[test]
    fn set_delay_keeps_the_next_slot() {
        let mut t = Timetable::new("i");
        t.add_timed("a", every(10_000), delayed(0, 0, 5_000), 1, 0)
            .unwrap();
        t.add("b", every(10_000), 0, 1, 0, 0);
        assert_eq!(t.due(10_000, 10).len(), 1); // b
        assert_eq!(t.next_of("a"), Some((10_000, 15_000)));
        // Rank 0 now: the pending slot 10 000 fires at once, not lost.
        assert_eq!(t.set_delay("a", 0), Ok(true));
        assert_eq!(t.next_of("a"), Some((10_000, 10_000)));
        assert_eq!(t.next_wakeup(), Some(10_000));
        let due = t.due(12_000, 10);
        assert_eq!(
            due,
            vec![Due {
                job: "a".into(),
                slot: 10_000,
                fire_at: 10_000
            }]
        );
        // The later slots keep the new delay; a longer one moves them back.
        assert_eq!(t.set_delay("a", 2_000), Ok(true));
        assert_eq!(t.next_of("a"), Some((20_000, 22_000)));
        assert_eq!(t.next_wakeup(), Some(20_000)); // b
        t.due(20_000, 10);
        assert_eq!(t.next_wakeup(), Some(22_000));
        assert_eq!(t.set_delay("a", 2_000), Ok(true));
        assert_eq!(t.set_delay("missing", 0), Ok(false));
        // Each slot is returned once.
        let slots: Vec<i64> = t
            .due(60_000, 100)
            .into_iter()
            .filter(|d| d.job == "a")
            .map(|d| d.slot)
            .collect();
        assert_eq!(slots, vec![20_000, 30_000, 40_000, 50_000]);
    }

    #[test]
    fn repeated_set_delay_compacts_the_heap() {
        let mut t = Timetable::new("i");
        for i in 0..100 {
            t.add(&format!("j{i}"), every(1_000), 0, 1, 0, 0);
        }
        for round in 0..50 {
            for i in 0..100 {
                t.set_delay(&format!("j{i}"), round * 10).unwrap();
            }
        }
        assert!(t.heap.len() <= 2 * 100 + 1);
        let due = t.due(1_490, usize::MAX);
        assert_eq!(due.len(), 100);
        assert!(due.iter().all(|d| d.slot == 1_000 && d.fire_at == 1_490));
    }
}
