//! CNI results (SPEC.md "Success") in every version roce-tune speaks:
//! 0.3.0, 0.3.1, 0.4.0, 1.0.0 and 1.1.0.
//!
//! A chained plugin gets the previous plugin's result as `prevResult`, in the
//! version that plugin wrote, and must print its own result in the
//! configuration's `cniVersion`. [`NetResult::parse`] reads any supported
//! version into one normalized form; [`NetResult::to_value`] prints it in any
//! supported version.
//!
//! The parser walks the JSON by hand so that every error names the exact
//! field (`prevResult.ips[1].address: ...`). It is strict about what it keeps
//! (CIDRs, IPs, integer ranges, interface indices) and ignores every field it
//! does not keep, including fields of a later version than the one the result
//! declares.
//!
//! Output conventions, matching what libcni prints:
//! - `interfaces`, `ips`, `routes` are omitted when empty (libcni: omitempty
//!   on slices);
//! - `dns` is always printed, as `{}` when empty (libcni's omitempty has no
//!   effect on a struct), and inside it every empty member is omitted;
//! - absent optional fields (`mac`, `sandbox`, `gateway`, `interface`, `gw`,
//!   ...) are omitted; an empty string counts as absent, as Go's omitempty
//!   makes `""` and "missing" the same thing on the wire;
//! - `ips[].version` is printed for 0.x only, derived from the address family;
//! - interface `mtu`/`socketPath`/`pciID` and route `mtu`/`advmss`/`priority`/
//!   `table`/`scope` are printed for 1.1.0 only.

use std::net::IpAddr;

use ipnetwork::IpNetwork;
use serde_json::{Map, Value};

use super::error::{code, CniError};
use super::json;
use super::version::{self, is_supported, SUPPORTED_VERSIONS};

