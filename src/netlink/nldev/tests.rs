//! The nldev codec against messages written out by hand and captured from
//! the kernel lane.

use super::socket::*;
use super::*;
use crate::wire::unhex;
use nix::errno::Errno;
use std::io;

// Fixtures are written out by hand, following the kernel's layout, not
// produced by the encoder under test:
// - `struct nlmsghdr` (include/uapi/linux/netlink.h): u32 nlmsg_len
//   (header included, padding of the last attribute included), u16
//   nlmsg_type, u16 nlmsg_flags, u32 nlmsg_seq, u32 nlmsg_pid; host order.
// - `struct nlattr`: u16 nla_len (header + value, no padding), u16
//   nla_type, the value, zero padding to 4 bytes (NLA_ALIGN).
// - nldev puts attributes right after the header (no family header).

const SEQ: u32 = 0x0102_0304;
const MULTI: u16 = 0x2; // NLM_F_MULTI
const GET_T: [u8; 2] = [0x01, 0x14]; // (5 << 10) + 1 = 0x1401, little-endian
const PORT_GET_T: [u8; 2] = [0x05, 0x14]; // 0x1405
const SYS_GET_T: [u8; 2] = [0x06, 0x14]; // 0x1406

/// A header with an explicit nlmsg_len, so tests can lie about it.
fn hdr(len: u32, ty: [u8; 2], flags: u16, seq: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(len.to_ne_bytes());
    b.extend(ty);
    b.extend(flags.to_ne_bytes());
    b.extend(seq.to_ne_bytes());
    b.extend(0x0000_1234u32.to_ne_bytes()); // nlmsg_pid: our port id
    b
}

/// A well-formed message: header with the right nlmsg_len, then `body`.
fn msg(ty: [u8; 2], flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let mut b = hdr(16 + body.len() as u32, ty, flags, seq);
    b.extend(body);
    b
}

/// One attribute: nla_len = 4 + value length, then padding to 4.
fn nla(ty: u16, value: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend((4 + value.len() as u16).to_ne_bytes());
    b.extend(ty.to_ne_bytes());
    b.extend(value);
    while b.len() % 4 != 0 {
        b.push(0);
    }
    b
}

fn u32a(ty: u16, v: u32) -> Vec<u8> {
    nla(ty, &v.to_ne_bytes())
}

/// nla_put_string: the string and its NUL.
fn stra(ty: u16, s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    nla(ty, &v)
}

/// NLMSG_DONE (type 3) with the dump's errno, as `netlink_dump_done` sends it.
fn done(seq: u32, errno: i32) -> Vec<u8> {
    msg([3, 0], MULTI, seq, &(-errno).to_ne_bytes())
}

/// NLMSG_ERROR (type 2): -errno, then the request's header echoed.
fn nlerr(seq: u32, errno: i32) -> Vec<u8> {
    let mut body = (-errno).to_ne_bytes().to_vec();
    body.extend(hdr(16, PORT_GET_T, 0x301, seq));
    msg([2, 0], 0, seq, &body)
}

/// `fill_port_info` for rxe0 port 1 on net1 (ifindex 3), seen from the
/// pod netns: handle, PORT_INDEX, CAP_FLAGS (u64, attr 4, not decoded:
/// rxe is RoCE, so no IB-only LID attributes), PORT_STATE 4 (ACTIVE),
/// PHYS_STATE 5 (LinkUp), NDEV_INDEX, NDEV_NAME.
fn rxe_port_body(with_netdev: bool) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(u32a(1, 1)); // DEV_INDEX
    b.extend(stra(2, "rxe0")); // DEV_NAME: 5 bytes + 3 padding
    b.extend(u32a(3, 1)); // PORT_INDEX
    b.extend(nla(4, &0x0001_0000u64.to_ne_bytes())); // CAP_FLAGS
    b.extend(nla(12, &[4])); // PORT_STATE
    b.extend(nla(13, &[5])); // PORT_PHYS_STATE
    if with_netdev {
        b.extend(u32a(50, 3)); // NDEV_INDEX
        b.extend(stra(51, "net1")); // NDEV_NAME
    }
    b
}

