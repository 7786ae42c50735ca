//! Where a pod's rails sit against its GPUs, judged the way NCCL judges it
//! (docs/topology.md). Why, as measured: two 4-GPU pods got VFs on
//! NICs behind other PCIe roots than their GPUs; NCCL ran 4 of 6 channels
//! without GPUDirect RDMA and reached 17.95 and 8.99 GB/s of bus bandwidth
//! instead of 96.
//!
//! - `gpu`: a device plugin's GPU ID (UUID, MIG, index, PCI address) to the
//!   GPU's PCI function, read from the NVIDIA driver's proc directory.
//! - `pci`: a PCI function's place in the tree (bridges, NUMA node, IDs),
//!   as NCCL builds it from sysfs, switches flattened as NCCL flattens them.
//! - `path`: NCCL's path type between two functions, and the GDR level.
//! - `verdict`: pure; whether the pod's GPUs got their part of near rails.
//! - `render`: pure text; the rail x GPU matrix and the node's grouping.
//!
//! NCCL sources are cited at NVIDIA/nccl 5067397c2676 (2.30, June 2026).

pub mod gpu;
pub mod path;
pub mod pci;
pub mod render;
pub mod verdict;

#[cfg(test)]
mod tests;

pub use path::PathType;
pub use pci::{Bdf, PciNode};
