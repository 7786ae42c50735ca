//! What the plugin answers: the event mask it asks for, the environment a
//! container gets at CreateContainer, and the pod events. CreateContainer
//! answers from what is already on the node (the state dir's records,
//! through [`RailEnv`]), never waiting on a device lock, a GID or the
//! kubelet: the runtime drops a plugin whose answer outlasts its request
//! timeout (2 s by default), and the pod then starts without the
//! environment (what nri-sim observed of the adaptation: docs/design.md,
//! "NRI"). A pod event tunes or gives back the pod's DRA rails
//! (`super::dra`), device locks and GID wait included, within
//! [`Plugin::pod_event_budget`].

use super::catch_up::CatchUp;
use super::dra::DraRails;
use super::Stats;
use crate::netns::{Lookup, NetNs, NsId};
use crate::node::NcclEnv;
use crate::wire::nri_messages::{Configure, Container, Pod, PodEvent, Synchronize};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The annotation a pod switches the environment on with. Only its value
/// `"true"` does (node config `ncclEnv: annotated`); with `ncclEnv: all`,
/// `"false"` switches it off. It names nothing: every value injected comes
/// from what roce-tune verified at ADD.
pub const ANNOTATION: &str = "roce-tune.io/nccl-env";

/// `pkg/api/event.go`: bit `1 << (event - 1)`.
pub mod event {
    pub const RUN_POD_SANDBOX: u32 = 1 << 0;
    pub const STOP_POD_SANDBOX: u32 = 1 << 1;
    pub const REMOVE_POD_SANDBOX: u32 = 1 << 2;
    pub const CREATE_CONTAINER: u32 = 1 << 3;
    /// `ValidEvents`: a mask with a bit outside it fails configuration.
    pub const VALID: u32 = 0x3fff;
}

/// The request timeout a runtime that announces none is taken to have (NRI
/// before v0.7 sends no `request_timeout`; `api.DefaultPluginRequestTimeout`
/// is 2 s, pkg/api/timeouts.go).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Where a container's environment comes from: the rails the state dir
/// records for the pod whose netns is `netns` (`super::rails::JobEnv`, over
/// `crate::job_env`). `Err` is the log line saying why the pod gets nothing
/// (no live rail, every variable left out, ...).
pub trait RailEnv {
    fn env_for(&mut self, netns: &NsId) -> Result<PodVars, String>;
}

/// A pod's variables, in injection order, and why one a reader might expect
/// is absent (a line each: the GID index left to NCCL, say).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVars {
    pub vars: Vec<(String, String)>,
    pub notes: Vec<String>,
}

/// The plugin's state across one runtime connection and the next.
pub struct Plugin {
    pub nccl_env: NcclEnv,
    rails: Box<dyn RailEnv + Send>,
    request_timeout: Duration,
    /// Pods whose kept variables were logged (once per pod, then counted
    /// only); cleared when full, so it stays bounded.
    kept_logged: HashSet<String>,
    /// The node's DRA rails (`draRails`), tuned at RunPodSandbox and given
    /// back at StopPodSandbox, and those of the pods a Synchronize lists
    /// and what an answer's deadline cut, done off the request path
    /// (`catch_up::CatchUp`); `None` without a profile.
    catch_up: Option<CatchUp>,
}

/// At most this many pods remembered for "logged once".
const KEPT_LOGGED_MAX: usize = 4096;

impl Plugin {
    pub fn new(nccl_env: NcclEnv, rails: Box<dyn RailEnv + Send>) -> Plugin {
        Plugin {
            nccl_env,
            rails,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            kept_logged: HashSet::new(),
            catch_up: None,
        }
    }

    /// The plugin with the node's DRA rails to tune (`None`: none).
    pub fn with_dra(mut self, dra: Option<DraRails>) -> Plugin {
        self.catch_up = dra.map(|d| CatchUp::new(Arc::new(d)));
        self
    }

    /// Whether a Synchronize's pods are wanted after its answer (they are
    /// kept, as bytes, only then).
    pub fn wants_synchronized_pods(&self) -> bool {
        self.catch_up.is_some()
    }

    /// Every part of a Synchronize, its answers sent: the DRA rails of its
    /// pods are caught up on the catch-up thread. Returns at once.
    pub fn synchronized_pods(&mut self, parts: Vec<Vec<u8>>) {
        let budget = self.pod_event_budget();
        if let Some(c) = &mut self.catch_up {
            c.submit(parts, budget);
        }
    }

