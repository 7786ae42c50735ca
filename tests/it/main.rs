//! The integration tests, one binary (`cargo test --test it`): each module is
//! one concern, and `common` is their harness (the process runner `Exec`, the
//! pod netns, the sysfs test tree). One binary, not one per file: cargo links
//! each test binary against the library and its dependencies. With twenty
//! binaries a clean `cargo test --no-run` took 36 to 48 s and 1.1 GB of
//! target/ on two cores; with this one, 26 to 31 s and 627 MB.
//!
//! A test names its module in a filter: `cargo test --test it faults::`
//! (`make faults`), `cargo test --test it stress:: -- --ignored` (`make stress`).

mod common;

mod adding_a_setting;
mod agent;
mod agent_exposition;
mod bad_inputs;
mod cni_versions;
mod commands_misc;
mod conf_examples;
mod config_keys;
mod del_never_stuck;
mod demo;
mod docs_figures;
mod dra;
mod dra_hostile;
mod exclusive_sysfs;
mod faults;
mod features;
mod gc_state;
mod harness;
mod helm_chart;
mod host_paths;
mod inspect;
mod job_env;
mod layers;
mod netlink_route;
mod nri;
mod nri_session;
mod orphans;
mod placement;
mod podresources;
mod qos;
mod rdma_gid;
mod rdma_lookup;
mod rdma_traffic_class;
mod references;
mod release;
mod security;
mod stress;
mod tally;
mod tampered_state;
mod topology;
mod tree;
