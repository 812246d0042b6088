//! Action profiles and selectors (issue 52 item 2): v1model's `action_profile` and
//! `action_selector`, PSA's `ActionProfile` and `ActionSelector`, as a table's implementation.
//! The checker takes them, P4Info lists them as p4c does, the software target runs members,
//! groups (one member picked by BMv2's hash of the `selector` fields) and one-shot action sets,
//! and the kernel back end refuses them by name.

use p4::backends::software::{Indirect, Match, ProfileError, Switch};

/// A v1model ECMP program: `ecmp` matches the EtherType and picks a member of a group by a CRC-16
/// of the IPv4 source and destination; `nexthop` has a plain action profile.
const ECMP: &str = r#"
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_t { bit<32> src; bit<32> dst; }
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata { }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.ipv4); transition accept; }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action to(PortId_t port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    @max_group_size(4) action_selector(HashAlgorithm.crc16, 32w64, 32w16) paths;
    table ecmp {
        key = { hdr.ethernet.ether_type : exact; hdr.ipv4.src : selector; hdr.ipv4.dst : selector; }
        actions = { to; drop; }
        default_action = drop();
        implementation = paths;
    }
    table nexthop {
        key = { hdr.ethernet.dst : exact; }
        actions = { to; NoAction; }
        implementation = action_profile(32w8);
    }
    apply { if (hdr.ethernet.ether_type == 0x0800) { ecmp.apply(); } else { nexthop.apply(); } }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

fn switch(text: &str) -> Switch {
    let (program, checked) = p4::front_end("ecmp.p4", text).unwrap_or_else(|e| panic!("{e}"));
    Switch::new(program, checked).unwrap_or_else(|e| panic!("{e}"))
}

fn frame(ether_type: u16, src: u32, dst: u32) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&ether_type.to_be_bytes());
    f.extend_from_slice(&src.to_be_bytes());
    f.extend_from_slice(&dst.to_be_bytes());
    f
}

fn port_of(sw: &mut Switch, f: &[u8]) -> Option<u32> {
    sw.process(f, 0, 0).ok().and_then(|outs| outs.first().map(|o| o.port))
}

/// CRC-16/ARC, written here from its definition (reflected polynomial 0x8005, init 0): BMv2's
/// `crc16`.
fn crc16_arc(data: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &b in data {
        crc ^= b as u16;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xa001 } else { crc >> 1 };
        }
    }
    crc
}

#[test]
fn a_group_spreads_flows_over_its_members_by_bmv2s_hash_and_keeps_each_flow_on_one() {
    let mut sw = switch(ECMP);
    for (member, port) in [(1, 1), (2, 2), (3, 3)] {
        sw.set_member("I.paths", member, "to", vec![port], true).unwrap();
    }
    sw.set_profile_group("I.paths", 10, vec![(3, 1), (1, 1), (2, 1)], 0, true).unwrap();
    sw.insert_indirect("I.ecmp", vec![Match::Exact(0x0800)], Indirect::Group(10), 0).unwrap();
    let mut seen = [0; 4];
    for flow in 0..64u32 {
        let (src, dst) = (0x0a00_0000 + flow * 7, 0x0b00_0001);
        let f = frame(0x0800, src, dst);
        let port = port_of(&mut sw, &f).expect("forwarded");
        // BMv2: the hash of the selector fields' bytes, modulo the group's size, indexes its
        // members in id order.
        let mut bytes = src.to_be_bytes().to_vec();
        bytes.extend_from_slice(&dst.to_be_bytes());
        assert_eq!(port, [1, 2, 3][crc16_arc(&bytes) as usize % 3], "flow {flow}");
        assert_eq!(port_of(&mut sw, &f), Some(port), "a flow keeps its member");
        seen[port as usize] += 1;
    }
    assert!(seen[1..].iter().all(|&n| n > 5), "every member takes some flows: {seen:?}");
    // Weights: member 3 counts twice.
    sw.set_profile_group("I.paths", 10, vec![(1, 1), (3, 2)], 0, false).unwrap();
    let f = frame(0x0800, 0x0a00_0001, 0x0b00_0001);
    let mut bytes = 0x0a00_0001u32.to_be_bytes().to_vec();
    bytes.extend_from_slice(&0x0b00_0001u32.to_be_bytes());
    assert_eq!(port_of(&mut sw, &f), Some([1, 3, 3][crc16_arc(&bytes) as usize % 3]));
    // An empty group is a miss: the default action (drop).
    sw.set_profile_group("I.paths", 10, vec![], 0, false).unwrap();
    assert_eq!(port_of(&mut sw, &f), None);
}