    /// The events asked for, never 0: 0 means every event, validation
    /// included (adaptation plugin.go `configure`). The pod events are
    /// asked for in both generations' form (the DRA rails' handler, `dra`, goes there).
    pub fn events(&self) -> u32 {
        let pods = event::RUN_POD_SANDBOX | event::STOP_POD_SANDBOX | event::REMOVE_POD_SANDBOX;
        match self.nccl_env {
            NcclEnv::Off => pods,
            NcclEnv::Annotated | NcclEnv::All => pods | event::CREATE_CONTAINER,
        }
    }

    pub fn configure(&mut self, c: &Configure<'_>) {
        self.request_timeout = match c.request_timeout_ms {
            ms if ms > 0 => Duration::from_millis(ms as u64),
            _ => DEFAULT_REQUEST_TIMEOUT,
        };
        crate::info!(
            "configured by {} {} (NRI {}): request timeout {} ms, registration timeout {} ms; events {:#x}",
            c.runtime_name,
            c.runtime_version,
            if c.nri_version.is_empty() { "before v0.12" } else { c.nri_version },
            self.request_timeout.as_millis(),
            c.registration_timeout_ms,
            self.events()
        );
    }

    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The bound on a pod event's work: three quarters of the request
    /// timeout, so the answer is in before the runtime gives up.
    pub fn pod_event_budget(&self) -> Duration {
        self.request_timeout * 3 / 4
    }

    /// The runtime's picture of its pods, once per connection (in parts
    /// while `more` is set). Nothing to keep: the state dir is the record.
    pub fn synchronize(&mut self, s: &Synchronize, took: std::time::Duration) {
        // Integer tenths: core's float formatting is 17.6 KB of binary
        // (src/wire/exposition.rs, `format_seconds`, measured it).
        let tenths = took.as_micros() / 100;
        crate::info!(
            "synchronized: {} pods, {} containers{}, answered in {}.{} ms",
            s.pods,
            s.containers,
            if s.more { ", more to come" } else { "" },
            tenths / 10,
            tenths % 10
        );
    }

    /// A pod's run, stop or remove, in either generation's form: the DRA
    /// rails of the pod tuned (run) or given back (stop, remove), all
    /// within [`Plugin::pod_event_budget`]. `Err` fails the sandbox.
    pub fn pod_event(&mut self, e: PodEvent, pod: &Pod<'_>) -> Result<(), String> {
        let deadline = Instant::now() + self.pod_event_budget();
        let Some(catch_up) = &mut self.catch_up else {
            crate::debug!(
                "{} {}/{} ({})",
                e.as_str(),
                crate::quote::input(pod.namespace),
                crate::quote::input(pod.name),
                crate::quote::input(pod.id)
            );
            return Ok(());
        };
        match e {
            PodEvent::Run => catch_up.run(pod, deadline),
            PodEvent::Stop => {
                catch_up.stop(pod, deadline, super::dra::STOP);
                Ok(())
            }
            PodEvent::Remove => {
                catch_up.stop(pod, deadline, super::dra::REMOVE);
                Ok(())
            }
        }
    }

    /// Whether the pod asked for the environment: `Err` is the log line of
    /// an annotation that is neither on nor off.
    fn wanted(&self, pod: &Pod<'_>) -> Result<bool, String> {
        let value = pod.annotation(ANNOTATION);
        match (self.nccl_env, value) {
            (NcclEnv::Off, _) => Ok(false),
            (_, Some("true")) => Ok(true),
            (NcclEnv::All, None | Some("false")) => Ok(value.is_none()),
            (NcclEnv::Annotated, None) => Ok(false),
            (_, Some(other)) => Err(format!(
                "pod {}/{}: annotation {ANNOTATION} is {}, not \"true\": no environment (it only switches the feature on)",
                pod.namespace,
                pod.name,
                crate::quote::input(other)
            )),
        }
    }

