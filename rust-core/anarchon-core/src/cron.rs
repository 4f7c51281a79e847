//! Cron expressions (docs/engine.md), evaluated in an IANA time zone.
//!
//! Parsing turns each field into a bitmask; the day fields (day-of-month,
//! day-of-week, `L`, `W`, `#`, the OR/AND rule) become a table of day masks
//! keyed by the weekday of the 1st and the length of the month. `next_after`
//! finds the first matching *wall-clock* time field by field (carrying to the
//! next minute, hour, day, month instead of scanning seconds), then maps it to
//! an instant with the DST rules of `docs/engine.md`:
//!
//! - a time in a spring-forward gap: with a fixed hour it fires once, at the
//!   first instant after the gap; with a wildcard hour (`*`, `*/n`) it is
//!   skipped;
//! - a time in a fall-back overlap: with a fixed hour it fires once, at its
//!   first occurrence; with a wildcard hour both occurrences fire.

mod parse;
#[cfg(test)]
mod tests;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeZone};
use chrono_tz::{GapInfo, Tz};
use std::sync::OnceLock;

use crate::error::ScheduleError;
use parse::Parsed;

/// 0001-01-01T00:00:00Z: searches start no earlier.
const MIN_SEC: i64 = -62_135_596_800;
/// 9999-12-31T23:59:59Z: the last slot there can be.
const MAX_SEC: i64 = 253_402_300_799;
/// How far `next_after` looks before it gives up (as croniter does).
const SEARCH_YEARS: i64 = 50;
const DAY: i64 = 86_400;

/// A parsed cron expression bound to an IANA time zone.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    expression: String,
    tz: Tz,
    /// The zone's offset in seconds when it never changes (UTC, `Etc/*`).
    fixed_offset: Option<i64>,
    seconds: u64,
    minutes: u64,
    hours: u32,
    /// Bits 1..=12.
    months: u16,
    /// Matching days (bits 1..=31) for a month whose 1st is weekday `w`
    /// (0 = Sunday) and which has `n` days: index `w * 4 + (n - 28)`.
    day_table: [u32; 28],
    /// The hour field is `*` or `*/n`: times follow real time across DST.
    wildcard_hour: bool,
    /// `min_gap_ms`, computed on first use (it probes the zone's DST changes).
    min_gap: OnceLock<i64>,
}

/// A wall-clock time mapped to instants.
enum Local {
    /// Exists once: the instant and the offset in force.
    Single(i64, i64),
    /// Exists twice (fall-back overlap): earliest and latest instant.
    Ambiguous(i64, i64),
    /// Does not exist (spring-forward gap).
    Gap,
}

impl CronSchedule {
    /// Parse a 5- or 6-field (seconds first) expression or a macro, in zone `tz`.
    pub fn parse(expression: &str, tz: &str) -> Result<Self, ScheduleError> {
        let parsed = parse::parse_expression(expression)?;
        let zone = parse_tz(tz)?;
        let fixed_offset = if is_fixed_zone(zone) {
            let utc = DateTime::from_timestamp(0, 0)
                .map(|d| d.naive_utc())
                .unwrap_or_default();
            Some(i64::from(
                zone.offset_from_utc_datetime(&utc).fix().local_minus_utc(),
            ))
        } else {
            None
        };
        Ok(Self {
            expression: expression.to_string(),
            tz: zone,
            fixed_offset,
            seconds: parsed.seconds.mask,
            minutes: parsed.minutes.mask,
            hours: parsed.hours.mask as u32,
            months: parsed.months.mask as u16,
            day_table: build_day_table(&parsed),
            wildcard_hour: parsed.wildcard_hour,
            min_gap: OnceLock::new(),
        })
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The IANA name of the zone.
    pub fn tz_name(&self) -> &'static str {
        self.tz.name()
    }

