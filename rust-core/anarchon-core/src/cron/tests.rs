//! Tests of the cron parser and evaluator. Expected instants are written in
//! UTC and worked out by hand (offsets noted next to them).

use super::*;
use chrono::Utc;

const MIN: i64 = 60_000;
const HOUR: i64 = 3_600_000;
const DAY_MS: i64 = 86_400_000;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
        .single()
        .expect("valid test date")
        .timestamp_millis()
}

fn cron(expression: &str, tz: &str) -> CronSchedule {
    CronSchedule::parse(expression, tz)
        .unwrap_or_else(|e| panic!("{expression:?} in {tz} should parse: {e}"))
}

/// The next `n` slots strictly after `from`.
fn next_n(c: &CronSchedule, from: i64, n: usize) -> Vec<i64> {
    let mut out = Vec::new();
    let mut cursor = from;
    while out.len() < n {
        match c.next_after(cursor) {
            Some(slot) => {
                assert!(slot > cursor, "not strictly after: {slot} <= {cursor}");
                out.push(slot);
                cursor = slot;
            }
            None => break,
        }
    }
    out
}

fn slots_utc(expression: &str, from: i64, n: usize) -> Vec<i64> {
    next_n(&cron(expression, "UTC"), from, n)
}

fn parse_err(expression: &str) -> ScheduleError {
    match CronSchedule::parse(expression, "UTC") {
        Ok(c) => panic!("{expression:?} should be refused, got {c:?}"),
        Err(e) => e,
    }
}

/// Minute values (0-59) at which `expression` fires during one UTC hour.
fn minutes_in_hour(expression: &str) -> Vec<i64> {
    let start = utc(2026, 1, 1, 0, 0, 0);
    let c = cron(expression, "UTC");
    let mut out = Vec::new();
    let mut cursor = start - 1;
    while let Some(slot) = c.next_after(cursor) {
        if slot >= start + HOUR {
            break;
        }
        out.push((slot - start) / MIN);
        cursor = slot;
    }
    out
}

/// Hours (0-23) at which `expression` fires during one UTC day.
fn hours_in_day(expression: &str) -> Vec<i64> {
    let start = utc(2026, 1, 1, 0, 0, 0);
    let c = cron(expression, "UTC");
    let mut out = Vec::new();
    let mut cursor = start - 1;
    while let Some(slot) = c.next_after(cursor) {
        if slot >= start + DAY_MS {
            break;
        }
        out.push((slot - start) / HOUR);
        cursor = slot;
    }
    out
}

/// Days of January 2026 (1-31) matched by the day fields of `days`
/// (`"<dom> <month> <dow>"`).
fn days_in_january(days: &str) -> Vec<i64> {
    let start = utc(2026, 1, 1, 0, 0, 0);
    let c = cron(&format!("0 0 {days}"), "UTC");
    let mut out = Vec::new();
    let mut cursor = start - 1;
    while let Some(slot) = c.next_after(cursor) {
        if slot >= utc(2026, 2, 1, 0, 0, 0) {
            break;
        }
        out.push((slot - start) / DAY_MS + 1);
        cursor = slot;
    }
    out
}

/// Days (1-31) matched in month `mo` of `y`.
fn days_in_month_of(days: &str, y: i32, mo: u32) -> Vec<i64> {
    let start = utc(y, mo, 1, 0, 0, 0);
    let end = if mo == 12 {
        utc(y + 1, 1, 1, 0, 0, 0)
    } else {
        utc(y, mo + 1, 1, 0, 0, 0)
    };
    let c = cron(&format!("0 0 {days}"), "UTC");
    let mut out = Vec::new();
    let mut cursor = start - 1;
    while let Some(slot) = c.next_after(cursor) {
        if slot >= end {
            break;
        }
        out.push((slot - start) / DAY_MS + 1);
        cursor = slot;
    }
    out
}

// ------------------------------------------------------------------ basics

#[test]
fn every_second_is_strictly_after_whole_seconds() {
    let c = cron("* * * * * *", "UTC");
    for k in [-5_i64, -1, 0, 1, 1_767_225_600, 4_000_000_000] {
        assert_eq!(c.next_after(1000 * k), Some(1000 * (k + 1)));
        assert_eq!(c.next_after(1000 * k + 500), Some(1000 * (k + 1)));
        assert_eq!(c.next_after(1000 * k - 1), Some(1000 * k));
    }
}

#[test]
fn five_fields_minute_first() {
    let t = utc(2026, 1, 1, 0, 0, 0);
    assert_eq!(
        slots_utc("*/5 * * * *", t, 3),
        vec![t + 5 * MIN, t + 10 * MIN, t + 15 * MIN]
    );
    assert_eq!(
        slots_utc("*/5 * * * *", t + 5 * MIN - 1, 1),
        vec![t + 5 * MIN]
    );
    assert_eq!(
        slots_utc("0 3 * * *", t, 2),
        vec![utc(2026, 1, 1, 3, 0, 0), utc(2026, 1, 2, 3, 0, 0)]
    );
    // 2026-01-01 is a Thursday: next weekday 09:00 after Friday is Monday.
    assert_eq!(
        slots_utc("0 9 * * 1-5", utc(2026, 1, 2, 9, 0, 0), 1),
        vec![utc(2026, 1, 5, 9, 0, 0)]
    );
    assert_eq!(slots_utc("* * * * *", t, 1), vec![t + MIN]);
}

#[test]
fn six_fields_are_seconds_first() {
    let t = utc(2026, 1, 1, 0, 0, 0);
    assert_eq!(
        slots_utc("*/10 * * * * *", t, 3),
        vec![t + 10_000, t + 20_000, t + 30_000]
    );
    assert_eq!(
        slots_utc("30 15 10 * * *", t, 2),
        vec![utc(2026, 1, 1, 10, 15, 30), utc(2026, 1, 2, 10, 15, 30)]
    );
    assert_eq!(
        slots_utc("0 0 0 1 1 *", t, 1),
        vec![utc(2027, 1, 1, 0, 0, 0)]
    );
}

