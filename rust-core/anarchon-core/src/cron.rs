//! Cron expressions (SPEC §3). PLACEHOLDER: being written; the interface is fixed.

use crate::error::ScheduleError;

/// A parsed cron expression bound to an IANA time zone.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    _private: (),
}

impl CronSchedule {
    /// Parse a 5- or 6-field (seconds first) expression or a macro, in zone `tz`.
    pub fn parse(expression: &str, tz: &str) -> Result<Self, ScheduleError> {
        let _ = (expression, tz);
        Err(ScheduleError::new(
            "cron expressions are not implemented yet",
        ))
    }

    /// The first slot (ms since the epoch) strictly after `ms`.
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        let _ = ms;
        None
    }

    /// The smallest gap between consecutive slots, in ms.
    pub fn min_gap_ms(&self) -> i64 {
        1_000
    }
}
