//! The CNI_* environment. libcni always sets all six variables, empty ones
//! included, so an empty value means "absent" (docs/design.md, "The CNI protocol").

use super::error::{CniError, CniResult};
use std::cmp::Ordering;
use std::ffi::OsString;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Command {
    Add,
    Del,
    Check,
    Version,
    Gc,
    Status,
}

impl Command {
    /// Every command, in the order of the tally file's counters
    /// (`crate::tally`): append a new one, never reorder.
    pub const ALL: [Command; 6] = [
        Command::Add,
        Command::Del,
        Command::Check,
        Command::Gc,
        Command::Status,
        Command::Version,
    ];

    /// As `CNI_COMMAND` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Version => "VERSION",
            Command::Gc => "GC",
            Command::Status => "STATUS",
        }
    }

    pub fn parse(s: &str) -> CniResult<Self> {
        Command::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                CniError::env(format!(
                    "CNI_COMMAND {s:?} is not one of ADD, DEL, CHECK, VERSION, GC, STATUS"
                ))
            })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniEnv {
    pub command: Command,
    pub container_id: Option<String>,
    pub netns: Option<String>,
    pub ifname: Option<String>,
    pub args: Vec<(String, String)>,
}

impl CniEnv {
    /// Read the environment through `get`, so tests need not touch the process env.
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> CniResult<Self> {
        let var = |name: &str| -> CniResult<Option<String>> {
            match get(name) {
                None => Ok(None),
                Some(v) if v.is_empty() => Ok(None),
                Some(v) => v
                    .into_string()
                    .map(Some)
                    .map_err(|_| CniError::env(format!("{name} is not valid UTF-8"))),
            }
        };
        let command = match var("CNI_COMMAND")? {
            Some(c) => Command::parse(&c)?,
            None => return Err(CniError::env("CNI_COMMAND is not set")),
        };
        let container_id = var("CNI_CONTAINERID")?;
        let netns = var("CNI_NETNS")?;
        let ifname = var("CNI_IFNAME")?;
        let args = parse_args(var("CNI_ARGS")?.as_deref().unwrap_or(""))?;

        let env = CniEnv {
            command,
            container_id,
            netns,
            ifname,
            args,
        };
        env.validate()?;
        Ok(env)
    }

    pub fn from_process() -> CniResult<Self> {
        Self::from_lookup(|k| std::env::var_os(k))
    }

    /// DEL's reading: only what names the attachment (CNI_CONTAINERID and
    /// CNI_IFNAME) must be valid. The netns is often gone, and neither it nor
    /// CNI_ARGS is needed to give anything back, so a value ADD would have
    /// refused there cannot stop a DEL (libcni's DelNetworkList stops at the
    /// first plugin that fails, stranding the VF of the plugins after it).
    pub fn for_del(get: impl Fn(&str) -> Option<OsString>) -> CniResult<Self> {
        let var = |name: &str| match get(name) {
            Some(v) if !v.is_empty() => v
                .into_string()
                .map(Some)
                .map_err(|_| CniError::env(format!("{name} is not valid UTF-8"))),
            _ => Ok(None),
        };
        let container_id =
            var("CNI_CONTAINERID")?.ok_or_else(|| missing("CNI_CONTAINERID", Command::Del))?;
        validate_container_id(&container_id)?;
        let ifname = var("CNI_IFNAME")?.ok_or_else(|| missing("CNI_IFNAME", Command::Del))?;
        validate_ifname(&ifname)?;
        let netns = var("CNI_NETNS")
            .ok()
            .flatten()
            .filter(|ns| validate_netns_path(ns).is_ok());
        let args = var("CNI_ARGS")
            .ok()
            .flatten()
            .and_then(|a| parse_args(&a).ok())
            .unwrap_or_default();
        Ok(CniEnv {
            command: Command::Del,
            container_id: Some(container_id),
            netns,
            ifname: Some(ifname),
            args,
        })
    }

    fn validate(&self) -> CniResult<()> {
        let needs_netns = matches!(self.command, Command::Add | Command::Check);
        let needs_attachment = needs_netns || self.command == Command::Del;
        if needs_attachment {
            let id = self
                .container_id
                .as_deref()
                .ok_or_else(|| missing("CNI_CONTAINERID", self.command))?;
            validate_container_id(id)?;
            let ifname = self
                .ifname
                .as_deref()
                .ok_or_else(|| missing("CNI_IFNAME", self.command))?;
            validate_ifname(ifname)?;
        }
        if needs_netns && self.netns.is_none() {
            return Err(missing("CNI_NETNS", self.command));
        }
        if let Some(ns) = &self.netns {
            validate_netns_path(ns)?;
        }
        Ok(())
    }

    /// For commands that validated them in `from_lookup`.
    pub fn container_id(&self) -> &str {
        self.container_id.as_deref().unwrap_or_default()
    }
    pub fn ifname(&self) -> &str {
        self.ifname.as_deref().unwrap_or_default()
    }
}