#[test]
fn lists_ranges_and_steps() {
    assert_eq!(minutes_in_hour("1,2,3 * * * *"), vec![1, 2, 3]);
    assert_eq!(minutes_in_hour("10-12 * * * *"), vec![10, 11, 12]);
    assert_eq!(minutes_in_hour("*/20 * * * *"), vec![0, 20, 40]);
    assert_eq!(minutes_in_hour("5-20/5 * * * *"), vec![5, 10, 15, 20]);
    assert_eq!(minutes_in_hour("50/5 * * * *"), vec![50, 55]);
    assert_eq!(minutes_in_hour("59/15 * * * *"), vec![59]);
    assert_eq!(minutes_in_hour("*/100 * * * *"), vec![0]);
    assert_eq!(minutes_in_hour("0-59/30,7 * * * *"), vec![0, 7, 30]);
    assert_eq!(minutes_in_hour("5-5 * * * *"), vec![5]);
    // Reversed ranges wrap around the end of the field, as in croniter,
    // including croniter's arithmetic for where a step resumes.
    assert_eq!(minutes_in_hour("58-2 * * * *"), vec![0, 1, 2, 58, 59]);
    assert_eq!(minutes_in_hour("50-10/7 * * * *"), vec![5, 50, 57]);
    assert_eq!(hours_in_day("0 22-2 * * *"), vec![0, 1, 2, 22, 23]);
    assert_eq!(hours_in_day("0 */6 * * *"), vec![0, 6, 12, 18]);
    // Months 4-1/3 wrap: 4, 7, 10, 1; 11-2/3 resumes past 2 (croniter).
    let c = cron("0 0 1 4-1/3 *", "UTC");
    assert_eq!(
        next_n(&c, utc(2026, 1, 1, 0, 0, 0), 4),
        vec![
            utc(2026, 4, 1, 0, 0, 0),
            utc(2026, 7, 1, 0, 0, 0),
            utc(2026, 10, 1, 0, 0, 0),
            utc(2027, 1, 1, 0, 0, 0)
        ]
    );
    let c = cron("0 0 1 11-2/3 *", "UTC");
    assert_eq!(
        next_n(&c, utc(2026, 1, 1, 0, 0, 0), 2),
        vec![utc(2026, 11, 1, 0, 0, 0), utc(2027, 11, 1, 0, 0, 0)]
    );
}

#[test]
fn month_and_day_names() {
    let c = cron("0 0 1 jan-MAR *", "UTC");
    assert_eq!(
        next_n(&c, utc(2026, 1, 1, 0, 0, 0), 3),
        vec![
            utc(2026, 2, 1, 0, 0, 0),
            utc(2026, 3, 1, 0, 0, 0),
            utc(2027, 1, 1, 0, 0, 0)
        ]
    );
    let c = cron("0 0 1 JAN/2 *", "UTC");
    assert_eq!(
        next_n(&c, utc(2026, 1, 1, 0, 0, 0), 2),
        vec![utc(2026, 3, 1, 0, 0, 0), utc(2026, 5, 1, 0, 0, 0)]
    );
    // January 2026: Thu 1, Fri 2, Sat 3, Sun 4, Mon 5 ...
    assert_eq!(days_in_january("* * MON-fri")[..5], [1, 2, 5, 6, 7]);
    assert_eq!(days_in_january("* * sun"), vec![4, 11, 18, 25]);
    assert_eq!(
        days_in_january("* * Sat,SUN"),
        vec![3, 4, 10, 11, 17, 18, 24, 25, 31]
    );
}

#[test]
fn day_of_week_seven_is_sunday() {
    assert_eq!(days_in_january("* * 7"), vec![4, 11, 18, 25]);
    assert_eq!(days_in_january("* * 0"), vec![4, 11, 18, 25]);
    assert_eq!(days_in_january("* * 5-7")[..3], [2, 3, 4]);
    assert_eq!(
        days_in_january("* * 6-0"),
        vec![3, 4, 10, 11, 17, 18, 24, 25, 31]
    );
    assert_eq!(days_in_january("* * 0-7").len(), 31);
    assert_eq!(
        days_in_january("* * 7-1"),
        vec![4, 5, 11, 12, 18, 19, 25, 26]
    );
    // `a/n` runs to Saturday (6), as croniter: 1/2 = Mon, Wed, Fri.
    assert_eq!(days_in_january("* * 1/2")[..3], [2, 5, 7]);
    assert_eq!(days_in_january("* * */2")[..3], [1, 3, 4]);
}

#[test]
fn question_mark_means_star() {
    assert_eq!(days_in_january("? * 5"), days_in_january("* * 5"));
    assert_eq!(days_in_january("13 * ?"), vec![13]);
    assert_eq!(days_in_january("? * ?").len(), 31);
}

#[test]
fn last_day_and_nearest_weekday() {
    assert_eq!(days_in_month_of("L * *", 2026, 2), vec![28]);
    assert_eq!(days_in_month_of("L * *", 2028, 2), vec![29]);
    assert_eq!(days_in_month_of("1,L * *", 2026, 4), vec![1, 30]);
    assert_eq!(days_in_month_of("28-L * *", 2026, 1), vec![28, 29, 30, 31]);
    // LW: last weekday. Jan 2026 ends Sat 31 -> Fri 30; May 2026 ends Sun 31
    // -> Fri 29; March 2026 ends Tue 31.
    assert_eq!(days_in_month_of("LW * *", 2026, 1), vec![30]);
    assert_eq!(days_in_month_of("LW * *", 2026, 5), vec![29]);
    assert_eq!(days_in_month_of("LW * *", 2026, 3), vec![31]);
    // 15W: Feb 15 2026 is a Sunday -> Mon 16; Aug 15 2026 is a Saturday -> Fri 14.
    assert_eq!(days_in_month_of("15W * *", 2026, 2), vec![16]);
    assert_eq!(days_in_month_of("15W * *", 2026, 8), vec![14]);
    assert_eq!(days_in_month_of("W15 * *", 2026, 8), vec![14]);
    assert_eq!(days_in_month_of("15W * *", 2026, 1), vec![15]);
    // 1W never leaves the month: Aug 1 2026 is a Saturday -> Mon 3.
    assert_eq!(days_in_month_of("1W * *", 2026, 8), vec![3]);
    // 31W clamps to the month: Feb 2026 ends Sat 28 -> Fri 27 (croniter);
    // May 31 2026 is a Sunday and the last day -> Fri 29.
    assert_eq!(days_in_month_of("31W * *", 2026, 2), vec![27]);
    assert_eq!(days_in_month_of("31W * *", 2026, 5), vec![29]);
    assert_eq!(days_in_month_of("1W,15W * *", 2026, 8), vec![3, 14]);
}

