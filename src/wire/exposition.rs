//! The Prometheus text exposition format, version 0.0.4: what `GET /metrics`
//! answers.
//!
//! Source: prometheus/docs `docs/instrumenting/exposition_formats.md` at
//! c105550a (2026-08-06), "Prometheus Text Format", lines 35-119:
//! - lines end with `\n`, the last one included; `# HELP name text` and
//!   `# TYPE name type` at most once per name, before its first sample; all
//!   lines of one metric form one group (lines 99-107);
//! - HELP text escapes `\` and newline as `\\` and `\n` (lines 49-55); a label
//!   value also escapes `"` as `\"` (line 94);
//! - a value is what Go's `ParseFloat` reads, plus `NaN`, `+Inf`, `-Inf`
//!   (line 95): here integers and decimal seconds only;
//! - a histogram `x` is `x_bucket{le="y"}` lines, cumulative and in increasing
//!   `le` order, one of them `le="+Inf"` equal to `x_count`, then `x_sum` and
//!   `x_count` (lines 109-119);
//! - Prometheus 3 fails a scrape without a valid Content-Type (lines 254-258):
//!   [`CONTENT_TYPE`].
//!
//! Names are the legacy character set only (`[a-zA-Z_:][a-zA-Z0-9_:]*` for
//! metrics, `[a-zA-Z_][a-zA-Z0-9_]*` for labels, `__` reserved): the quoted
//! UTF-8 syntax needs a newer scraper, and every name here is a constant of
//! the agent's catalogue (`agent::metrics`), checked by its tests. The writer trusts
//! its names (debug assertions only) and escapes every value.

use std::fmt::Write as _;
use std::time::Duration;

/// The media type of format 0.0.4 (exposition_formats.md, "Basic info").
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, the legacy metric name set.
pub fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, and not `__...` (reserved for Prometheus's own
/// labels).
pub fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with("__")
}

/// Seconds as a decimal, `secs[.fraction]` with no trailing zeros: exact to
/// the nanosecond, and what Go's `ParseFloat` reads. Every non-integer value
/// roce-tune exposes is a time, so no f64 is formatted: core's float
/// formatting alone would add 17.6 KB to the static binary (measured).
pub fn format_seconds(d: Duration) -> String {
    let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
    if nanos == 0 {
        return secs.to_string();
    }
    let mut s = format!("{secs}.{nanos:09}");
    while s.ends_with('0') {
        s.pop();
    }
    s
}

