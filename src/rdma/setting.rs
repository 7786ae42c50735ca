//! A per-rail setting roce-tune owns while a pod lives: a file of the rail's
//! device that ADD records, writes and reads back, and that DEL, GC and the
//! orphan repair give back. Each setting says how its value is read, written
//! and compared, and where its file lives; `ownership` does the rest (the
//! record before the write, co-owners, the restore rules) for all of them.
//!
//! This file is the trait only. The list of settings, which everything else
//! iterates, is `crate::settings`, a layer above the implementations, so an
//! implementation and the list never import each other
//! (docs/contributing.md says what a new one takes).

use super::RdmaPort;
use crate::cni::keys::{Key, Owned};
use crate::netns::NetNs;
use crate::sysfs::View;
use std::fmt;

/// A setting's value: `None` is unset (the class has an unset state; a ToS
/// always has a value). Every setting so far is a number.
pub type Value = Option<u32>;

/// Where a rail's files are reached: its device's sysfs (the pod's in
/// exclusive mode), the node's configfs (always the host's), and the pod's
/// end of the rail, for a setting of the pod's interface (an MTU).
#[derive(Clone, Copy)]
pub struct Views<'a> {
    pub device: &'a View,
    pub host: &'a View,
    /// `None` when there is no pod to reach: its netns is gone (a DEL after
    /// the sandbox died, the orphan repair), or there never was one (an idle
    /// VF reset by `reset-idle`). A setting of the interface then has nothing
    /// to read or give back: the interface went with the netns.
    pub pod: Option<PodIface<'a>>,
}

/// The pod's interface of a rail: CNI_IFNAME in the pod's netns, the one
/// the command opened (and proved: `NetNs::lookup`, or the recorded nsfs
/// identity). A setting works on it from a thread inside (`NetNs::run`):
/// rtnetlink and `/proc/sys/net` answer for the caller's netns.
#[derive(Clone, Copy)]
pub struct PodIface<'a> {
    pub netns: &'a NetNs,
    pub ifname: &'a str,
}

impl<'a> Views<'a> {
    /// The host's sysfs for everything, no pod: an idle VF, a unit test.
    pub fn host_only(host: &'a View) -> Views<'a> {
        Views {
            device: host,
            host,
            pod: None,
        }
    }
}

/// Why a setting's file could not be used, with the CNI code the edge gives
/// it. The message quotes a file only as a value that parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    pub code: u32,
    pub msg: String,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for SettingError {}

pub type SettingResult<T> = Result<T, SettingError>;

pub trait Setting: Sync {
    /// Its network config key, where the setting is declared (its bounds,
    /// title, code, whether a profile may carry it: `cni::keys`, `owned`).
    fn declared(&self) -> Key;
    /// The config key, and the name a state entry records it under.
    fn key(&self) -> &'static str {
        self.declared().name()
    }
    /// How messages and logs name it.
    fn title(&self) -> &'static str {
        self.declaration().title
    }
    /// The CNI error code of its failures (docs/errors.md).
    fn code(&self) -> u32 {
        self.declaration().code
    }
    /// What its key declares. Every setting's key declares one
    /// (`settings::tests`), so a key that does not is a bug caught there.
    fn declaration(&self) -> Owned {
        self.declared()
            .owned()
            .unwrap_or_else(|| panic!("{} declares no owned setting", self.declared().name()))
    }
    /// The value the file holds now.
    fn read(&self, at: Views, port: &RdmaPort) -> SettingResult<Value>;
    /// Put `value` in the file (`None`: unset it).
    fn write(&self, at: Views, port: &RdmaPort, value: Value) -> SettingResult<()>;
    /// Whether the device has the file now. A file that is gone went with the
    /// device (re-created or removed), and with it what was set.
    fn present(&self, at: Views, port: &RdmaPort) -> SettingResult<bool>;
    /// `read` when `present`, else `None`: what a restore and the drift check
    /// ask. An implementation can answer both with one look at the file.
    fn read_present(&self, at: Views, port: &RdmaPort) -> SettingResult<Option<Value>> {
        if !self.present(at, port)? {
            return Ok(None);
        }
        self.read(at, port).map(Some)
    }
    /// Whatever must exist before the first read (a configfs group).
    fn prepare(&self, _at: Views, _port: &RdmaPort) -> SettingResult<()> {
        Ok(())
    }
    /// Whether two values are the same setting.
    fn same(&self, a: Value, b: Value) -> bool {
        a == b
    }
    /// Where the file is, as a message shows it.
    fn show_path(&self, at: Views, port: &RdmaPort) -> String;
    /// What the file holds, changing nothing: `None` when there is nothing
    /// to read without a change (no file). `inspect` shows it. `read_present`
    /// unless `present` or `read` change anything (the ToS's `present` makes
    /// its configfs directory).
    fn peek(&self, at: Views, port: &RdmaPort) -> SettingResult<Option<Value>> {
        self.read_present(at, port)
    }
    /// Who likely wrote `found` over roce-tune's value, when the setting
    /// knows its usual suspects: the agent's drift line says "likely" and
    /// this, else "set by someone else".
    fn suspect(&self, _found: Value) -> Option<&'static str> {
        None
    }

    /// Read back what was written: drivers reject some writes silently.
    fn verify(&self, at: Views, port: &RdmaPort, value: Value) -> SettingResult<()> {
        let back = self.read(at, port)?;
        if self.same(back, value) {
            return Ok(());
        }
        Err(SettingError {
            code: self.code(),
            msg: format!(
                "{} {} reads {} after writing {}: the driver did not take it",
                self.title(),
                self.show_path(at, port),
                show(back),
                show(value)
            ),
        })
    }
}

/// A value as logs and messages say it.
pub fn show(v: Value) -> String {
    match v {
        Some(n) => n.to_string(),
        None => "unset".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_show_as_messages_say_them() {
        assert_eq!(show(None), "unset");
        assert_eq!(show(Some(41)), "41");
    }
}
