//! The mlx5 traffic class file (MLNX_OFED/DOCA-OFED's mlx5 main_ext.c; see
//! docs/design.md, "The traffic class file"). Reading: empty when unset, else a
//! `Global tclass=<N>` first line, possibly followed by per-flow rule lines
//! that are never taken for the global value. Writing: `tclass=<N>` sets it,
//! `tclass=-1` unsets it (writing 0 would FORCE class 0, the RDMA CNI's bug).

use super::setting::{Setting, SettingError, SettingResult, Value, Views};
use super::RdmaPort;
use crate::cni::code;
use crate::cni::keys::Key;
use crate::sysfs::{SysfsError, View};

/// The global traffic class: `None` is unset.
pub type TrafficClass = Option<u8>;

/// Parse the file's content. Besides the driver's form, a plain file in a
/// test tree holds what was last written: `tclass=N`, a bare `N`, `-1` or
/// `tclass=-1`. An error says what was expected and how much was found, never
/// what: the file may be a planted link's target in a test tree.
pub fn parse(content: &str) -> Result<TrafficClass, String> {
    let lines: Vec<&str> = content
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // The driver prints the global value first when it is set; rule lines
    // (`dst_ip=10.0.0.0/8,tclass=96`) alone mean the global value is unset.
    if let Some(v) = lines.iter().find_map(|l| l.strip_prefix("Global tclass=")) {
        return global_value(v.trim(), content);
    }
    match lines.first() {
        None => Ok(None),
        Some(l) if is_rule(l) && lines.iter().all(|l| is_rule(l)) => Ok(None),
        Some(l) => global_value(l.strip_prefix("tclass=").unwrap_or(l).trim(), l),
    }
}

/// A per-flow rule: `key=value` pairs separated by commas, one of them tclass.
fn is_rule(line: &str) -> bool {
    line.contains(',') && line.split(',').all(|kv| kv.contains('='))
}

fn global_value(value: &str, line: &str) -> Result<TrafficClass, String> {
    if value == "-1" {
        return Ok(None);
    }
    match value.parse::<u16>() {
        Ok(n) if n <= 255 => Ok(Some(n as u8)),
        _ => Err(format!(
            "expected empty, \"Global tclass=N\" or \"tclass=N\" with N from 0 to 255, found a line of {} bytes that is not one",
            line.lines().next().unwrap_or(line).len()
        )),
    }
}

/// What to write to set `tc`, or to unset the class.
pub fn write_form(tc: TrafficClass) -> String {
    match tc {
        Some(n) => format!("tclass={n}"),
        None => "tclass=-1".to_string(),
    }
}

pub fn describe(tc: TrafficClass) -> String {
    match tc {
        Some(n) => n.to_string(),
        None => "unset".to_string(),
    }
}

/// The mlx5 class file as a setting roce-tune owns.
pub struct Class;
pub static CLASS: Class = Class;

impl Setting for Class {
    fn declared(&self) -> Key {
        Key::TrafficClass
    }

    fn read(&self, at: Views, port: &RdmaPort) -> SettingResult<Value> {
        read(at.device, port).map(|tc| tc.map(u32::from))
    }

    fn write(&self, at: Views, port: &RdmaPort, value: Value) -> SettingResult<()> {
        write(at.device, port, value.map(|v| v.min(255) as u8))
    }

    fn present(&self, at: Views, port: &RdmaPort) -> SettingResult<bool> {
        Ok(at.device.exists(&port.traffic_class_path()))
    }

    fn read_present(&self, at: Views, port: &RdmaPort) -> SettingResult<Option<Value>> {
        read_if_there(at.device, port).map(|tc| tc.map(|tc| tc.map(u32::from)))
    }

    fn show_path(&self, at: Views, port: &RdmaPort) -> String {
        at.device.show(&port.traffic_class_path())
    }

    fn suspect(&self, found: Value) -> Option<&'static str> {
        match found {
            None => Some("a driver reset or a re-created VF: either unsets it (the class lives in driver memory)"),
            Some(0) => Some("NVIDIA's rdma CNI fork, which writes 0 when rdmaQoS.tc is unset, or the RDMA CNI, which leaves 0 on DEL"),
            Some(_) => None,
        }
    }
}

fn error(msg: String) -> SettingError {
    SettingError {
        code: code::TRAFFIC_CLASS,
        msg,
    }
}

/// The class file's state as a restore must know it: a file that is gone is
/// not one that cannot be read.
pub fn read(view: &View, port: &RdmaPort) -> SettingResult<TrafficClass> {
    read_if_there(view, port)?.ok_or_else(|| read_error(view, port, SysfsError::Missing))
}

