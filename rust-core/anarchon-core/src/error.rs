//! The error raised for a schedule the engine cannot accept.

use std::fmt;

/// A schedule that cannot be parsed or evaluated.
///
/// `field` names the cron field (`"minute"`, `"day-of-week"`, ...) or
/// `"interval"`/`"tz"`; `position` is the 0-based character offset in the
/// expression where the bad token starts, when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError {
    pub message: String,
    pub field: Option<String>,
    pub position: Option<usize>,
}

impl ScheduleError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            field: None,
            position: None,
        }
    }

    pub fn at(message: impl Into<String>, field: impl Into<String>, position: usize) -> Self {
        Self {
            message: message.into(),
            field: Some(field.into()),
            position: Some(position),
        }
    }

    pub fn in_field(message: impl Into<String>, field: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            field: Some(field.into()),
            position: None,
        }
    }
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match (&self.field, self.position) {
            (Some(field), Some(pos)) => write!(f, " (field {field}, position {pos})"),
            (Some(field), None) => write!(f, " (field {field})"),
            (None, Some(pos)) => write!(f, " (position {pos})"),
            (None, None) => Ok(()),
        }
    }
}

impl std::error::Error for ScheduleError {}
