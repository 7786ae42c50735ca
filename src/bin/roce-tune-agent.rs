//! `roce-tune-agent`: the long-running side of roce-tune (`agent`, `nri`,
//! `gc --orphans --every`), the DaemonSet's container. A binary of its own
//! so that the one-shot CNI binary carries none of it (docs/design.md, "Two
//! binaries").
//!
//! An ordinary `fn main`: std's start-up costs this process once, not every
//! pod's ADD, and a stack overflow in one of its threads ends with a message.
//! `process::start` makes it start as the CNI binary does (fds 0 to 2 open,
//! SIGPIPE ignored, one malloc arena).

fn main() {
    roce_tune::process::start();
    roce_tune::process::long_running();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // process::exit flushes stdout (std's cleanup), then exits.
    std::process::exit(roce_tune::cli::daemons::run(&args));
}