#[test]
fn members_one_shot_sets_and_the_control_planes_mistakes() {
    let mut sw = switch(ECMP);
    sw.set_member("I.nexthop", 5, "to", vec![4], true).unwrap();
    sw.insert_indirect("I.nexthop", vec![Match::Exact(0)], Indirect::Member(5), 0).unwrap();
    assert_eq!(port_of(&mut sw, &frame(0x86dd, 1, 2)), Some(4));
    sw.set_member("I.nexthop", 5, "to", vec![6], false).unwrap();
    assert_eq!(port_of(&mut sw, &frame(0x86dd, 1, 2)), Some(6), "a member's change reaches its entries");
    let kind = |r: Result<(), ProfileError>| match r {
        Err(ProfileError::NotFound(_)) => "not found",
        Err(ProfileError::Exists(_)) => "exists",
        Err(ProfileError::Full(_)) => "full",
        Err(ProfileError::InUse(_)) => "in use",
        Err(ProfileError::Invalid(_)) => "invalid",
        Ok(()) => "ok",
    };
    assert_eq!(kind(sw.set_member("I.nexthop", 5, "to", vec![1], true)), "exists");
    assert_eq!(kind(sw.set_member("I.nexthop", 6, "to", vec![], true)), "invalid", "data missing");
    assert_eq!(kind(sw.set_member("I.nexthop", 6, "drop", vec![], true)), "invalid", "not the table's action");
    assert_eq!(kind(sw.delete_member("I.nexthop", 5)), "in use", "an entry uses it");
    assert_eq!(kind(sw.insert_indirect("I.nexthop", vec![Match::Exact(1)], Indirect::Member(9), 0)), "not found");
    assert_eq!(kind(sw.insert_indirect("I.nexthop", vec![Match::Exact(1)], Indirect::Group(1), 0)), "invalid");
    assert_eq!(kind(sw.set_profile_group("I.nexthop", 1, vec![(5, 1)], 0, true)), "invalid", "no selector");
    assert!(sw.insert("I.nexthop", vec![Match::Exact(1)], "to", vec![1], 0).is_err(), "entries are members");
    for m in 0..7 {
        sw.set_member("I.nexthop", 100 + m, "NoAction", vec![], true).unwrap();
    }
    assert_eq!(kind(sw.set_member("I.nexthop", 200, "NoAction", vec![], true)), "full", "8 members");
    // The selector: groups past @max_group_size, members a group holds.
    for m in 1..=5 {
        sw.set_member("I.paths", m, "to", vec![m as u128], true).unwrap();
    }
    let all: Vec<(u32, u32)> = (1..=5).map(|m| (m, 1)).collect();
    assert_eq!(kind(sw.set_profile_group("I.paths", 1, all, 0, true)), "full", "5 members past @max_group_size(4)");
    assert_eq!(kind(sw.set_profile_group("I.paths", 1, vec![(1, 2), (2, 3)], 0, true)), "full", "weights 5");
    assert_eq!(kind(sw.set_profile_group("I.paths", 1, vec![(1, 2), (2, 1)], 2, true)), "full", "past its own max");
    assert_eq!(kind(sw.set_profile_group("I.paths", 1, vec![(1, 1)], 8, true)), "invalid", "max past the profile's");
    assert_eq!(kind(sw.set_profile_group("I.paths", 1, vec![(1, 1), (9, 1)], 0, true)), "not found");
    assert_eq!(kind(sw.set_profile_group("I.paths", 1, vec![(1, 0)], 0, true)), "invalid", "weight 0");
    sw.set_profile_group("I.paths", 1, vec![(1, 1), (2, 1)], 0, true).unwrap();
    assert_eq!(kind(sw.delete_member("I.paths", 2)), "in use", "a group holds it");
    sw.insert_indirect("I.ecmp", vec![Match::Exact(0x0800)], Indirect::Group(1), 0).unwrap();
    assert_eq!(kind(sw.delete_profile_group("I.paths", 1)), "in use");
    // A one-shot set replaces the group in the entry; then the group may go.
    let set = Indirect::ActionSet(vec![("to".into(), vec![7], 1)]);
    sw.insert_indirect("I.ecmp", vec![Match::Exact(0x0800)], set, 0).unwrap();
    assert_eq!(port_of(&mut sw, &frame(0x0800, 1, 2)), Some(7));
    assert_eq!(kind(sw.delete_profile_group("I.paths", 1)), "ok");
    assert_eq!(kind(sw.delete_member("I.paths", 2)), "ok");
}