#[test]
fn last_and_nth_weekday() {
    // Last Friday: Jan 30 2026, Feb 27 2026.
    for e in ["* * 5L", "* * L5", "* * fri#5,5L"] {
        assert_eq!(days_in_month_of(e, 2026, 1), vec![30], "{e}");
    }
    assert_eq!(days_in_month_of("* * 5L", 2026, 2), vec![27]);
    // A name works like the number (`FRIL` = `LFRI` = `5L`), and so does a
    // range: `MON-FRIL` is the last Monday, ..., the last Friday.
    for e in ["* * FRIL", "* * LFRI", "* * fril", "* * Fri-FriL"] {
        assert_eq!(days_in_month_of(e, 2026, 1), vec![30], "{e}");
    }
    for e in ["* * MON-FRIL", "* * 1-5L", "* * L1-5", "* * LMON-FRI"] {
        assert_eq!(
            days_in_month_of(e, 2026, 1),
            vec![26, 27, 28, 29, 30],
            "{e}"
        );
    }
    // A range past Saturday wraps: Fri, Sat, Sun, Mon.
    assert_eq!(
        days_in_month_of("* * FRI-MONL", 2026, 1),
        vec![25, 26, 30, 31]
    );
    assert_eq!(days_in_month_of("* * SUNL,7L", 2026, 1), vec![25]);
    // Last Sunday, 0 and 7 alike: Jan 25 2026.
    assert_eq!(days_in_month_of("* * L0", 2026, 1), vec![25]);
    assert_eq!(days_in_month_of("* * 7L", 2026, 1), vec![25]);
    assert_eq!(days_in_month_of("* * 5#2", 2026, 1), vec![9]);
    assert_eq!(days_in_month_of("* * FRI#2", 2026, 1), vec![9]);
    // Fifth Friday exists in January 2026, not in February.
    assert_eq!(days_in_month_of("* * 5#5", 2026, 1), vec![30]);
    assert!(days_in_month_of("* * 5#5", 2026, 2).is_empty());
    assert_eq!(days_in_month_of("* * 5#2,L5,1#1", 2026, 1), vec![5, 9, 30]);
    // Mixing plain weekdays and `#` (croniter refuses this).
    assert_eq!(
        days_in_month_of("* * 1,5#2", 2026, 1),
        vec![5, 9, 12, 19, 26]
    );
    assert_eq!(days_in_month_of("* * mon-wed#1", 2026, 1), vec![5, 6, 7]);
}

#[test]
fn day_of_month_and_day_of_week_or_rule() {
    // Both restricted: OR (Fridays and the 13th).
    assert_eq!(days_in_january("13 * 5"), vec![2, 9, 13, 16, 23, 30]);
    // `*/2` counts as restricted: odd days or Mondays.
    assert_eq!(
        days_in_january("*/2 * 1"),
        vec![1, 3, 5, 7, 9, 11, 12, 13, 15, 17, 19, 21, 23, 25, 26, 27, 29, 31]
    );
    // One side `*`: the other one alone.
    assert_eq!(days_in_january("* * 5"), vec![2, 9, 16, 23, 30]);
    assert_eq!(days_in_january("13 * *"), vec![13]);
    // Only a bare `*`/`?` is unrestricted: a field listing every value is
    // restricted and the OR takes every day (croniter: AND, `or-star-collapse`).
    assert_eq!(days_in_january("*/2 * */1").len(), 31);
    assert_eq!(days_in_january("*/1 * */2").len(), 31);
    assert_eq!(days_in_january("1-31 * 5").len(), 31);
    assert_eq!(days_in_january("*/2 * 0-6").len(), 31);
    // Specials combine with OR too: the 15th or the second Friday (9th).
    assert_eq!(days_in_january("15 * 5#2"), vec![9, 15]);
    assert_eq!(days_in_january("1 * L5"), vec![1, 30]);
    assert_eq!(days_in_january("15W * 5"), vec![2, 9, 15, 16, 23, 30]);
    assert_eq!(days_in_january("L * 1"), vec![5, 12, 19, 26, 31]);
}

#[test]
fn macros() {
    let t = utc(2026, 1, 1, 0, 0, 0);
    let cases = [
        ("@hourly", utc(2026, 1, 1, 1, 0, 0)),
        ("@daily", utc(2026, 1, 2, 0, 0, 0)),
        ("@midnight", utc(2026, 1, 2, 0, 0, 0)),
        ("@weekly", utc(2026, 1, 4, 0, 0, 0)),
        ("@monthly", utc(2026, 2, 1, 0, 0, 0)),
        ("@yearly", utc(2027, 1, 1, 0, 0, 0)),
        ("@annually", utc(2027, 1, 1, 0, 0, 0)),
        ("  @DAILY ", utc(2026, 1, 2, 0, 0, 0)),
    ];
    for (e, expected) in cases {
        assert_eq!(cron(e, "UTC").next_after(t), Some(expected), "{e}");
    }
    // @daily is a fixed local time (hour 0), @hourly a wildcard hour.
    assert!(!cron("@daily", "UTC").wildcard_hour);
    assert!(cron("@hourly", "UTC").wildcard_hour);
}

#[test]
fn whitespace_and_case() {
    let a = cron(" 0\t9  *  * mon-FRI ", "UTC");
    let b = cron("0 9 * * 1-5", "UTC");
    let t = utc(2026, 1, 1, 0, 0, 0);
    assert_eq!(next_n(&a, t, 10), next_n(&b, t, 10));
}

// ------------------------------------------------------------------ errors