fn rxe_port(with_netdev: bool) -> Port {
    Port {
        dev_index: 1,
        dev_name: Name::Valid("rxe0".into()),
        port: 1,
        state: Some(4),
        phys_state: Some(5),
        ndev_index: with_netdev.then_some(3),
        ndev_name: with_netdev.then(|| Name::Valid("net1".into())),
    }
}

/// `fill_dev_info` for a device: handle, PORT_INDEX (number of ports),
/// CAP_FLAGS, NODE_GUID, SYS_IMAGE_GUID, NODE_TYPE, DEV_DIM (84),
/// DEV_PROTOCOL; all u64 without PAD, as on x86 (efficient unaligned access).
fn device_body(index: u32, name: &str, guid: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(u32a(1, index));
    b.extend(stra(2, name));
    b.extend(u32a(3, 1));
    b.extend(nla(4, &0u64.to_ne_bytes()));
    b.extend(nla(6, &guid.to_ne_bytes()));
    b.extend(nla(7, &guid.to_ne_bytes()));
    b.extend(nla(14, &[1])); // DEV_NODE_TYPE: RDMA_NODE_IB_CA
    b.extend(nla(84, &[0])); // DEV_DIM
    b.extend(stra(67, "roce"));
    b
}

fn device(index: u32, name: &str, guid: u64) -> Device {
    Device {
        index,
        name: Name::Valid(name.into()),
        ports: Some(1),
        node_guid: Some(guid),
        protocol: Some(Name::Valid("roce".into())),
        parent: None,
    }
}

// Datagrams captured from Debian 12's kernel 6.1.0-57-amd64 under qemu:
// rxe0 on net1, created inside netns "pod" (`rdma link add rxe0 type rxe
// netdev net1`), shared mode; one line per recv().
const REAL_GET: &str = "6c000000011402000b00000010010000080001000000000009000200727865300000000008000300010000000c000400763c2201000000000c000600d249bafeff1b28940c000700d249bafeff1b289405000e0001000000050054000000000009004300726f636500000000";
const REAL_GET_DONE: &str = "14000000030002000b0000001001000000000000";
const REAL_PORT_POD: &str = "50000000051402000c000000100100000800010000000000090002007278653000000000080003000100000005000c000400000005000d00050000000800320002000000090033006e65743100000000";
const REAL_PORT_HOST: &str = "3c000000051402000c000000110100000800010000000000090002007278653000000000080003000100000005000c000400000005000d0005000000";
const REAL_PORT_DONE: &str = "14000000030002000c0000001001000000000000";
const REAL_PORT_999: &str = "14000000030002000d00000010010000eaffffff";
const REAL_SYS: &str =
    "28000000061400000e000000100100000500420001000000050060000000000005005d0001000000";
const REAL_SYS_ACK: &str =
    "24000000020000010e000000100100000000000010000000061405000e00000000000000";

