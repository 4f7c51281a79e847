//! Cron expression parser: text to per-field bitmasks.
//!
//! Every error names its field and the 0-based character offset of the bad
//! token in the original expression.

use crate::error::ScheduleError;

/// One of the six cron fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl Field {
    pub(super) fn name(self) -> &'static str {
        match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
        }
    }

    /// Smallest value accepted.
    fn min(self) -> u32 {
        match self {
            Field::DayOfMonth | Field::Month => 1,
            _ => 0,
        }
    }

    /// Largest value accepted as written (7 = Sunday in day-of-week).
    fn max(self) -> u32 {
        match self {
            Field::Second | Field::Minute => 59,
            Field::Hour => 23,
            Field::DayOfMonth => 31,
            Field::Month => 12,
            Field::DayOfWeek => 7,
        }
    }

    /// Upper end of the field's cycle, used by `*`, `a/n` and wrapping
    /// ranges (day-of-week cycles over 0-6, as croniter does).
    fn cycle_max(self) -> u32 {
        match self {
            Field::DayOfWeek => 6,
            other => other.max(),
        }
    }
}

/// What one field accepts, before the day fields are combined.
#[derive(Debug, Clone, Default)]
pub(super) struct FieldSpec {
    /// Plain values (bit `v` for value `v`; day-of-week 7 is stored as 0).
    pub mask: u64,
    /// Day-of-month `L`: the last day of the month.
    pub last_day: bool,
    /// Day-of-month `LW`: the last weekday (Mon-Fri) of the month.
    pub last_weekday: bool,
    /// Day-of-month `nW`: bit `n` = the weekday nearest to day `n`.
    pub nearest_weekday: u32,
    /// Day-of-week `n#k`: `nth[n]` has bit `k` (1..=5).
    pub nth: [u8; 7],
    /// Day-of-week `nL` / `Ln`: bit `n` = the last weekday `n` of the month.
    pub last_dow: u8,
    /// The field is a bare `*` or `?`.
    pub star: bool,
}

/// The parsed fields of an expression.
#[derive(Debug, Clone)]
pub(super) struct Parsed {
    pub seconds: FieldSpec,
    pub minutes: FieldSpec,
    pub hours: FieldSpec,
    pub dom: FieldSpec,
    pub months: FieldSpec,
    pub dow: FieldSpec,
    /// The hour field is `*` or `*/n`: times follow real time across DST.
    pub wildcard_hour: bool,
    /// Day-of-month / day-of-week put no restriction (after the OR/AND rule).
    pub dom_unrestricted: bool,
    pub dow_unrestricted: bool,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

const MACROS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

fn err(message: impl Into<String>, field: &str, position: usize) -> ScheduleError {
    ScheduleError::at(message, field, position)
}

/// A piece of the expression with its character offset.
#[derive(Debug, Clone, Copy)]
struct Tok<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Tok<'a> {
    /// Sub-token from byte `start` to byte `end` (both on char boundaries).
    fn slice(&self, start: usize, end: usize) -> Tok<'a> {
        let text = self.text.get(start..end).unwrap_or("");
        let prefix = self.text.get(..start).unwrap_or("");
        Tok {
            text,
            pos: self.pos + prefix.chars().count(),
        }
    }

    /// Split at the first occurrence of `c` (an ASCII char).
    fn split_once(&self, c: char) -> Option<(Tok<'a>, Tok<'a>)> {
        let i = self.text.find(c)?;
        Some((self.slice(0, i), self.slice(i + 1, self.text.len())))
    }

    /// Split on every `c` (an ASCII char), keeping empty pieces.
    fn split_all(&self, c: char) -> Vec<Tok<'a>> {
        let mut out = Vec::new();
        let mut start = 0;
        for (i, ch) in self.text.char_indices() {
            if ch == c {
                out.push(self.slice(start, i));
                start = i + 1;
            }
        }
        out.push(self.slice(start, self.text.len()));
        out
    }
}