/// `read`, with `None` for a file that is not there (`present` is false):
/// one open where a check and then a read were two.
fn read_if_there(view: &View, port: &RdmaPort) -> SettingResult<Option<TrafficClass>> {
    let path = port.traffic_class_path();
    let content = match view.read(&path) {
        Err(SysfsError::Missing | SysfsError::Escapes) => return Ok(None),
        other => other.map_err(|e| read_error(view, port, e))?,
    };
    parse(&content).map(Some).map_err(|why| {
        error(format!(
            "traffic class file {}: {why}; roce-tune will not change a file it cannot read",
            view.show(&path)
        ))
    })
}

fn read_error(view: &View, port: &RdmaPort, e: SysfsError) -> SettingError {
    let path = view.show(&port.traffic_class_path());
    error(match e {
        SysfsError::Missing => format!(
            "{path} does not exist: {} has no traffic class file; the file exists only with MLNX_OFED/DOCA-OFED (mlx5), not with the inbox driver or soft-RoCE; remove trafficClass or use rdmaCmTos",
            port.device
        ),
        other => format!("read traffic class {path}: {other}"),
    })
}

/// Write `tc` and read it back.
pub fn write_verified(view: &View, port: &RdmaPort, tc: TrafficClass) -> SettingResult<()> {
    let at = Views::host_only(view);
    CLASS.write(at, port, tc.map(u32::from))?;
    CLASS.verify(at, port, tc.map(u32::from))
}

/// Set or unset the class. No O_CREAT: a missing file means the device is not
/// what we think it is, and it must stay missing.
pub fn write(view: &View, port: &RdmaPort, tc: TrafficClass) -> SettingResult<()> {
    let form = write_form(tc);
    let path = port.traffic_class_path();
    view.write(&path, form.as_bytes()).map_err(|e| match e {
        SysfsError::Missing => read_error(view, port, e),
        other => error(format!("write {form} to {}: {other}", view.show(&path))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The driver's forms, from tests/data/traffic-class-file.txt (the seed's samples).
    fn fixture_cases() -> Vec<(String, String)> {
        let text = include_str!("../../tests/data/traffic-class-file.txt");
        text.split("-----\n")
            .map(|block| {
                let mut lines = block.lines().filter(|l| !l.starts_with('#'));
                let name = lines
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("case: ")
                    .to_string();
                let body: Vec<&str> = lines.collect();
                (name, body.join("\n"))
            })
            .collect()
    }

    #[test]
    fn driver_forms_from_fixture() {
        let cases = fixture_cases();
        assert_eq!(cases.len(), 4);
        assert_eq!(parse(&cases[0].1), Ok(None), "{}", cases[0].0);
        assert_eq!(parse(&cases[1].1), Ok(Some(0)), "{}", cases[1].0);
        assert_eq!(parse(&cases[2].1), Ok(Some(41)), "{}", cases[2].0);
        assert_eq!(parse(&cases[3].1), Ok(Some(106)), "{}", cases[3].0);
    }

    #[test]
    fn test_tree_forms() {
        assert_eq!(parse("tclass=41"), Ok(Some(41)));
        assert_eq!(parse("41\n"), Ok(Some(41)));
        assert_eq!(parse("tclass=-1"), Ok(None));
        assert_eq!(parse("-1"), Ok(None));
        assert_eq!(parse("\n\n"), Ok(None));
    }

    #[test]
    fn rule_lines_are_never_the_global_value() {
        assert_eq!(
            parse("dst_ip=10.0.0.0/8,tclass=96\nsrc_ip=1.2.3.4,dst_ip=5.6.7.0/24,tclass=104\n"),
            Ok(None)
        );
        assert_eq!(
            parse("dst_ip=10.0.0.0/8,tclass=96\nGlobal tclass=7\n"),
            Ok(Some(7))
        );
        assert!(parse("dst_ip=10.0.0.0/8,tclass=96\ngarbage\n").is_err());
        assert!(parse("Global tclass=256").is_err());
        assert!(parse("tclass=abc").is_err());
        assert!(parse("Global tclass=-2").is_err());
        let e = parse("root:$6$secret:19000:0:99999:7:::\n").unwrap_err();
        assert!(!e.contains("root") && e.contains("33 bytes"), "{e}");
    }

    #[test]
    fn write_forms() {
        assert_eq!(write_form(Some(41)), "tclass=41");
        assert_eq!(write_form(Some(0)), "tclass=0");
        assert_eq!(write_form(None), "tclass=-1");
    }
}
