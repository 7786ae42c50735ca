//! Thin entry point: a CNI plugin when the runtime sets CNI_COMMAND, an
//! operator's command line otherwise.

fn main() {
    let code = if std::env::var_os("CNI_COMMAND").is_some_and(|v| !v.is_empty()) {
        roce_tune::plugin::run()
    } else {
        let args: Vec<String> = std::env::args().skip(1).collect();
        roce_tune::cli::run(&args)
    };
    std::process::exit(code);
}
