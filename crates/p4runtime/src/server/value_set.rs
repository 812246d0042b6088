//! Value set entries (P4Runtime 9.7): a parser's `value_set` members, written as a whole with
//! MODIFY (INSERT and DELETE are not how members change, so they are INVALID_ARGUMENT) and read
//! back as written.

use p4::backends::software::Switch;
use p4::info::{Info, ValueSetInfo};
use tonic::Status;

use super::entity::{key_fields, key_matches};
use crate::proto::p4::v1 as pb;

fn value_set(info: &Info, id: u32) -> Result<&ValueSetInfo, Status> {
    info.value_set(id).ok_or_else(|| Status::not_found(format!("no value set {id:#x}")))
}

/// A write of `e`: its members replace the set's.
pub(super) fn write(sw: &mut Switch, info: &Info, kind: pb::update::Type, e: &pb::ValueSetEntry) -> Result<(), Status> {
    if kind != pb::update::Type::Modify {
        return Err(Status::invalid_argument("a value set's members are written with MODIFY, which replaces them all"));
    }
    let v = value_set(info, e.value_set_id)?;
    if e.members.len() as u64 > v.size {
        return Err(Status::resource_exhausted(format!(
            "{} holds {} members, not {}",
            v.preamble.name,
            v.size,
            e.members.len()
        )));
    }
    let members =
        e.members.iter().map(|m| key_matches(&v.preamble.name, &v.keys, &m.r#match)).collect::<Result<Vec<_>, _>>()?;
    sw.set_value_set(&v.target, members).map_err(Status::invalid_argument)
}

/// The value sets a read asks for (every one for id 0) with their members.
pub(super) fn read(
    sw: &Switch,
    info: &Info,
    want: &pb::ValueSetEntry,
    out: &mut Vec<pb::Entity>,
) -> Result<(), Status> {
    if want.value_set_id != 0 {
        value_set(info, want.value_set_id)?;
    }
    for v in info.value_sets.iter().filter(|v| want.value_set_id == 0 || v.preamble.id == want.value_set_id) {
        let members = sw
            .value_set(&v.target)
            .unwrap_or(&[])
            .iter()
            .map(|m| pb::ValueSetMember { r#match: key_fields(&v.keys, m) })
            .collect();
        out.push(pb::Entity {
            entity: Some(pb::entity::Entity::ValueSetEntry(pb::ValueSetEntry { value_set_id: v.preamble.id, members })),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::read::read_entities;
    use super::super::write::apply_updates;
    use pb::field_match::{Exact, FieldMatchType as F, Ternary};
    use pb::update::Type::{Delete, Insert, Modify};
    use tonic::Code;

    use super::*;

    /// A parser whose value set of (ethertype, low byte of the source) sends a frame to port 2.
    const PROGRAM: &str = r#"
#include <core.p4>
#include <edgeflow.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
struct headers_t { eth_t eth; }
struct meta_t { bit<1> hit; }
struct key_t { bit<16> kind; @match(ternary) bit<8> low; }
parser P(packet_in packet, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<key_t>(2) kinds;
    state start { packet.extract(hdr.eth); transition select(hdr.eth.kind, hdr.eth.src[7:0]) { kinds: hit; default: accept; } }
    state hit { meta.hit = 1; transition accept; }
}
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_port = meta.hit == 1 ? 32w2 : 32w1; }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out packet, in headers_t hdr) { apply { packet.emit(hdr.eth); } }
EdgeflowSwitch(P(), I(), E(), D()) main;
"#;

    fn member(kind: u16, low: Option<(u8, u8)>) -> pb::ValueSetMember {
        let mut r#match = vec![pb::FieldMatch {
            field_id: 1,
            field_match_type: Some(F::Exact(Exact { value: kind.to_be_bytes().to_vec() })),
        }];
        if let Some((value, mask)) = low {
            let t = Ternary { value: vec![value], mask: vec![mask] };
            r#match.push(pb::FieldMatch { field_id: 2, field_match_type: Some(F::Ternary(t)) });
        }
        pb::ValueSetMember { r#match }
    }

    fn write(sw: &mut Switch, kind: pb::update::Type, id: u32, members: Vec<pb::ValueSetMember>) -> Result<(), Code> {
        let e = pb::entity::Entity::ValueSetEntry(pb::ValueSetEntry { value_set_id: id, members });
        let u = pb::Update { r#type: kind as i32, entity: Some(pb::Entity { entity: Some(e) }) };
        apply_updates(sw, &[u]).remove(0).map_err(|s| s.code())
    }

    fn port(sw: &mut Switch, kind: u16, low: u8) -> u32 {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, low];
        f.extend_from_slice(&kind.to_be_bytes());
        f.extend_from_slice(&[0; 46]);
        sw.process(&f, 1, 0).unwrap()[0].port
    }

    #[test]
    fn a_value_set_entry_is_modified_as_a_whole_and_read_back() {
        let (program, checked) = p4::front_end("vs.p4", PROGRAM).unwrap();
        let mut sw = Switch::new(program, checked).unwrap();
        let info = sw.info();
        let [v] = info.value_sets.as_slice() else { panic!() };
        let id = v.preamble.id;
        assert_eq!(port(&mut sw, 0x88b5, 7), 1);
        let both = vec![member(0x88b5, None), member(0x88b6, Some((0x10, 0xf0)))];
        assert_eq!(write(&mut sw, Modify, id, both.clone()), Ok(()));
        assert_eq!([port(&mut sw, 0x88b5, 7), port(&mut sw, 0x88b6, 0x1a), port(&mut sw, 0x88b6, 0x2a)], [2, 2, 1]);
        let read = |sw: &Switch, id| {
            let want = pb::Entity {
                entity: Some(pb::entity::Entity::ValueSetEntry(pb::ValueSetEntry {
                    value_set_id: id,
                    members: vec![],
                })),
            };
            read_entities(sw, &[want])
        };
        let got = read(&sw, 0).unwrap();
        let Some(pb::entity::Entity::ValueSetEntry(e)) = &got[0].entity else { panic!("{got:?}") };
        assert_eq!((e.value_set_id, e.members.clone()), (id, both), "read back as written, the wildcard left out");
        // MODIFY replaces the members: 0x88b5 goes.
        assert_eq!(write(&mut sw, Modify, id, vec![member(0x88b6, None)]), Ok(()));
        assert_eq!([port(&mut sw, 0x88b5, 7), port(&mut sw, 0x88b6, 0x2a)], [1, 2]);
        assert_eq!(write(&mut sw, Insert, id, vec![member(1, None)]), Err(Code::InvalidArgument));
        assert_eq!(write(&mut sw, Delete, id, vec![]), Err(Code::InvalidArgument));
        assert_eq!(write(&mut sw, Modify, id, vec![member(1, None); 3]), Err(Code::ResourceExhausted));
        assert_eq!(write(&mut sw, Modify, id + 1, vec![]), Err(Code::NotFound));
        assert_eq!(read(&sw, id + 1).unwrap_err().code(), Code::NotFound);
        let wrong_kind = pb::ValueSetMember {
            r#match: vec![pb::FieldMatch {
                field_id: 1,
                field_match_type: Some(F::Ternary(Ternary { value: vec![0, 1], mask: vec![0, 1] })),
            }],
        };
        assert_eq!(write(&mut sw, Modify, id, vec![wrong_kind]), Err(Code::InvalidArgument), "its field is exact");
        assert_eq!(port(&mut sw, 0x88b6, 0x2a), 2, "a refused write changes nothing");
        assert_eq!(write(&mut sw, Modify, id, vec![]), Ok(()));
        assert_eq!(port(&mut sw, 0x88b6, 0x2a), 1);
    }
}
