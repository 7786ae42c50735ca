//! Test-only crash points (cargo feature `fault-injection`): when the
//! environment names a point with ROCE_TUNE_FAULT, the process aborts there,
//! as a node losing power or an OOM kill would stop it. Release builds have
//! no such code: every call site is behind `#[cfg(feature = "fault-injection")]`.

/// Abort the process if ROCE_TUNE_FAULT names `name`.
pub fn point(name: &str) {
    if std::env::var("ROCE_TUNE_FAULT").is_ok_and(|v| v == name) {
        eprintln!("roce-tune: fault injection: aborting at {name}");
        std::process::abort();
    }
}

/// Whether ROCE_TUNE_REFUSE names `name`: the step then fails the way the
/// kernel would refuse it, for refusals this machine cannot provoke (a
/// seccomp or LSM denial of the pod's sysfs).
pub fn refused(name: &str) -> bool {
    std::env::var("ROCE_TUNE_REFUSE").is_ok_and(|v| v == name)
}
