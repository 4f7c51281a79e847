//! A stored result as compact JSON text, written once per job-slot by the
//! stores that keep results as JSON (Redis, NATS).
//!
//! The text is exactly what Python's
//! `json.dumps(fields, separators=(",", ":"), sort_keys=True)` writes
//! (`ensure_ascii` on), so a retried write stores the same bytes again and
//! either side can read what the other wrote.

/// The fields of a stored result (the names of `anarchon.types.StoredResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultFields<'a> {
    pub slot: i64,
    pub token: &'a str,
    pub instance_id: &'a str,
    pub status: &'a str,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub error: Option<&'a str>,
    pub attempt: i64,
    pub manual: bool,
    pub reason: Option<&'a str>,
}

/// The result as JSON, keys in sorted order.
pub fn result_json(r: &ResultFields<'_>) -> String {
    let mut out = String::with_capacity(
        160 + r.token.len()
            + r.instance_id.len()
            + r.status.len()
            + r.error.map_or(0, str::len)
            + r.reason.map_or(0, str::len),
    );
    out.push_str("{\"attempt\":");
    push_int(&mut out, r.attempt);
    out.push_str(",\"error\":");
    push_opt_str(&mut out, r.error);
    out.push_str(",\"finished_at\":");
    push_opt_int(&mut out, r.finished_at);
    out.push_str(",\"instance_id\":");
    push_str(&mut out, r.instance_id);
    out.push_str(",\"manual\":");
    out.push_str(if r.manual { "true" } else { "false" });
    out.push_str(",\"reason\":");
    push_opt_str(&mut out, r.reason);
    out.push_str(",\"slot\":");
    push_int(&mut out, r.slot);
    out.push_str(",\"started_at\":");
    push_opt_int(&mut out, r.started_at);
    out.push_str(",\"status\":");
    push_str(&mut out, r.status);
    out.push_str(",\"token\":");
    push_str(&mut out, r.token);
    out.push('}');
    out
}

fn push_int(out: &mut String, n: i64) {
    out.push_str(&n.to_string());
}

fn push_opt_int(out: &mut String, n: Option<i64>) {
    match n {
        Some(n) => push_int(out, n),
        None => out.push_str("null"),
    }
}

fn push_opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => push_str(out, s),
        None => out.push_str("null"),
    }
}

/// A JSON string as Python's `json.dumps` writes it with `ensure_ascii`:
/// the short escapes it knows, every other character outside `' '..='~'`
/// as `\uXXXX` in lower-case hex (UTF-16 surrogate pairs above U+FFFF).
pub fn push_str(out: &mut String, s: &str) {
    out.push('"');
    let plain = |c: char| (' '..='~').contains(&c) && c != '"' && c != '\\';
    if s.chars().all(plain) {
        out.push_str(s);
    } else {
        let mut units = [0u16; 2];
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if plain(c) => out.push(c),
                c => {
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> ResultFields<'static> {
        ResultFields {
            slot: 1_700_000_000_000,
            token: "t-1",
            instance_id: "host:1",
            status: "success",
            started_at: Some(1_700_000_000_005),
            finished_at: None,
            error: None,
            attempt: 1,
            manual: false,
            reason: None,
        }
    }

    #[test]
    fn the_common_result_in_sorted_key_order() {
        assert_eq!(
            result_json(&fields()),
            "{\"attempt\":1,\"error\":null,\"finished_at\":null,\"instance_id\":\"host:1\",\
             \"manual\":false,\"reason\":null,\"slot\":1700000000000,\
             \"started_at\":1700000000005,\"status\":\"success\",\"token\":\"t-1\"}"
        );
    }

    #[test]
    fn every_optional_field_set() {
        let r = ResultFields {
            finished_at: Some(-3),
            error: Some("boom"),
            manual: true,
            reason: Some("lease_lost"),
            attempt: i64::MAX,
            slot: i64::MIN,
            ..fields()
        };
        let text = result_json(&r);
        assert!(text.contains("\"attempt\":9223372036854775807,\"error\":\"boom\""));
        assert!(text.contains("\"finished_at\":-3,"));
        assert!(text.contains("\"manual\":true,\"reason\":\"lease_lost\""));
        assert!(text.contains("\"slot\":-9223372036854775808,"));
    }

    #[test]
    fn strings_escaped_as_python_writes_them() {
        let mut out = String::new();
        push_str(
            &mut out,
            "a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{1}i\u{7f}j\u{e9}k\u{1f600}",
        );
        assert_eq!(
            out,
            "\"a\\\"b\\\\c\\nd\\re\\tf\\bg\\fh\\u0001i\\u007fj\\u00e9k\\ud83d\\ude00\""
        );
    }

    #[test]
    fn the_empty_string() {
        let mut out = String::new();
        push_str(&mut out, "");
        assert_eq!(out, "\"\"");
    }
}
