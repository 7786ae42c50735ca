//! `promtool check metrics`: Prometheus's parser and linter of the text
//! exposition (client_golang's promlint: naming, units, `_total`, histogram
//! rules), from Debian's `prometheus` package as integration/setup.sh
//! unpacks it. A test that runs it says `needs!(promtool)` first: that is
//! the path these functions take.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The one lint accepted (see `check_metrics`).
pub const ACCEPTED_LINT: &str =
    "roce_tune_rail_hw_counter_total metric name should not include type 'counter'";

/// Feed `exposition` to `promtool check metrics`: `Ok` when it exits 0 and
/// says nothing (it prints each lint it finds and still exits 0), else what
/// it said, with its exit status.
pub fn check_metrics(promtool: &Path, exposition: &str) -> Result<(), String> {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", promtool.display()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // One lint is the shared metric catalogue's choice, not the writer's:
    // the rail counters' family is named for the kernel's `hw_counters`
    // directory, and promlint refuses `_counter_` inside any name
    // (client_golang prometheus/testutil/promlint `lintMetricTypeInName`).
    // The alert rules and dashboards name it as it is; every other lint holds.
    let linted_only_that = said.contains(ACCEPTED_LINT);
    let said: String = said
        .lines()
        .filter(|l| !l.contains(ACCEPTED_LINT))
        .map(|l| format!("{l}\n"))
        .collect();
    if (out.status.success() || linted_only_that) && said.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("promtool check metrics ({}): {said}", out.status))
    }
}
