//! The CNI error object. libcni reads a plugin's error from STDOUT as
//! `{"cniVersion","code","msg","details"}` together with a non-zero exit.

use serde_json::{json, Value};
use std::fmt;

/// Every code a request can end with, declared once: its name, its value
/// and why it is given. A row here is the whole of a new code in the
/// source; the tally gives each its counter by this order
/// (`crate::tally`), so a new code is appended, never inserted, and
/// docs/errors.md has a row for each (a test holds the two together).
macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal;)*) => {
        /// Well-known codes of the CNI spec (SPEC.md "Error") and roce-tune's own (100+).
        pub mod code {
            $($(#[$doc])* pub const $name: u32 = $value;)*
            /// Every code above with its name, in the order written.
            pub const ALL: &[(&str, u32)] = &[$((stringify!($name), $name)),*];
        }
    };
}

codes! {
    INCOMPATIBLE_VERSION = 1;
    CONTAINER_UNKNOWN = 3;
    INVALID_ENV = 4;
    IO_FAILURE = 5;
    DECODE_FAILED = 6;
    INVALID_CONFIG = 7;
    TRY_AGAIN_LATER = 11;
    NOT_READY = 50;
    /// RDMA device of the VF not found, ambiguous, or its address malformed.
    RDMA_DEVICE = 100;
    /// GID index does not hold the RoCE v2 GID of the pod's address.
    GID_CHECK = 101;
    /// Traffic class could not be written or did not read back.
    TRAFFIC_CLASS = 102;
    /// CHECK: a sysctl in the pod differs from the config.
    SYSCTL_DRIFT = 103;
    /// The node config is refused: not a root-owned file closed to others,
    /// not JSON, or a bad key. A node admin's problem, never the tenant's.
    NODE_CONFIG = 104;
    /// The rdma_cm default ToS could not be written or did not read back.
    RDMA_CM_TOS = 105;
    /// `placementCheck: enforce`: a GPU of the pod has too few rails near it
    /// for GPUDirect RDMA (docs/placement.md).
    PLACEMENT = 106;
    /// `placementCheck: enforce`, and an input of the verdict is not one only
    /// root can provide (the kubelet socket's peer, the checkpoint, an NVIDIA
    /// `information` file): a node admin's problem, as 104 is, and not the
    /// pod's layout, which 106 says; nothing failed to be read, so not 5.
    UNTRUSTED_INPUT = 107;
    /// `qosCheck: enforce`: the rail's class lands, by its DSCP's own entry
    /// in the PF's DSCP map, on another priority than `railPriority`
    /// (docs/design.md, "DCB and the QoS verdict").
    QOS_PRIORITY = 108;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    pub details: String,
}

pub type CniResult<T> = Result<T, CniError>;

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        CniError {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    pub fn config(msg: impl Into<String>) -> Self {
        Self::new(code::INVALID_CONFIG, msg)
    }

    pub fn env(msg: impl Into<String>) -> Self {
        Self::new(code::INVALID_ENV, msg)
    }

    /// An I/O failure on `what` (a path or an action), keeping the OS error as details.
    pub fn io(what: impl fmt::Display, err: impl fmt::Display) -> Self {
        Self::new(code::IO_FAILURE, format!("{what}: {err}"))
    }

    /// The JSON object libcni expects on stdout.
    pub fn to_json(&self, cni_version: &str) -> Value {
        let mut v = json!({ "cniVersion": cni_version, "code": self.code, "msg": self.msg });
        if !self.details.is_empty() {
            v["details"] = Value::String(self.details.clone());
        }
        v
    }
}

impl fmt::Display for CniError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "code {}: {}", self.code, self.msg)?;
        if !self.details.is_empty() {
            write!(f, " ({})", self.details)?;
        }
        Ok(())
    }
}

impl std::error::Error for CniError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_json_has_spec_fields_and_omits_empty_details() {
        let e = CniError::config("sysctl key \"kernel.x\" is outside net.");
        let v = e.to_json("1.0.0");
        assert_eq!(v["cniVersion"], "1.0.0");
        assert_eq!(v["code"], 7);
        assert_eq!(v["msg"], "sysctl key \"kernel.x\" is outside net.");
        assert!(v.get("details").is_none());
        let v = e.with_details("see docs/design.md").to_json("0.4.0");
        assert_eq!(v["details"], "see docs/design.md");
        assert_eq!(v["cniVersion"], "0.4.0");
    }

    #[test]
    fn io_error_names_what_failed() {
        let e = CniError::io("write /x", "Permission denied");
        assert_eq!(e.code, code::IO_FAILURE);
        assert_eq!(e.msg, "write /x: Permission denied");
    }
}
