//! Merging claim records and stored results into run records (docs/concepts.md, "History"):
//! one record per attempt, newest first (by slot, then attempt).

use std::collections::HashMap;

/// A won claim, as a backend stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub slot: i64,
    pub token: String,
    pub instance_id: String,
    pub at: i64,
    pub manual: bool,
    pub attempt: i64,
}

/// How a run ended, as a backend stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    pub slot: i64,
    pub token: String,
    pub instance_id: String,
    pub status: String,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub error: Option<String>,
    pub attempt: i64,
    pub manual: bool,
    pub reason: Option<String>,
}

/// One attempt of one run, merged from its claim and its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub slot: i64,
    pub instance_id: String,
    pub status: String,
    pub reason: Option<String>,
    pub attempt: i64,
    pub manual: bool,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub duration_ms: Option<i64>,
    pub error: Option<String>,
}

/// A status that ends a run wins over `running` when one token has several results.
fn rank(status: &str) -> u8 {
    u8::from(status != "running")
}

/// Merge claims and results by token; a claim without a result is `running`.
/// Returns at most `limit` records, newest first.
pub fn build_history(claims: &[Claim], results: &[RunResult], limit: usize) -> Vec<Record> {
    let mut best: HashMap<&str, &RunResult> = HashMap::with_capacity(results.len());
    for result in results {
        best.entry(result.token.as_str())
            .and_modify(|current| {
                let newer = (rank(&result.status), result.finished_at)
                    > (rank(&current.status), current.finished_at);
                if newer {
                    *current = result;
                }
            })
            .or_insert(result);
    }
    let mut records = Vec::with_capacity(claims.len() + results.len());
    let mut seen: HashMap<&str, ()> = HashMap::with_capacity(claims.len());
    for claim in claims {
        if seen.insert(claim.token.as_str(), ()).is_some() {
            continue;
        }
        let record = match best.remove(claim.token.as_str()) {
            Some(result) => from_result(result, Some(claim)),
            None => Record {
                slot: claim.slot,
                instance_id: claim.instance_id.clone(),
                status: "running".to_owned(),
                reason: None,
                attempt: claim.attempt.max(1),
                manual: claim.manual,
                started_at: Some(claim.at),
                finished_at: None,
                duration_ms: None,
                error: None,
            },
        };
        records.push(record);
    }
    for result in results {
        if let Some(r) = best.remove(result.token.as_str()) {
            records.push(from_result(r, None));
        }
    }
    records.sort_by(|a, b| {
        (b.slot, b.attempt, b.started_at, b.manual).cmp(&(
            a.slot,
            a.attempt,
            a.started_at,
            a.manual,
        ))
    });
    records.truncate(limit);
    records
}

fn from_result(result: &RunResult, claim: Option<&Claim>) -> Record {
    let started_at = result.started_at.or(claim.map(|c| c.at));
    let duration_ms = match (started_at, result.finished_at) {
        // A finish before the start (clocks of two instances) counts as 0;
        // a difference past i64 (corrupt times) has no duration.
        (Some(start), Some(end)) => end.checked_sub(start).map(|d| d.max(0)),
        _ => None,
    };
    let instance_id = if result.instance_id.is_empty() {
        claim.map(|c| c.instance_id.clone()).unwrap_or_default()
    } else {
        result.instance_id.clone()
    };
    let attempt = if result.attempt > 0 {
        result.attempt
    } else {
        claim.map_or(1, |c| c.attempt.max(1))
    };
    Record {
        slot: result.slot,
        instance_id,
        status: result.status.clone(),
        reason: result.reason.clone(),
        attempt,
        manual: result.manual || claim.is_some_and(|c| c.manual),
        started_at,
        finished_at: result.finished_at,
        duration_ms,
        error: result.error.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(slot: i64, token: &str, instance: &str, attempt: i64) -> Claim {
        Claim {
            slot,
            token: token.into(),
            instance_id: instance.into(),
            at: slot + 5,
            manual: false,
            attempt,
        }
    }

    fn result(slot: i64, token: &str, instance: &str, status: &str, attempt: i64) -> RunResult {
        RunResult {
            slot,
            token: token.into(),
            instance_id: instance.into(),
            status: status.into(),
            started_at: Some(slot + 5),
            finished_at: Some(slot + 25),
            error: None,
            attempt,
            manual: false,
            reason: None,
        }
    }

    #[test]
    fn claim_and_result_merge_into_one_record() {
        let records = build_history(
            &[claim(1_000, "t1", "a", 1)],
            &[result(1_000, "t1", "a", "ok", 1)],
            10,
        );
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].status, "ok");
        assert_eq!(records[0].instance_id, "a");
        assert_eq!(records[0].duration_ms, Some(20));
    }

    #[test]
    fn claim_without_result_is_running() {
        let records = build_history(&[claim(1_000, "t1", "a", 1)], &[], 10);
        assert_eq!(records[0].status, "running");
        assert_eq!(records[0].started_at, Some(1_005));
    }

    #[test]
    fn newest_first_by_slot_then_attempt() {
        let claims = vec![
            claim(1_000, "t1", "a", 1),
            claim(2_000, "t2", "a", 1),
            claim(2_000, "t3", "b", 2),
        ];
        let results = vec![
            result(2_000, "t2", "a", "interrupted", 1),
            result(3_000, "t4", "c", "skipped", 1),
        ];
        let records = build_history(&claims, &results, 10);
        let order: Vec<(i64, i64, &str)> = records
            .iter()
            .map(|r| (r.slot, r.attempt, r.status.as_str()))
            .collect();
        assert_eq!(
            order,
            vec![
                (3_000, 1, "skipped"),
                (2_000, 2, "running"),
                (2_000, 1, "interrupted"),
                (1_000, 1, "running")
            ]
        );
    }

    #[test]
    fn limit_and_duplicate_claims() {
        let claims = vec![
            claim(1_000, "t1", "a", 1),
            claim(1_000, "t1", "a", 1),
            claim(2_000, "t2", "a", 1),
        ];
        assert_eq!(build_history(&claims, &[], 10).len(), 2);
        assert_eq!(build_history(&claims, &[], 1)[0].slot, 2_000);
    }

    #[test]
    fn extreme_times_do_not_overflow() {
        let mut r = result(i64::MIN, "t1", "a", "ok", i64::MAX);
        r.started_at = Some(i64::MIN);
        r.finished_at = Some(i64::MAX);
        let records = build_history(&[], &[r.clone()], 10);
        assert_eq!(records[0].duration_ms, None);
        r.started_at = Some(i64::MAX);
        r.finished_at = Some(i64::MIN);
        assert_eq!(build_history(&[], &[r.clone()], 10)[0].duration_ms, None);
        r.started_at = Some(-1);
        r.finished_at = Some(i64::MAX - 1);
        assert_eq!(build_history(&[], &[r], 10)[0].duration_ms, Some(i64::MAX));
        let mut c = claim(0, "t2", "b", i64::MIN);
        c.slot = i64::MAX;
        c.at = i64::MIN;
        let records = build_history(&[c], &[], usize::MAX);
        assert_eq!(records[0].attempt, 1);
        assert_eq!(records[0].started_at, Some(i64::MIN));
    }

    #[test]
    fn final_status_wins_over_running() {
        let mut running = result(1_000, "t1", "a", "running", 1);
        running.finished_at = None;
        let done = result(1_000, "t1", "a", "ok", 1);
        let records = build_history(&[], &[done.clone(), running.clone()], 10);
        assert_eq!(records[0].status, "ok");
        let records = build_history(&[], &[running, done], 10);
        assert_eq!(records[0].status, "ok");
    }
}