#[test]
fn p4info_lists_profiles_and_tables_their_implementation_as_p4c_does() {
    let sw = switch(ECMP);
    let info = sw.info();
    let table = |name: &str| info.tables.iter().find(|t| t.preamble.name == name).unwrap().clone();
    let (ecmp, nexthop) = (table("I.ecmp"), table("I.nexthop"));
    let keys: Vec<&str> = ecmp.keys.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(keys, ["hdr.ethernet.ether_type"], "selector fields are not match fields");
    let paths = info.action_profile(ecmp.implementation.unwrap()).unwrap();
    assert_eq!(paths.preamble.name, "I.paths");
    assert_eq!(paths.preamble.id >> 24, 0x11);
    assert_eq!(
        (paths.table_ids.as_slice(), paths.with_selector, paths.size, paths.max_group_size),
        (&[ecmp.preamble.id][..], true, 64, 4)
    );
    let own = info.action_profile(nexthop.implementation.unwrap()).unwrap();
    assert_eq!((own.preamble.name.as_str(), own.with_selector, own.size), ("I.nexthop", false, 8));
    assert_eq!(info.action_profiles.len(), 2);
}

#[test]
fn psas_action_selector_runs_as_v1models() {
    let text = r#"
#include <core.p4>
#include <psa.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers { ethernet_t ethernet; }
struct empty_t { }
parser IP(packet_in pkt, out headers hdr, inout empty_t m, in psa_ingress_parser_input_metadata_t i,
          in empty_t r, in empty_t c) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}
control IC(inout headers hdr, inout empty_t m, in psa_ingress_input_metadata_t i,
           inout psa_ingress_output_metadata_t o) {
    ActionSelector(PSA_HashAlgorithm_t.CRC16, 32w16, 32w16) sel;
    action to(PortId_t port) { send_to_port(o, port); }
    table t {
        key = { hdr.ethernet.dst : exact; hdr.ethernet.src : selector; }
        actions = { to; }
        psa_implementation = sel;
    }
    apply { t.apply(); }
}
control ID(packet_out pkt, out empty_t c, out empty_t r, out empty_t n, inout headers hdr, in empty_t m,
           in psa_ingress_output_metadata_t o) { apply { pkt.emit(hdr.ethernet); } }
parser EP(packet_in pkt, out empty_t hdr, inout empty_t m, in psa_egress_parser_input_metadata_t i,
          in empty_t n, in empty_t c, in empty_t r) { state start { transition accept; } }
control EC(inout empty_t hdr, inout empty_t m, in psa_egress_input_metadata_t i,
           inout psa_egress_output_metadata_t o) { apply { } }
control ED(packet_out pkt, out empty_t c, out empty_t r, inout empty_t hdr, in empty_t m,
           in psa_egress_output_metadata_t o, in psa_egress_deparser_input_metadata_t d) { apply { } }