#[test]
fn errors_carry_field_and_position() {
    let cases: &[(&str, &str, usize, &str)] = &[
        ("", "expression", 0, "empty"),
        ("   ", "expression", 0, "empty"),
        ("* * * *", "expression", 7, "too few fields"),
        ("0 0 0 * * * 2030", "expression", 12, "seventh (year) field"),
        ("0 0 0 * * * * *", "expression", 12, "too many fields"),
        ("@reboot", "expression", 0, "unknown macro"),
        (" @every", "expression", 1, "unknown macro"),
        ("@daily 5", "expression", 7, "stands alone"),
        (
            "60 * * * *",
            "minute",
            0,
            "minute value 60 out of range 0-59",
        ),
        ("* 24 * * *", "hour", 2, "hour value 24 out of range 0-23"),
        (
            "0 0 0 * *",
            "day-of-month",
            4,
            "day-of-month value 0 out of range 1-31",
        ),
        ("0 0 32 * *", "day-of-month", 4, "out of range 1-31"),
        ("0 0 * 13 *", "month", 6, "month value 13 out of range 1-12"),
        ("0 0 * 0 *", "month", 6, "out of range 1-12"),
        (
            "0 0 * * 8",
            "day-of-week",
            8,
            "day-of-week value 8 out of range 0-7",
        ),
        (
            "60 * * * * *",
            "second",
            0,
            "second value 60 out of range 0-59",
        ),
        ("1-60 * * * *", "minute", 2, "minute value 60 out of range"),
        ("*/0 * * * *", "minute", 2, "step 0"),
        ("5/0 * * * *", "minute", 2, "step 0"),
        ("*/x * * * *", "minute", 2, "step must be a positive number"),
        ("*/ * * * *", "minute", 2, "step must be a positive number"),
        ("1/2/3 * * * *", "minute", 0, "more than one `/`"),
        ("1,,2 * * * *", "minute", 2, "empty list item"),
        ("0 0 1,,2 * *", "day-of-month", 6, "empty list item"),
        ("1, * * * *", "minute", 2, "empty list item"),
        (",1 * * * *", "minute", 0, "empty list item"),
        ("0 0 * * 1,", "day-of-week", 10, "empty list item"),
        ("H * * * *", "minute", 0, "`H`"),
        ("0 H(0-5) * * *", "hour", 2, "`H`"),
        ("0 0 H * *", "day-of-month", 4, "`H`"),
        ("R * * * *", "minute", 0, "`R`"),
        ("0 0 * * r", "day-of-week", 8, "`R`"),
        (
            "0 0 * JANUARY *",
            "month",
            6,
            "unknown month name `JANUARY`",
        ),
        ("0 0 * XYZ *", "month", 6, "unknown month name"),
        ("0 0 * * tues", "day-of-week", 8, "unknown day name `tues`"),
        (
            "0 0 * * mon-xyz",
            "day-of-week",
            12,
            "unknown day name `xyz`",
        ),
        ("0 0 * * 1-", "day-of-week", 10, "missing value after `-`"),
        ("0 0 1-2-3 * *", "day-of-month", 6, "malformed range"),
        ("0 0 * * 1-#2", "day-of-week", 10, "missing value after `-`"),
        ("0 0 * * -1#2", "day-of-week", 8, "negative value"),
        ("0 0 * * 7-8#2", "day-of-week", 10, "out of range 0-7"),
        ("0 0 * * -1", "day-of-week", 8, "negative value"),
        ("0 0 * mon *", "month", 6, "unknown month name"),
        ("0 0 jan * *", "day-of-month", 4, "invalid value"),
        ("a * * * *", "minute", 0, "invalid value `a`"),
        ("0 ? * * *", "hour", 2, "`?` is only allowed"),
        ("? * * * * *", "second", 0, "`?` is only allowed"),
        ("0 0 ?/2 * *", "day-of-month", 4, "`?` must stand alone"),
        ("0 0 1,? * *", "day-of-month", 6, "`?` must stand alone"),
        ("0 0 * * L", "day-of-week", 8, "needs a weekday"),
        ("0 0 * * 8L", "day-of-week", 8, "out of range 0-7"),
        ("0 0 * * L8", "day-of-week", 9, "out of range 0-7"),
        ("- * * * *", "minute", 0, "a lone `-` in the minute field"),
        ("0 - * * *", "hour", 2, "a lone `-`"),
        ("0 0 * * -", "day-of-week", 8, "a lone `-`"),
        ("0 0 * * -#2", "day-of-week", 8, "a lone `-`"),
        ("0 0 * * -L", "day-of-week", 8, "a lone `-`"),
        ("0 0 -/2 * *", "day-of-month", 4, "a lone `-`"),
        ("0 0 -L * *", "day-of-month", 4, "has no start value"),
        ("0 0 * * -FRI", "day-of-week", 8, "has no start value"),
        (
            "0 0 * * */2L",
            "day-of-week",
            8,
            "takes a weekday or a range",
        ),
        ("0 0 * * FUNL", "day-of-week", 8, "unknown day name `FUN`"),
        (
            "0 0 * * MON-FUNL",
            "day-of-week",
            12,
            "unknown day name `FUN`",
        ),
        (
            "0 0 * * MON-L",
            "day-of-week",
            12,
            "missing value after `-`",
        ),
        (
            "0 0 * * 5#6",
            "day-of-week",
            10,
            "`#` takes an occurrence 1-5",
        ),
        (
            "0 0 * * 5#0",
            "day-of-week",
            10,
            "`#` takes an occurrence 1-5",
        ),
        (
            "0 0 * * 5#",
            "day-of-week",
            10,
            "`#` takes an occurrence 1-5",
        ),
        ("0 0 * * 9#2", "day-of-week", 8, "out of range 0-7"),
        ("0 0 W * *", "day-of-month", 4, "`W` takes a single day"),
        ("0 0 1-5W * *", "day-of-month", 4, "`W` takes a single day"),
        ("0 0 0W * *", "day-of-month", 4, "out of range 1-31"),
        ("0 0 32W * *", "day-of-month", 4, "out of range 1-31"),
        ("0 0 L-3 * *", "day-of-month", 4, "not supported"),
        ("0 0 L/2 * *", "day-of-month", 4, "not supported"),
        ("99999999999 * * * *", "minute", 0, "out of range 0-59"),
        ("0 0 * * 1 ", "day-of-week", 0, ""), // valid: placeholder skipped below
    ];
    for (expression, field, position, message) in cases {
        if message.is_empty() {
            assert!(CronSchedule::parse(expression, "UTC").is_ok());
            continue;
        }
        let e = parse_err(expression);
        assert_eq!(e.field.as_deref(), Some(*field), "{expression:?}: {e}");
        assert_eq!(e.position, Some(*position), "{expression:?}: {e}");
        assert!(
            e.message.contains(message),
            "{expression:?}: {:?} should contain {message:?}",
            e.message
        );
    }
}

