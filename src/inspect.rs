//! `roce-tune inspect` (placeholder until the inspect module lands).
pub fn run(_args: &[String]) -> i32 {
    eprintln!("roce-tune inspect: not built yet");
    2
}