fn is_cron_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// Split on ASCII whitespace, keeping character offsets.
fn tokens(expression: &str) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None; // (byte, char)
    for (chars, (i, c)) in expression.char_indices().enumerate() {
        if is_cron_space(c) {
            if let Some((b, p)) = start.take() {
                out.push(Tok {
                    text: expression.get(b..i).unwrap_or(""),
                    pos: p,
                });
            }
        } else if start.is_none() {
            start = Some((i, chars));
        }
    }
    if let Some((b, p)) = start {
        out.push(Tok {
            text: expression.get(b..).unwrap_or(""),
            pos: p,
        });
    }
    out
}

/// Parse a whole expression (5 fields, 6 with seconds first, or a macro).
pub(super) fn parse_expression(expression: &str) -> Result<Parsed, ScheduleError> {
    let toks = tokens(expression);
    let Some(first) = toks.first() else {
        return Err(err("empty cron expression", "expression", 0));
    };
    if first.text.starts_with('@') {
        if let Some(extra) = toks.get(1) {
            return Err(err(
                format!(
                    "a macro such as {} stands alone; unexpected `{}`",
                    first.text, extra.text
                ),
                "expression",
                extra.pos,
            ));
        }
        let lower = first.text.to_ascii_lowercase();
        let Some((_, body)) = MACROS.iter().find(|(name, _)| *name == lower) else {
            return Err(err(
                format!(
                    "unknown macro `{}` (known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)",
                    first.text
                ),
                "expression",
                first.pos,
            ));
        };
        // The macro's own fields carry no user positions; point at the macro.
        let fields: Vec<Tok<'_>> = tokens(body)
            .into_iter()
            .map(|t| Tok {
                text: t.text,
                pos: first.pos,
            })
            .collect();
        return parse_fields(&fields, true);
    }
    match toks.len() {
        5 | 6 => parse_fields(&toks, toks.len() == 5),
        7 => Err(err(
            format!(
                "a seventh (year) field `{}` is not supported; use 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first",
                toks[6].text
            ),
            "expression",
            toks[6].pos,
        )),
        n if n > 7 => Err(err(
            format!("too many fields: {n} (expected 5, or 6 with seconds first)"),
            "expression",
            toks[6].pos,
        )),
        n => Err(err(
            format!("too few fields: {n} (expected 5, or 6 with seconds first)"),
            "expression",
            expression.chars().count(),
        )),
    }
}

fn parse_fields(toks: &[Tok<'_>], five: bool) -> Result<Parsed, ScheduleError> {
    let (sec_tok, rest) = if five {
        (
            Tok {
                text: "0",
                pos: toks.first().map_or(0, |t| t.pos),
            },
            toks,
        )
    } else {
        match toks.split_first() {
            Some((s, rest)) => (*s, rest),
            None => return Err(err("empty cron expression", "expression", 0)),
        }
    };
    let [min_tok, hour_tok, dom_tok, month_tok, dow_tok] = rest else {
        return Err(err("wrong number of fields", "expression", 0));
    };
    let seconds = parse_field(sec_tok, Field::Second)?;
    let minutes = parse_field(*min_tok, Field::Minute)?;
    let hours = parse_field(*hour_tok, Field::Hour)?;
    let dom = parse_field(*dom_tok, Field::DayOfMonth)?;
    let months = parse_field(*month_tok, Field::Month)?;
    let dow = parse_field(*dow_tok, Field::DayOfWeek)?;

    let wildcard_hour = hour_tok.text == "*"
        || hour_tok
            .text
            .strip_prefix("*/")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));

    // docs/engine.md: OR unless one of the day fields is a bare `*` or `?`
    // (`*/2`, `1-31` and `0-6` all count as restricted).
    let dom_unrestricted = dom.star;
    let dow_unrestricted = dow.star;
    Ok(Parsed {
        seconds,
        minutes,
        hours,
        dom,
        months,
        dow,
        wildcard_hour,
        dom_unrestricted,
        dow_unrestricted,
    })
}