#[test]
fn real_kernel_answers_decode() {
    let mut ex = Exchange::new(Request::Devices, 11);
    assert!(!ex.feed(&unhex(REAL_GET)).unwrap());
    assert!(ex.feed(&unhex(REAL_GET_DONE)).unwrap());
    assert_eq!(
        ex.into_replies(),
        vec![Reply::Device(Device {
            index: 0,
            name: Name::Valid("rxe0".into()),
            ports: Some(1),
            // `rdma dev show`: node_guid 9428:1bff:feba:49d2
            node_guid: Some(0x9428_1bff_feba_49d2),
            protocol: Some(Name::Valid("roce".into())),
            parent: None,
        })]
    );

    // In the pod: net1 is ifindex 2 there (`rdma -j link show`:
    // "netdev":"net1","netdev_index":2). From the host: no netdev.
    for (bytes, netdev) in [(REAL_PORT_POD, true), (REAL_PORT_HOST, false)] {
        let mut ex = Exchange::new(Request::Ports { dev_index: 0 }, 12);
        assert!(!ex.feed(&unhex(bytes)).unwrap());
        assert!(ex.feed(&unhex(REAL_PORT_DONE)).unwrap());
        let want = Port {
            dev_index: 0,
            ndev_index: netdev.then_some(2),
            ..rxe_port(netdev)
        };
        assert_eq!(ex.into_replies(), vec![Reply::Port(want)]);
    }

    // A port dump of an index this netns cannot see: NLMSG_DONE carrying
    // -EINVAL, not an NLMSG_ERROR.
    let mut ex = Exchange::new(Request::Ports { dev_index: 999 }, 13);
    let e = ex.feed(&unhex(REAL_PORT_999)).unwrap_err();
    assert!(matches!(e, Error::Kernel { errno: 22, .. }), "{e:?}");

    // SYS_GET: NETNS_MODE 1, PRIVILEGED_QKEY_MODE 0, COPY_ON_FORK 1; then
    // the ACK (flags NLM_F_CAPPED, our header echoed), in a second recv.
    let mut ex = Exchange::new(Request::System, 14);
    assert!(!ex.feed(&unhex(REAL_SYS)).unwrap());
    assert!(ex.feed(&unhex(REAL_SYS_ACK)).unwrap());
    assert_eq!(
        ex.into_replies(),
        vec![Reply::System(System {
            netns_mode: Some(NetnsMode::Shared)
        })]
    );
}

#[test]
fn type_is_client_shifted_by_ten() {
    assert_eq!(nl_type(cmd::GET), 0x1401);
    assert_eq!(nl_type(cmd::PORT_GET), 0x1405);
    assert_eq!(nl_type(cmd::SYS_GET), 0x1406);
    assert_eq!(split_type(0x1405), (5, 5));
}

#[test]
fn requests_match_the_kernel_layout() {
    // PORT_GET dump of device 1: 16-byte header + DEV_INDEX (8 bytes).
    let mut want = hdr(24, PORT_GET_T, 0x301, 7); // REQUEST | DUMP (ROOT|MATCH)
    want[12..16].copy_from_slice(&[0; 4]); // nlmsg_pid 0: the kernel fills it
    want.extend([8, 0, 1, 0, 1, 0, 0, 0]);
    assert_eq!(encode_request(Request::Ports { dev_index: 1 }, 7), want);

    let mut want = hdr(16, GET_T, 0x301, 8);
    want[12..16].copy_from_slice(&[0; 4]);
    assert_eq!(encode_request(Request::Devices, 8), want);

    let mut want = hdr(16, SYS_GET_T, 0x5, 9); // REQUEST | ACK
    want[12..16].copy_from_slice(&[0; 4]);
    assert_eq!(encode_request(Request::System, 9), want);
}

#[test]
fn rxe_port_in_the_pod_netns() {
    let mut buf = msg(PORT_GET_T, MULTI, SEQ, &rxe_port_body(true));
    buf.extend(done(SEQ, 0));
    let b = decode_replies(&buf, SEQ).unwrap();
    assert_eq!(b.replies, vec![Reply::Port(rxe_port(true))]);
    assert_eq!(b.end, Some(End::Done));
    assert_eq!(b.messages, 2);
    // The encoder lays the same reply out as this fixture, minus the
    // attributes it does not know (CAP_FLAGS).
    let again = decode_replies(&encode_batch(&b, SEQ), SEQ).unwrap();
    assert_eq!(again.replies, b.replies);
    assert_eq!(again.end, b.end);
}

#[test]
fn rxe_port_from_the_host_has_no_netdev() {
    let mut buf = msg(PORT_GET_T, MULTI, SEQ, &rxe_port_body(false));
    buf.extend(done(SEQ, 0));
    let b = decode_replies(&buf, SEQ).unwrap();
    assert_eq!(b.replies, vec![Reply::Port(rxe_port(false))]);
    let ports = [rxe_port(false)];
    assert_eq!(port_for_netdev(&ports, 3, "net1"), PortMatch::None);
}