    /// The first slot (ms since the epoch) strictly after `ms`, or `None`
    /// when there is none within 50 years or before year 10000.
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        // Slots are whole seconds: the first slot > ms is the first > p.
        let p = ms.div_euclid(1000).max(MIN_SEC - 1);
        if p >= MAX_SEC {
            return None;
        }
        let slot = match self.fixed_offset {
            Some(off) => {
                let wall = p + off + 1;
                self.find_wall(wall, max_year(wall))? - off
            }
            None => self.next_zoned(p)?,
        };
        if slot <= p || slot > MAX_SEC {
            return None;
        }
        slot.checked_mul(1000)
    }

    /// The smallest gap between consecutive slots, in ms. Exact from the
    /// fields in a fixed-offset zone; in a zone with DST it is lowered to the
    /// smallest gap seen around the zone's offset changes in 2024-2035.
    pub fn min_gap_ms(&self) -> i64 {
        *self.min_gap.get_or_init(|| self.compute_min_gap_ms())
    }

    fn compute_min_gap_ms(&self) -> i64 {
        let wall = self.wall_min_gap();
        if wall <= 1 || self.fixed_offset.is_some() {
            return wall.max(1) * 1000;
        }
        self.dst_min_gap(wall).max(1) * 1000
    }

    // ------------------------------------------------------------ zoned search

    /// First slot (seconds) > `p` in a zone with offset changes.
    fn next_zoned(&self, p: i64) -> Option<i64> {
        let off0 = self.offset_at(p)?;
        let mut wall = p + off0 + 1;
        let max_year = max_year(wall);
        for _ in 0..64 {
            let l = self.find_wall(wall, max_year)?;
            match self.resolve(l)? {
                Local::Single(s, off) => {
                    if s <= p {
                        wall = l + 1;
                        continue;
                    }
                    if self.wildcard_hour && off != off0 {
                        // p may sit in the first pass of an overlap whose
                        // second pass (wall times before p's) comes first.
                        if let Some(x) = self.second_pass_after(p, off0) {
                            if x < s {
                                return Some(x);
                            }
                        }
                    }
                    return Some(s);
                }
                Local::Ambiguous(early, late) => {
                    if early > p {
                        return Some(early);
                    }
                    if self.wildcard_hour && late > p {
                        return Some(late);
                    }
                    // p is in the second pass and the hour is fixed: the
                    // first occurrence is gone, skip to the end of the overlap.
                    let t = self.transition_between(early, late)?;
                    let fold_end_wall = t + (l - early);
                    wall = fold_end_wall.max(l + 1);
                }
                Local::Gap => {
                    let (end, end_wall) = self.gap_end(l)?;
                    if !self.wildcard_hour && end > p {
                        return Some(end);
                    }
                    wall = end_wall.max(l + 1);
                }
            }
        }
        None
    }

    /// When `p` is in the first pass of an overlap, the first matching wall
    /// time of the second pass that precedes p's wall time, as an instant.
    fn second_pass_after(&self, p: i64, off0: i64) -> Option<i64> {
        let wp = p + off0;
        let Local::Ambiguous(early, late) = self.resolve(wp)? else {
            return None;
        };
        if early != p {
            return None;
        }
        let t = self.transition_between(early, late)?;
        let off_second = wp - late;
        let fold_start_wall = t + off_second;
        let (wp_year, _, _) = civil_from_days(wp.div_euclid(DAY));
        let x = self.find_wall(fold_start_wall, wp_year)?;
        (x <= wp).then_some(x - off_second)
    }

    /// UTC offset (seconds) in force at `instant`.
    fn offset_at(&self, instant: i64) -> Option<i64> {
        if let Some(off) = self.fixed_offset {
            return Some(off);
        }
        let shift = table_shift(instant);
        let n = naive(instant - shift)?;
        Some(i64::from(
            self.tz.offset_from_utc_datetime(&n).fix().local_minus_utc(),
        ))
    }

    /// Map a wall-clock time (seconds, as if UTC) to instants.
    fn resolve(&self, wall: i64) -> Option<Local> {
        if let Some(off) = self.fixed_offset {
            return Some(Local::Single(wall - off, off));
        }
        let shift = table_shift(wall);
        let n = naive(wall - shift)?;
        Some(match self.tz.offset_from_local_datetime(&n) {
            LocalResult::Single(o) => {
                let off = i64::from(o.fix().local_minus_utc());
                Local::Single(wall - off, off)
            }
            LocalResult::Ambiguous(a, b) => {
                let x = wall - i64::from(a.fix().local_minus_utc());
                let y = wall - i64::from(b.fix().local_minus_utc());
                Local::Ambiguous(x.min(y), x.max(y))
            }
            LocalResult::None => Local::Gap,
        })
    }

    /// For a wall time in a gap: the first instant after the gap and its
    /// wall time.
    fn gap_end(&self, wall: i64) -> Option<(i64, i64)> {
        let shift = table_shift(wall);
        let n = naive(wall - shift)?;
        let end = GapInfo::new(&n, &self.tz)?.end?;
        let instant = end.timestamp() + shift;
        let off = i64::from(end.offset().fix().local_minus_utc());
        Some((instant, instant + off))
    }

    /// The first instant in `(a, b]` whose offset differs from `a`'s.
    fn transition_between(&self, a: i64, b: i64) -> Option<i64> {
        let off_a = self.offset_at(a)?;
        let (mut lo, mut hi) = (a, b);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.offset_at(mid)? == off_a {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(hi)
    }

    // ------------------------------------------------------------ wall search

    /// The matching days of month `mo` of year `y` (bits 1..=31).
    fn day_mask(&self, y: i64, mo: u32, len: u32) -> u32 {
        let wd1 = (days_from_civil(y, mo, 1) + 4).rem_euclid(7) as usize;
        let idx = wd1 * 4 + (len.saturating_sub(28) as usize).min(3);
        self.day_table.get(idx).copied().unwrap_or(0)
    }

    /// The first matching wall-clock time (seconds, as if UTC) at or after
    /// `wall`, up to the end of `max_year`.
    fn find_wall(&self, wall: i64, max_year: i64) -> Option<i64> {
        let days = wall.div_euclid(DAY);
        let sod = wall.rem_euclid(DAY) as u32;
        let (mut y, mut mo, mut d) = civil_from_days(days);
        let (mut h, mut mi, mut s) = (sod / 3600, sod / 60 % 60, sod % 60);
        // One turn per month visited: 50 years is 600 months.
        for _ in 0..((SEARCH_YEARS as usize + 2) * 13) {
            if y > max_year {
                return None;
            }
            match next_bit(u64::from(self.months), mo) {
                Some(m) if m == mo => {}
                Some(m) => {
                    (mo, d, h, mi, s) = (m, 1, 0, 0, 0);
                }
                None => {
                    (y, mo, d, h, mi, s) = (y + 1, 1, 1, 0, 0, 0);
                    continue;
                }
            }
            let len = days_in_month(y, mo);
            let dm = self.day_mask(y, mo, len);
            while let Some(nd) = next_bit(u64::from(dm), d) {
                if nd != d {
                    (d, h, mi, s) = (nd, 0, 0, 0);
                }
                while let Some(nh) = next_bit(u64::from(self.hours), h) {
                    if nh != h {
                        (h, mi, s) = (nh, 0, 0);
                    }
                    while let Some(nm) = next_bit(self.minutes, mi) {
                        if nm != mi {
                            (mi, s) = (nm, 0);
                        }
                        if let Some(ns) = next_bit(self.seconds, s) {
                            let tod = i64::from(h * 3600 + mi * 60 + ns);
                            return Some(days_from_civil(y, mo, d) * DAY + tod);
                        }
                        (mi, s) = (mi + 1, 0);
                    }
                    (h, mi, s) = (h + 1, 0, 0);
                }
                (d, h, mi, s) = (d + 1, 0, 0, 0);
            }
            (mo, d, h, mi, s) = (mo + 1, 1, 0, 0, 0);
            if mo > 12 {
                (y, mo) = (y + 1, 1);
            }
        }
        None
    }

    // ------------------------------------------------------------ gaps

    /// Smallest gap (seconds) between consecutive matching wall times.
    fn wall_min_gap(&self) -> i64 {
        let secs = bits(self.seconds);
        let mins = bits(self.minutes);
        let hours = bits(u64::from(self.hours));
        let (Some(&s0), Some(&s1), Some(&m0), Some(&m1), Some(&h0), Some(&h1)) = (
            secs.first(),
            secs.last(),
            mins.first(),
            mins.last(),
            hours.first(),
            hours.last(),
        ) else {
            return 1;
        };
        let mut best = i64::MAX;
        if let Some(g) = min_step(&secs) {
            best = best.min(g);
        }
        let hm_gap = match (min_step(&mins), min_step(&hours)) {
            (Some(a), Some(b)) => Some(a.min(b * 60 - (m1 - m0))),
            (Some(a), None) => Some(a),
            (None, Some(b)) => Some(b * 60 - (m1 - m0)),
            (None, None) => None,
        };
        if let Some(g) = hm_gap {
            best = best.min(g * 60 - (s1 - s0));
        }
        let tod_span = (h1 * 3600 + m1 * 60 + s1) - (h0 * 3600 + m0 * 60 + s0);
        if let Some(days) = self.min_day_distance() {
            best = best.min(days * DAY - tod_span);
        }
        if best == i64::MAX {
            // No two slots at all (an impossible date): any value is a
            // lower bound of no gaps; report the search horizon.
            best = SEARCH_YEARS * 365 * DAY;
        }
        best.max(1)
    }

    /// Smallest distance in days between two matching days, over 2001-2028
    /// (one full cycle of weekdays and leap years within a century).
    fn min_day_distance(&self) -> Option<i64> {
        let mut prev: Option<i64> = None;
        let mut best: Option<i64> = None;
        for y in 2001..=2028 {
            for mo in 1..=12u32 {
                if self.months & (1 << mo) == 0 {
                    continue;
                }
                let len = days_in_month(y, mo);
                let mut dm = self.day_mask(y, mo, len);
                let base = days_from_civil(y, mo, 1) - 1;
                while dm != 0 {
                    let d = i64::from(dm.trailing_zeros());
                    dm &= dm - 1;
                    let day = base + d;
                    if let Some(p) = prev {
                        let gap = day - p;
                        best = Some(best.map_or(gap, |b: i64| b.min(gap)));
                        if gap == 1 {
                            return best;
                        }
                    }
                    prev = Some(day);
                }
            }
        }
        best
    }

    /// Lower `wall` (seconds) to the smallest real gap seen around the zone's
    /// offset changes in 2024-2035.
    fn dst_min_gap(&self, wall: i64) -> i64 {
        const FROM: i64 = 1_704_067_200; // 2024-01-01T00:00:00Z
        const TO: i64 = 2_082_758_400; // 2036-01-01T00:00:00Z
        let mut best = wall;
        let mut budget: u32 = 200_000;
        let Some(mut prev_off) = self.offset_at(FROM) else {
            return best;
        };
        let mut x = FROM;
        while x < TO {
            let next = x + DAY;
            let Some(off) = self.offset_at(next) else {
                break;
            };
            if off != prev_off {
                let Some(t) = self.transition_between(x, next) else {
                    break;
                };
                let jump = (off - prev_off).abs();
                let reach = jump + wall + 1;
                let mut cursor = (t - reach).saturating_mul(1000);
                let end = (t + reach).saturating_mul(1000);
                let mut last: Option<i64> = None;
                while let Some(slot) = self.next_after(cursor) {
                    if let Some(a) = last {
                        best = best.min((slot - a) / 1000);
                    }
                    if slot > end {
                        break;
                    }
                    last = Some(slot);
                    cursor = slot;
                    budget = budget.saturating_sub(1);
                    if budget == 0 {
                        return best.min(1);
                    }
                }
                prev_off = off;
            }
            x = next;
        }
        best
    }
}

