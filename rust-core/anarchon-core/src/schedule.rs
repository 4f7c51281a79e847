//! One type for both kinds of schedule.

use crate::cron::CronSchedule;
use crate::interval::Every;

/// Slots walked forward by [`Schedule::latest_between`] before it bisects.
pub const FORWARD_PROBES: usize = 64;

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

    /// The first slot at or after `ms`, if any.
    pub fn at_or_after(&self, ms: i64) -> Option<i64> {
        match self {
            Schedule::Every(every) => every.at_or_after(ms),
            // Cron slots are whole seconds of years 1-9999, never `i64::MIN`,
            // so "after ms - 1" loses nothing when the subtraction saturates.
            Schedule::Cron(cron) => cron.next_after(ms.saturating_sub(1)),
        }
    }

    /// The latest slot in `[from_ms, to_ms]`, if any.
    ///
    /// The cost does not grow with the width of the range: for a cron
    /// expression at most [`FORWARD_PROBES`] slots are walked forward from
    /// `from_ms`, then the latest slot is found by bisection (a slot exists in
    /// `[x, to_ms]` is monotone in `x`). Bisection relies on the 50-year search
    /// horizon of `next_after` being longer than any gap between two slots of
    /// a valid expression (the longest is 40 years: a fifth weekday in
    /// February, `0 0 * 2 1#5`).
    pub fn latest_between(&self, from_ms: i64, to_ms: i64) -> Option<i64> {
        if from_ms > to_ms {
            return None;
        }
        match self {
            Schedule::Every(every) => every.at_or_before(to_ms).filter(|s| *s >= from_ms),
            Schedule::Cron(cron) => {
                let in_range =
                    |x: i64| cron.next_after(x.saturating_sub(1)).filter(|s| *s <= to_ms);
                let mut latest = in_range(from_ms)?;
                for _ in 0..FORWARD_PROBES {
                    match cron.next_after(latest) {
                        Some(slot) if slot <= to_ms => latest = slot,
                        _ => return Some(latest),
                    }
                }
                // Bisect: a slot exists in [lo, to_ms]; none in [hi, to_ms].
                let (mut lo, mut hi) = (latest, to_ms);
                if in_range(hi).is_some() {
                    return in_range(hi);
                }
                while hi.abs_diff(lo) > 1 {
                    let mid = lo.midpoint(hi);
                    if in_range(mid).is_some() {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                // No slot in [lo + 1, to_ms], one in [lo, to_ms]: it is lo.
                Some(lo)
            }
        }
    }

    /// Slots `s` with `start_ms <= s < end_ms`, at most `limit` of them.
    pub fn slots(&self, start_ms: i64, end_ms: i64, limit: usize) -> Vec<i64> {
        let mut out = Vec::new();
        let mut next = self.at_or_after(start_ms);
        while out.len() < limit {
            match next {
                Some(slot) if slot < end_ms => {
                    out.push(slot);
                    next = self.next_after(slot);
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

    fn cron(e: &str) -> Schedule {
        Schedule::Cron(Box::new(CronSchedule::parse(e, "UTC").unwrap()))
    }

    /// The latest slot by walking every slot (the reference).
    fn walk_latest(s: &Schedule, from: i64, to: i64) -> Option<i64> {
        let mut latest = None;
        let mut next = s.at_or_after(from);
        while let Some(slot) = next.filter(|x| *x <= to) {
            latest = Some(slot);
            next = s.next_after(slot);
        }
        latest
    }

    #[test]
    fn latest_between_cron_matches_a_walk() {
        let day = 86_400_000;
        for e in [
            "* * * * * *",
            "*/7 * * * *",
            "0 3 * * *",
            "0 0 L * *",
            "0 0 * 2 1#5",
        ] {
            let s = cron(e);
            for (from, to) in [
                (0, 1_000),
                (0, 3 * day),
                (12_345, 10 * day + 999),
                (-5 * day, 5 * day),
                (0, 400 * day),
            ] {
                if e == "* * * * * *" && to - from > 3 * day {
                    continue;
                }
                assert_eq!(
                    s.latest_between(from, to),
                    walk_latest(&s, from, to),
                    "{e} {from} {to}"
                );
            }
        }
    }

    #[test]
    fn latest_between_wide_ranges_are_quick_and_exact() {
        let s = cron("* * * * * *");
        // 9999-12-31T23:59:59Z is the last cron slot there is.
        assert_eq!(
            s.latest_between(i64::MIN, i64::MAX),
            Some(253_402_300_799_000)
        );
        assert_eq!(s.latest_between(i64::MIN, 999), Some(0));
        assert_eq!(s.latest_between(i64::MIN, -62_135_596_800_001), None);
        let rare = cron("0 0 * 2 1#5");
        // 2044-02-29 is the last fifth Monday of February before 2070.
        assert_eq!(
            rare.latest_between(i64::MIN, 3_155_760_000_000),
            Some(2_340_316_800_000)
        );
        let every = Schedule::Every(Every::new(1, 0).unwrap());
        assert_eq!(every.latest_between(i64::MIN, i64::MAX), Some(i64::MAX));
        assert_eq!(
            every.slots(i64::MIN, i64::MIN + 3, 10),
            vec![i64::MIN, i64::MIN + 1, i64::MIN + 2]
        );
        assert_eq!(every.slots(i64::MAX - 1, i64::MAX, 10), vec![i64::MAX - 1]);
    }
}
