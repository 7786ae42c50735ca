//! Test-only crash points (cargo feature `fault-injection`): when the
//! environment names a point with ROCE_TUNE_FAULT, the process aborts there,
//! as a node losing power or an OOM kill would stop it. Release builds have
//! no such code: every call site is behind `#[cfg(feature = "fault-injection")]`.

/// Whether ROCE_TUNE_FAULT names `name`.
pub fn named(name: &str) -> bool {
    std::env::var("ROCE_TUNE_FAULT").is_ok_and(|v| v == name)
}

/// Abort the process if ROCE_TUNE_FAULT names `name`.
pub fn point(name: &str) {
    if named(name) {
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

/// Wait at `name` while ROCE_TUNE_STALL is `<name>:<file>` and that file
/// exists, or until `stop()`: a step stuck (in the kernel, on a wedged
/// device) for as long as the test wants, for what watches the process from
/// outside (the agent's `/healthz`).
pub fn stall(name: &str, stop: &dyn Fn() -> bool) {
    let Ok(v) = std::env::var("ROCE_TUNE_STALL") else {
        return;
    };
    let Some(file) = v.strip_prefix(name).and_then(|r| r.strip_prefix(':')) else {
        return;
    };
    while std::path::Path::new(file).exists() && !stop() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
