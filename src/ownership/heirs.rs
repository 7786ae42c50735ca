//! Which owner's value a shared device file takes, as pure functions of the
//! entries (docs/design.md, "Co-owners"). Two attachments on one device port
//! (which a VF normally never has) share the device's TRUE original: the
//! second ADD records the first owner's original instead of the first
//! owner's value; a release while another LIVE owner remains hands the file
//! to the newest live owner's value. A dead owner (its pod gone without DEL)
//! is never an heir: the orphan repair releases it later, finding the file no
//! longer holds its value.

use crate::state::{Entry, Owned};

/// The co-owner whose original of `key` a new owner records: the first
/// recorded (oldest, then by container ID for a tie), whose original is the
/// device's own. `None`: no co-owner owns `key`, the live value is the original.
pub fn first_owner<'a>(key: &str, co_owners: &'a [Entry]) -> Option<(&'a Entry, Owned)> {
    co_owners
        .iter()
        .filter_map(|e| e.owned.get(key).map(|o| (e, *o)))
        .min_by(|(a, _), (b, _)| {
            (a.created_ns, &a.container_id).cmp(&(b.created_ns, &b.container_id))
        })
}

/// Who inherits `key` when an owner leaves: the newest of the LIVE co-owners
/// that own it (the caller has dropped the dead ones). `None`: the original
/// goes back.
pub fn heir<'a>(key: &str, live_co_owners: &'a [Entry]) -> Option<(&'a Entry, Owned)> {
    live_co_owners
        .iter()
        .filter_map(|e| e.owned.get(key).map(|o| (e, *o)))
        .max_by(|(a, _), (b, _)| {
            (a.created_ns, &a.container_id).cmp(&(b.created_ns, &b.container_id))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdma::reach::Reach;

    fn owner(cid: &str, created_ns: u64, class: Option<(Option<u32>, u32)>) -> Entry {
        Entry {
            version: crate::state::FORMAT,
            network: "rail".into(),
            container_id: cid.into(),
            ifname: "net1".into(),
            netns: "/var/run/netns/p".into(),
            netns_id: None,
            reach: Reach::Host,
            device: "mlx5_2".into(),
            port: 1,
            pci: Some("0000:0c:00.2".into()),
            guid: None,
            owned: class
                .map(|(original, written)| {
                    ("trafficClass".to_string(), Owned { original, written })
                })
                .into_iter()
                .collect(),
            device_info: None,
            pod: None,
            placement: None,
            gid: None,
            rail: None,
            created_ns,
        }
    }

    #[test]
    fn the_first_recorded_owner_holds_the_true_original() {
        let co = [
            owner("b", 20, Some((Some(41), 50))),
            owner("a", 10, Some((None, 41))),
            owner("c", 5, None),
        ];
        let (first, o) = first_owner("trafficClass", &co).unwrap();
        assert_eq!((first.container_id.as_str(), o.original), ("a", None));
        assert!(
            first_owner("rdmaCmTos", &co).is_none(),
            "nobody owns the ToS"
        );
        // A tie in time goes to the smaller container ID, the same on every node.
        let tie = [
            owner("y", 10, Some((Some(7), 1))),
            owner("x", 10, Some((Some(8), 2))),
        ];
        assert_eq!(
            first_owner("trafficClass", &tie).unwrap().0.container_id,
            "x"
        );
        assert!(first_owner("trafficClass", &[]).is_none());
    }

    #[test]
    fn the_newest_live_owner_inherits() {
        let live = [
            owner("a", 10, Some((None, 41))),
            owner("b", 30, Some((None, 50))),
            owner("c", 40, None),
        ];
        let (h, o) = heir("trafficClass", &live).unwrap();
        assert_eq!(
            (h.container_id.as_str(), o.written),
            ("b", 50),
            "c owns no class"
        );
        assert!(
            heir("trafficClass", &live[2..]).is_none(),
            "no owner: the original goes back"
        );
    }
}
