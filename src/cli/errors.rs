//! A library error as the operator's command line shows it: its message,
//! under the context of what stopped ("roce-tune: what: why"). The CNI and
//! sysfs errors keep their causes for the code that branches on them.

use crate::cni::CniError;

/// A library error as a person reads it: its text. The CNI and sysfs errors
/// keep their causes for the code that branches on them; here only the
/// message is shown, under the context of what stopped.
pub fn cause(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::msg(e.to_string())
}

/// A CniError as a person reads it: its message, without the code only a
/// runtime reads.
pub fn message(e: CniError) -> anyhow::Error {
    anyhow::Error::msg(e.msg)
}
