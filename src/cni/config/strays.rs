//! The keys of a network config that are not roce-tune's: a typo of one
//! refuses ADD, the rest are one warning line.

use super::fields::names;
use super::NetConf;
use crate::cni::error::{CniError, CniResult};
use crate::cni::keys::{Key, Whose};

impl NetConf {
    /// ADD's rule for a key one edit from one of roce-tune's: refused (7),
    /// since ignoring it would apply the default the key was meant to
    /// change (`"gidindex": 1` enforcing index 3). Every typo is named, so
    /// one round of fixes is enough.
    pub fn refuse_typos(&self) -> CniResult<()> {
        let typos: Vec<String> = self
            .strays
            .iter()
            .filter_map(|s| {
                let meant = s.meant?;
                let note = match meant.whose() {
                    Whose::Node => format!(
                        "; {} is a node setting too, which a network config may not name",
                        meant.name()
                    ),
                    _ => String::new(),
                };
                Some(format!(
                    "{}: did you mean \"{}\"{note}",
                    crate::quote::input(&s.key),
                    meant.name()
                ))
            })
            .collect();
        if typos.is_empty() {
            return Ok(());
        }
        Err(CniError::config(format!(
            "network config {} roce-tune does not know, one edit (or a letter's case) from one it does: {}; fix the key (ignored, it would leave that setting at its default)",
            if typos.len() == 1 { "key" } else { "keys" },
            typos.join("; ")
        )))
    }

    /// The one warning line for the keys neither roce-tune nor the runtime
    /// uses (another tool's, or a typo a command other than ADD only warns
    /// about), or `None` when there are none. At most `MAX_STRAYS_NAMED`
    /// are named: a config can hold thousands.
    pub fn strays_warning(&self) -> Option<String> {
        if self.strays.is_empty() {
            return None;
        }
        let mut named: Vec<String> = self
            .strays
            .iter()
            .take(MAX_STRAYS_NAMED)
            .map(|s| match s.meant {
                Some(m) => format!(
                    "{} (did you mean \"{}\"?)",
                    crate::quote::input(&s.key),
                    m.name()
                ),
                None => crate::quote::input(&s.key),
            })
            .collect();
        if self.strays.len() > MAX_STRAYS_NAMED {
            named.push(format!("and {} more", self.strays.len() - MAX_STRAYS_NAMED));
        }
        let (keys, are) = match self.strays.len() {
            1 => ("key", "is neither roce-tune's nor one"),
            _ => ("keys", "are neither roce-tune's nor ones"),
        };
        let own: Vec<Key> = Key::ALL
            .iter()
            .copied()
            .filter(|k| k.whose() == Whose::RoceTune)
            .collect();
        Some(format!(
            "network config {keys} {} {are} the runtime adds: ignored (roce-tune's keys: {})",
            named.join(", "),
            names(&own)
        ))
    }
}

/// How many stray keys the warning names before it counts the rest.
const MAX_STRAYS_NAMED: usize = 8;