IngressPipeline(IP(), IC(), ID()) ip;
EgressPipeline(EP(), EC(), ED()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
"#;
    let mut sw = switch(text);
    sw.set_member("IC.sel", 1, "to", vec![1], true).unwrap();
    sw.set_member("IC.sel", 2, "to", vec![2], true).unwrap();
    sw.set_profile_group("IC.sel", 1, vec![(1, 1), (2, 1)], 0, true).unwrap();
    sw.insert_indirect("IC.t", vec![Match::Exact(0xffff_ffff_ffff)], Indirect::Group(1), 0).unwrap();
    for src in 0..16u64 {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&src.to_be_bytes()[2..]);
        f.extend_from_slice(&[0x88, 0xb5]);
        let want = [1, 2][crc16_arc(&src.to_be_bytes()[2..]) as usize % 2];
        assert_eq!(port_of(&mut sw, &f), Some(want), "source {src}");
    }
}

#[test]
fn the_checker_takes_selectors_only_where_a_table_has_one_and_the_kernel_refuses_them() {
    let without = ECMP.replace("implementation = paths;", "");
    let e = p4::front_end("ecmp.p4", &without).unwrap_err();
    assert!(e.contains("a 'selector' key picks among a group's members: table 'ecmp' has no action selector"), "{e}");
    let counter = ECMP.replace("implementation = paths;", "implementation = 5;");
    let e = p4::front_end("ecmp.p4", &counter).unwrap_err();
    assert!(e.contains("an implementation is an action profile or selector"), "{e}");
    // Refused by name and line, at the table that has it: a selector instance, and a profile
    // constructed in a table.
    let (p, c) = p4::front_end("ecmp.p4", ECMP).unwrap();
    let e = p4::backends::ebpf::generate_in("ecmp.p4", &p, &c).unwrap_err();
    assert!(e.starts_with("ecmp.p4:16:") && e.contains("I.ecmp's action profile or selector"), "{e}");
    let inline = ECMP.replace("@max_group_size(4) action_selector(HashAlgorithm.crc16, 32w64, 32w16) paths;", "");
    let inline = inline.replace("= paths;", "= action_selector(HashAlgorithm.crc16, 32w64, 32w16);");
    let (p, c) = p4::front_end("ecmp.p4", &inline).unwrap_or_else(|e| panic!("{e}"));
    let e = p4::backends::ebpf::generate_in("ecmp.p4", &p, &c).unwrap_err();
    assert!(e.starts_with("ecmp.p4:16:"), "{e}");
    assert!(e.contains("action profile or selector (implementation = ...) does not fit the kernel back end"), "{e}");
}

#[test]
fn annotations_on_the_property_name_and_bound_a_profile_made_in_place_as_p4c_reads_them() {
    let text = ECMP
        .replace("@max_group_size(4) action_selector(HashAlgorithm.crc16, 32w64, 32w16) paths;", "")
        .replace(
        "implementation = paths;",
        "@name(\"ecmp_paths\") @max_group_size(2) implementation = action_selector(HashAlgorithm.crc16, 32w64, 32w16);",
    );
    let mut sw = switch(&text);
    let info = sw.info();
    let ecmp = info.tables.iter().find(|t| t.preamble.name == "I.ecmp").unwrap();
    let p = info.action_profile(ecmp.implementation.unwrap()).unwrap();
    assert_eq!((p.preamble.name.as_str(), p.with_selector, p.size, p.max_group_size), ("ecmp_paths", true, 64, 2));
    for m in 1..=3 {
        sw.set_member("I.ecmp", m, "to", vec![m as u128], true).unwrap();
    }
    let three = sw.set_profile_group("I.ecmp", 1, vec![(1, 1), (2, 1), (3, 1)], 0, true);
    assert!(matches!(three, Err(ProfileError::Full(_))), "{three:?}");
    sw.set_profile_group("I.ecmp", 1, vec![(1, 1), (2, 1)], 0, true).unwrap();
}