#[test]
fn error_positions_count_characters_not_bytes() {
    // `é` is two bytes: a missing field is reported at character 7.
    let e = parse_err("é * * *");
    assert_eq!(e.field.as_deref(), Some("expression"));
    assert_eq!(e.position, Some(7));
    let e = parse_err("0 0 * é 60");
    assert_eq!(e.field.as_deref(), Some("month"));
    assert_eq!(e.position, Some(6));
    let e = parse_err("0 0\u{a0}* * 1 60");
    // A no-break space is not a separator (as in croniter): 5 tokens here,
    // and the second one is not a valid hour.
    assert_eq!(e.field.as_deref(), Some("hour"));
    assert_eq!(e.position, Some(2));
}

#[test]
fn time_zone_errors() {
    for tz in ["", "  "] {
        let e = CronSchedule::parse("0 3 * * *", tz).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("tz"));
        assert_eq!(e.position, None);
        assert!(e.message.contains("empty"), "{}", e.message);
    }
    let e = CronSchedule::parse("0 3 * * *", "Mars/Olympus").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("tz"));
    assert_eq!(e.position, None);
    assert!(e.message.contains("unknown time zone `Mars/Olympus`"));
    let e = CronSchedule::parse("0 3 * * *", "europe/athens").unwrap_err();
    assert!(
        e.message.contains("did you mean `Europe/Athens`"),
        "{}",
        e.message
    );
    // The expression is checked first.
    let e = CronSchedule::parse("61 * * * *", "Nowhere").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("minute"));
}

#[test]
fn error_display_is_readable() {
    let e = parse_err("60 * * * *");
    assert_eq!(
        e.to_string(),
        "minute value 60 out of range 0-59 (field minute, position 0)"
    );
}

// ------------------------------------------------------------------ DST

#[test]
fn new_york_gap_fixed_time_fires_once_after_the_gap() {
    // 2026-03-08: 02:00 EST (07:00 UTC) -> 03:00 EDT.
    let c = cron("30 2 * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc(2026, 3, 7, 12, 0, 0), 2),
        vec![utc(2026, 3, 8, 7, 0, 0), utc(2026, 3, 9, 6, 30, 0)]
    );
    // Several nonexistent times, one instant.
    let c = cron("0,30 2 * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc(2026, 3, 7, 12, 0, 0), 3),
        vec![
            utc(2026, 3, 8, 7, 0, 0),
            utc(2026, 3, 9, 6, 0, 0),
            utc(2026, 3, 9, 6, 30, 0)
        ]
    );
    // 03:00 itself also matches: still once, then 03:30 EDT.
    let c = cron("0,30 2,3 * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc(2026, 3, 8, 6, 0, 0), 3),
        vec![
            utc(2026, 3, 8, 7, 0, 0),  // 02:00, 02:30 and 03:00 EDT
            utc(2026, 3, 8, 7, 30, 0), // 03:30 EDT
            utc(2026, 3, 9, 6, 0, 0)   // 02:00 EDT
        ]
    );
    // Asked from the last instant before the gap, and from half a second before.
    let c = cron("30 2 * * *", "America/New_York");
    assert_eq!(
        c.next_after(utc(2026, 3, 8, 6, 59, 59)),
        Some(utc(2026, 3, 8, 7, 0, 0))
    );
    assert_eq!(
        c.next_after(utc(2026, 3, 8, 7, 0, 0) - 500),
        Some(utc(2026, 3, 8, 7, 0, 0))
    );
    assert_eq!(
        c.next_after(utc(2026, 3, 8, 7, 0, 0)),
        Some(utc(2026, 3, 9, 6, 30, 0))
    );
}

#[test]
fn new_york_fold_fixed_time_fires_once_first_occurrence() {
    // 2026-11-01: 02:00 EDT (06:00 UTC) -> 01:00 EST.
    let c = cron("30 1 * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc(2026, 10, 31, 12, 0, 0), 2),
        vec![utc(2026, 11, 1, 5, 30, 0), utc(2026, 11, 2, 6, 30, 0)]
    );
    // Asked from inside the second pass (01:10 EST = 06:10 UTC).
    assert_eq!(
        c.next_after(utc(2026, 11, 1, 6, 10, 0)),
        Some(utc(2026, 11, 2, 6, 30, 0))
    );
    // Asked from inside the first pass (01:10 EDT = 05:10 UTC).
    assert_eq!(
        c.next_after(utc(2026, 11, 1, 5, 10, 0)),
        Some(utc(2026, 11, 1, 5, 30, 0))
    );
    // A fixed hour with a wildcard minute: the whole first pass, no replay.
    let c = cron("*/20 1 * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc(2026, 11, 1, 4, 30, 0), 4),
        vec![
            utc(2026, 11, 1, 5, 0, 0),
            utc(2026, 11, 1, 5, 20, 0),
            utc(2026, 11, 1, 5, 40, 0),
            utc(2026, 11, 2, 6, 0, 0)
        ]
    );
}