#[test]
fn two_devices_in_one_buffer() {
    let mut buf = msg(GET_T, MULTI, SEQ, &device_body(1, "mlx5_2", 0x1122));
    buf.extend(msg(GET_T, MULTI, SEQ, &device_body(2, "mlx5_3", 0x3344)));
    buf.extend(done(SEQ, 0));
    let mut ex = Exchange::new(Request::Devices, SEQ);
    assert!(ex.feed(&buf).unwrap());
    assert_eq!(
        ex.into_replies(),
        vec![
            Reply::Device(device(1, "mlx5_2", 0x1122)),
            Reply::Device(device(2, "mlx5_3", 0x3344)),
        ]
    );
}

#[test]
fn a_dump_split_across_recvs() {
    // What ib_enum_all_devs does: one device per skb, then DONE alone.
    let parts = [
        msg(GET_T, MULTI, SEQ, &device_body(1, "rxe0", 1)),
        msg(GET_T, MULTI, SEQ, &device_body(2, "rxe1", 2)),
        done(SEQ, 0),
    ];
    let mut ex = Exchange::new(Request::Devices, SEQ);
    assert!(!ex.feed(&parts[0]).unwrap());
    assert!(!ex.feed(&parts[1]).unwrap());
    assert!(ex.feed(&parts[2]).unwrap());
    let names: Vec<_> = ex
        .into_replies()
        .into_iter()
        .map(|r| match r {
            Reply::Device(d) => d.name.to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(names, ["rxe0", "rxe1"]);
}

#[test]
fn nlmsg_error_eopnotsupp_is_a_typed_errno() {
    let buf = nlerr(SEQ, 95);
    assert_eq!(
        decode_replies(&buf, SEQ).unwrap().end,
        Some(End::Failed(95))
    );
    let mut ex = Exchange::new(Request::Ports { dev_index: 1 }, SEQ);
    let e = ex.feed(&buf).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EOPNOTSUPP as i32));
    assert_eq!(e.kind(), io::ErrorKind::Unsupported);
    assert!(!e.is_unavailable());
    assert!(matches!(e, Error::Kernel { errno: 95, .. }), "{e:?}");
    assert!(e.to_string().contains("errno 95"), "{e}");
}