/// Prefix of every field path in parse errors.
const ROOT: &str = "prevResult";

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Interface {
    pub name: String,
    pub mac: Option<String>,
    /// 1.1.0 only.
    pub mtu: Option<u32>,
    pub sandbox: Option<String>,
    /// 1.1.0 only.
    pub socket_path: Option<String>,
    /// 1.1.0 only.
    pub pci_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpConfig {
    /// The address with its prefix length; host bits are kept (10.1.0.5/16).
    pub address: IpNetwork,
    pub gateway: Option<IpAddr>,
    /// Index into [`NetResult::interfaces`]; always in range after `parse`.
    pub interface: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub dst: IpNetwork,
    pub gw: Option<IpAddr>,
    /// 1.1.0 only, as are the four fields below.
    pub mtu: Option<u32>,
    pub advmss: Option<u32>,
    pub priority: Option<u32>,
    pub table: Option<u32>,
    pub scope: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dns {
    pub nameservers: Vec<String>,
    pub domain: Option<String>,
    pub search: Vec<String>,
    pub options: Vec<String>,
}

/// A CNI result, normalized across versions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetResult {
    /// The version the result was parsed from: its own `cniVersion`, or the
    /// assumed one when it had none.
    pub cni_version: String,
    pub interfaces: Vec<Interface>,
    pub ips: Vec<IpConfig>,
    pub routes: Vec<Route>,
    pub dns: Dns,
}

impl NetResult {
    /// Parse a prevResult. `assumed_version` is used when the value has no
    /// `cniVersion` (or an empty one).
    ///
    /// Errors: an unsupported version is code 1 (INCOMPATIBLE_VERSION); any
    /// malformed field is code 7 (INVALID_CONFIG) naming the field path.
    pub fn parse(v: &Value, assumed_version: &str) -> Result<NetResult, CniError> {
        let obj = as_object(v, ROOT)?;

        let cni_version = match opt_str(obj, "cniVersion", ROOT)? {
            Some(declared) => {
                if !is_supported(&declared) {
                    return Err(unsupported(format!(
                        "{ROOT}.cniVersion {} is not supported",
                        crate::quote::input(&declared)
                    )));
                }
                declared
            }
            None => {
                if !is_supported(assumed_version) {
                    return Err(unsupported(format!(
                        "{ROOT} has no cniVersion and the assumed {} is not supported",
                        crate::quote::input(assumed_version)
                    )));
                }
                assumed_version.to_string()
            }
        };
        // The 1.1.0 additions are unknown fields in earlier versions: ignored,
        // not validated, like any other unknown field.
        let extended = version::at_least(&cni_version, "1.1.0");

        let mut interfaces = Vec::new();
        for (i, item) in array(obj, "interfaces", ROOT)?.iter().enumerate() {
            let path = format!("{ROOT}.interfaces[{i}]");
            interfaces.push(parse_interface(item, &path, extended)?);
        }

        let mut ips = Vec::new();
        for (i, item) in array(obj, "ips", ROOT)?.iter().enumerate() {
            let path = format!("{ROOT}.ips[{i}]");
            ips.push(parse_ip(item, &path, interfaces.len())?);
        }

        let mut routes = Vec::new();
        for (i, item) in array(obj, "routes", ROOT)?.iter().enumerate() {
            let path = format!("{ROOT}.routes[{i}]");
            routes.push(parse_route(item, &path, extended)?);
        }

        let dns = match present(obj, "dns") {
            None => Dns::default(),
            Some(d) => parse_dns(d, &format!("{ROOT}.dns"))?,
        };

        Ok(NetResult {
            cni_version,
            interfaces,
            ips,
            routes,
            dns,
        })
    }

    /// Print in `version` (must be supported, else code 1). The result's own
    /// `cni_version` is not consulted.
    pub fn to_value(&self, version: &str) -> Result<Value, CniError> {
        if !is_supported(version) {
            return Err(unsupported(format!(
                "cannot print a result as cniVersion {}",
                crate::quote::input(version)
            )));
        }
        // SPEC 1.0.0 removed ips[].version; 0.x requires it.
        let legacy = !version::at_least(version, "1.0.0");
        let extended = version::at_least(version, "1.1.0");

        let mut out = Map::new();
        out.insert("cniVersion".into(), Value::String(version.to_string()));

        if !self.interfaces.is_empty() {
            let list = self
                .interfaces
                .iter()
                .map(|i| interface_value(i, extended))
                .collect();
            out.insert("interfaces".into(), Value::Array(list));
        }
        if !self.ips.is_empty() {
            let list = self.ips.iter().map(|ip| ip_value(ip, legacy)).collect();
            out.insert("ips".into(), Value::Array(list));
        }
        if !self.routes.is_empty() {
            let list = self
                .routes
                .iter()
                .map(|r| route_value(r, extended))
                .collect();
            out.insert("routes".into(), Value::Array(list));
        }
        out.insert("dns".into(), dns_value(&self.dns));
        Ok(Value::Object(out))
    }

    /// Addresses that `ips` gives to the interface named `ifname`, in order:
    /// those whose `interface` index points at an interface of that name
    /// (every such interface, should the name repeat).
    ///
    /// Fallback: when NO entry of `ips` carries an `interface` index at all
    /// (an IPAM-only result, or a plugin that never sets it), the addresses
    /// cannot be attributed, so every address is returned. As soon as one
    /// entry carries an index, attribution is by index only.
    pub fn addresses_of(&self, ifname: &str) -> Vec<IpNetwork> {
        if self.ips.iter().all(|ip| ip.interface.is_none()) {
            return self.ips.iter().map(|ip| ip.address).collect();
        }
        self.ips
            .iter()
            .filter(|ip| {
                ip.interface
                    .and_then(|idx| self.interfaces.get(idx))
                    .is_some_and(|intf| intf.name == ifname)
            })
            .map(|ip| ip.address)
            .collect()
    }
}

/// Convenience: parse `prev` (see [`NetResult::parse`]) then print it in
/// `to_version`.
pub fn convert(prev: &Value, assumed_version: &str, to_version: &str) -> Result<Value, CniError> {
    NetResult::parse(prev, assumed_version)?.to_value(to_version)
}

// ---------------------------------------------------------------- parsing

fn parse_interface(v: &Value, path: &str, extended: bool) -> Result<Interface, CniError> {
    let obj = as_object(v, path)?;
    let name = match present(obj, "name") {
        None => return Err(bad(&format!("{path}.name"), "missing")),
        Some(n) => as_str(n, &format!("{path}.name"))?.to_string(),
    };
    let mut intf = Interface {
        name,
        mac: opt_str(obj, "mac", path)?,
        sandbox: opt_str(obj, "sandbox", path)?,
        ..Interface::default()
    };
    if extended {
        intf.mtu = opt_u32(obj, "mtu", path)?;
        intf.socket_path = opt_str(obj, "socketPath", path)?;
        intf.pci_id = opt_str(obj, "pciID", path)?;
    }
    Ok(intf)
}

fn parse_ip(v: &Value, path: &str, interface_count: usize) -> Result<IpConfig, CniError> {
    let obj = as_object(v, path)?;
    // ips[].version (0.x) is not read: the address family is the authority,
    // and it is derived again on output. libcni drops it the same way when
    // converting to 1.0.0.
    let address = req_cidr(obj, "address", path)?;
    let gateway = opt_ip(obj, "gateway", path)?;
    let interface = match present(obj, "interface") {
        None => None,
        Some(n) => {
            let ipath = format!("{path}.interface");
            let idx = as_uint(n, &ipath)?;
            // SPEC: "interface (uint): the index into the interfaces list".
            if idx >= interface_count as u64 {
                return Err(bad(
                    &ipath,
                    format!(
                        "index {idx} is out of range: the result has {interface_count} interface(s)"
                    ),
                ));
            }
            // In range of a Vec's length, so it fits a usize.
            Some(idx as usize)
        }
    };
    Ok(IpConfig {
        address,
        gateway,
        interface,
    })
}

fn parse_route(v: &Value, path: &str, extended: bool) -> Result<Route, CniError> {
    let obj = as_object(v, path)?;
    let mut route = Route {
        dst: req_cidr(obj, "dst", path)?,
        gw: opt_ip(obj, "gw", path)?,
        mtu: None,
        advmss: None,
        priority: None,
        table: None,
        scope: None,
    };
    if extended {
        route.mtu = opt_u32(obj, "mtu", path)?;
        route.advmss = opt_u32(obj, "advmss", path)?;
        route.priority = opt_u32(obj, "priority", path)?;
        route.table = opt_u32(obj, "table", path)?;
        route.scope = opt_u32(obj, "scope", path)?;
    }
    Ok(route)
}

fn parse_dns(v: &Value, path: &str) -> Result<Dns, CniError> {
    let obj = as_object(v, path)?;
    Ok(Dns {
        nameservers: str_list(obj, "nameservers", path)?,
        domain: opt_str(obj, "domain", path)?,
        search: str_list(obj, "search", path)?,
        options: str_list(obj, "options", path)?,
    })
}

/// A member that is present and not `null`: Go's decoder, which wrote most
/// results roce-tune will see, treats `null` as absent.
fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn as_object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, CniError> {
    v.as_object()
        .ok_or_else(|| bad(path, format!("expected an object, got {}", kind(v))))
}

fn as_str<'a>(v: &'a Value, path: &str) -> Result<&'a str, CniError> {
    v.as_str()
        .ok_or_else(|| bad(path, format!("expected a string, got {}", kind(v))))
}