#[test]
fn new_york_wildcard_hour_follows_real_time() {
    // Gap: 02:00 does not exist and is skipped.
    let c = cron("0 * * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc(2026, 3, 8, 5, 30, 0), 3),
        vec![
            utc(2026, 3, 8, 6, 0, 0), // 01:00 EST
            utc(2026, 3, 8, 7, 0, 0), // 03:00 EDT
            utc(2026, 3, 8, 8, 0, 0)  // 04:00 EDT
        ]
    );
    let c = cron("*/15 * * * *", "America/New_York");
    assert_eq!(
        c.next_after(utc(2026, 3, 8, 6, 45, 0)), // 01:45 EST
        Some(utc(2026, 3, 8, 7, 0, 0))           // 03:00 EDT
    );
    // `*/n` hour: 02:15 and 02:45 are skipped, not moved to 03:00.
    let c = cron("15,45 */2 * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc(2026, 3, 8, 5, 30, 0), 2),
        vec![utc(2026, 3, 8, 5, 45, 0), utc(2026, 3, 8, 8, 15, 0)]
    );
    // Fold: both occurrences.
    let c = cron("0 * * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc(2026, 11, 1, 4, 30, 0), 3),
        vec![
            utc(2026, 11, 1, 5, 0, 0), // 01:00 EDT
            utc(2026, 11, 1, 6, 0, 0), // 01:00 EST
            utc(2026, 11, 1, 7, 0, 0)  // 02:00 EST
        ]
    );
    let c = cron("*/15 * * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc(2026, 11, 1, 5, 30, 0), 4),
        vec![
            utc(2026, 11, 1, 5, 45, 0), // 01:45 EDT
            utc(2026, 11, 1, 6, 0, 0),  // 01:00 EST
            utc(2026, 11, 1, 6, 15, 0), // 01:15 EST
            utc(2026, 11, 1, 6, 30, 0)  // 01:30 EST
        ]
    );
    // From inside the second pass: 01:10 EST -> 01:15 EST (not 01:15 EDT).
    assert_eq!(
        c.next_after(utc(2026, 11, 1, 6, 10, 0)),
        Some(utc(2026, 11, 1, 6, 15, 0))
    );
    // From the end of the first pass: 01:50 EDT -> 01:00 EST.
    assert_eq!(
        c.next_after(utc(2026, 11, 1, 5, 50, 0)),
        Some(utc(2026, 11, 1, 6, 0, 0))
    );
    assert_eq!(
        c.next_after(utc(2026, 11, 1, 5, 59, 59) + 999),
        Some(utc(2026, 11, 1, 6, 0, 0))
    );
    // From the first pass, with the match only in the replayed part:
    // 01:50 EDT, `10 * * * *` -> 01:10 EST.
    let c = cron("10 * * * *", "America/New_York");
    assert_eq!(
        c.next_after(utc(2026, 11, 1, 5, 50, 0)),
        Some(utc(2026, 11, 1, 6, 10, 0))
    );
}

#[test]
fn athens_gap_and_fold() {
    // 2026-03-29: 03:00 EET (01:00 UTC) -> 04:00 EEST.
    let c = cron("0 3 * * *", "Europe/Athens");
    assert_eq!(
        next_n(&c, utc(2026, 3, 27, 12, 0, 0), 3),
        vec![
            utc(2026, 3, 28, 1, 0, 0), // 03:00 EET
            utc(2026, 3, 29, 1, 0, 0), // gap -> 04:00 EEST
            utc(2026, 3, 30, 0, 0, 0)  // 03:00 EEST
        ]
    );
    let c = cron("30 3 * * *", "Europe/Athens");
    assert_eq!(
        c.next_after(utc(2026, 3, 28, 12, 0, 0)),
        Some(utc(2026, 3, 29, 1, 0, 0))
    );
    // 2026-10-25: 04:00 EEST (01:00 UTC) -> 03:00 EET.
    let c = cron("0 3 * * *", "Europe/Athens");
    assert_eq!(
        next_n(&c, utc(2026, 10, 24, 12, 0, 0), 2),
        vec![utc(2026, 10, 25, 0, 0, 0), utc(2026, 10, 26, 1, 0, 0)]
    );
    let c = cron("30 * * * *", "Europe/Athens");
    assert_eq!(
        next_n(&c, utc(2026, 10, 24, 23, 0, 0), 4),
        vec![
            utc(2026, 10, 24, 23, 30, 0), // 02:30 EEST
            utc(2026, 10, 25, 0, 30, 0),  // 03:30 EEST
            utc(2026, 10, 25, 1, 30, 0),  // 03:30 EET
            utc(2026, 10, 25, 2, 30, 0)   // 04:30 EET
        ]
    );
}

#[test]
fn lord_howe_half_hour_dst() {
    // 2026-10-04: 02:00 LHST (+10:30, 15:30 UTC the day before) -> 02:30 LHDT.
    let c = cron("15 2 * * *", "Australia/Lord_Howe");
    assert_eq!(
        next_n(&c, utc(2026, 10, 3, 0, 0, 0), 2),
        vec![utc(2026, 10, 3, 15, 30, 0), utc(2026, 10, 4, 15, 15, 0)]
    );
    // Wildcard hour: 02:15 does not exist and is skipped.
    let c = cron("15 * * * *", "Australia/Lord_Howe");
    assert_eq!(
        next_n(&c, utc(2026, 10, 3, 14, 0, 0), 2),
        vec![
            utc(2026, 10, 3, 14, 45, 0), // 01:15 LHST
            utc(2026, 10, 3, 16, 15, 0)  // 03:15 LHDT
        ]
    );
    // 2026-04-05: 02:00 LHDT (+11, 15:00 UTC the day before) -> 01:30 LHST.
    let c = cron("45 1 * * *", "Australia/Lord_Howe");
    assert_eq!(
        next_n(&c, utc(2026, 4, 4, 0, 0, 0), 2),
        vec![utc(2026, 4, 4, 14, 45, 0), utc(2026, 4, 5, 15, 15, 0)]
    );
    let c = cron("*/20 * * * *", "Australia/Lord_Howe");
    assert_eq!(
        next_n(&c, utc(2026, 4, 4, 14, 30, 0), 4),
        vec![
            utc(2026, 4, 4, 14, 40, 0), // 01:40 LHDT
            utc(2026, 4, 4, 15, 10, 0), // 01:40 LHST (replayed)
            utc(2026, 4, 4, 15, 30, 0), // 02:00 LHST
            utc(2026, 4, 4, 15, 50, 0)  // 02:20 LHST
        ]
    );
}

#[test]
fn offsets_that_are_not_whole_hours() {
    // Asia/Kolkata is +05:30 all year.
    let c = cron("0 9 * * *", "Asia/Kolkata");
    assert_eq!(
        c.next_after(utc(2026, 1, 1, 0, 0, 0)),
        Some(utc(2026, 1, 1, 3, 30, 0))
    );
    // Asia/Kathmandu is +05:45.
    let c = cron("0 0 * * *", "Asia/Kathmandu");
    assert_eq!(
        c.next_after(utc(2026, 1, 1, 0, 0, 0)),
        Some(utc(2026, 1, 1, 18, 15, 0))
    );
}