#[test]
fn a_failed_dump_ends_with_done_carrying_the_errno() {
    // nldev_port_get_dumpit without a known DEV_INDEX returns -EINVAL;
    // netlink_dump_done puts it in the DONE message.
    let mut ex = Exchange::new(Request::Ports { dev_index: 99 }, SEQ);
    let e = ex.feed(&done(SEQ, 22)).unwrap_err();
    assert!(matches!(e, Error::Kernel { errno: 22, .. }), "{e:?}");
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn a_done_without_its_int_still_ends_the_dump() {
    let buf = msg([3, 0], MULTI, SEQ, &[]);
    assert_eq!(decode_replies(&buf, SEQ).unwrap().end, Some(End::Done));
}

#[test]
fn a_truncated_attribute_is_an_error() {
    // DEV_INDEX complete, then an NDEV_NAME header saying 12 bytes with
    // only 6 left in the message.
    let mut body = u32a(1, 1);
    body.extend([12, 0, 51, 0, b'n', b'e']);
    let buf = msg(PORT_GET_T, MULTI, SEQ, &body);
    assert_eq!(
        decode_replies(&buf, SEQ),
        Err(DecodeError::BadAttribute { offset: 24 })
    );
    // An attribute header cut in half.
    let mut body = u32a(1, 1);
    body.extend([8, 0]);
    let buf = msg(PORT_GET_T, MULTI, SEQ, &body);
    assert_eq!(
        decode_replies(&buf, SEQ),
        Err(DecodeError::BadAttribute { offset: 24 })
    );
}

#[test]
fn a_message_length_past_the_buffer_is_an_error() {
    let mut buf = hdr(64, PORT_GET_T, MULTI, SEQ);
    buf.extend(u32a(1, 1));
    assert_eq!(
        decode_replies(&buf, SEQ),
        Err(DecodeError::BadMessageLength {
            offset: 0,
            len: 64,
            have: 24
        })
    );
}

#[test]
fn a_zero_length_header_is_an_error_not_a_loop() {
    let mut buf = msg(GET_T, MULTI, SEQ, &device_body(1, "rxe0", 1));
    let second = buf.len();
    buf.extend(hdr(0, GET_T, MULTI, SEQ));
    assert_eq!(
        decode_replies(&buf, SEQ),
        Err(DecodeError::BadMessageLength {
            offset: second,
            len: 0,
            have: 16
        })
    );
    // Below the header size, too.
    let buf = hdr(8, GET_T, MULTI, SEQ);
    assert!(matches!(
        decode_replies(&buf, SEQ),
        Err(DecodeError::BadMessageLength { len: 8, .. })
    ));
    // And fewer bytes than a header.
    assert_eq!(
        decode_replies(&buf[..10], SEQ),
        Err(DecodeError::ShortHeader {
            offset: 0,
            have: 10
        })
    );
}

#[test]
fn unknown_and_nested_attributes_are_skipped() {
    let mut body = Vec::new();
    body.extend(nla(0, &[0; 4])); // RDMA_NLDEV_ATTR_PAD before a u64
    body.extend(u32a(1, 7));
    body.extend(stra(2, "mlx5_0"));
    body.extend(nla(300, b"from a kernel newer than us"));
    // RES_SUMMARY (15) with NLA_F_NESTED, holding one RES_SUMMARY_ENTRY
    // (16) with ENTRY_NAME (17) "qp" and ENTRY_CURR (18) u64 = 2; an
    // ENTRY_NAME inside must not be read as anything of ours.
    let mut entry = stra(17, "qp");
    entry.extend(nla(18, &2u64.to_ne_bytes()));
    let summary = nla(16 | 0x8000, &entry);
    body.extend(nla(15 | 0x8000, &summary));
    // Known attribute after the nest: still read.
    body.extend(u32a(3, 2));
    let mut buf = msg(GET_T, MULTI, SEQ, &body);
    buf.extend(done(SEQ, 0));
    let b = decode_replies(&buf, SEQ).unwrap();
    assert_eq!(
        b.replies,
        vec![Reply::Device(Device {
            index: 7,
            name: Name::Valid("mlx5_0".into()),
            ports: Some(2),
            node_guid: None,
            protocol: None,
            parent: None,
        })]
    );
}

#[test]
fn another_requests_messages_are_skipped() {
    // A late answer to an earlier request (seq - 1) before ours.
    let mut buf = msg(GET_T, MULTI, SEQ - 1, &device_body(9, "old0", 9));
    buf.extend(done(SEQ - 1, 0));
    buf.extend(msg(GET_T, MULTI, SEQ, &device_body(1, "rxe0", 1)));
    buf.extend(done(SEQ, 0));
    let b = decode_replies(&buf, SEQ).unwrap();
    assert_eq!(b.replies, vec![Reply::Device(device(1, "rxe0", 1))]);
    assert_eq!(b.end, Some(End::Done));
    assert_eq!(b.messages, 4);
}

#[test]
fn wrong_sizes_and_missing_attributes_are_errors() {
    let body = [nla(1, &[1, 0]), stra(2, "rxe0")].concat();
    assert_eq!(
        decode_replies(&msg(GET_T, MULTI, SEQ, &body), SEQ),
        Err(DecodeError::AttributeSize { attr: 1, len: 2 })
    );
    let body = u32a(1, 1);
    assert_eq!(
        decode_replies(&msg(GET_T, MULTI, SEQ, &body), SEQ),
        Err(DecodeError::MissingAttribute { op: 1, attr: 2 })
    );
    let body = [u32a(1, 1), stra(2, "rxe0")].concat();
    assert_eq!(
        decode_replies(&msg(PORT_GET_T, MULTI, SEQ, &body), SEQ),
        Err(DecodeError::MissingAttribute { op: 5, attr: 3 })
    );
    // A type of another client (RDMA_NL_LS = 4) or command (RES_GET = 9).
    for ty in [[0x00, 0x10], [0x09, 0x14]] {
        let kind = u16::from_le_bytes(ty);
        assert_eq!(
            decode_replies(&msg(ty, MULTI, SEQ, &body), SEQ),
            Err(DecodeError::UnexpectedType { kind })
        );
    }
    // NLMSG_ERROR with no room for the errno.
    assert_eq!(
        decode_replies(&msg([2, 0], 0, SEQ, &[0, 0]), SEQ),
        Err(DecodeError::ShortError { offset: 0 })
    );
    // NLMSG_OVERRUN.
    assert_eq!(
        decode_replies(&msg([4, 0], 0, SEQ, &[]), SEQ),
        Err(DecodeError::Overrun)
    );
}

#[test]
fn names_that_are_not_device_names_are_kept_as_lengths() {
    let body = [u32a(1, 1), stra(2, "evil\n\x1b[31m"), u32a(3, 1)].concat();
    let b = decode_replies(&msg(PORT_GET_T, MULTI, SEQ, &body), SEQ).unwrap();
    let Reply::Port(p) = &b.replies[0] else {
        panic!("{:?}", b.replies)
    };
    assert_eq!(p.dev_name, Name::Invalid { len: 10 });
    assert_eq!(
        p.to_string(),
        "a name of 10 bytes that is not a device name port 1 (no netdev in this netns)"
    );
    // Not UTF-8, too long, empty, "..": all invalid.
    assert_eq!(Name::parse(&[0xff, 0xfe, 0]), Name::Invalid { len: 2 });
    assert_eq!(Name::parse(&[b'a'; 65]), Name::Invalid { len: 65 });
    assert_eq!(Name::parse(&[0]), Name::Invalid { len: 0 });
    assert_eq!(Name::parse(b"..\0"), Name::Invalid { len: 2 });
    // Bytes after the NUL are not part of the name; no NUL at all is accepted.
    assert_eq!(Name::parse(b"rxe0\0junk"), Name::Valid("rxe0".into()));
    assert_eq!(
        Name::parse(b"mlx5_core.sf.2"),
        Name::Valid("mlx5_core.sf.2".into())
    );
}

#[test]
fn system_reports_the_netns_mode() {
    // nldev_sys_get_doit: NETNS_MODE, PRIVILEGED_QKEY_MODE (96, newer
    // kernels), COPY_ON_FORK (93); then the ACK we asked for.
    let body = [nla(66, &[1]), nla(96, &[0]), nla(93, &[1])].concat();
    let mut buf = msg(SYS_GET_T, 0, SEQ, &body);
    buf.extend(nlerr(SEQ, 0));
    let mut ex = Exchange::new(Request::System, SEQ);
    assert!(ex.feed(&buf).unwrap());
    assert_eq!(
        ex.into_replies(),
        vec![Reply::System(System {
            netns_mode: Some(NetnsMode::Shared)
        })]
    );
    let b = decode_replies(&msg(SYS_GET_T, 0, SEQ, &nla(66, &[0])), SEQ).unwrap();
    assert_eq!(
        b.replies,
        vec![Reply::System(System {
            netns_mode: Some(NetnsMode::Exclusive)
        })]
    );
    assert_eq!(b.end, None);
    assert_eq!(
        decode_replies(&msg(SYS_GET_T, 0, SEQ, &nla(66, &[2])), SEQ),
        Err(DecodeError::BadNetnsMode(2))
    );
}

#[test]
fn a_reply_of_another_command_is_refused() {
    let mut buf = msg(GET_T, MULTI, SEQ, &device_body(1, "rxe0", 1));
    buf.extend(done(SEQ, 0));
    let mut ex = Exchange::new(Request::Ports { dev_index: 1 }, SEQ);
    let e = ex.feed(&buf).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Decode {
                err: DecodeError::WrongReply { asked: 5, got: 1 },
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn an_endless_answer_is_cut_off() {
    // NLMSG_NOOPs of our seq never end an answer; the bound does.
    let noop = msg([1, 0], 0, SEQ, &[]);
    let buf: Vec<u8> = noop.repeat(1024);
    let mut ex = Exchange::new(Request::Devices, SEQ);
    let mut fed = 0;
    let err = loop {
        match ex.feed(&buf) {
            Ok(false) => fed += 1,
            Ok(true) => panic!("NOOPs ended the answer"),
            Err(e) => break e,
        }
    };
    assert_eq!(fed, MAX_MESSAGES / 1024);
    assert!(matches!(
        err,
        Error::Decode {
            err: DecodeError::TooManyMessages,
            ..
        }
    ));
    // Empty datagrams count too.
    let mut ex = Exchange::new(Request::Devices, SEQ);
    assert!((0..=MAX_MESSAGES).any(|_| ex.feed(&[]).is_err()));
}

#[test]
fn encoded_batches_decode_to_the_same_values() {
    let batch = Batch {
        replies: vec![
            Reply::Port(rxe_port(true)),
            Reply::Port(Port {
                dev_name: Name::Invalid { len: 3 },
                ndev_name: Some(Name::Invalid { len: 0 }),
                ..rxe_port(true)
            }),
        ],
        end: Some(End::Failed(95)),
        messages: 3,
    };
    assert_eq!(decode_replies(&encode_batch(&batch, 5), 5).unwrap(), batch);
    let batch = Batch {
        replies: vec![Reply::Device(Device {
            parent: Some(Name::Valid("mlx5_0".into())),
            ..device(4, "smi0", u64::MAX)
        })],
        end: Some(End::Done),
        messages: 2,
    };
    assert_eq!(decode_replies(&encode_batch(&batch, 5), 5).unwrap(), batch);
}

#[test]
fn the_port_is_the_one_whose_netdev_has_both_index_and_name() {
    let ours = rxe_port(true);
    let other = Port {
        dev_index: 2,
        dev_name: Name::Valid("rxe1".into()),
        ndev_index: Some(4),
        ndev_name: Some(Name::Valid("net2".into())),
        ..rxe_port(true)
    };
    let host_view = Port {
        dev_index: 3,
        dev_name: Name::Valid("mlx5_0".into()),
        ..rxe_port(false)
    };
    let ports = [host_view.clone(), other.clone(), ours.clone()];
    assert_eq!(
        port_for_netdev(&ports, 3, "net1"),
        PortMatch::One(&ports[2])
    );
    assert_eq!(
        port_for_netdev(&ports, 4, "net2"),
        PortMatch::One(&ports[1])
    );
    // Index right, name wrong (renamed, or another netns's index): none.
    assert_eq!(port_for_netdev(&ports, 3, "net2"), PortMatch::None);
    assert_eq!(port_for_netdev(&ports, 9, "net1"), PortMatch::None);
    assert_eq!(port_for_netdev(&[], 3, "net1"), PortMatch::None);
    // A name that is not a device name never matches, even by length.
    let odd = Port {
        ndev_name: Some(Name::Invalid { len: 4 }),
        ..ours.clone()
    };
    assert_eq!(port_for_netdev(&[odd], 3, "net1"), PortMatch::None);
    // Two devices on one netdev (a bond's LAG device and a leftover).
    let twin = Port {
        dev_index: 5,
        dev_name: Name::Valid("mlx5_bond_0".into()),
        ..ours.clone()
    };
    let ports = [ours, twin];
    assert_eq!(
        port_for_netdev(&ports, 3, "net1"),
        PortMatch::Ambiguous(vec![&ports[0], &ports[1]])
    );
}

#[test]
fn open_is_unavailable_without_ib_core_or_answers() {
    // This machine's kernel may or may not have ib_core: either the socket
    // is refused as "unavailable", or it opens and answers a device dump.
    match RdmaNetlink::open() {
        Err(e) => assert!(
            e.is_unavailable() && e.errno() == Some(Errno::EPROTONOSUPPORT as i32),
            "{e:?}"
        ),
        Ok(mut nl) => match nl.devices() {
            Ok(_) => {}
            Err(e) => assert!(e.is_unavailable(), "{e:?}"),
        },
    }
}
