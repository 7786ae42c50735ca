//! `roce-tune agent`: the long-running container of the DaemonSet. It repairs
//! orphans and drifted rails every period and serves Prometheus metrics all
//! the time. `metrics` is the catalogue and the snapshot, `exposition` the
//! text format, `http` the server a scrape reaches.

pub mod exposition;
pub mod http;
pub mod metrics;
