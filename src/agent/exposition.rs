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
//!   (line 95);
//! - a histogram `x` is `x_bucket{le="y"}` lines, cumulative and in increasing
//!   `le` order, one of them `le="+Inf"` equal to `x_count`, then `x_sum` and
//!   `x_count` (lines 109-119);
//! - Prometheus 3 fails a scrape without a valid Content-Type (lines 254-258):
//!   [`CONTENT_TYPE`].
//!
//! Names are the legacy character set only (`[a-zA-Z_:][a-zA-Z0-9_:]*` for
//! metrics, `[a-zA-Z_][a-zA-Z0-9_]*` for labels, `__` reserved): the quoted
//! UTF-8 syntax needs a newer scraper, and every name here is a constant of
//! the catalogue (`super::metrics`), checked by its tests. The writer trusts
//! its names (debug assertions only) and escapes every value.

use std::fmt::Write as _;

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

/// A sample value as Go's `ParseFloat` reads it. Rust's `Display` for f64 is
/// the shortest string that reads back to the same number and never uses an
/// exponent, both of which ParseFloat accepts; only the infinities need the
/// format's own spelling (Rust writes `inf`).
pub fn format_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
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

/// A sample's value: integers stay exact (a counter past 2^53 would lose
/// digits as an f64 here, though not once Prometheus reads it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Uint(u64),
    Float(f64),
}

impl Value {
    fn write(self, out: &mut String) {
        let _ = match self {
            Value::Int(v) => write!(out, "{v}"),
            Value::Uint(v) => write!(out, "{v}"),
            Value::Float(v) => {
                out.push_str(&format_float(v));
                Ok(())
            }
        };
    }
}

/// One histogram's data: `counts[i]` observations fell in bucket `i` (not
/// cumulative); `counts` has one more element than `bounds`, the `+Inf`
/// bucket. The writer makes the cumulative `_bucket` lines and `_count`.
#[derive(Clone, Copy, Debug)]
pub struct HistogramData<'a> {
    pub bounds: &'a [f64],
    pub counts: &'a [u64],
    pub sum: f64,
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
                .map_or_else(|| "+Inf".into(), |b| format_float(*b));
            let mut all: Vec<&str> = values.to_vec();
            all.push(&le);
            self.series(name, "_bucket", &names, &all);
            Value::Uint(cumulative).write(&mut self.out);
            self.out.push('\n');
        }
        self.series(name, "_sum", labels, values);
        Value::Float(h.sum).write(&mut self.out);
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
    fn floats_read_back_as_go_parses_them() {
        assert_eq!(format_float(1.0), "1");
        assert_eq!(format_float(0.005), "0.005");
        assert_eq!(format_float(2.5), "2.5");
        assert_eq!(format_float(-1.0), "-1");
        assert_eq!(format_float(f64::INFINITY), "+Inf");
        assert_eq!(format_float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_float(f64::NAN), "NaN");
        assert_eq!(format_float(1e21), "1000000000000000000000");
        for v in [
            0.1,
            1.0 / 3.0,
            1e-7,
            123456.789,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            assert_eq!(format_float(v).parse::<f64>().unwrap(), v);
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
                bounds: &[0.1, 1.0],
                counts: &[2, 0, 3],
                sum: 7.25,
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
