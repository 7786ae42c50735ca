//! Thin entry point: a CNI plugin when the runtime sets CNI_COMMAND, an
//! operator's command line otherwise.
//!
//! Not Rust's `fn main`: std's start-up before `main` reads /proc/self/maps
//! (the main thread's stack guard) and gives every thread a signal stack
//! (mmap, mprotect, sigaltstack, and munmap at its end), about 0.07 ms of a
//! 1 ms plugin run on the bench machine (docs/performance.md). A stack
//! overflow then ends in SIGSEGV instead of a message, as `panic = "abort"`
//! ends a panic; what else that start-up does for us, `process_start` does.
#![cfg_attr(not(test), no_main)]

use std::ffi::{c_char, c_int};

/// What std's start-up did that this binary relies on, and one thing it
/// adds.
fn process_start() {
    use nix::libc;
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
    // waiting for the other.
    // SAFETY: a documented glibc tunable, set before any thread exists.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
}

#[cfg_attr(not(test), unsafe(no_mangle))]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    process_start();
    // A runtime sets every CNI_* variable (empty ones included) and passes no
    // arguments: if it left CNI_COMMAND out, libcni reads stdout and needs the
    // error object (code 4 from plugin::run), not the usage text.
    let runtime_env = std::env::args_os().len() <= 1
        && [
            "CNI_COMMAND",
            "CNI_CONTAINERID",
            "CNI_NETNS",
            "CNI_IFNAME",
            "CNI_ARGS",
            "CNI_PATH",
        ]
        .iter()
        .any(|k| std::env::var_os(k).is_some());
    let code = if runtime_env || std::env::var_os("CNI_COMMAND").is_some_and(|v| !v.is_empty()) {
        roce_tune::plugin::run()
    } else {
        let args: Vec<String> = std::env::args().skip(1).collect();
        roce_tune::cli::run(&args)
    };
    // process::exit flushes stdout (std's cleanup), then exits.
    std::process::exit(code);
}