    /// The environment variables of the container's adjustment, in
    /// injection order; empty for nothing.
    pub fn create_container(
        &mut self,
        pod: &Pod<'_>,
        ctr: &Container<'_>,
        stats: &Stats,
    ) -> Vec<(String, String)> {
        match self.wanted(pod) {
            Ok(true) => {}
            Ok(false) => return Vec::new(),
            Err(line) => {
                crate::info!("{line}");
                return Vec::new();
            }
        }
        let who = format!("pod {}/{} container {}", pod.namespace, pod.name, ctr.name);
        let Some(path) = pod.netns else {
            crate::info!("{who}: no network namespace of its own (hostNetwork?): no environment");
            return Vec::new();
        };
        let ns = match NetNs::lookup(std::path::Path::new(path)) {
            Ok(Lookup::Netns(ns)) => ns.id(),
            Ok(Lookup::Missing) => {
                crate::info!("{who}: its network namespace {path} is gone: no environment");
                return Vec::new();
            }
            Ok(Lookup::NotNetns) => {
                crate::warn!("{who}: {path} is not a network namespace: no environment");
                return Vec::new();
            }
            Err(e) => {
                crate::warn!("{who}: {e}: no environment");
                return Vec::new();
            }
        };
        let PodVars { vars, notes } = match self.rails.env_for(&ns) {
            Ok(v) => v,
            Err(why) => {
                crate::info!("{who}: {why}: no environment");
                return Vec::new();
            }
        };
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        let own = ctr.sets_each(&names);
        let (given, kept): (Vec<_>, Vec<_>) = vars.into_iter().zip(own).partition(|(_, own)| !own);
        let given: Vec<(String, String)> = given.into_iter().map(|(kv, _)| kv).collect();
        let kept: Vec<(String, String)> = kept.into_iter().map(|(kv, _)| kv).collect();
        if !kept.is_empty() {
            stats.count_kept();
            if self.kept_logged.len() >= KEPT_LOGGED_MAX {
                self.kept_logged.clear();
            }
            if self.kept_logged.insert(pod.id.to_owned()) {
                let names: Vec<&str> = kept.iter().map(|(k, _)| k.as_str()).collect();
                crate::info!(
                    "{who} sets {} itself: its own value wins (said once per pod)",
                    names.join(", ")
                );
            }
        }
        if !given.is_empty() {
            stats.count_injected();
            let names: Vec<&str> = given.iter().map(|(k, _)| k.as_str()).collect();
            let mut line = format!("{who}: injected {}", names.join(", "));
            for n in &notes {
                line.push_str("; ");
                line.push_str(n);
            }
            crate::info!("{line}");
        }
        given
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rails of one netns: the test's own namespace.
    struct Fixed(Result<Vec<(String, String)>, String>);

    fn vars_of(v: Vec<(String, String)>) -> PodVars {
        PodVars {
            vars: v,
            notes: vec!["NCCL_IB_GID_INDEX left to NCCL".into()],
        }
    }

    impl RailEnv for Fixed {
        fn env_for(&mut self, _: &NsId) -> Result<PodVars, String> {
            self.0.clone().map(vars_of)
        }
    }

    fn vars() -> Vec<(String, String)> {
        [
            ("NCCL_IB_HCA", "=mlx5_2:1,mlx5_3:1"),
            ("NCCL_IB_GID_INDEX", "3"),
            ("NCCL_IB_TC", "41"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// A pod as the runtime encodes it, decoded (its bytes live as long as
    /// the test).
    fn pod(annotations: Vec<(&str, &str)>, netns: Option<&'static str>) -> Pod<'static> {
        let wire = crate::wire::nri_messages::tests::pod_bytes("p1", None, &annotations);
        let bytes: &'static [u8] = Box::leak(wire.into_bytes().into_boxed_slice());
        Pod {
            netns,
            ..crate::wire::nri_messages::pod(bytes).unwrap()
        }
    }

    /// A container as the runtime encodes it, decoded.
    fn container(env: &[&str]) -> Container<'static> {
        let mut c = crate::wire::protobuf::Writer::new();
        c.text(1, "c1").text(3, "nccl");
        for e in env {
            c.text(8, e);
        }
        let bytes: &'static [u8] = Box::leak(c.into_bytes().into_boxed_slice());
        crate::wire::nri_messages::container(bytes).unwrap()
    }

    const SELF_NS: &str = "/proc/self/ns/net";

    #[test]
    fn the_annotation_switches_and_the_container_keeps_its_own_values() {
        let stats = Stats::default();
        let mut p = Plugin::new(NcclEnv::Annotated, Box::new(Fixed(Ok(vars()))));
        let ctr = container(&["NCCL_IB_TC=106", "PATH=/bin"]);
        let on = pod(vec![(ANNOTATION, "true")], Some(SELF_NS));
        let got = p.create_container(&on, &ctr, &stats);
        let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            ["NCCL_IB_HCA", "NCCL_IB_GID_INDEX"],
            "NCCL_IB_TC is the container's"
        );
        assert_eq!(stats.injected(), 1);
        assert_eq!(stats.kept(), 1);
        for off in [
            vec![],
            vec![(ANNOTATION, "false")],
            vec![(ANNOTATION, "yes")],
            vec![(ANNOTATION, "TRUE")],
        ] {
            assert!(
                p.create_container(&pod(off.clone(), Some(SELF_NS)), &ctr, &stats)
                    .is_empty(),
                "{off:?}"
            );
        }
        assert_eq!(stats.injected(), 1);
    }

    #[test]
    fn all_and_off_and_pods_without_a_netns_of_their_own() {
        let stats = Stats::default();
        let ctr = Container::default();
        let mut all = Plugin::new(NcclEnv::All, Box::new(Fixed(Ok(vars()))));
        assert_eq!(
            all.create_container(&pod(vec![], Some(SELF_NS)), &ctr, &stats)
                .len(),
            3
        );
        assert!(all
            .create_container(
                &pod(vec![(ANNOTATION, "false")], Some(SELF_NS)),
                &ctr,
                &stats
            )
            .is_empty());
        assert!(all
            .create_container(&pod(vec![], None), &ctr, &stats)
            .is_empty());
        assert!(all
            .create_container(&pod(vec![], Some("/etc/hostname")), &ctr, &stats)
            .is_empty());
        assert!(all
            .create_container(&pod(vec![], Some("/nonexistent/ns")), &ctr, &stats)
            .is_empty());
        let mut off = Plugin::new(NcclEnv::Off, Box::new(Fixed(Ok(vars()))));
        assert!(off
            .create_container(
                &pod(vec![(ANNOTATION, "true")], Some(SELF_NS)),
                &ctr,
                &stats
            )
            .is_empty());
        assert_eq!(off.events() & event::CREATE_CONTAINER, 0);
        assert_ne!(off.events(), 0);
        assert_eq!(all.events() & !event::VALID, 0);
        let mut none = Plugin::new(NcclEnv::All, Box::new(Fixed(Err("no live rail".into()))));
        assert!(none
            .create_container(&pod(vec![], Some(SELF_NS)), &ctr, &stats)
            .is_empty());
    }

    #[test]
    fn the_pod_is_matched_by_its_netns_identity() {
        use std::os::unix::fs::MetadataExt;
        use std::sync::{Arc, Mutex};
        struct Seen(Arc<Mutex<Option<NsId>>>);
        impl RailEnv for Seen {
            fn env_for(&mut self, netns: &NsId) -> Result<PodVars, String> {
                *self.0.lock().unwrap() = Some(*netns);
                Ok(vars_of(vars()))
            }
        }
        let seen = Arc::new(Mutex::new(None));
        let mut p = Plugin::new(NcclEnv::All, Box::new(Seen(seen.clone())));
        p.create_container(
            &pod(vec![], Some(SELF_NS)),
            &Container::default(),
            &Stats::default(),
        );
        let m = std::fs::metadata(SELF_NS).unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            Some(NsId {
                dev: m.dev(),
                ino: m.ino()
            })
        );
    }

    #[test]
    fn without_dra_rails_every_pod_event_succeeds_and_changes_nothing() {
        let mut p = Plugin::new(NcclEnv::Annotated, Box::new(Fixed(Ok(vars())))).with_dra(None);
        for e in [PodEvent::Run, PodEvent::Stop, PodEvent::Remove] {
            assert_eq!(p.pod_event(e, &pod(vec![], Some(SELF_NS))), Ok(()));
            assert_eq!(p.pod_event(e, &pod(vec![], None)), Ok(()));
        }
    }

    #[test]
    fn the_pod_event_budget_is_three_quarters_of_the_request_timeout() {
        let mut p = Plugin::new(NcclEnv::Annotated, Box::new(Fixed(Ok(vars()))));
        assert_eq!(p.pod_event_budget(), Duration::from_millis(1500));
        p.configure(&Configure {
            request_timeout_ms: 400,
            ..Configure::default()
        });
        assert_eq!(p.pod_event_budget(), Duration::from_millis(300));
    }
}
