//! `railCounters` and `railCountersMax`: which RDMA counters of each live
//! rail the agent exports, and how many at most per rail.

use serde_json::{Map, Value};

/// Which counter files of a rail's port the agent exports (`railCounters`)
/// and how many at most per rail (`railCountersMax`): docs/agent.md,
/// "RDMA counters".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RailCounters {
    pub pick: CounterPick,
    /// Series per rail at most; past it the first ones by name are exported
    /// and the rail's line says how many were left out.
    pub max: usize,
}

/// The names `railCounters` picks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterPick {
    /// No key: the loss, retransmission and congestion counters of mlx5
    /// and rxe (`DEFAULT_RAIL_COUNTERS`).
    Default,
    /// `"*"`: every file but `lifespan` (a setting, not a counter).
    All,
    /// The names listed.
    Named(Vec<String>),
}

/// The default `railCounters`: mlx5's and rxe's counters of loss,
/// retransmission and congestion (docs/design.md, "RDMA counters"). One
/// list for every driver, not one per driver: the two drivers' names meet
/// only in `duplicate_request` (the same event for both), so this list
/// filtered by the files a device has is that driver's list, without asking
/// which driver it is, and a third driver gets whichever of these it names
/// alike.
pub const DEFAULT_RAIL_COUNTERS: &[&str] = &[
    // mlx5 (drivers/infiniband/hw/mlx5/counters.c)
    "out_of_sequence",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "duplicate_request",
    "rnr_nak_retry_err",
    "out_of_buffer",
    "req_transport_retries_exceeded",
    "roce_adp_retrans",
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "rp_cnp_handled",
    // rxe (drivers/infiniband/sw/rxe/rxe_hw_counters.c)
    "out_of_seq_request",
    "rcvd_seq_err",
    "completer_retry_err",
    "retry_exceeded_err",
    "rcvd_rnr_err",
    "send_err",
    "sent_pkts",
    "rcvd_pkts",
];
pub const DEFAULT_RAIL_COUNTERS_MAX: usize = 64;
/// The most `railCountersMax` may be: a port of mlx5 has about 60 counter
/// files, and every series is one more per rail on a node of 128 rails.
pub const MAX_RAIL_COUNTERS_MAX: usize = 1024;
/// The most names `railCounters` may list.
pub const MAX_RAIL_COUNTER_NAMES: usize = 256;
const MAX_COUNTER_NAME: usize = 64;

impl Default for RailCounters {
    fn default() -> Self {
        RailCounters {
            pick: CounterPick::Default,
            max: DEFAULT_RAIL_COUNTERS_MAX,
        }
    }
}

impl RailCounters {
    pub(super) fn from_node_config(obj: &Map<String, Value>) -> Result<RailCounters, String> {
        let mut out = RailCounters::default();
        match obj.get("railCounters") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "*" => out.pick = CounterPick::All,
            Some(Value::Array(a)) if a.len() <= MAX_RAIL_COUNTER_NAMES => {
                let mut names: Vec<String> = Vec::new();
                for v in a {
                    let name = v.as_str().unwrap_or_default();
                    if !is_counter_name(name) {
                        return Err(format!(
                            "railCounters: {} is not a counter's file name: 1 to {MAX_COUNTER_NAME} letters, digits, '_' or '-' (no '/', no '..'), as the kernel names them under hw_counters/",
                            crate::quote::input_json(v)
                        ));
                    }
                    if name == "lifespan" {
                        return Err("railCounters: lifespan is a setting of the counters (how long a read may be answered from the last query), not a counter; leave it out".into());
                    }
                    if !names.iter().any(|n| n == name) {
                        names.push(name.to_owned());
                    }
                }
                out.pick = CounterPick::Named(names);
            }
            Some(_) => {
                return Err(format!(
                    "railCounters must be \"*\" (every counter) or a list of at most {MAX_RAIL_COUNTER_NAMES} counter names, e.g. [\"out_of_sequence\", \"packet_seq_err\"]"
                ))
            }
        }
        match obj.get("railCountersMax") {
            None | Some(Value::Null) => {}
            Some(v) => match v.as_u64() {
                Some(n) if (1..=MAX_RAIL_COUNTERS_MAX as u64).contains(&n) => out.max = n as usize,
                _ => {
                    return Err(format!(
                        "railCountersMax must be a whole number of series per rail from 1 to {MAX_RAIL_COUNTERS_MAX}"
                    ))
                }
            },
        }
        Ok(out)
    }

    /// Whether the file `name` of a port's counter directory is picked.
    pub fn picks(&self, name: &str) -> bool {
        match &self.pick {
            CounterPick::Default => DEFAULT_RAIL_COUNTERS.contains(&name),
            CounterPick::All => name != "lifespan",
            CounterPick::Named(names) => names.iter().any(|n| n == name),
        }
    }
}

/// A counter file's name as `railCounters` may list it.
fn is_counter_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_COUNTER_NAME
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}
