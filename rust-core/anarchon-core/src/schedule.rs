//! One type for both kinds of schedule.

use crate::cron::CronSchedule;
use crate::interval::Every;

/// A job's schedule: an epoch-aligned interval or a cron expression in a zone.
#[derive(Debug, Clone)]
pub enum Schedule {
    Every(Every),
    Cron(Box<CronSchedule>),
}

impl Schedule {
    /// The first slot strictly after `ms`, or `None` when there is none
    /// (an impossible date such as `0 0 30 2 *`, or past the supported range).
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        match self {
            Schedule::Every(every) => every.next_after(ms),
            Schedule::Cron(cron) => cron.next_after(ms),
        }
    }

    /// The latest slot in `[from_ms, to_ms]`, if any.
    pub fn latest_between(&self, from_ms: i64, to_ms: i64) -> Option<i64> {
        if from_ms > to_ms {
            return None;
        }
        match self {
            Schedule::Every(every) => every.at_or_before(to_ms).filter(|s| *s >= from_ms),
            Schedule::Cron(cron) => {
                let mut latest = None;
                let mut cursor = from_ms.checked_sub(1)?;
                while let Some(slot) = cron.next_after(cursor) {
                    if slot > to_ms {
                        break;
                    }
                    latest = Some(slot);
                    cursor = slot;
                }
                latest
            }
        }
    }

    /// Slots `s` with `start_ms <= s < end_ms`, at most `limit` of them.
    pub fn slots(&self, start_ms: i64, end_ms: i64, limit: usize) -> Vec<i64> {
        let mut out = Vec::new();
        let Some(mut cursor) = start_ms.checked_sub(1) else {
            return out;
        };
        while out.len() < limit {
            match self.next_after(cursor) {
                Some(slot) if slot < end_ms => {
                    out.push(slot);
                    cursor = slot;
                }
                _ => break,
            }
        }
        out
    }

    /// The smallest gap between two consecutive slots, in ms (the job's period).
    pub fn min_gap_ms(&self) -> i64 {
        match self {
            Schedule::Every(every) => every.period_ms(),
            Schedule::Cron(cron) => cron.min_gap_ms(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_half_open() {
        let s = Schedule::Every(Every::new(1_000, 0).unwrap());
        assert_eq!(s.slots(1_000, 4_000, 10), vec![1_000, 2_000, 3_000]);
        assert_eq!(s.slots(1_000, 4_000, 2), vec![1_000, 2_000]);
        assert!(s.slots(4_000, 4_000, 10).is_empty());
    }

    #[test]
    fn latest_between_interval() {
        let s = Schedule::Every(Every::new(1_000, 0).unwrap());
        assert_eq!(s.latest_between(1_500, 3_700), Some(3_000));
        assert_eq!(s.latest_between(1_500, 1_900), None);
        assert_eq!(s.latest_between(2_000, 2_000), Some(2_000));
    }
}