fn parse_field(tok: Tok<'_>, field: Field) -> Result<FieldSpec, ScheduleError> {
    let name = field.name();
    let mut spec = FieldSpec::default();
    if let Some(q) = tok.text.find('?') {
        let is_day = matches!(field, Field::DayOfMonth | Field::DayOfWeek);
        if is_day && tok.text == "?" {
            spec.star = true;
            spec.mask = full_mask(field);
            return Ok(spec);
        }
        let q_tok = tok.slice(q, q + 1);
        let message = if is_day {
            format!("`?` must stand alone in the {name} field")
        } else {
            format!("`?` is only allowed in the day-of-month and day-of-week fields, not in the {name} field")
        };
        return Err(err(message, name, q_tok.pos));
    }
    if tok.text == "*" {
        spec.star = true;
        spec.mask = full_mask(field);
        return Ok(spec);
    }
    for item in tok.split_all(',') {
        parse_item(item, field, &mut spec)?;
    }
    Ok(spec)
}

fn full_mask(field: Field) -> u64 {
    let mut m = 0u64;
    for v in field.min()..=field.cycle_max() {
        m |= 1u64 << v;
    }
    m
}

/// Parse one list item into `spec`.
fn parse_item(item: Tok<'_>, field: Field, spec: &mut FieldSpec) -> Result<(), ScheduleError> {
    let name = field.name();
    if item.text.is_empty() {
        return Err(err(
            format!("empty list item in the {name} field"),
            name,
            item.pos,
        ));
    }
    let upper = item.text.to_ascii_uppercase();
    // Jenkins-style hashed (`H`) and random (`R`) values.
    let mut chars = upper.chars();
    let first = chars.next();
    let second = chars.next();
    if matches!(first, Some('H') | Some('R')) && !second.is_some_and(|c| c.is_ascii_alphabetic()) {
        let what = if first == Some('H') {
            "`H` (hashed value) is not supported"
        } else {
            "`R` (random value) is not supported"
        };
        return Err(err(what, name, item.pos));
    }

    match field {
        Field::DayOfMonth => {
            if upper == "L" {
                spec.last_day = true;
                return Ok(());
            }
            if upper == "LW" {
                spec.last_weekday = true;
                return Ok(());
            }
            let w_day = if let Some(n) = upper.strip_suffix('W') {
                Some((n, item.slice(0, n.len())))
            } else {
                upper
                    .strip_prefix('W')
                    .map(|n| (n, item.slice(1, item.text.len())))
            };
            if let Some((digits, dtok)) = w_day {
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(err(
                        format!(
                            "`W` takes a single day, as in `15W` or `LW`; got `{}`",
                            item.text
                        ),
                        name,
                        item.pos,
                    ));
                }
                let day = number(dtok, field)?;
                spec.nearest_weekday |= 1u32 << day;
                return Ok(());
            }
            if upper.starts_with('L') {
                return Err(err(
                    format!(
                        "`{}` is not supported in the day-of-month field (use `L`, `LW` or `nW`)",
                        item.text
                    ),
                    name,
                    item.pos,
                ));
            }
        }
        Field::DayOfWeek => {
            if let Some((days, nth)) = item.split_once('#') {
                let k = if !nth.text.is_empty() && nth.text.bytes().all(|b| b.is_ascii_digit()) {
                    nth.text.parse::<u32>().ok().filter(|k| (1..=5).contains(k))
                } else {
                    None
                };
                let Some(k) = k else {
                    return Err(err(
                        format!(
                            "`#` takes an occurrence 1-5, as in `5#2` (second Friday); got `{}`",
                            nth.text
                        ),
                        name,
                        nth.pos,
                    ));
                };
                let (lo, hi) = dow_values(days, field)?;
                for d in dow_span(lo, hi) {
                    if let Some(slot) = spec.nth.get_mut(d as usize) {
                        *slot |= 1u8 << k;
                    }
                }
                return Ok(());
            }
            if upper == "L" {
                return Err(err(
                    "`L` in the day-of-week field needs a weekday: `5L` or `L5` is the last Friday",
                    name,
                    item.pos,
                ));
            }
            let last_of = if upper.len() > 1 {
                if let Some(n) = upper.strip_suffix('L') {
                    Some(item.slice(0, n.len()))
                } else if upper.starts_with('L') {
                    Some(item.slice(1, item.text.len()))
                } else {
                    None
                }
            } else {
                None
            };
            if let Some(dtok) = last_of {
                // `5L`, `L5`, a name (`FRIL`, `LFRI`) or a range of them
                // (`MON-FRIL` = the last Monday, ..., the last Friday).
                if dtok.text.contains('/') || dtok.text.contains('*') {
                    return Err(err(
                        format!(
                            "`L` in the day-of-week field takes a weekday or a range of weekdays, as in `5L`, `FRIL` or `MON-FRIL`; got `{}`",
                            item.text
                        ),
                        name,
                        item.pos,
                    ));
                }
                let (lo, hi) = dow_values(dtok, field)?;
                for d in dow_span(lo, hi) {
                    spec.last_dow |= 1u8 << d;
                }
                return Ok(());
            }
        }
        _ => {}
    }

    // base[-end][/step]
    let (base, step) = match item.split_once('/') {
        Some((base, step_tok)) => {
            if step_tok.text.contains('/') {
                return Err(err(
                    format!("more than one `/` in `{}`", item.text),
                    name,
                    item.pos,
                ));
            }
            if step_tok.text.is_empty() || !step_tok.text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err(
                    format!("step must be a positive number; got `{}`", step_tok.text),
                    name,
                    step_tok.pos,
                ));
            }
            let step = step_tok.text.parse::<u32>().unwrap_or(u32::MAX);
            if step == 0 {
                return Err(err(
                    format!("step 0 in the {name} field (a step must be at least 1)"),
                    name,
                    step_tok.pos,
                ));
            }
            (base, Some(step))
        }
        None => (item, None),
    };
    let cmax = field.cycle_max();
    let fmin = field.min();
    let values: Vec<u32> = if base.text == "*" {
        stepped(fmin, cmax, step.unwrap_or(1))
    } else if let Some((a, b)) = base.split_once('-') {
        if a.text.is_empty() {
            return Err(no_range_start(base, field));
        }
        range_end_ok(b, base, field)?;
        let lo_raw = value(a, field)?;
        let hi_raw = if field == Field::DayOfMonth && b.text.eq_ignore_ascii_case("L") {
            31
        } else {
            value(b, field)?
        };
        let step = step.unwrap_or(1);
        let (lo, hi) = if field == Field::DayOfWeek {
            (lo_raw % 7, hi_raw % 7)
        } else {
            (lo_raw, hi_raw)
        };
        if lo_raw == hi_raw {
            // `a-a` is the single value `a` (croniter: the whole cycle).
            vec![lo]
        } else if lo == hi {
            // `0-7` / `7-0` in day-of-week: Sunday to Sunday, the whole week.
            stepped(fmin, cmax, step)
        } else if lo < hi {
            stepped(lo, hi, step)
        } else {
            wrapped(lo, hi, step, fmin, cmax)
        }
    } else {
        let v = value(base, field)?;
        match step {
            // `a/n`: from a to the end of the field, as croniter.
            Some(step) => {
                let v = if field == Field::DayOfWeek { v % 7 } else { v };
                stepped(v, cmax, step)
            }
            None => vec![v],
        }
    };
    for v in values {
        let v = if field == Field::DayOfWeek { v % 7 } else { v };
        if v < 64 {
            spec.mask |= 1u64 << v;
        }
    }
    Ok(())
}

