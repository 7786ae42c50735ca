//! `testKnob`: a setting that exists only in test builds (the feature
//! `test-setting`), to prove that one declaration in `cni::keys`, this file
//! and its line in `SETTINGS` are all a new owned setting takes in the code
//! (docs/contributing.md, "Adding a setting"). Its file, `roce_tune_test_knob`
//! in the device's port directory, is one no kernel has: only a test tree
//! plants it. It holds a number from 0 to 15, or nothing (unset).

use crate::cni::keys::Key;
use crate::rdma::setting::{Setting, SettingError, SettingResult, Value, Views};
use crate::rdma::{class_dir, RdmaPort};
use crate::sysfs::{SysfsError, View};
use std::path::PathBuf;

pub struct Knob;
pub static KNOB: Knob = Knob;

impl Setting for Knob {
    fn declared(&self) -> Key {
        Key::TestKnob
    }

    fn read(&self, at: Views, port: &RdmaPort) -> SettingResult<Value> {
        self.read_present(at, port)?
            .ok_or_else(|| self.error(at.device, port, "does not exist"))
    }

    fn write(&self, at: Views, port: &RdmaPort, value: Value) -> SettingResult<()> {
        let form = value.map_or_else(String::new, |v| format!("{v}\n"));
        at.device
            .write(&path(port), form.as_bytes())
            .map_err(|e| self.error(at.device, port, &e.to_string()))
    }

    fn present(&self, at: Views, port: &RdmaPort) -> SettingResult<bool> {
        Ok(at.device.exists(&path(port)))
    }

    fn read_present(&self, at: Views, port: &RdmaPort) -> SettingResult<Option<Value>> {
        let content = match at.device.read(&path(port)) {
            Err(SysfsError::Missing | SysfsError::Escapes) => return Ok(None),
            other => other.map_err(|e| self.error(at.device, port, &e.to_string()))?,
        };
        let bound = self.declaration().max;
        match content.trim() {
            "" => Ok(Some(None)),
            n => match n.parse::<u32>() {
                Ok(v) if v <= bound => Ok(Some(Some(v))),
                _ => Err(self.error(
                    at.device,
                    port,
                    &format!("holds no number from 0 to {bound}"),
                )),
            },
        }
    }

    fn show_path(&self, at: Views, port: &RdmaPort) -> String {
        at.device.show(&path(port))
    }
}

impl Knob {
    fn error(&self, view: &View, port: &RdmaPort, why: &str) -> SettingError {
        SettingError {
            code: self.code(),
            msg: format!("test knob {}: {why}", view.show(&path(port))),
        }
    }
}

fn path(port: &RdmaPort) -> PathBuf {
    class_dir(&port.device).join(format!("ports/{}/roce_tune_test_knob", port.port))
}
