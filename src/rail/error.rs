//! What a rail's tuning failed at: the kind of failure and the message the
//! user reads. The edges map it to their answer (a CNI ADD to its CNI code,
//! `Error::into_cni`; a DRA rail to its log line and whether it waits for
//! after the answer, `Failure::Busy`). The library's typed causes are read
//! here as CNI errors first (`From<StateError> for CniError` and the rest):
//! the codes users see were chosen for the CNI edge, and a DRA rail reports
//! the same failures by the same messages.

use crate::cni::{code, CniError};
use crate::ownership::OwnError;
use crate::rdma::setting::SettingError;
use crate::state::StateError;
use std::fmt;

/// Which failure of one rail's tuning it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The config asks for what cannot be (CNI 7).
    Config,
    /// A read, a write or a netns trip failed (CNI 5).
    Io,
    /// Another process holds what the rail needs (its device's lock, its
    /// previous device): nothing was changed, try again (CNI 11).
    Busy,
    /// The pod's RDMA device was not found or not agreed on (100).
    Device,
    /// The pod's RoCE v2 GID is not where the config asks (101).
    Gid,
    /// The traffic class could not be set (102).
    TrafficClass,
    /// A sysctl is not what was set (103).
    SysctlDrift,
    /// The node config forbids it (104).
    NodeConfig,
    /// The rdma_cm ToS could not be set (105).
    RdmaCmTos,
    /// `placementCheck: enforce` and the pod is starved (106).
    Placement,
    /// `placementCheck: enforce` and its input is not root's (107).
    UntrustedInput,
    /// `qosCheck: enforce` and the class lands on another priority (108).
    QosPriority,
    /// Any other CNI code a lower layer chose.
    Other(u32),
}

impl Failure {
    fn of_code(c: u32) -> Failure {
        match c {
            code::INVALID_CONFIG => Failure::Config,
            code::IO_FAILURE => Failure::Io,
            code::TRY_AGAIN_LATER => Failure::Busy,
            code::RDMA_DEVICE => Failure::Device,
            code::GID_CHECK => Failure::Gid,
            code::TRAFFIC_CLASS => Failure::TrafficClass,
            code::SYSCTL_DRIFT => Failure::SysctlDrift,
            code::NODE_CONFIG => Failure::NodeConfig,
            code::RDMA_CM_TOS => Failure::RdmaCmTos,
            code::PLACEMENT => Failure::Placement,
            code::UNTRUSTED_INPUT => Failure::UntrustedInput,
            code::QOS_PRIORITY => Failure::QosPriority,
            other => Failure::Other(other),
        }
    }

    /// The CNI code a runtime reads for it (docs/errors.md).
    pub fn cni_code(self) -> u32 {
        match self {
            Failure::Config => code::INVALID_CONFIG,
            Failure::Io => code::IO_FAILURE,
            Failure::Busy => code::TRY_AGAIN_LATER,
            Failure::Device => code::RDMA_DEVICE,
            Failure::Gid => code::GID_CHECK,
            Failure::TrafficClass => code::TRAFFIC_CLASS,
            Failure::SysctlDrift => code::SYSCTL_DRIFT,
            Failure::NodeConfig => code::NODE_CONFIG,
            Failure::RdmaCmTos => code::RDMA_CM_TOS,
            Failure::Placement => code::PLACEMENT,
            Failure::UntrustedInput => code::UNTRUSTED_INPUT,
            Failure::QosPriority => code::QOS_PRIORITY,
            Failure::Other(c) => c,
        }
    }
}

/// One rail's tuning failed: which failure, and what the user reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub failure: Failure,
    pub msg: String,
}

impl Error {
    /// The CNI error a CNI command returns for it: the same code and
    /// message as before the rail's tuning had a module of its own.
    pub fn into_cni(self) -> CniError {
        CniError::new(self.failure.cni_code(), self.msg)
    }
}

impl From<CniError> for Error {
    fn from(e: CniError) -> Error {
        Error {
            failure: Failure::of_code(e.code),
            msg: e.msg,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

// The library's typed causes, as the CNI error codes a runtime reads
// (docs/errors.md).

impl From<StateError> for CniError {
    fn from(e: StateError) -> CniError {
        let code = match e {
            StateError::BadLockName => code::RDMA_DEVICE,
            StateError::Busy { .. } => code::TRY_AGAIN_LATER,
            _ => code::IO_FAILURE,
        };
        CniError::new(code, e.to_string())
    }
}

impl From<SettingError> for CniError {
    fn from(e: SettingError) -> CniError {
        CniError::new(e.code, e.msg)
    }
}

impl From<OwnError> for CniError {
    fn from(e: OwnError) -> CniError {
        match e {
            OwnError::State(e) => e.into(),
            OwnError::Setting(e) => e.into(),
            e @ OwnError::Newer { .. } => CniError::new(code::IO_FAILURE, e.to_string()),
        }
    }
}

impl From<crate::netlink::Error> for CniError {
    fn from(e: crate::netlink::Error) -> CniError {
        CniError::new(code::IO_FAILURE, e.to_string())
    }
}

impl From<crate::sysctl::SysctlError> for CniError {
    fn from(e: crate::sysctl::SysctlError) -> CniError {
        use crate::sysctl::SysctlError;
        match e {
            SysctlError::Config(m) => CniError::config(m),
            SysctlError::Io(m) => CniError::new(code::IO_FAILURE, m),
            SysctlError::Drifted(m) => CniError::new(code::SYSCTL_DRIFT, m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_comes_back_as_it_went_in() {
        // The CNI edge must answer with the code a lower layer chose: the
        // kind in between loses nothing.
        for c in [
            1, 3, 5, 7, 11, 100, 101, 102, 103, 104, 105, 106, 107, 108, 999,
        ] {
            let e: Error = CniError::new(c, "why").into();
            assert_eq!(e.clone().into_cni(), CniError::new(c, "why"), "code {c}");
        }
        let busy: Error = CniError::new(code::TRY_AGAIN_LATER, "held").into();
        assert_eq!(busy.failure, Failure::Busy);
    }
}