/// The Kubernetes pod an attachment is for, as CNI_ARGS names it (the
/// kubelet's pairs; Multus passes its own first, then the runtime's again:
/// the first of each key is taken). Only values that are Kubernetes names
/// are kept: they reach state entries, logs and metric labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
}

impl CniEnv {
    /// The pod, when CNI_ARGS names one with valid names.
    pub fn pod(&self) -> Option<PodRef> {
        let first = |k: &str| {
            self.args
                .iter()
                .find(|(key, v)| key == k && !v.is_empty())
                .map(|(_, v)| v.clone())
        };
        let namespace = first("K8S_POD_NAMESPACE").filter(|n| is_k8s_name(n, 63))?;
        let name = first("K8S_POD_NAME").filter(|n| is_k8s_name(n, 253))?;
        let uid = first("K8S_POD_UID")
            .filter(|u| u.len() == 36 && u.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
        Some(PodRef {
            namespace,
            name,
            uid,
        })
    }
}

/// A DNS-1123 name (a namespace is a label of at most 63, a pod a subdomain
/// of at most 253): lower-case letters, digits, '-' and, for a subdomain,
/// '.'; a letter or digit at each end.
pub fn is_k8s_name(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || (max > 63 && c == b'.')
        })
}

fn missing(name: &str, command: Command) -> CniError {
    CniError::env(format!(
        "{name} is required for {} but is empty or unset",
        command.as_str()
    ))
}

/// SPEC.md: "must start with an alphanumeric character, optionally followed by any
/// combination of one or more alphanumeric characters, underscore, period or hyphen".
pub fn validate_container_id(id: &str) -> CniResult<()> {
    // Bytes, not chars: only ASCII passes either way, and the NRI plugin
    // checks every entry name of the state dir per request with it.
    let mut bytes = id.bytes();
    let first_ok = bytes.next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok || !bytes.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-')) {
        return Err(CniError::env(format!(
            "CNI_CONTAINERID {id:?} is invalid: it must start with a letter or digit and hold only letters, digits, '_', '.', '-'"
        )));
    }
    if id.len() > 255 {
        return Err(CniError::env(
            "CNI_CONTAINERID is longer than 255 characters",
        ));
    }
    Ok(())
}

/// The kernel's dev_valid_name(): 1..15 bytes, not "." or "..", no '/', ':' or
/// whitespace. We also refuse control and non-ASCII bytes: the name ends up in
/// /proc/sys paths, state file names and logs.
pub fn validate_ifname(name: &str) -> CniResult<()> {
    let bad = name.is_empty()
        || name.len() > 15
        || name == "."
        || name == ".."
        || name
            .bytes()
            .any(|b| b == b'/' || b == b':' || !b.is_ascii_graphic());
    if bad {
        return Err(CniError::env(format!(
            "CNI_IFNAME {name:?} is not a valid interface name: use 1 to 15 printable ASCII characters without '/', ':' or spaces, and not '.' or '..'"
        )));
    }
    Ok(())
}

fn validate_netns_path(ns: &str) -> CniResult<()> {
    if !ns.starts_with('/') {
        return Err(CniError::env(format!(
            "CNI_NETNS {ns:?} must be an absolute path to a network namespace (e.g. /var/run/netns/<name>)"
        )));
    }
    Ok(())
}

/// CNI_ARGS is `K=V;K=V`. roce-tune reads no key of its own, but a malformed
/// pair means a broken runtime, so it is refused like the reference plugins do.
pub fn parse_args(s: &str) -> CniResult<Vec<(String, String)>> {
    let mut out = Vec::new();
    for pair in s.split(';').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() && !k.contains('=') => {
                if k.chars().chain(v.chars()).any(|c| c.is_control()) {
                    return Err(CniError::env(format!(
                        "CNI_ARGS pair {pair:?} holds a control character"
                    )));
                }
                out.push((k.to_string(), v.to_string()))
            }
            _ => {
                return Err(CniError::env(format!(
                    "CNI_ARGS pair {pair:?} is not KEY=VALUE (pairs are separated by ';')"
                )))
            }
        }
    }
    Ok(out)
}

