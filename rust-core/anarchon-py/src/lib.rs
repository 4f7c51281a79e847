//! `anarchon._core`: the Python face of the slot engine. Thin wrappers only;
//! the logic lives in the `anarchon-core` crate.

use anarchon_core::history::{self, Claim, RunResult};
use anarchon_core::rendezvous;
use anarchon_core::result_json::{result_json as core_result_json, ResultFields};
use anarchon_core::{
    CronSchedule, Every, Schedule as CoreSchedule, ScheduleError, Timetable as CoreTimetable,
    Timing,
};
use pyo3::exceptions::PyOverflowError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// The most slots or due jobs one call returns (the list is built in memory).
const MAX_LIMIT: usize = 10_000_000;
/// The limit of `slots()` and `Timetable.due()` when none is given.
const DEFAULT_LIMIT: usize = 100_000;
/// The most candidates of a job (`k` of the rendezvous functions).
const MAX_CANDIDATES: usize = 1_024;

/// Raise `anarchon.errors.InvalidJobError` with the field and position.
fn invalid_job(py: Python<'_>, error: &ScheduleError) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let class = py.import("anarchon.errors")?.getattr("InvalidJobError")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("field", error.field.as_deref())?;
        kwargs.set_item("position", error.position)?;
        let instance = class.call((error.to_string(),), Some(&kwargs))?;
        Ok(PyErr::from_value(instance))
    };
    build().unwrap_or_else(|e| e)
}

/// An integer argument of type `T`. An int outside `T`'s range raises
/// `InvalidJobError` naming the argument (`field` = its name) instead of
/// pyo3's bare `OverflowError`; a value that is not an int raises `TypeError`.
fn int_arg<'py, T: FromPyObjectOwned<'py>>(
    value: &Bound<'py, PyAny>,
    name: &str,
    range: &str,
) -> PyResult<T> {
    let py = value.py();
    value.extract::<T>().map_err(|e| {
        let e: PyErr = e.into();
        if e.is_instance_of::<PyOverflowError>(py) {
            invalid_job(
                py,
                &ScheduleError::in_field(format!("{name} must be {range}"), name),
            )
        } else {
            e
        }
    })
}

/// A time or duration in ms: any `i64`.
fn ms_arg(value: &Bound<'_, PyAny>, name: &str) -> PyResult<i64> {
    int_arg(
        value,
        name,
        "a whole number of milliseconds from -2**63 to 2**63-1",
    )
}

/// A result limit: 0 to [`MAX_LIMIT`].
fn limit_arg(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let range = "from 0 to 10000000 (page through larger results)";
    let limit: usize = int_arg(value, "limit", range)?;
    if limit > MAX_LIMIT {
        return Err(invalid_job(
            value.py(),
            &ScheduleError::in_field(format!("limit must be {range}"), "limit"),
        ));
    }
    Ok(limit)
}

/// The number of candidates `k`: 1 to [`MAX_CANDIDATES`].
fn candidates_arg(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let range = "from 1 to 1024";
    let k: usize = int_arg(value, "k", range)?;
    if !(1..=MAX_CANDIDATES).contains(&k) {
        return Err(invalid_job(
            value.py(),
            &ScheduleError::in_field(format!("k must be {range}"), "k"),
        ));
    }
    Ok(k)
}

/// The UTF-8 text of a `str` argument; a `str` with a lone surrogate (no
/// UTF-8 form, so no stable hash) raises `InvalidJobError` naming `name`.
fn text_arg<'a>(value: &'a Bound<'_, PyString>, name: &str) -> PyResult<&'a str> {
    value.to_str().map_err(|_| {
        invalid_job(
            value.py(),
            &ScheduleError::in_field(format!("{name} must be encodable as UTF-8"), name),
        )
    })
}

