//! Thin entry point: a CNI plugin when the runtime sets CNI_COMMAND, an
//! operator's command line otherwise.

fn main() {
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
    std::process::exit(code);
}