/// Kernel names as a person orders them, mlx5_2 before mlx5_10 and net2
/// before net10: compared by their digit runs.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    // The next run of digits or of non-digits from `at`, without a
    // collection: the NRI plugin orders a pod's rails inside a request.
    fn chunk(s: &str, at: usize) -> Option<(bool, &str)> {
        let bytes = s.as_bytes();
        let digit = bytes.get(at)?.is_ascii_digit();
        let len = bytes[at..]
            .iter()
            .position(|b| b.is_ascii_digit() != digit)
            .unwrap_or(bytes.len() - at);
        Some((digit, &s[at..at + len]))
    }
    let (mut i, mut j) = (0, 0);
    loop {
        let (x, y) = match (chunk(a, i), chunk(b, j)) {
            (Some(x), Some(y)) => (x, y),
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
        };
        i += x.1.len();
        j += y.1.len();
        let o = match (x, y) {
            ((true, p), (true, q)) => {
                let (p, q) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                p.len().cmp(&q.len()).then(p.cmp(q))
            }
            ((_, p), (_, q)) => p.cmp(q),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> CniResult<CniEnv> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        CniEnv::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn empty_values_are_absent_and_del_needs_no_netns() {
        let e = env(&[
            ("CNI_COMMAND", "DEL"),
            ("CNI_CONTAINERID", "abc"),
            ("CNI_NETNS", ""),
            ("CNI_IFNAME", "net1"),
            ("CNI_ARGS", ""),
            ("CNI_PATH", ""),
        ])
        .unwrap();
        assert_eq!(e.netns, None);
        assert_eq!(e.ifname(), "net1");
    }

    #[test]
    fn add_and_check_need_netns_containerid_ifname() {
        for cmd in ["ADD", "CHECK"] {
            let all = [
                ("CNI_COMMAND", cmd),
                ("CNI_CONTAINERID", "c1"),
                ("CNI_NETNS", "/var/run/netns/p"),
                ("CNI_IFNAME", "net1"),
            ];
            assert!(env(&all).is_ok());
            for skip in 1..4 {
                let some: Vec<_> = all
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != skip)
                    .map(|(_, p)| *p)
                    .collect();
                let err = env(&some).unwrap_err();
                assert_eq!(err.code, 4);
                assert!(err.msg.contains(all[skip].0), "{}", err.msg);
            }
        }
    }

    #[test]
    fn gc_status_version_need_nothing() {
        for cmd in ["GC", "STATUS", "VERSION"] {
            assert!(env(&[("CNI_COMMAND", cmd)]).is_ok());
        }
        assert_eq!(env(&[("CNI_COMMAND", "FOO")]).unwrap_err().code, 4);
        assert_eq!(env(&[]).unwrap_err().code, 4);
    }

    #[test]
    fn ifname_rules() {
        for ok in ["net1", "eth0", "rail_15", "a.b", "x-y"] {
            assert!(validate_ifname(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a:b",
            "a b",
            "sixteen_chars_xx",
            "tab\t",
            "é",
        ] {
            assert_eq!(validate_ifname(bad).unwrap_err().code, 4, "{bad:?}");
        }
    }

    #[test]
    fn container_id_rules() {
        assert!(validate_container_id("4b1c2f0e-6a53_x.y").is_ok());
        for bad in ["", "-abc", ".x", "a/b", "a b", "a;b", "../etc"] {
            assert_eq!(validate_container_id(bad).unwrap_err().code, 4, "{bad:?}");
        }
    }

    #[test]
    fn args_pairs() {
        let a = parse_args("IgnoreUnknown=1;K8S_POD_NAME=p;K8S_POD_NAMESPACE=ns").unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a[1], ("K8S_POD_NAME".into(), "p".into()));
        assert!(parse_args("").unwrap().is_empty());
        assert!(parse_args("A=1;;B=2").unwrap().len() == 2);
        for bad in ["novalue", "=v", "A=1;junk", "A=\u{1}"] {
            assert_eq!(parse_args(bad).unwrap_err().code, 4, "{bad:?}");
        }
    }

    #[test]
    fn the_pod_comes_from_the_first_pairs_that_are_names() {
        // Multus thin mode: its five pairs, then the kubelet's again.
        let args = "IgnoreUnknown=true;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=train-0;K8S_POD_INFRA_CONTAINER_ID=c;K8S_POD_UID=6f1b7d8e-1c2a-4b3c-8d4e-5f6a7b8c9d0e;IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=train-0";
        let e = env(&[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_NETNS", "/var/run/netns/p"),
            ("CNI_IFNAME", "net1"),
            ("CNI_ARGS", args),
        ])
        .unwrap();
        let pod = e.pod().unwrap();
        assert_eq!(
            (pod.namespace.as_str(), pod.name.as_str()),
            ("ml", "train-0")
        );
        assert_eq!(
            pod.uid.as_deref(),
            Some("6f1b7d8e-1c2a-4b3c-8d4e-5f6a7b8c9d0e")
        );
        for bad in [
            "K8S_POD_NAMESPACE=ML;K8S_POD_NAME=p",
            "K8S_POD_NAMESPACE=a.b;K8S_POD_NAME=p",
            "K8S_POD_NAME=p",
            "K8S_POD_NAMESPACE=n;K8S_POD_NAME=-p",
        ] {
            let e = env(&[
                ("CNI_COMMAND", "ADD"),
                ("CNI_CONTAINERID", "c1"),
                ("CNI_NETNS", "/n"),
                ("CNI_IFNAME", "net1"),
                ("CNI_ARGS", bad),
            ])
            .unwrap();
            assert_eq!(e.pod(), None, "{bad}");
        }
    }

    #[test]
    fn netns_must_be_absolute() {
        let e = env(&[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_NETNS", "relative/ns"),
            ("CNI_IFNAME", "net1"),
        ]);
        assert_eq!(e.unwrap_err().code, 4);
    }
}