/// A result string: absent, null or empty is `None` (what the reference
/// plugins print for a field they do not fill).
fn opt_str(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<String>, CniError> {
    let s = json::str_field(obj, key).map_err(|v| {
        bad(
            &format!("{path}.{key}"),
            format!("expected a string, got {}", kind(v)),
        )
    })?;
    Ok(s.filter(|s| !s.is_empty()).map(str::to_owned))
}

/// An absent or null array is empty.
fn array<'a>(obj: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a [Value], CniError> {
    match present(obj, key) {
        None => Ok(&[]),
        Some(v) => v.as_array().map(Vec::as_slice).ok_or_else(|| {
            bad(
                &format!("{path}.{key}"),
                format!("expected an array, got {}", kind(v)),
            )
        }),
    }
}

fn str_list(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Vec<String>, CniError> {
    array(obj, key, path)?
        .iter()
        .enumerate()
        .map(|(i, v)| as_str(v, &format!("{path}.{key}[{i}]")).map(str::to_string))
        .collect()
}

fn as_uint(v: &Value, path: &str) -> Result<u64, CniError> {
    let Value::Number(n) = v else {
        return Err(bad(
            path,
            format!("expected a non-negative integer, got {}", kind(v)),
        ));
    };
    if let Some(u) = n.as_u64() {
        Ok(u)
    } else if let Some(i) = n.as_i64() {
        Err(bad(path, format!("must not be negative, got {i}")))
    } else {
        Err(bad(
            path,
            format!("expected a non-negative integer, got {n}"),
        ))
    }
}

fn opt_u32(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<u32>, CniError> {
    let Some(v) = present(obj, key) else {
        return Ok(None);
    };
    let fpath = format!("{path}.{key}");
    let u = as_uint(v, &fpath)?;
    u32::try_from(u).map(Some).map_err(|_| {
        bad(
            &fpath,
            format!("{u} is out of range (at most {})", u32::MAX),
        )
    })
}

fn req_cidr(obj: &Map<String, Value>, key: &str, path: &str) -> Result<IpNetwork, CniError> {
    let fpath = format!("{path}.{key}");
    let Some(v) = present(obj, key) else {
        return Err(bad(&fpath, "missing"));
    };
    let s = as_str(v, &fpath)?;
    parse_cidr(s).ok_or_else(|| bad(&fpath, format!("{} is not a CIDR", crate::quote::input(s))))
}

fn opt_ip(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<IpAddr>, CniError> {
    let Some(v) = present(obj, key) else {
        return Ok(None);
    };
    let fpath = format!("{path}.{key}");
    let s = as_str(v, &fpath)?;
    s.parse::<IpAddr>().map(Some).map_err(|_| {
        bad(
            &fpath,
            format!("{} is not an IP address", crate::quote::input(s)),
        )
    })
}

/// `address/prefix` with a decimal prefix, as Go's net.ParseCIDR reads it.
/// ipnetwork's own parser is looser (a bare address becomes /32, a dotted
/// netmask or "+24" is taken as a prefix), which a CNI result never holds.
fn parse_cidr(s: &str) -> Option<IpNetwork> {
    let (addr, prefix) = s.split_once('/')?;
    if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let prefix: u8 = prefix.parse().ok()?;
    let ip: IpAddr = addr.parse().ok()?;
    IpNetwork::new(ip, prefix).ok()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn bad(path: &str, what: impl std::fmt::Display) -> CniError {
    CniError::config(format!("{path}: {what}"))
}

fn unsupported(what: String) -> CniError {
    CniError::new(
        code::INCOMPATIBLE_VERSION,
        format!(
            "{what} (roce-tune supports {})",
            SUPPORTED_VERSIONS.join(", ")
        ),
    )
}

// ---------------------------------------------------------------- printing

fn put_str(m: &mut Map<String, Value>, key: &str, v: &Option<String>) {
    if let Some(s) = v.as_deref().filter(|s| !s.is_empty()) {
        m.insert(key.into(), Value::String(s.to_string()));
    }
}

fn put_u32(m: &mut Map<String, Value>, key: &str, v: Option<u32>) {
    if let Some(n) = v {
        m.insert(key.into(), Value::from(n));
    }
}

fn put_list(m: &mut Map<String, Value>, key: &str, v: &[String]) {
    if !v.is_empty() {
        m.insert(key.into(), Value::from(v.to_vec()));
    }
}

fn interface_value(i: &Interface, extended: bool) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), Value::String(i.name.clone()));
    put_str(&mut m, "mac", &i.mac);
    put_str(&mut m, "sandbox", &i.sandbox);
    if extended {
        put_u32(&mut m, "mtu", i.mtu);
        put_str(&mut m, "socketPath", &i.socket_path);
        put_str(&mut m, "pciID", &i.pci_id);
    }
    Value::Object(m)
}

fn ip_value(ip: &IpConfig, legacy: bool) -> Value {
    let mut m = Map::new();
    if legacy {
        let family = if ip.address.is_ipv4() { "4" } else { "6" };
        m.insert("version".into(), Value::String(family.into()));
    }
    m.insert("address".into(), Value::String(ip.address.to_string()));
    if let Some(gw) = ip.gateway {
        m.insert("gateway".into(), Value::String(gw.to_string()));
    }
    if let Some(idx) = ip.interface {
        m.insert("interface".into(), Value::from(idx));
    }
    Value::Object(m)
}

fn route_value(r: &Route, extended: bool) -> Value {
    let mut m = Map::new();
    m.insert("dst".into(), Value::String(r.dst.to_string()));
    if let Some(gw) = r.gw {
        m.insert("gw".into(), Value::String(gw.to_string()));
    }
    if extended {
        put_u32(&mut m, "mtu", r.mtu);
        put_u32(&mut m, "advmss", r.advmss);
        put_u32(&mut m, "priority", r.priority);
        put_u32(&mut m, "table", r.table);
        put_u32(&mut m, "scope", r.scope);
    }
    Value::Object(m)
}

fn dns_value(d: &Dns) -> Value {
    let mut m = Map::new();
    put_list(&mut m, "nameservers", &d.nameservers);
    put_str(&mut m, "domain", &d.domain);
    put_list(&mut m, "search", &d.search);
    put_list(&mut m, "options", &d.options);
    Value::Object(m)
}

// ------------------------------------------------------------------ tests

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn is_legacy(v: &str) -> bool {
        v.starts_with("0.")
    }

    /// A result as a plugin of `version` would write it. The 1.1.0 additions
    /// are written in every version: below 1.1.0 they are unknown fields and
    /// must not survive.
    fn sample(version: &str) -> Value {
        let mut v = json!({
            "cniVersion": version,
            "interfaces": [
                {"name": "net1-host", "mac": "aa:bb:cc:dd:ee:01",
                 "mtu": 9000, "socketPath": "/run/vhost.sock", "pciID": "0000:3b:00.2"},
                {"name": "net1", "mac": "aa:bb:cc:dd:ee:02", "sandbox": "/var/run/netns/pod",
                 "mtu": 4200, "pciID": "0000:3b:00.3"}
            ],
            "ips": [
                {"address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 1},
                {"address": "fd00:1::5/64", "gateway": "fd00:1::1", "interface": 1}
            ],
            "routes": [
                {"dst": "0.0.0.0/0", "gw": "10.1.0.1", "mtu": 4000, "advmss": 3960,
                 "priority": 10, "table": 100, "scope": 0},
                {"dst": "fd00:2::/48", "gw": "fd00:1::1", "table": 101}
            ],
            "dns": {"nameservers": ["10.1.0.53"], "domain": "rail.local",
                    "search": ["rail.local"], "options": ["ndots:2"]}
        });
        if is_legacy(version) {
            v["ips"][0]["version"] = json!("4");
            v["ips"][1]["version"] = json!("6");
        }
        v
    }

    /// What roce-tune must print for `sample(from)` asked in `to`.
    fn expected(from: &str, to: &str) -> Value {
        let mut v = json!({
            "cniVersion": to,
            "interfaces": [
                {"name": "net1-host", "mac": "aa:bb:cc:dd:ee:01"},
                {"name": "net1", "mac": "aa:bb:cc:dd:ee:02", "sandbox": "/var/run/netns/pod"}
            ],
            "ips": [
                {"address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 1},
                {"address": "fd00:1::5/64", "gateway": "fd00:1::1", "interface": 1}
            ],
            "routes": [
                {"dst": "0.0.0.0/0", "gw": "10.1.0.1"},
                {"dst": "fd00:2::/48", "gw": "fd00:1::1"}
            ],
            "dns": {"nameservers": ["10.1.0.53"], "domain": "rail.local",
                    "search": ["rail.local"], "options": ["ndots:2"]}
        });
        if is_legacy(to) {
            v["ips"][0]["version"] = json!("4");
            v["ips"][1]["version"] = json!("6");
        }
        if from == "1.1.0" && to == "1.1.0" {
            let i0 = v["interfaces"][0].as_object_mut().unwrap();
            i0.insert("mtu".into(), json!(9000));
            i0.insert("socketPath".into(), json!("/run/vhost.sock"));
            i0.insert("pciID".into(), json!("0000:3b:00.2"));
            let i1 = v["interfaces"][1].as_object_mut().unwrap();
            i1.insert("mtu".into(), json!(4200));
            i1.insert("pciID".into(), json!("0000:3b:00.3"));
            let r0 = v["routes"][0].as_object_mut().unwrap();
            for (k, n) in [
                ("mtu", 4000),
                ("advmss", 3960),
                ("priority", 10),
                ("table", 100),
                ("scope", 0),
            ] {
                r0.insert(k.into(), json!(n));
            }
            v["routes"][1]
                .as_object_mut()
                .unwrap()
                .insert("table".into(), json!(101));
        }
        v
    }

    fn err_of(v: Value) -> CniError {
        NetResult::parse(&v, "1.0.0").expect_err("parse should fail")
    }

    fn assert_config_err(v: Value, path: &str, needle: &str) {
        let e = err_of(v);
        assert_eq!(e.code, code::INVALID_CONFIG, "{e}");
        assert!(
            e.msg.starts_with(&format!("{path}: ")),
            "path {path:?} not named: {}",
            e.msg
        );
        assert!(e.msg.contains(needle), "{needle:?} not in {:?}", e.msg);
    }

    #[test]
    fn converts_between_every_ordered_pair_of_versions() {
        let mut pairs = 0;
        for from in SUPPORTED_VERSIONS {
            for to in SUPPORTED_VERSIONS {
                let out = convert(&sample(from), "0.3.0", to).unwrap();
                assert_eq!(out, expected(from, to), "{from} -> {to}");
                assert_eq!(out["cniVersion"], *to);
                for ip in out["ips"].as_array().unwrap() {
                    assert_eq!(
                        ip.get("version").is_some(),
                        is_legacy(to),
                        "{from} -> {to}: {ip}"
                    );
                }
                // What we print, we read back to the same data.
                let a = NetResult::parse(&sample(from), "0.3.0").unwrap();
                let mut b = NetResult::parse(&out, "0.3.0").unwrap();
                assert_eq!(a.cni_version, *from);
                assert_eq!(b.cni_version, *to);
                b.cni_version = a.cni_version.clone();
                if *to == "1.1.0" {
                    assert_eq!(a, b, "{from} -> {to}");
                } else {
                    assert_eq!(a.interfaces.len(), b.interfaces.len());
                    assert_eq!(a.ips, b.ips, "{from} -> {to}");
                    assert_eq!(a.dns, b.dns);
                    assert_eq!(
                        a.routes.iter().map(|r| (r.dst, r.gw)).collect::<Vec<_>>(),
                        b.routes.iter().map(|r| (r.dst, r.gw)).collect::<Vec<_>>()
                    );
                }
                pairs += 1;
            }
        }
        assert_eq!(pairs, 25);
    }

    #[test]
    fn parsed_form_holds_the_typed_values() {
        let r = NetResult::parse(&sample("1.1.0"), "1.0.0").unwrap();
        assert_eq!(r.interfaces[1].name, "net1");
        assert_eq!(
            r.interfaces[1].sandbox.as_deref(),
            Some("/var/run/netns/pod")
        );
        assert_eq!(
            r.interfaces[0].socket_path.as_deref(),
            Some("/run/vhost.sock")
        );
        assert_eq!(r.interfaces[1].mtu, Some(4200));
        assert_eq!(
            r.ips[0].address,
            "10.1.0.5/16".parse::<IpNetwork>().unwrap()
        );
        assert_eq!(r.ips[0].address.ip(), "10.1.0.5".parse::<IpAddr>().unwrap());
        assert_eq!(r.ips[1].gateway, Some("fd00:1::1".parse().unwrap()));
        assert_eq!(r.ips[1].interface, Some(1));
        assert_eq!(r.routes[0].scope, Some(0));
        assert_eq!(r.routes[1].mtu, None);
        assert_eq!(r.dns.domain.as_deref(), Some("rail.local"));

        // Below 1.1.0 the additions are unknown fields and are dropped.
        let r = NetResult::parse(&sample("1.0.0"), "1.0.0").unwrap();
        assert_eq!(r.interfaces[0].mtu, None);
        assert_eq!(r.interfaces[0].pci_id, None);
        assert_eq!(r.routes[0].table, None);
    }

    #[test]
    fn tolerates_version_in_1_0_0_and_unknown_fields_anywhere() {
        let v = json!({
            "cniVersion": "1.0.0",
            "vendorExtension": {"deep": [[[{"x": 1}]]]},
            "interfaces": [{"name": "net1", "extra": true, "mtu": "garbage below 1.1.0"}],
            "ips": [{"version": "4", "address": "192.168.1.7/24", "interface": 0, "x": null}],
            "routes": [{"dst": "192.168.0.0/16", "table": -5, "whatever": []}],
            "dns": {"nameservers": [], "sortlist": 3}
        });
        let r = NetResult::parse(&v, "0.4.0").unwrap();
        assert_eq!(r.cni_version, "1.0.0");
        assert_eq!(r.interfaces[0].name, "net1");
        assert_eq!(r.interfaces[0].mtu, None);
        assert_eq!(r.routes[0].table, None);
        let out = r.to_value("1.0.0").unwrap();
        assert!(out["ips"][0].get("version").is_none(), "{out}");
        assert!(out.get("vendorExtension").is_none());
        assert_eq!(
            out["ips"][0],
            json!({"address": "192.168.1.7/24", "interface": 0})
        );
    }

    #[test]
    fn a_0x_version_field_is_not_trusted_over_the_address() {
        // A wrong or missing 0.x `version` is rederived from the address.
        let v = json!({"cniVersion": "0.3.1", "ips": [
            {"version": "6", "address": "10.0.0.2/8"},
            {"address": "fd00::2/64"}
        ]});
        let out = convert(&v, "0.3.1", "0.4.0").unwrap();
        assert_eq!(out["ips"][0]["version"], "4");
        assert_eq!(out["ips"][1]["version"], "6");
    }

    #[test]
    fn missing_optional_fields_are_omitted_and_dns_is_always_printed() {
        let r = NetResult::parse(&json!({"cniVersion": "0.4.0"}), "1.0.0").unwrap();
        assert_eq!(
            r,
            NetResult {
                cni_version: "0.4.0".into(),
                ..NetResult::default()
            }
        );
        for to in SUPPORTED_VERSIONS {
            assert_eq!(
                r.to_value(to).unwrap(),
                json!({"cniVersion": to, "dns": {}})
            );
        }

        let v = json!({
            "cniVersion": "1.1.0",
            "interfaces": [{"name": "eth0", "mac": "", "sandbox": null}],
            "ips": [{"address": "10.0.0.2/24"}],
            "routes": [{"dst": "10.9.0.0/16"}],
            "dns": {"domain": "example"}
        });
        let out = convert(&v, "1.1.0", "1.1.0").unwrap();
        assert_eq!(
            out,
            json!({
                "cniVersion": "1.1.0",
                "interfaces": [{"name": "eth0"}],
                "ips": [{"address": "10.0.0.2/24"}],
                "routes": [{"dst": "10.9.0.0/16"}],
                "dns": {"domain": "example"}
            })
        );
        let out = convert(&v, "1.1.0", "0.3.0").unwrap();
        assert_eq!(
            out["ips"],
            json!([{"version": "4", "address": "10.0.0.2/24"}])
        );
    }

    #[test]
    fn null_members_count_as_absent() {
        let v = json!({"cniVersion": null, "interfaces": null, "ips": null, "routes": null, "dns": null});
        let r = NetResult::parse(&v, "0.3.1").unwrap();
        assert_eq!(
            r,
            NetResult {
                cni_version: "0.3.1".into(),
                ..NetResult::default()
            }
        );
    }

    #[test]
    fn absent_or_empty_cni_version_is_assumed() {
        let mut v = sample("1.1.0");
        v.as_object_mut().unwrap().remove("cniVersion");
        let r = NetResult::parse(&v, "1.1.0").unwrap();
        assert_eq!(r.cni_version, "1.1.0");
        assert_eq!(
            r.interfaces[0].mtu,
            Some(9000),
            "assumed version decides the format"
        );
        let r = NetResult::parse(&v, "0.4.0").unwrap();
        assert_eq!(r.cni_version, "0.4.0");
        assert_eq!(r.interfaces[0].mtu, None);

        v["cniVersion"] = json!("");
        assert_eq!(NetResult::parse(&v, "0.3.1").unwrap().cni_version, "0.3.1");
    }

    #[test]
    fn rejects_unsupported_versions_with_code_1() {
        let e = err_of(json!({"cniVersion": "0.2.0", "ip4": {"ip": "10.0.0.2/24"}}));
        assert_eq!(e.code, code::INCOMPATIBLE_VERSION);
        assert!(e.msg.contains("\"0.2.0\""), "{}", e.msg);
        assert!(
            e.msg.contains("0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0"),
            "{}",
            e.msg
        );

        let e = NetResult::parse(&json!({}), "9.9.9").unwrap_err();
        assert_eq!(e.code, code::INCOMPATIBLE_VERSION);
        assert!(e.msg.contains("assumed \"9.9.9\""), "{}", e.msg);

        let r = NetResult::parse(&sample("1.0.0"), "1.0.0").unwrap();
        let e = r.to_value("1.2.0").unwrap_err();
        assert_eq!(e.code, code::INCOMPATIBLE_VERSION);
        assert!(e.msg.contains("\"1.2.0\""), "{}", e.msg);
        assert_eq!(
            convert(&sample("1.0.0"), "1.0.0", "0.1.0")
                .unwrap_err()
                .code,
            1
        );

        // A cniVersion of the wrong type is malformed, not unsupported.
        assert_config_err(
            json!({"cniVersion": 1.0}),
            "prevResult.cniVersion",
            "expected a string",
        );
    }

    #[test]
    fn rejects_a_non_object() {
        for v in [json!([]), json!("{}"), json!(null), json!(42), json!(true)] {
            assert_config_err(v, "prevResult", "expected an object");
        }
    }

    #[test]
    fn rejects_an_address_that_is_not_a_cidr() {
        let with_addr = |a: &str| {
            json!({"cniVersion": "1.0.0", "ips": [
                {"address": "10.0.0.2/24"},
                {"address": a}
            ]})
        };
        assert_config_err(
            with_addr("10.0.0.1"),
            "prevResult.ips[1].address",
            "\"10.0.0.1\" is not a CIDR",
        );
        for a in [
            "10.0.0.1/33",
            "fd00::1/129",
            "10.0.0.1/255.255.255.0",
            "10.0.0.1/+8",
            "10.0.0.1/8/8",
            "10.0.0.1/",
            "/8",
            "010.0.0.1/8",
            "host/8",
            "10.0.0.1/0008",
            "",
        ] {
            assert_config_err(with_addr(a), "prevResult.ips[1].address", "is not a CIDR");
        }
        assert_config_err(
            json!({"ips": [{"address": 167772161}]}),
            "prevResult.ips[0].address",
            "expected a string, got a number",
        );
        assert_config_err(
            json!({"ips": [{"gateway": "10.0.0.1"}]}),
            "prevResult.ips[0].address",
            "missing",
        );
        assert_config_err(
            json!({"routes": [{"dst": "10.0.0.0"}]}),
            "prevResult.routes[0].dst",
            "is not a CIDR",
        );
    }

    #[test]
    fn rejects_a_gateway_that_is_not_an_ip() {
        assert_config_err(
            json!({"ips": [{"address": "10.0.0.2/24", "gateway": "10.0.0.1/24"}]}),
            "prevResult.ips[0].gateway",
            "\"10.0.0.1/24\" is not an IP address",
        );
        assert_config_err(
            json!({"ips": [{"address": "10.0.0.2/24", "gateway": ["10.0.0.1"]}]}),
            "prevResult.ips[0].gateway",
            "expected a string, got an array",
        );
        assert_config_err(
            json!({"routes": [{"dst": "0.0.0.0/0", "gw": "fe80::1%eth0"}]}),
            "prevResult.routes[0].gw",
            "is not an IP address",
        );
    }

    #[test]
    fn rejects_bad_interface_indices() {
        let with_idx = |i: Value| {
            json!({"interfaces": [{"name": "a"}, {"name": "b"}],
                   "ips": [{"address": "10.0.0.2/24", "interface": 1},
                           {"address": "10.0.0.3/24", "interface": i}]})
        };
        assert!(NetResult::parse(&with_idx(json!(0)), "1.0.0").is_ok());
        assert_config_err(
            with_idx(json!(2)),
            "prevResult.ips[1].interface",
            "index 2 is out of range: the result has 2 interface(s)",
        );
        assert_config_err(
            with_idx(json!(u64::MAX)),
            "prevResult.ips[1].interface",
            "out of range",
        );
        assert_config_err(
            with_idx(json!(-1)),
            "prevResult.ips[1].interface",
            "must not be negative, got -1",
        );
        assert_config_err(
            with_idx(json!(1.5)),
            "prevResult.ips[1].interface",
            "non-negative integer",
        );
        assert_config_err(
            with_idx(json!("0")),
            "prevResult.ips[1].interface",
            "got a string",
        );
        assert_config_err(
            json!({"ips": [{"address": "10.0.0.2/24", "interface": 0}]}),
            "prevResult.ips[0].interface",
            "the result has 0 interface(s)",
        );
    }

    #[test]
    fn rejects_wrong_types_naming_the_field() {
        assert_config_err(
            json!({"interfaces": {"name": "a"}}),
            "prevResult.interfaces",
            "expected an array, got an object",
        );
        assert_config_err(
            json!({"interfaces": ["net1"]}),
            "prevResult.interfaces[0]",
            "expected an object, got a string",
        );
        assert_config_err(
            json!({"interfaces": [{"mac": "aa:bb:cc:dd:ee:ff"}]}),
            "prevResult.interfaces[0].name",
            "missing",
        );
        assert_config_err(
            json!({"interfaces": [{"name": 7}]}),
            "prevResult.interfaces[0].name",
            "expected a string",
        );
        assert_config_err(
            json!({"interfaces": [{"name": "a", "sandbox": false}]}),
            "prevResult.interfaces[0].sandbox",
            "got a boolean",
        );
        assert_config_err(
            json!({"ips": "10.0.0.2/24"}),
            "prevResult.ips",
            "expected an array",
        );
        assert_config_err(
            json!({"routes": [{"dst": "0.0.0.0/0"}, 3]}),
            "prevResult.routes[1]",
            "expected an object, got a number",
        );
        assert_config_err(
            json!({"dns": []}),
            "prevResult.dns",
            "expected an object, got an array",
        );
        assert_config_err(
            json!({"dns": {"nameservers": ["10.0.0.53", 53]}}),
            "prevResult.dns.nameservers[1]",
            "expected a string",
        );
        assert_config_err(
            json!({"dns": {"search": "a.local"}}),
            "prevResult.dns.search",
            "expected an array",
        );
        assert_config_err(
            json!({"dns": {"domain": {}}}),
            "prevResult.dns.domain",
            "got an object",
        );
    }

    #[test]
    fn rejects_out_of_range_1_1_0_integers() {
        let route = |k: &str, n: Value| {
            let mut r = json!({"dst": "0.0.0.0/0"});
            r[k] = n;
            json!({"cniVersion": "1.1.0", "routes": [r]})
        };
        assert_config_err(
            route("mtu", json!(-1)),
            "prevResult.routes[0].mtu",
            "must not be negative",
        );
        assert_config_err(
            route("table", json!(4294967296u64)),
            "prevResult.routes[0].table",
            "4294967296 is out of range",
        );
        assert_config_err(
            route("priority", json!(1e300)),
            "prevResult.routes[0].priority",
            "non-negative integer",
        );
        assert_config_err(
            route("scope", json!("253")),
            "prevResult.routes[0].scope",
            "got a string",
        );
        let r = NetResult::parse(&route("table", json!(4294967295u64)), "1.1.0").unwrap();
        assert_eq!(r.routes[0].table, Some(u32::MAX));
        assert_config_err(
            json!({"cniVersion": "1.1.0", "interfaces": [{"name": "a", "mtu": -9000}]}),
            "prevResult.interfaces[0].mtu",
            "must not be negative",
        );
        assert_config_err(
            json!({"cniVersion": "1.1.0", "interfaces": [{"name": "a", "pciID": 3}]}),
            "prevResult.interfaces[0].pciID",
            "expected a string",
        );
    }

    #[test]
    fn long_hostile_strings_are_cut_in_messages() {
        let long = "x".repeat(10_000);
        let e = err_of(json!({"ips": [{"address": long}]}));
        assert!(e.msg.len() < 200, "{}", e.msg.len());
        assert!(e.msg.contains("xxx\"... is not a CIDR"), "{}", e.msg);
    }

    #[test]
    fn odd_inputs_give_errors_not_panics() {
        let deep: Value =
            serde_json::from_str(&format!("{}{}", "[".repeat(100), "]".repeat(100))).unwrap();
        let odd = [
            json!(null),
            json!(-1),
            json!(1e308),
            json!(u64::MAX),
            json!(i64::MIN),
            json!("\u{0}"),
            json!("\u{1F600}/8"),
            json!([]),
            json!({}),
            deep,
        ];
        let keys: [&[&str]; 12] = [
            &["cniVersion"],
            &["interfaces"],
            &["ips"],
            &["routes"],
            &["dns"],
            &["interfaces", "0"],
            &["interfaces", "0", "name"],
            &["ips", "0", "address"],
            &["ips", "0", "interface"],
            &["routes", "0", "mtu"],
            &["dns", "options"],
            &["ips", "0", "gateway"],
        ];
        for k in keys {
            for o in &odd {
                let mut v = sample("1.1.0");
                let mut slot = &mut v;
                for part in k {
                    slot = match part.parse::<usize>() {
                        Ok(i) => &mut slot[i],
                        Err(_) => &mut slot[*part],
                    };
                }
                *slot = o.clone();
                if let Ok(r) = NetResult::parse(&v, "1.1.0") {
                    for to in SUPPORTED_VERSIONS {
                        r.to_value(to).unwrap();
                    }
                }
            }
        }
    }

    #[test]
    fn addresses_of_follows_the_interface_index_by_name() {
        let v = json!({"cniVersion": "1.0.0",
            "interfaces": [{"name": "veth1"}, {"name": "net1", "sandbox": "/ns"}, {"name": "net2", "sandbox": "/ns"}],
            "ips": [{"address": "10.0.0.2/24", "interface": 1},
                    {"address": "10.5.0.2/24", "interface": 2},
                    {"address": "fd00::2/64", "interface": 1},
                    {"address": "10.9.0.2/24"}]});
        let r = NetResult::parse(&v, "1.0.0").unwrap();
        let want: Vec<IpNetwork> = vec![
            "10.0.0.2/24".parse().unwrap(),
            "fd00::2/64".parse().unwrap(),
        ];
        assert_eq!(r.addresses_of("net1"), want);
        assert_eq!(
            r.addresses_of("net2"),
            vec!["10.5.0.2/24".parse::<IpNetwork>().unwrap()]
        );
        assert!(r.addresses_of("veth1").is_empty());
        assert!(
            r.addresses_of("eth0").is_empty(),
            "one index present: no fallback"
        );
    }

    #[test]
    fn addresses_of_falls_back_to_all_when_no_ip_has_an_index() {
        let v = json!({"cniVersion": "0.4.0",
            "ips": [{"version": "4", "address": "10.0.0.2/24"}, {"version": "6", "address": "fd00::2/64"}]});
        let r = NetResult::parse(&v, "1.0.0").unwrap();
        let all: Vec<IpNetwork> = vec![
            "10.0.0.2/24".parse().unwrap(),
            "fd00::2/64".parse().unwrap(),
        ];
        assert_eq!(r.addresses_of("net1"), all);

        let mut named = v.clone();
        named["interfaces"] = json!([{"name": "net1"}]);
        let r = NetResult::parse(&named, "1.0.0").unwrap();
        assert_eq!(r.addresses_of("net1"), all);
        assert_eq!(r.addresses_of("other"), all);

        assert!(NetResult::default().addresses_of("net1").is_empty());
    }
}