#[test]
fn fixed_offset_zones() {
    let c = cron("0 3 * * *", "Etc/GMT+5"); // UTC-5
    assert_eq!(c.fixed_offset, Some(-5 * 3600));
    assert_eq!(
        c.next_after(utc(2026, 1, 1, 0, 0, 0)),
        Some(utc(2026, 1, 1, 8, 0, 0))
    );
    assert_eq!(cron("* * * * *", "UTC").fixed_offset, Some(0));
    assert_eq!(cron("* * * * *", "Europe/Athens").fixed_offset, None);
}

#[test]
fn slots_strictly_increase_through_a_dst_year() {
    for tz in [
        "America/New_York",
        "Europe/Athens",
        "Australia/Lord_Howe",
        "America/Santiago",
        "Pacific/Chatham",
    ] {
        for e in [
            "0 * * * *",
            "*/15 * * * *",
            "30 1 * * *",
            "0 2 * * *",
            "0 0 * * *",
            "*/20 0-3 * * *",
        ] {
            let c = cron(e, tz);
            let from = utc(2026, 1, 1, 0, 0, 0);
            let slots = next_n(&c, from, 40_000);
            assert!(!slots.is_empty());
            for w in slots.windows(2) {
                assert!(w[0] < w[1], "{e} {tz}");
                assert_eq!(w[0] % 1000, 0);
            }
        }
    }
}

// ------------------------------------------------------------------ calendar

#[test]
fn leap_day_skips_2100() {
    let c = cron("0 0 29 2 *", "UTC");
    assert_eq!(
        c.next_after(utc(2024, 3, 1, 0, 0, 0)),
        Some(utc(2028, 2, 29, 0, 0, 0))
    );
    assert_eq!(
        next_n(&c, utc(2096, 3, 1, 0, 0, 0), 2),
        vec![utc(2104, 2, 29, 0, 0, 0), utc(2108, 2, 29, 0, 0, 0)]
    );
}

#[test]
fn impossible_dates_have_no_slot() {
    for e in [
        "0 0 30 2 *",
        "0 0 31 4 *",
        "0 0 31 4,6,9,11 *",
        "0 0 30,31 feb *",
    ] {
        for tz in ["UTC", "Europe/Athens"] {
            let c = cron(e, tz);
            assert_eq!(c.next_after(0), None, "{e}");
            assert_eq!(c.next_after(i64::MIN), None, "{e}");
        }
    }
    // A rare date is still found: the fifth Monday of February.
    let c = cron("0 0 * 2 1#5", "UTC");
    // Feb 29 2044 is a Monday (5th Monday of February).
    assert_eq!(
        c.next_after(utc(2026, 1, 1, 0, 0, 0)),
        Some(utc(2044, 2, 29, 0, 0, 0))
    );
}

// ------------------------------------------------------------------ min gap

#[test]
fn min_gap_in_utc_is_exact() {
    let cases: &[(&str, i64)] = &[
        ("* * * * * *", 1_000),
        ("*/10 * * * * *", 10_000),
        ("0,30 * * * * *", 30_000),
        ("* * * * *", MIN),
        ("*/5 * * * *", 5 * MIN),
        ("*/7 * * * *", 4 * MIN), // 56 -> 00
        ("15,45 */2 * * *", 30 * MIN),
        ("0 * * * *", HOUR),
        ("@hourly", HOUR),
        ("0 3 * * *", DAY_MS),
        ("@daily", DAY_MS),
        ("0 9 * * 1-5", DAY_MS),
        ("0 22,2 * * *", 4 * HOUR),
        ("0 0,12 * * *", 12 * HOUR),
        ("@weekly", 7 * DAY_MS),
        ("0 0 1 * *", 28 * DAY_MS),
        ("@monthly", 28 * DAY_MS),
        ("@yearly", 365 * DAY_MS),
        ("0 0 29 2 *", 1461 * DAY_MS),
        ("0 0 13 * 5", DAY_MS), // Friday 12th then Saturday 13th
        ("0 0 * * 5L", 28 * DAY_MS),
        ("59 23 * * *", DAY_MS),
        ("0 23 * * 1,2", DAY_MS),
    ];
    for (e, expected) in cases {
        assert_eq!(cron(e, "UTC").min_gap_ms(), *expected, "{e}");
    }
}

#[test]
fn min_gap_is_a_lower_bound_of_real_gaps() {
    let cases = [
        ("0 * * * *", "America/New_York"),
        ("30 1 * * *", "America/New_York"),
        ("30 2 * * *", "America/New_York"),
        ("0 3 * * *", "Europe/Athens"),
        ("*/20 1 * * *", "Europe/London"),
        ("15 2 * * *", "Australia/Lord_Howe"),
        ("30,59 * * * *", "Australia/Lord_Howe"),
        ("59 59 1,2 * * *", "America/New_York"),
        ("0 */3 * * *", "Europe/Athens"),
        ("0 0 1 * *", "UTC"),
        ("0 0 * * 5L", "Europe/Athens"),
    ];
    for (e, tz) in cases {
        let c = cron(e, tz);
        let gap = c.min_gap_ms();
        let slots = next_n(&c, utc(2025, 1, 1, 0, 0, 0), 30_000);
        let end = utc(2028, 1, 1, 0, 0, 0);
        let smallest = slots
            .windows(2)
            .filter(|w| w[1] < end)
            .map(|w| w[1] - w[0])
            .min()
            .expect("some gaps");
        assert!(
            0 < gap && gap <= smallest,
            "{e} {tz}: min_gap {gap} > {smallest}"
        );
    }
    // DST days are 23 h long: the real minimum for a daily job.
    assert_eq!(cron("0 3 * * *", "Europe/Athens").min_gap_ms(), 23 * HOUR);
    assert_eq!(cron("0 * * * *", "America/New_York").min_gap_ms(), HOUR);
    assert_eq!(cron("*/5 * * * *", "Europe/Athens").min_gap_ms(), 5 * MIN);
    assert_eq!(cron("* * * * * *", "Europe/Athens").min_gap_ms(), 1_000);
    // A fixed hour around the gap collapses to one second.
    assert_eq!(
        cron("59 59 1,2 * * *", "America/New_York").min_gap_ms(),
        1_000
    );
}

