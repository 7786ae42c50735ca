//! What a rail's owned settings are asked with beyond a network config's
//! keys: a pod's pick of its class (`args.cni.trafficClass`, or a DRA
//! rail's annotation), a rail profile of the node config's `draRails`, and
//! the settings a config asks ADD to own.

use super::fields::{get, names, opt_int, wrong_type};
use super::NetConf;
use crate::cni::error::{CniError, CniResult};
use crate::cni::keys::{self, Key};
use serde_json::{Map, Value};
use std::path::Path;

impl NetConf {
    /// A rail profile (the node config's `draRails`) as the config a rail
    /// is tuned with: the same keys as a network config's, each by the same
    /// rule (`PROFILE_KEYS`; any other key is refused), and `pod_class`, a
    /// pod's pick of its class (the annotation `roce-tune.io/traffic-class`),
    /// judged against the profile's `podTrafficClasses` as
    /// `args.cni.trafficClass` is against a network's. `network` names what
    /// tuned the rail in its state entry.
    pub fn from_profile(
        profile: &Value,
        network: &str,
        pod_class: Option<(&'static str, &str)>,
    ) -> CniResult<NetConf> {
        let obj = profile
            .as_object()
            .ok_or_else(|| CniError::config("a rail profile must be a JSON object"))?;
        let profile_keys = profile_keys();
        if let Some(k) = obj
            .keys()
            .find(|k| !Key::named(k).is_some_and(|k| profile_keys.contains(&k)))
        {
            let meant = keys::meant(k)
                .filter(|m| profile_keys.contains(m))
                .map_or_else(String::new, |m| {
                    format!(" (did you mean \"{}\"?)", m.name())
                });
            return Err(CniError::config(format!(
                "unknown key {}{meant}: a rail profile's keys are {}",
                crate::quote::input(k),
                names(&profile_keys)
            )));
        }
        let mut whole = obj.clone();
        // What a network config has and a profile does not: the version its
        // rules are read at, a name (replaced below: `network` is no CNI
        // network's name), and no placement check (no kubelet answer
        // names a DRA rail's VF).
        whole.insert(Key::CniVersion.name().into(), Value::from("1.1.0"));
        whole.insert(Key::Name.name().into(), Value::from("rail-profile"));
        whole.insert(Key::PlacementCheck.name().into(), Value::from("off"));
        let asked = pod_class.map(|(what, v)| PodPick {
            what,
            // A number is judged as one; anything else is refused as not one.
            value: v
                .parse::<u64>()
                .ok()
                .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
                .map_or_else(|| Value::from(v), Value::from),
            of: "profile",
            fix: "remove it from the pod's annotations",
        });
        let mut conf = Self::from_object(&whole, Path::new(""), asked)?;
        conf.name = network.to_owned();
        Ok(conf)
    }

    /// The device settings this config asks ADD to own, by their keys
    /// (`crate::settings`): each is recorded, written and given back.
    pub fn owned(&self) -> Vec<(&'static str, u32)> {
        self.owned.iter().map(|&(k, v)| (k.name(), v)).collect()
    }
}

/// The keys of a rail profile (node config `draRails`), beyond the owned
/// settings whose declaration says a profile may carry them: a network
/// config's, with the same types, bounds and defaults.
const PROFILE_ALSO: &[Key] = &[
    Key::Sysctl,
    Key::GidIndex,
    Key::GidCheck,
    Key::GidTimeoutMs,
    Key::PodTrafficClasses,
];

/// The keys of a rail profile, in the network config reference's order.
pub fn profile_keys() -> Vec<Key> {
    Key::ALL
        .iter()
        .copied()
        .filter(|k| PROFILE_ALSO.contains(k) || k.owned().is_some_and(|o| o.profile))
        .collect()
}

/// Every owned setting's value (`Key::owned`), each within its declared
/// bounds; the class is the pod's pick where it made one.
pub(super) fn parse_owned(
    obj: &Map<String, Value>,
    pick: Option<u8>,
) -> CniResult<Vec<(Key, u32)>> {
    let mut out = Vec::new();
    for &key in Key::ALL {
        let Some(declared) = key.owned() else {
            continue;
        };
        let value = opt_int(obj, key, declared.min.into(), declared.max.into())?.map(|n| n as u32);
        let value = match key {
            Key::TrafficClass => pick.map(u32::from).or(value),
            _ => value,
        };
        out.extend(value.map(|v| (key, v)));
    }
    Ok(out)
}

/// A pod's pick of its class: what carried it, its value, whose list it is
/// judged against, and what the pod does instead.
pub(super) struct PodPick {
    pub(super) what: &'static str,
    pub(super) value: Value,
    pub(super) of: &'static str,
    pub(super) fix: &'static str,
}

/// A pod's class: `args.cni.trafficClass` (Multus fills `args.cni` from the
/// pod's cni-args) or a DRA rail's annotation, allowed only when it is one
/// of the network's (or profile's) `podTrafficClasses`: a tenant must not
/// pick its own priority unless the network's owner allows it.
pub(super) fn pod_class(obj: &Map<String, Value>, asked: Option<PodPick>) -> CniResult<Option<u8>> {
    let allowed: Option<Vec<u8>> = match get(obj, Key::PodTrafficClasses) {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) if a.len() <= 256 => Some(
            a.iter()
                .map(|v| match v.as_u64() {
                    Some(n) if n <= 255 => Ok(n as u8),
                    _ => Err(wrong_type(
                        Key::PodTrafficClasses.name(),
                        "a list of whole numbers from 0 to 255",
                        v,
                    )),
                })
                .collect::<CniResult<_>>()?,
        ),
        Some(other) => {
            return Err(wrong_type(
                Key::PodTrafficClasses.name(),
                "a list of whole numbers from 0 to 255",
                other,
            ))
        }
    };
    let Some(PodPick {
        what,
        value,
        of,
        fix,
    }) = asked
    else {
        return Ok(None);
    };
    let asked = match value.as_u64() {
        Some(n) if n <= 255 => n as u8,
        _ => return Err(wrong_type(what, "a whole number from 0 to 255", &value)),
    };
    match allowed {
        Some(list) if list.contains(&asked) => Ok(Some(asked)),
        Some(list) => Err(CniError::config(format!(
            "{what} {asked} is not one of the {of}'s podTrafficClasses {list:?}: the pod may pick only those; ask the {of}'s owner"
        ))),
        None => Err(CniError::config(format!(
            "{what} {asked} is not allowed: the {of} lists no podTrafficClasses, so a pod may not pick its own class; {fix}, or ask the {of}'s owner to list it"
        ))),
    }
}