/// Append `v` with `\`, `"` and line feed escaped (label values).
fn escape_label_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Append `v` with `\` and line feed escaped (HELP text).
fn escape_help(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A sample's value, written exactly: an integer, or a time or duration as
/// decimal seconds ([`format_seconds`]; a timestamp is the time since the
/// Unix epoch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Uint(u64),
    Seconds(Duration),
}

impl Value {
    fn write(self, out: &mut String) {
        let _ = match self {
            Value::Int(v) => write!(out, "{v}"),
            Value::Uint(v) => write!(out, "{v}"),
            Value::Seconds(d) => {
                out.push_str(&format_seconds(d));
                Ok(())
            }
        };
    }
}

/// One histogram of durations (a `_seconds` family): `counts[i]`
/// observations fell in bucket `i` (not cumulative); `counts` has one more
/// element than `bounds`, the `+Inf` bucket. The writer makes the cumulative
/// `_bucket` lines and `_count`.
#[derive(Clone, Copy, Debug)]
pub struct HistogramData<'a> {
    pub bounds: &'a [Duration],
    pub counts: &'a [u64],
    pub sum: Duration,
}

/// Writes one exposition. Families come one at a time ([`Writer::family`]);
/// their HELP and TYPE lines are written with the first sample, so a family
/// without samples leaves no lines (as client_golang does).
pub struct Writer {
    out: String,
    family: Option<Open>,
    #[cfg(debug_assertions)]
    seen: Vec<&'static str>,
}

struct Open {
    name: &'static str,
    kind: Kind,
    help: &'static str,
    labels: &'static [&'static str],
    header_written: bool,
}

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

impl Writer {
    pub fn new() -> Writer {
        Writer {
            out: String::new(),
            family: None,
            #[cfg(debug_assertions)]
            seen: Vec::new(),
        }
    }

    /// Start the family `name`; every sample until the next call belongs to
    /// it and carries exactly `labels`, in that order.
    pub fn family(
        &mut self,
        name: &'static str,
        kind: Kind,
        help: &'static str,
        labels: &'static [&'static str],
    ) {
        debug_assert!(is_metric_name(name), "metric name {name}");
        debug_assert!(labels.iter().all(|l| is_label_name(l) && *l != "le"));
        #[cfg(debug_assertions)]
        {
            assert!(!self.seen.contains(&name), "family {name} twice");
            self.seen.push(name);
        }
        self.family = Some(Open {
            name,
            kind,
            help,
            labels,
            header_written: false,
        });
    }

    fn header(&mut self) -> (&'static str, &'static [&'static str]) {
        let f = self.family.as_mut().expect("a sample outside a family");
        if !f.header_written {
            f.header_written = true;
            let _ = write!(self.out, "# HELP {} ", f.name);
            escape_help(&mut self.out, f.help);
            let _ = writeln!(self.out, "\n# TYPE {} {}", f.name, f.kind.as_str());
        }
        (f.name, f.labels)
    }

    fn series(&mut self, name: &str, suffix: &str, names: &[&str], values: &[&str]) {
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !names.is_empty() {
            self.out.push('{');
            for (i, (n, v)) in names.iter().zip(values).enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(n);
                self.out.push_str("=\"");
                escape_label_value(&mut self.out, v);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
    }

    /// One counter or gauge sample; `values` are the family's label values.
    pub fn sample(&mut self, values: &[&str], value: Value) {
        let (name, labels) = self.header();
        debug_assert_eq!(labels.len(), values.len(), "{name}: label values");
        debug_assert!(self
            .family
            .as_ref()
            .is_some_and(|f| f.kind != Kind::Histogram));
        self.series(name, "", labels, values);
        value.write(&mut self.out);
        self.out.push('\n');
    }

    /// One histogram series: its buckets, `_sum` and `_count`.
    pub fn histogram(&mut self, values: &[&str], h: HistogramData<'_>) {
        let (name, labels) = self.header();
        debug_assert_eq!(labels.len(), values.len(), "{name}: label values");
        debug_assert!(self
            .family
            .as_ref()
            .is_some_and(|f| f.kind == Kind::Histogram));
        debug_assert_eq!(h.counts.len(), h.bounds.len() + 1, "{name}: buckets");
        debug_assert!(h.bounds.windows(2).all(|w| w[0] < w[1]), "{name}: le order");
        let mut names: Vec<&str> = labels.to_vec();
        names.push("le");
        let mut cumulative = 0u64;
        for (i, count) in h.counts.iter().enumerate() {
            cumulative = cumulative.saturating_add(*count);
            let le = h
                .bounds
                .get(i)
                .map_or_else(|| "+Inf".into(), |b| format_seconds(*b));
            let mut all: Vec<&str> = values.to_vec();
            all.push(&le);
            self.series(name, "_bucket", &names, &all);
            Value::Uint(cumulative).write(&mut self.out);
            self.out.push('\n');
        }
        self.series(name, "_sum", labels, values);
        Value::Seconds(h.sum).write(&mut self.out);
        self.out.push('\n');
        self.series(name, "_count", labels, values);
        Value::Uint(cumulative).write(&mut self.out);
        self.out.push('\n');
    }

    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_legacy_character_sets() {
        for ok in ["a", "roce_tune_rail_info", "_x", "a:b", "A9"] {
            assert!(is_metric_name(ok), "{ok}");
        }
        for bad in ["", "9a", "a-b", "a b", "é", "a.b", "a{"] {
            assert!(!is_metric_name(bad), "{bad}");
        }
        for ok in ["a", "_a", "pci_address", "A9"] {
            assert!(is_label_name(ok), "{ok}");
        }
        for bad in ["", "__name__", "__x", "a:b", "9a", "a-b", "le\n"] {
            assert!(!is_label_name(bad), "{bad}");
        }
    }

    #[test]
    fn seconds_are_exact_decimals_that_parse_as_floats() {
        let d = |s, n| format_seconds(Duration::new(s, n));
        assert_eq!(d(0, 0), "0");
        assert_eq!(d(1, 0), "1");
        assert_eq!(d(0, 5_000_000), "0.005");
        assert_eq!(d(2, 500_000_000), "2.5");
        assert_eq!(d(0, 1), "0.000000001");
        assert_eq!(d(1_780_000_660, 250_000_000), "1780000660.25");
        assert_eq!(d(u64::MAX, 999_999_999), "18446744073709551615.999999999");
        for (s, n) in [(0, 100_000_000), (12, 345_678_901), (60, 0)] {
            let parsed: f64 = d(s, n).parse().unwrap();
            assert!((parsed - (s as f64 + f64::from(n) / 1e9)).abs() < 1e-9);
        }
    }

    #[test]
    fn escapes_label_values_and_help() {
        let mut w = Writer::new();
        w.family(
            "t_info",
            Kind::Gauge,
            "back\\slash\nnewline \"quoted\"",
            &["a", "b"],
        );
        w.sample(&["x\\y", "say \"hi\"\nbye"], Value::Uint(1));
        assert_eq!(
            w.finish(),
            "# HELP t_info back\\\\slash\\nnewline \"quoted\"\n\
             # TYPE t_info gauge\n\
             t_info{a=\"x\\\\y\",b=\"say \\\"hi\\\"\\nbye\"} 1\n"
        );
    }

    #[test]
    fn a_family_without_samples_writes_nothing() {
        let mut w = Writer::new();
        w.family("t_total", Kind::Counter, "h", &[]);
        w.family("t2", Kind::Gauge, "h", &[]);
        w.sample(&[], Value::Int(-1));
        assert_eq!(w.finish(), "# HELP t2 h\n# TYPE t2 gauge\nt2 -1\n");
    }

    #[test]
    fn histograms_are_cumulative_with_inf_equal_to_count() {
        let mut w = Writer::new();
        w.family("t_seconds", Kind::Histogram, "h", &["command"]);
        w.histogram(
            &["ADD"],
            HistogramData {
                bounds: &[Duration::from_millis(100), Duration::from_secs(1)],
                counts: &[2, 0, 3],
                sum: Duration::from_millis(7250),
            },
        );
        assert_eq!(
            w.finish(),
            "# HELP t_seconds h\n# TYPE t_seconds histogram\n\
             t_seconds_bucket{command=\"ADD\",le=\"0.1\"} 2\n\
             t_seconds_bucket{command=\"ADD\",le=\"1\"} 2\n\
             t_seconds_bucket{command=\"ADD\",le=\"+Inf\"} 5\n\
             t_seconds_sum{command=\"ADD\"} 7.25\n\
             t_seconds_count{command=\"ADD\"} 5\n"
        );
    }
}
