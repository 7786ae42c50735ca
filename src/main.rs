//! Thin entry point: a CNI plugin when the runtime sets CNI_COMMAND, an
//! operator's command line otherwise.
//!
//! Not Rust's `fn main`: std's start-up before `main` reads /proc/self/maps
//! (the main thread's stack guard) and gives every thread a signal stack
//! (mmap, mprotect, sigaltstack, and munmap at its end), about 0.07 ms of a
//! 1 ms plugin run on the bench machine (docs/performance.md). A stack
//! overflow then ends in SIGSEGV instead of a message, as `panic = "abort"`
//! ends a panic; what else that start-up does for us, `process::start` does.
//!
//! This binary is the one-shot side only: the long-running commands (`agent`,
//! `nri`, `gc --orphans --every`) are `roce-tune-agent`'s
//! (src/bin/roce-tune-agent.rs), and nothing here reaches them, so the
//! linker leaves the agent, its HTTP server, its metrics and the NRI plugin
//! out of this binary (docs/design.md, "Two binaries").
#![cfg_attr(not(test), no_main)]

use std::ffi::{c_char, c_int};

#[cfg_attr(not(test), unsafe(no_mangle))]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    roce_tune::process::start();
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