/// A day-of-week value or range `a-b` (names allowed), as raw 0-7 values.
fn dow_values(days: Tok<'_>, field: Field) -> Result<(u32, u32), ScheduleError> {
    match days.split_once('-') {
        Some((a, b)) => {
            if a.text.is_empty() {
                return Err(no_range_start(days, field));
            }
            range_end_ok(b, days, field)?;
            Ok((value(a, field)?, value(b, field)?))
        }
        None => {
            let v = value(days, field)?;
            Ok((v, v))
        }
    }
}

/// The error for an item that starts with `-`: a lone `-`, a negative
/// number, or a range without its start.
fn no_range_start(item: Tok<'_>, field: Field) -> ScheduleError {
    let name = field.name();
    let rest = item.text.get(1..).unwrap_or("");
    let message = if rest.is_empty() {
        format!("a lone `-` in the {name} field: a range needs a value on each side, as in `1-5`")
    } else if rest.bytes().all(|b| b.is_ascii_digit()) {
        format!(
            "negative value `{}` in the {name} field (values start at {})",
            item.text,
            field.min()
        )
    } else {
        format!(
            "range `{}` has no start value in the {name} field (write it as `a-b`)",
            item.text
        )
    };
    err(message, name, item.pos)
}

/// The end of a range `a-b` must be one value (`1-` and `1-2-3` are refused
/// at the end's position).
fn range_end_ok(end: Tok<'_>, range: Tok<'_>, field: Field) -> Result<(), ScheduleError> {
    let name = field.name();
    if end.text.is_empty() {
        return Err(err(
            format!("missing value after `-` in `{}` ({name} field)", range.text),
            name,
            end.pos,
        ));
    }
    if end.text.contains('-') {
        return Err(err(
            format!("malformed range `{}` in the {name} field", range.text),
            name,
            end.pos,
        ));
    }
    Ok(())
}

