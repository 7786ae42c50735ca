//! The CNI protocol alone: environment, config, results and their version
//! conversion, errors. Pure data: nothing here touches /sys or /proc.

pub mod config;
pub mod env;
pub mod error;
pub mod json;
pub mod keys;
pub mod result;
pub mod version;

pub use error::{code, CniError, CniResult};