// ---------------------------------------------------------------- helpers

fn parse_tz(tz: &str) -> Result<Tz, ScheduleError> {
    if tz.trim().is_empty() {
        return Err(ScheduleError::in_field(
            "time zone is empty (use an IANA name such as UTC or Europe/Athens)",
            "tz",
        ));
    }
    if let Ok(zone) = tz.parse::<Tz>() {
        return Ok(zone);
    }
    let suggestion = chrono_tz::TZ_VARIANTS
        .iter()
        .find(|z| z.name().eq_ignore_ascii_case(tz.trim()))
        .map(|z| format!(" (did you mean `{}`?)", z.name()))
        .unwrap_or_default();
    Err(ScheduleError::in_field(
        format!(
            "unknown time zone `{tz}`{suggestion}; use an IANA name such as UTC or Europe/Athens"
        ),
        "tz",
    ))
}

/// Zones whose offset never changes.
fn is_fixed_zone(zone: Tz) -> bool {
    let name = zone.name();
    name.starts_with("Etc/")
        || matches!(
            name,
            "UTC" | "UCT" | "GMT" | "GMT0" | "GMT+0" | "GMT-0" | "Greenwich" | "Universal" | "Zulu"
        )
}

/// chrono-tz's transition tables stop at the end of 2099 (after that the
/// last offset would hold for ever, DST included). Like a POSIX TZ rule, a
/// later year repeats a year of 2072-2099 that starts on the same weekday
/// and has the same length: this returns how far (seconds) `secs` (an instant
/// or a wall time) must be moved back to land in that year; 0 before 2100.
fn table_shift(secs: i64) -> i64 {
    const YEAR_2100: i64 = 4_102_444_800; // 2100-01-01T00:00:00
    if secs < YEAR_2100 {
        return 0;
    }
    let (year, _, _) = civil_from_days(secs.div_euclid(DAY));
    let first = days_from_civil(year, 1, 1);
    let weekday = (first + 4).rem_euclid(7);
    for reference in 2072..=2099 {
        let ref_first = days_from_civil(reference, 1, 1);
        if is_leap(reference) == is_leap(year) && (ref_first + 4).rem_euclid(7) == weekday {
            return (first - ref_first) * DAY;
        }
    }
    0
}