/// `lo, lo+step, ... <= hi`.
fn stepped(lo: u32, hi: u32, step: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut v = lo;
    while v <= hi {
        out.push(v);
        match v.checked_add(step) {
            Some(n) => v = n,
            None => break,
        }
    }
    out
}

/// A reversed range `lo-hi` (lo > hi) wraps around the end of the field,
/// with croniter's arithmetic for where the step resumes after the wrap.
fn wrapped(lo: u32, hi: u32, step: u32, fmin: u32, fmax: u32) -> Vec<u32> {
    let mut out = stepped(lo, fmax, step);
    let mut to_skip = 0;
    if let Some(&last) = out.last() {
        let already_skipped = fmax - last;
        let curpos = last - fmin;
        let len = fmax - fmin + 1;
        if curpos.saturating_add(step) > len && already_skipped < step {
            to_skip = step - already_skipped;
        }
    }
    if let Some(start) = fmin.checked_add(to_skip) {
        out.extend(stepped(start, hi, step));
    }
    out
}

/// Days of week `lo..=hi` (raw 0-7 values), wrapping like a range.
fn dow_span(lo: u32, hi: u32) -> Vec<u32> {
    let (l, h) = (lo % 7, hi % 7);
    if lo == hi {
        vec![l]
    } else if l == h {
        (0..7).collect()
    } else if l < h {
        (l..=h).collect()
    } else {
        (l..7).chain(0..=h).collect()
    }
}

/// A number or (month / day-of-week) name, range-checked.
fn value(tok: Tok<'_>, field: Field) -> Result<u32, ScheduleError> {
    let name = field.name();
    if tok.text.is_empty() {
        return Err(err(
            format!("missing value in the {name} field"),
            name,
            tok.pos,
        ));
    }
    if tok.text.bytes().all(|b| b.is_ascii_digit()) {
        return number(tok, field);
    }
    let upper = tok.text.to_ascii_uppercase();
    let found = match field {
        Field::Month => MONTHS
            .iter()
            .position(|m| *m == upper)
            .map(|i| i as u32 + 1),
        Field::DayOfWeek => DAYS.iter().position(|d| *d == upper).map(|i| i as u32),
        _ => None,
    };
    if let Some(v) = found {
        return Ok(v);
    }
    if tok.text.starts_with('-') {
        return Err(no_range_start(tok, field));
    }
    let hint = match field {
        Field::Month => " (month names are JAN-DEC)",
        Field::DayOfWeek => " (day names are SUN-SAT)",
        _ => "",
    };
    let what = match field {
        Field::Month => "unknown month name",
        Field::DayOfWeek => "unknown day name",
        _ => "invalid value",
    };
    Err(err(
        format!("{what} `{}` in the {name} field{hint}", tok.text),
        name,
        tok.pos,
    ))
}

/// A decimal number within the field's range.
fn number(tok: Tok<'_>, field: Field) -> Result<u32, ScheduleError> {
    let name = field.name();
    let parsed = tok.text.parse::<u32>().ok();
    match parsed {
        Some(v) if v >= field.min() && v <= field.max() => Ok(v),
        _ => Err(err(
            format!(
                "{name} value {} out of range {}-{}",
                tok.text,
                field.min(),
                field.max()
            ),
            name,
            tok.pos,
        )),
    }
}
