//! Interval schedules aligned to the Unix epoch: `slot = k * period + offset`.

use crate::error::ScheduleError;

/// Every `period_ms`, shifted by `offset_ms` (`0 <= offset_ms < period_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Every {
    period_ms: i64,
    offset_ms: i64,
}

impl Every {
    /// Build an interval; the offset is reduced modulo the period.
    pub fn new(period_ms: i64, offset_ms: i64) -> Result<Self, ScheduleError> {
        if period_ms <= 0 {
            return Err(ScheduleError::in_field(
                format!("interval must be positive, got {period_ms} ms"),
                "interval",
            ));
        }
        Ok(Self {
            period_ms,
            offset_ms: offset_ms.rem_euclid(period_ms),
        })
    }

    pub fn period_ms(&self) -> i64 {
        self.period_ms
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms
    }

    /// The first slot strictly after `ms`.
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        let k = (ms - self.offset_ms).div_euclid(self.period_ms);
        (k.checked_add(1)?)
            .checked_mul(self.period_ms)?
            .checked_add(self.offset_ms)
    }

    /// The last slot at or before `ms`.
    pub fn at_or_before(&self, ms: i64) -> Option<i64> {
        let k = (ms - self.offset_ms).div_euclid(self.period_ms);
        k.checked_mul(self.period_ms)?.checked_add(self.offset_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_to_epoch() {
        let e = Every::new(10_000, 0).unwrap();
        assert_eq!(e.next_after(0), Some(10_000));
        assert_eq!(e.next_after(9_999), Some(10_000));
        assert_eq!(e.next_after(10_000), Some(20_000));
        assert_eq!(e.at_or_before(19_999), Some(10_000));
        assert_eq!(e.at_or_before(20_000), Some(20_000));
    }

    #[test]
    fn offset_and_negative_times() {
        let e = Every::new(1_000, 250).unwrap();
        assert_eq!(e.next_after(0), Some(250));
        assert_eq!(e.next_after(250), Some(1_250));
        assert_eq!(e.next_after(-1), Some(250));
        assert_eq!(e.next_after(-800), Some(-750));
        let wrapped = Every::new(1_000, 1_250).unwrap();
        assert_eq!(wrapped.offset_ms(), 250);
        let negative = Every::new(1_000, -250).unwrap();
        assert_eq!(negative.offset_ms(), 750);
    }

    #[test]
    fn refuses_non_positive() {
        assert!(Every::new(0, 0).is_err());
        assert!(Every::new(-5, 0).is_err());
    }

    #[test]
    fn overflow_is_none_not_panic() {
        let e = Every::new(i64::MAX, 0).unwrap();
        assert_eq!(e.next_after(i64::MAX - 1), Some(i64::MAX));
        assert_eq!(e.next_after(i64::MAX), None);
    }
}
