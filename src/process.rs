//! What std's start-up did that both binaries rely on, and one thing it
//! adds: `roce-tune` (src/main.rs) skips std's start-up, and
//! `roce-tune-agent` (src/bin/roce-tune-agent.rs) runs it and then this, so
//! the two start alike.

use nix::libc;

/// Call first, before any file is opened or any thread made.
pub fn start() {
    // File descriptors 0, 1 and 2 must be open: a runtime that started us
    // with stdout closed would otherwise have the first file we open (a
    // state entry) become fd 1, and the result printed into it.
    for fd in 0..3 {
        // SAFETY: fcntl(F_GETFD) on an integer only reads the fd table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            let flags = if fd == 0 {
                libc::O_RDONLY
            } else {
                libc::O_WRONLY
            };
            // SAFETY: a constant C string; the lowest free fd is `fd` itself.
            unsafe { libc::open(c"/dev/null".as_ptr(), flags) };
        }
    }
    // SAFETY: setting a signal's disposition to ignore runs no handler. A
    // write to a closed pipe is then an EPIPE error, not a death by signal.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // One malloc arena: the pod thread of `netns::NetNs::run` would make a
    // second one (a 64 MiB reservation trimmed by two munmaps, fresh pages
    // faulted in) for a few kilobytes. Contention is nil: two threads, one
    // waiting for the other. The agent's few threads (the pass, the HTTP
    // server, the NRI plugin) allocate little and seldom; it ran so before
    // it had a binary of its own.
    // SAFETY: a documented glibc tunable, set before any thread exists.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
}

/// The long-running binary's addition, after [`start`]: an allocation of
/// 256 KiB or more is always its own mapping, given back to the kernel when
/// freed. glibc's default raises that threshold to the largest block freed
/// so far (up to 32 MiB), after which the NRI plugin's 4 MiB messages come
/// from the heap, whose freed middle is never given back: a runtime that
/// resent a 67 MiB Synchronize, refused at the 64 MiB budget, five times
/// took the agent to 90 MiB RSS, not the 65 MiB of one (docs/design.md,
/// "NRI"). Not for the CNI binary, whose largest allocation is kilobytes
/// and whose process lives milliseconds.
pub fn long_running() {
    // SAFETY: a documented glibc tunable, set before any thread exists;
    // setting it turns off the dynamic threshold (mallopt(3)).
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10) };
}

/// Whether a unit test that needs root may run here (`test` names it, `why`
/// says what only root can make): `false`, said on stderr, when the tests
/// run as another user (`make unit-unprivileged`), and a failure instead
/// under ROCE_TUNE_REQUIRE_ROOT=1 (`make unit`, CI as root), so a run that
/// must cover it cannot pass without it. The trust rules refuse what is not
/// root's (a socket's peer, a checkpoint, a record, an NVIDIA file): their
/// tests make root's files, which only root can.
#[cfg(test)]
pub(crate) fn test_runs_as_root(test: &str, why: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { nix::libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var("ROCE_TUNE_REQUIRE_ROOT").as_deref() != Ok("1"),
        "{test}: needs root ({why}), and ROCE_TUNE_REQUIRE_ROOT=1 forbids skipping"
    );
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: needs root ({why})");
    false
}
