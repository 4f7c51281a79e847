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

    /// The first slot strictly after `ms`, or `None` when it would be past
    /// `i64::MAX` (there is no next slot in range).
    ///
    /// Computed in `i128`, so every `i64` input gives the exact answer.
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        let (period, offset) = (i128::from(self.period_ms), i128::from(self.offset_ms));
        let k = (i128::from(ms) - offset).div_euclid(period);
        i64::try_from((k + 1) * period + offset).ok()
    }

    /// The last slot at or before `ms`, or `None` when it would be before
    /// `i64::MIN`.
    pub fn at_or_before(&self, ms: i64) -> Option<i64> {
        let (period, offset) = (i128::from(self.period_ms), i128::from(self.offset_ms));
        let k = (i128::from(ms) - offset).div_euclid(period);
        i64::try_from(k * period + offset).ok()
    }

    /// The first slot at or after `ms`, or `None` when it would be past
    /// `i64::MAX`.
    pub fn at_or_after(&self, ms: i64) -> Option<i64> {
        let (period, offset) = (i128::from(self.period_ms), i128::from(self.offset_ms));
        let k = (i128::from(ms) - offset + period - 1).div_euclid(period);
        i64::try_from(k * period + offset).ok()
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

    #[test]
    fn extreme_inputs_are_exact() {
        // 1 s with a 500 ms offset, from i64::MIN.
        let e = Every::new(1_000, 500).unwrap();
        // i64::MIN = -9_223_372_036_854_775_808; the next ...500 after it.
        assert_eq!(e.next_after(i64::MIN), Some(-9_223_372_036_854_775_500));
        assert_eq!(e.at_or_before(i64::MIN), None);
        assert_eq!(e.at_or_after(i64::MIN), Some(-9_223_372_036_854_775_500));
        assert_eq!(e.next_after(i64::MAX), None);
        assert_eq!(e.at_or_before(i64::MAX), Some(9_223_372_036_854_775_500));
        assert_eq!(
            e.next_after(9_223_372_036_854_775_499),
            Some(9_223_372_036_854_775_500)
        );
        assert_eq!(e.next_after(9_223_372_036_854_775_500), None);
        // A period of i64::MAX with the largest offset.
        let wide = Every::new(i64::MAX, i64::MAX - 1).unwrap();
        assert_eq!(wide.next_after(i64::MIN), Some(-1));
        assert_eq!(wide.next_after(-1), Some(i64::MAX - 1));
        assert_eq!(wide.next_after(i64::MAX - 1), None);
        assert_eq!(wide.at_or_before(-2), Some(i64::MIN));
        assert_eq!(wide.at_or_before(i64::MIN), Some(i64::MIN));
        // An offset of i64::MIN is reduced modulo the period.
        let one = Every::new(1, i64::MIN).unwrap();
        assert_eq!(one.offset_ms(), 0);
        assert_eq!(one.at_or_after(i64::MIN), Some(i64::MIN));
        assert_eq!(one.next_after(i64::MAX - 1), Some(i64::MAX));
        assert_eq!(one.next_after(i64::MAX), None);
    }
}