fn naive(secs: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp(secs, 0).map(|d| d.naive_utc())
}

fn max_year(wall: i64) -> i64 {
    let (y, _, _) = civil_from_days(wall.div_euclid(DAY));
    (y + SEARCH_YEARS).min(9999)
}

/// The lowest set bit of `mask` at or above `from`.
#[inline]
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    let m = mask & u64::MAX.checked_shl(from)?;
    (m != 0).then(|| m.trailing_zeros())
}

fn bits(mask: u64) -> Vec<i64> {
    (0..64).filter(|b| mask & (1u64 << b) != 0).collect()
}

fn min_step(values: &[i64]) -> Option<i64> {
    values.windows(2).map(|w| w[1] - w[0]).min()
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (H. Hinnant).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The weekday (Mon-Fri) nearest to `day` (clamped to the month) without
/// leaving the month (Quartz / croniter rules). `wd1` is the weekday of the
/// 1st, 0 = Sunday.
fn nearest_weekday(day: u32, len: u32, wd1: u32) -> u32 {
    let day = day.clamp(1, len);
    match (wd1 + day - 1) % 7 {
        6 if day > 1 => day - 1,
        6 => day + 2,
        0 if day < len => day + 1,
        0 => day - 2,
        _ => day,
    }
}

/// The matching-day masks for every (weekday of the 1st, month length).
fn build_day_table(p: &Parsed) -> [u32; 28] {
    let mut table = [0u32; 28];
    for wd1 in 0..7u32 {
        // Day-of-week matches over 31 days: plain weekdays and `n#k`; the
        // last-weekday (`nL`) days depend on the month length, added below.
        let mut week = 0u32;
        if !p.dow_unrestricted {
            let mut wd = wd1 as usize;
            for d in 1..=31u32 {
                let nth = (d - 1) / 7 + 1;
                let plain = p.dow.mask & (1 << wd) != 0;
                let nth_hit = p.dow.nth.get(wd).is_some_and(|k| k & (1 << nth) != 0);
                if plain || nth_hit {
                    week |= 1 << d;
                }
                wd = if wd == 6 { 0 } else { wd + 1 };
            }
        }
        for len in 28..=31u32 {
            let valid = ((1u64 << (len + 1)) - 2) as u32;
            let mut dom = (p.dom.mask as u32) & valid;
            if p.dom.last_day {
                dom |= 1 << len;
            }
            if p.dom.last_weekday {
                dom |= 1 << nearest_weekday(len, len, wd1);
            }
            let mut w_days = p.dom.nearest_weekday;
            while w_days != 0 {
                let n = w_days.trailing_zeros();
                w_days &= w_days - 1;
                dom |= 1 << nearest_weekday(n, len, wd1);
            }
            let mut dow = week;
            // `nL`: the last seven days of the month hold each weekday once.
            for d in (len - 6)..=len {
                if p.dow.last_dow == 0 {
                    break;
                }
                let wd = (wd1 + d - 1) % 7;
                if p.dow.last_dow & (1 << wd) != 0 {
                    dow |= 1 << d;
                }
            }
            let days = match (p.dom_unrestricted, p.dow_unrestricted) {
                (true, true) => valid,
                (true, false) => dow,
                (false, true) => dom,
                (false, false) => dom | dow,
            };
            if let Some(slot) = table.get_mut((wd1 * 4 + len - 28) as usize) {
                *slot = days & valid;
            }
        }
    }
    table
}