// ------------------------------------------------------------------ robustness

#[test]
fn extreme_inputs_do_not_panic() {
    let exprs = [
        "* * * * * *",
        "0 3 * * *",
        "0 0 29 2 *",
        "0 0 30 2 *",
        "*/15 * * * *",
        "0 0 L * 5#5",
    ];
    let instants = [
        i64::MIN,
        i64::MIN + 1,
        -1,
        0,
        253_402_300_799_000, // 9999-12-31T23:59:59Z
        253_402_300_799_999,
        253_402_300_800_000,
        i64::MAX - 1,
        i64::MAX,
    ];
    for tz in [
        "UTC",
        "America/New_York",
        "Australia/Lord_Howe",
        "Etc/GMT-14",
    ] {
        for e in exprs {
            let c = cron(e, tz);
            for t in instants {
                if let Some(slot) = c.next_after(t) {
                    assert!(slot > t);
                    assert!(slot <= 253_402_300_799_000);
                    assert_eq!(slot % 1000, 0);
                }
            }
            assert!(c.min_gap_ms() > 0);
        }
    }
    // Far past: the search starts at year 1.
    let c = cron("0 0 1 1 *", "UTC");
    assert_eq!(c.next_after(i64::MIN), Some(-62_135_596_800_000));
    // Nothing after year 9999.
    assert_eq!(c.next_after(utc(9999, 6, 1, 0, 0, 0)), None);
    assert_eq!(
        cron("* * * * * *", "UTC").next_after(253_402_300_798_000),
        Some(253_402_300_799_000)
    );
}

#[test]
fn random_garbage_never_panics() {
    // A deterministic LCG over an alphabet of cron-ish characters.
    let alphabet: Vec<char> = "0123456789*/,-?LW#HRlw JANFEBMONSUN@é\t".chars().collect();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    let mut parsed = 0;
    for _ in 0..20_000 {
        let len = next() % 24;
        let s: String = (0..len)
            .map(|_| alphabet[next() % alphabet.len()])
            .collect();
        let tz = if next() % 2 == 0 {
            "UTC"
        } else {
            "America/New_York"
        };
        match CronSchedule::parse(&s, tz) {
            Ok(c) => {
                parsed += 1;
                let _ = c.next_after(0);
                let _ = c.next_after(1_793_500_000_000);
            }
            Err(e) => {
                assert!(e.field.is_some(), "{s:?}: {e}");
                if let Some(p) = e.position {
                    assert!(p <= s.chars().count(), "{s:?}: {e}");
                }
            }
        }
    }
    // Some random strings must be valid, or the test tests nothing.
    let _ = parsed;
    let fields = ["1", "*/2", "1-3", "?", "L", "5L", "MON", "1#2", "2W", "JAN"];
    for a in fields {
        for b in fields {
            let e = format!("{a} {b} {a} {b} {a}");
            if let Ok(c) = CronSchedule::parse(&e, "Europe/Athens") {
                let _ = c.next_after(0);
                let _ = c.min_gap_ms();
            }
        }
    }
}

#[test]
fn dst_rules_continue_after_2099() {
    // chrono-tz's tables end in 2099; later years repeat the rules.
    // 2101-07-01 12:00 EDT = 16:00 UTC; 2101-01-15 12:00 EST = 17:00 UTC.
    let c = cron("0 12 * * *", "America/New_York");
    assert_eq!(
        c.next_after(utc(2101, 7, 1, 0, 0, 0)),
        Some(utc(2101, 7, 1, 16, 0, 0))
    );
    assert_eq!(
        c.next_after(utc(2101, 1, 15, 0, 0, 0)),
        Some(utc(2101, 1, 15, 17, 0, 0))
    );
    // 2100-03-14 is the second Sunday of March 2100: 02:30 -> 03:00 EDT.
    let c = cron("30 2 * * *", "America/New_York");
    assert_eq!(
        c.next_after(utc(2100, 3, 13, 12, 0, 0)),
        Some(utc(2100, 3, 14, 7, 0, 0))
    );
    // 2100-11-07 is the first Sunday of November 2100: 01:30 EDT once.
    let c = cron("30 1 * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc(2100, 11, 6, 12, 0, 0), 2),
        vec![utc(2100, 11, 7, 5, 30, 0), utc(2100, 11, 8, 6, 30, 0)]
    );
}

#[test]
fn duplicate_list_values_are_a_set() {
    let from = utc(2026, 1, 1, 0, 0, 0);
    assert_eq!(
        slots_utc("0,0 * * * *", from, 5),
        slots_utc("0 * * * *", from, 5)
    );
    assert_eq!(
        slots_utc("5,1-10,5 * * * *", from, 30),
        slots_utc("1-10 * * * *", from, 30)
    );
    // 0 and 7 are both Sunday: once a week, not twice.
    assert_eq!(days_in_month_of("* * 0,7", 2026, 1), vec![4, 11, 18, 25]);
    assert_eq!(
        days_in_month_of("* * 0,7,SUN", 2026, 1),
        vec![4, 11, 18, 25]
    );
    assert_eq!(days_in_month_of("1,1,L,31 * *", 2026, 1), vec![1, 31]);
}

#[test]
fn question_mark_is_for_the_day_fields_only() {
    assert_eq!(
        slots_utc("0 0 ? * 1", utc(2026, 1, 1, 0, 0, 0), 2),
        slots_utc("0 0 * * 1", utc(2026, 1, 1, 0, 0, 0), 2)
    );
    for (e, field, pos) in [
        ("? * * * *", "minute", 0),
        ("0 ? * * *", "hour", 2),
        ("0 0 * ? *", "month", 6),
        ("? 0 0 * * *", "second", 0),
    ] {
        let error = parse_err(e);
        assert_eq!(error.field.as_deref(), Some(field), "{e}");
        assert_eq!(error.position, Some(pos), "{e}");
        assert!(
            error.message.contains(&format!("not in the {field} field")),
            "{e}: {error}"
        );
    }
}