/// The UTF-8 text of every `str` of a sequence argument.
fn texts_arg<'a>(values: &'a [Bound<'_, PyString>], name: &str) -> PyResult<Vec<&'a str>> {
    values.iter().map(|v| text_arg(v, name)).collect()
}

/// A compiled schedule: an epoch-aligned interval or a cron expression in a zone.
#[pyclass(module = "anarchon._core", name = "Schedule", frozen)]
struct Schedule {
    inner: CoreSchedule,
}

#[pymethods]
impl Schedule {
    /// Parse a cron expression (5 fields, 6 with seconds first, or a macro) in an IANA zone.
    #[staticmethod]
    #[pyo3(signature = (expression, tz = "UTC"))]
    fn cron(py: Python<'_>, expression: &str, tz: &str) -> PyResult<Self> {
        CronSchedule::parse(expression, tz)
            .map(|c| Self {
                inner: CoreSchedule::Cron(Box::new(c)),
            })
            .map_err(|e| invalid_job(py, &e))
    }

    /// An interval of `period_ms` aligned to the epoch, shifted by `offset_ms`.
    #[staticmethod]
    #[pyo3(signature = (period_ms, offset_ms = None))]
    fn every(
        py: Python<'_>,
        period_ms: &Bound<'_, PyAny>,
        offset_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let period = ms_arg(period_ms, "interval")?;
        let offset = offset_ms.map_or(Ok(0), |o| ms_arg(o, "offset"))?;
        Every::new(period, offset)
            .map(|e| Self {
                inner: CoreSchedule::Every(e),
            })
            .map_err(|e| invalid_job(py, &e))
    }

    /// The first slot strictly after `ms`, or None when there is none.
    fn next_after(&self, ms: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
        Ok(self.inner.next_after(ms_arg(ms, "ms")?))
    }

    /// Slots `s` with `start_ms <= s < end_ms`, at most `limit` (up to 10 000 000).
    #[pyo3(signature = (start_ms, end_ms, limit = None))]
    fn slots(
        &self,
        start_ms: &Bound<'_, PyAny>,
        end_ms: &Bound<'_, PyAny>,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<i64>> {
        let start = ms_arg(start_ms, "start_ms")?;
        let end = ms_arg(end_ms, "end_ms")?;
        let limit = limit.map_or(Ok(DEFAULT_LIMIT), limit_arg)?;
        Ok(self.inner.slots(start, end, limit))
    }

    /// The latest slot in `[from_ms, to_ms]`, or None.
    fn latest_between(
        &self,
        from_ms: &Bound<'_, PyAny>,
        to_ms: &Bound<'_, PyAny>,
    ) -> PyResult<Option<i64>> {
        Ok(self
            .inner
            .latest_between(ms_arg(from_ms, "from_ms")?, ms_arg(to_ms, "to_ms")?))
    }

    /// The smallest gap between two consecutive slots, in ms.
    #[getter]
    fn period_ms(&self) -> i64 {
        self.inner.min_gap_ms()
    }
}

/// The next slot after `after_ms` of each schedule, in one call.
#[pyfunction]
fn next_after_many(
    schedules: Vec<Bound<'_, Schedule>>,
    after_ms: &Bound<'_, PyAny>,
) -> PyResult<Vec<Option<i64>>> {
    let after = ms_arg(after_ms, "after_ms")?;
    Ok(schedules
        .iter()
        .map(|s| s.get().inner.next_after(after))
        .collect())
}

/// Deterministic jitter for `(instance_id, job, slot)`, uniform in `[0, min(jitter_ms, gap_ms / 2))`.
#[pyfunction]
fn jitter_ms(
    instance_id: &str,
    job: &str,
    slot: &Bound<'_, PyAny>,
    jitter_ms: &Bound<'_, PyAny>,
    gap_ms: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    Ok(anarchon_core::jitter::jitter_ms(
        instance_id,
        job,
        ms_arg(slot, "slot")?,
        ms_arg(jitter_ms, "jitter_ms")?,
        ms_arg(gap_ms, "gap_ms")?,
    ))
}

/// Every job's next slot, ordered by fire time (slot + jitter).
#[pyclass(module = "anarchon._core", name = "Timetable")]
struct Timetable {
    inner: CoreTimetable,
}

#[pymethods]
impl Timetable {
    #[new]
    fn new(instance_id: &str) -> Self {
        Self {
            inner: CoreTimetable::new(instance_id),
        }
    }

    /// Add or replace a job; its first slot is the latest one in
    /// `[now_ms - lookback_ms, now_ms]`, else the first after `now_ms`.
    /// Each slot is due `lead_ms` before its fire time (at most a quarter of
    /// the gap to the slot after it). Each slot fires `delay_ms` (0 to one
    /// day) after slot + jitter; the slot itself is unchanged.
    #[pyo3(signature = (job, schedule, jitter_ms, now_ms, lookback_ms = None, lead_ms = None, *, delay_ms = None))]
    #[allow(clippy::too_many_arguments)] // the Python signature: one per keyword
    fn add(
        &mut self,
        py: Python<'_>,
        job: &str,
        schedule: &Bound<'_, Schedule>,
        jitter_ms: &Bound<'_, PyAny>,
        now_ms: &Bound<'_, PyAny>,
        lookback_ms: Option<&Bound<'_, PyAny>>,
        lead_ms: Option<&Bound<'_, PyAny>>,
        delay_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let timing = Timing {
            jitter_ms: ms_arg(jitter_ms, "jitter_ms")?,
            lead_ms: lead_ms.map_or(Ok(0), |l| ms_arg(l, "lead_ms"))?,
            delay_ms: delay_ms.map_or(Ok(0), |d| ms_arg(d, "delay_ms"))?,
        };
        let now = ms_arg(now_ms, "now_ms")?;
        let lookback = lookback_ms.map_or(Ok(0), |l| ms_arg(l, "lookback_ms"))?;
        self.inner
            .add_timed(job, schedule.get().inner.clone(), timing, now, lookback)
            .map_err(|e| invalid_job(py, &e))
    }

    /// Change a job's delay (0 to one day), keeping its next slot: that slot
    /// and the later ones fire `delay_ms` after slot + jitter. False if there
    /// is no such job.
    fn set_delay(&mut self, job: &str, delay_ms: &Bound<'_, PyAny>) -> PyResult<bool> {
        let delay = ms_arg(delay_ms, "delay_ms")?;
        self.inner
            .set_delay(job, delay)
            .map_err(|e| invalid_job(delay_ms.py(), &e))
    }

    /// Remove a job; True if it was there.
    fn remove(&mut self, job: &str) -> bool {
        self.inner.remove(job)
    }

    /// `(job, slot, fire_at)` of every job due by `now_ms` (its fire time
    /// less its lead), in that order; each moves on to its next slot.
    /// At most `limit` (default 100 000, up to 10 000 000) per call.
    #[pyo3(signature = (now_ms, limit = None))]
    fn due(
        &mut self,
        now_ms: &Bound<'_, PyAny>,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<(String, i64, i64)>> {
        let now = ms_arg(now_ms, "now_ms")?;
        let limit = limit.map_or(Ok(DEFAULT_LIMIT), limit_arg)?;
        Ok(self
            .inner
            .due(now, limit)
            .into_iter()
            .map(|d| (d.job, d.slot, d.fire_at))
            .collect())
    }

    /// The earliest time a job is due (fire time less lead), or None when there are no slots left.
    fn next_wakeup(&mut self) -> Option<i64> {
        self.inner.next_wakeup()
    }

    /// The next `(slot, fire_at)` of one job.
    fn next_of(&self, job: &str) -> Option<(i64, i64)> {
        self.inner.next_of(job)
    }

    /// How many jobs are due by `now_ms`, counted by visiting every job (benchmarks).
    fn scan_due_count(&self, now_ms: &Bound<'_, PyAny>) -> PyResult<usize> {
        Ok(self.inner.scan_due_count(ms_arg(now_ms, "now_ms")?))
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, job: &str) -> bool {
        self.inner.contains(job)
    }
}

/// For each key, the 0-based rank of `me` among `members` under rendezvous
/// hashing (higher score first), or None when it is `k` (1 to 1024) or more
/// or `me` is not a member. Duplicate members count once.
#[pyfunction]
fn rendezvous_ranks(
    members: Vec<Bound<'_, PyString>>,
    me: Bound<'_, PyString>,
    keys: Vec<Bound<'_, PyString>>,
    k: &Bound<'_, PyAny>,
) -> PyResult<Vec<Option<u32>>> {
    let k = candidates_arg(k)?;
    let members = texts_arg(&members, "members")?;
    let me = text_arg(&me, "me")?;
    let keys = texts_arg(&keys, "keys")?;
    Ok(rendezvous::ranks(&members, me, &keys, k))
}

/// The first `k` (1 to 1024) distinct members of `key` under rendezvous hashing, rank 0 first.
#[pyfunction]
fn rendezvous_candidates(
    members: Vec<Bound<'_, PyString>>,
    key: Bound<'_, PyString>,
    k: &Bound<'_, PyAny>,
) -> PyResult<Vec<String>> {
    let k = candidates_arg(k)?;
    let members = texts_arg(&members, "members")?;
    let key = text_arg(&key, "key")?;
    Ok(rendezvous::candidates(&members, key, k))
}

fn opt_attr<'py, T: FromPyObjectOwned<'py>>(
    obj: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<Option<T>> {
    match obj.getattr(name) {
        Ok(value) if value.is_none() => Ok(None),
        Ok(value) => int_arg(&value, name, "a 64-bit integer").map(Some),
        Err(_) => Ok(None),
    }
}

fn claim_from(obj: &Bound<'_, PyAny>) -> PyResult<Claim> {
    Ok(Claim {
        slot: ms_arg(&obj.getattr("slot")?, "slot")?,
        token: obj.getattr("token")?.extract()?,
        instance_id: obj.getattr("instance_id")?.extract()?,
        at: ms_arg(&obj.getattr("at")?, "at")?,
        manual: opt_attr(obj, "manual")?.unwrap_or(false),
        attempt: opt_attr(obj, "attempt")?.unwrap_or(1),
    })
}

fn result_from(obj: &Bound<'_, PyAny>) -> PyResult<RunResult> {
    Ok(RunResult {
        slot: ms_arg(&obj.getattr("slot")?, "slot")?,
        token: obj.getattr("token")?.extract()?,
        instance_id: opt_attr(obj, "instance_id")?.unwrap_or_default(),
        status: obj.getattr("status")?.extract()?,
        started_at: opt_attr(obj, "started_at")?,
        finished_at: opt_attr(obj, "finished_at")?,
        error: opt_attr(obj, "error")?,
        attempt: opt_attr(obj, "attempt")?.unwrap_or(0),
        manual: opt_attr(obj, "manual")?.unwrap_or(false),
        reason: opt_attr(obj, "reason")?,
    })
}

type RecordTuple = (
    i64,
    String,
    String,
    Option<String>,
    i64,
    bool,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

/// Merge claim records and stored results (any objects with their fields)
/// into record tuples `(slot, instance_id, status, reason, attempt, manual,
/// started_at, finished_at, duration_ms, error)`, newest first.
#[pyfunction]
fn build_history(
    claims: Vec<Bound<'_, PyAny>>,
    results: Vec<Bound<'_, PyAny>>,
    limit: &Bound<'_, PyAny>,
) -> PyResult<Vec<RecordTuple>> {
    // History is trimmed, never paged: any non-negative limit is fine.
    let limit: usize = int_arg(limit, "limit", "a non-negative integer")?;
    let claims = claims
        .iter()
        .map(claim_from)
        .collect::<PyResult<Vec<_>>>()?;
    let results = results
        .iter()
        .map(result_from)
        .collect::<PyResult<Vec<_>>>()?;
    Ok(history::build_history(&claims, &results, limit)
        .into_iter()
        .map(|r| {
            (
                r.slot,
                r.instance_id,
                r.status,
                r.reason,
                r.attempt,
                r.manual,
                r.started_at,
                r.finished_at,
                r.duration_ms,
                r.error,
            )
        })
        .collect())
}

/// A string attribute as `&str`; None if it is not a `str` (or holds a lone surrogate).
fn str_attr<'a>(value: &'a Bound<'_, PyAny>) -> Option<&'a str> {
    value.cast::<PyString>().ok()?.to_str().ok()
}

/// An optional string attribute: `Some(None)` for `None`, None if it is not a `str`.
fn opt_str_attr<'a>(value: &'a Bound<'_, PyAny>) -> Option<Option<&'a str>> {
    if value.is_none() {
        return Some(None);
    }
    str_attr(value).map(Some)
}

/// An optional int attribute: `Some(None)` for `None`, None if it is not an `i64`.
fn opt_int_attr(value: &Bound<'_, PyAny>) -> Option<Option<i64>> {
    if value.is_none() {
        return Some(None);
    }
    value.extract::<i64>().ok().map(Some)
}

/// A stored result (any object with `StoredResult`'s fields) as the JSON text
/// `json.dumps(fields, separators=(",", ":"), sort_keys=True)` writes; None
/// when a field is not what the fast path handles (a string that is not a
/// `str`, an int beyond 64 bits): the caller then writes it with `json`.
#[pyfunction]
fn result_json(result: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let py = result.py();
    let slot = result.getattr(intern!(py, "slot"))?;
    let token = result.getattr(intern!(py, "token"))?;
    let instance_id = result.getattr(intern!(py, "instance_id"))?;
    let status = result.getattr(intern!(py, "status"))?;
    let started_at = result.getattr(intern!(py, "started_at"))?;
    let finished_at = result.getattr(intern!(py, "finished_at"))?;
    let error = result.getattr(intern!(py, "error"))?;
    let attempt = result.getattr(intern!(py, "attempt"))?;
    let manual = result.getattr(intern!(py, "manual"))?.is_truthy()?;
    let reason = result.getattr(intern!(py, "reason"))?;
    let fields = (|| {
        Some(ResultFields {
            slot: slot.extract::<i64>().ok()?,
            token: str_attr(&token)?,
            instance_id: str_attr(&instance_id)?,
            status: str_attr(&status)?,
            started_at: opt_int_attr(&started_at)?,
            finished_at: opt_int_attr(&finished_at)?,
            error: opt_str_attr(&error)?,
            attempt: attempt.extract::<i64>().ok()?,
            manual,
            reason: opt_str_attr(&reason)?,
        })
    })();
    Ok(fields.map(|f| core_result_json(&f)))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The Cargo workspace version: the one version source of every anarchon package.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Schedule>()?;
    m.add_class::<Timetable>()?;
    m.add_function(wrap_pyfunction!(next_after_many, m)?)?;
    m.add_function(wrap_pyfunction!(jitter_ms, m)?)?;
    m.add_function(wrap_pyfunction!(rendezvous_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(rendezvous_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(build_history, m)?)?;
    m.add_function(wrap_pyfunction!(result_json, m)?)?;
    Ok(())
}
