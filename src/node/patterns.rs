//! The sysctl allowlist's patterns: validated when the node config is read,
//! matched against a key and the pod's interface at ADD.

/// A pattern is a dotted sysctl key whose components may hold `*` (any run of
/// characters within that one component) or be `IFNAME` (the pod's interface).
/// Globs rather than regular expressions: a key is a list of components, a
/// component-wise match cannot spill across a dot the way an unescaped `.` in
/// a regex does (`net.ipv4.conf..*` matches far more than it reads), and it
/// costs no dependency.
pub fn validate_pattern(p: &str) -> Result<(), String> {
    let ok = !p.is_empty()
        && p.len() <= 256
        && p.split('.').all(|c| {
            !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'*'))
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "sysctlAllowlist pattern {:?} is not a dotted key of letters, digits, '_', '-' and '*' (e.g. net.ipv4.conf.*.arp_ignore)",
            p
        ))
    }
}

/// Whether `key` (as configured, `IFNAME` placeholder included) is allowed by
/// `pattern` for the interface `ifname`.
pub fn pattern_matches(pattern: &str, key: &str, ifname: &str) -> bool {
    let resolve = |c: &str| {
        if c == "IFNAME" {
            ifname.to_owned()
        } else {
            c.to_owned()
        }
    };
    let key: Vec<String> = key.split('.').map(resolve).collect();
    let pat: Vec<&str> = pattern.split('.').collect();
    pat.len() == key.len()
        && pat.iter().zip(&key).all(|(p, k)| {
            if *p == "IFNAME" {
                k == ifname
            } else {
                glob(p.as_bytes(), k.as_bytes())
            }
        })
}

/// `*` matches any run of bytes (iterative, linear backtracking on the last star).
pub(super) fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}
