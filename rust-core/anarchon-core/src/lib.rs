//! The slot engine of anarchon.
//!
//! Pure Rust (no Python types): cron and interval schedules with time zones,
//! a timetable for many jobs, deterministic jitter, rendezvous ranking of a
//! job's candidate instances and history merging. The
//! `anarchon-py` crate exposes it to Python as `anarchon._core`.

pub mod cron;
pub mod error;
pub mod history;
pub mod interval;
pub mod jitter;
pub mod rendezvous;
pub mod result_json;
pub mod schedule;
pub mod timetable;

pub use cron::CronSchedule;
pub use error::ScheduleError;
pub use interval::Every;
pub use schedule::Schedule;
pub use timetable::{Due, Timetable, Timing};
