//! The packet replication engine (P4Runtime §9.5): multicast groups and clone sessions written,
//! modified, deleted and read on the software target, whose groups the kernel's copy of the
//! program follows as it follows the tables.
//!
//! The target numbers groups and replication ids in 16 bits (v1model's `mcast_grp` and
//! `egress_rid`, PSA's `MulticastGroup_t` and `EgressInstance_t`), so larger ones are refused;
//! a replica's port comes as the deprecated `egress_port` or as `port` bytes, and is read back
//! as `egress_port`, which every 1.x client reads (edgeflow translates no port). What the
//! target has no place for (backup replicas, a group's controller metadata) is refused by name.

use p4::backends::software::{Session, Switch};
use tonic::Status;

use crate::codec::decode;
use crate::proto::p4::v1 as pb;

/// A clone's class of service is v1model's 3-bit `priority`, the queue it leaves by.
const CLASSES: u32 = 8;

/// One update of a PacketReplicationEngineEntry.
pub(super) fn update(
    sw: &mut Switch,
    kind: pb::update::Type,
    entry: &pb::PacketReplicationEngineEntry,
) -> Result<(), Status> {
    use pb::packet_replication_engine_entry::Type as T;
    match entry.r#type.as_ref() {
        Some(T::MulticastGroupEntry(g)) => group(sw, kind, g),
        Some(T::CloneSessionEntry(s)) => session(sw, kind, s),
        None => Err(Status::invalid_argument("a packet replication engine entry of neither kind")),
    }
}

/// What INSERT, MODIFY and DELETE require of an entry that `exists` (§12.1).
fn check_kind(kind: pb::update::Type, exists: bool, what: &str) -> Result<(), Status> {
    use pb::update::Type as U;
    match kind {
        U::Insert if exists => Err(Status::already_exists(format!("{what} exists"))),
        U::Modify | U::Delete if !exists => Err(Status::not_found(format!("no {what}"))),
        U::Unspecified => Err(Status::invalid_argument("an update of unspecified type")),
        _ => Ok(()),
    }
}

fn group(sw: &mut Switch, kind: pb::update::Type, g: &pb::MulticastGroupEntry) -> Result<(), Status> {
    let id = g.multicast_group_id;
    let what = format!("multicast group {id}");
    let id = match u16::try_from(id) {
        Ok(0) => return Err(Status::invalid_argument("multicast group 0: a group's id is 1 or more")),
        Ok(id) => id,
        Err(_) => return Err(Status::invalid_argument(format!("{what}: the switch numbers groups 1 to 65535"))),
    };
    check_kind(kind, sw.group_replicas(id).is_some(), &what)?;
    if kind == pb::update::Type::Delete {
        sw.delete_group(id);
        return Ok(());
    }
    if !g.metadata.is_empty() {
        return Err(Status::unimplemented(format!("{what}: metadata: edgeflow keeps no controller data on a group")));
    }
    let replicas = replicas(&g.replicas, &what)?;
    sw.set_replicas(id, replicas);
    Ok(())
}

fn session(sw: &mut Switch, kind: pb::update::Type, s: &pb::CloneSessionEntry) -> Result<(), Status> {
    let what = format!("clone session {}", s.session_id);
    if s.session_id == 0 {
        return Err(Status::invalid_argument("clone session 0: a session's id is 1 or more"));
    }
    check_kind(kind, sw.clone_session(s.session_id).is_some(), &what)?;
    if kind == pb::update::Type::Delete {
        sw.delete_clone_session(s.session_id);
        return Ok(());
    }
    if s.class_of_service >= CLASSES {
        return Err(Status::invalid_argument(format!(
            "{what}: class_of_service {}: the clones' queue, 0 to {}",
            s.class_of_service,
            CLASSES - 1
        )));
    }
    let truncate = match s.packet_length_bytes {
        0 => None,
        n if n < 0 => {
            return Err(Status::invalid_argument(format!("{what}: packet_length_bytes {n} is negative")));
        }
        n => Some(n as usize),
    };
    let session = Session {
        port: None,
        group: None,
        replicas: replicas(&s.replicas, &what)?,
        class_of_service: s.class_of_service as u8,
        truncate,
    };
    sw.set_clone_session(s.session_id, session);
    Ok(())
}

/// The target's (port, replication id) pairs for an entry's replicas: each pair once.
fn replicas(given: &[pb::Replica], what: &str) -> Result<Vec<(u32, u16)>, Status> {
    use pb::replica::PortKind;
    let mut out: Vec<(u32, u16)> = Vec::with_capacity(given.len());
    for r in given {
        #[allow(deprecated)] // P4Runtime 1.x clients (p4runtime-shell among them) still send it
        let port = match &r.port_kind {
            Some(PortKind::EgressPort(p)) => *p,
            Some(PortKind::Port(bytes)) => decode(bytes, 32, &format!("{what}: a replica's port"))? as u32,
            None => return Err(Status::invalid_argument(format!("{what}: a replica without a port"))),
        };
        if !r.backup_replicas.is_empty() {
            return Err(Status::unimplemented(format!("{what}: backup_replicas: a replica goes to its own port only")));
        }
        let instance = u16::try_from(r.instance).map_err(|_| {
            Status::invalid_argument(format!(
                "{what}: instance {}: replication ids are 16 bits (egress_rid)",
                r.instance
            ))
        })?;
        if out.contains(&(port, instance)) {
            return Err(Status::invalid_argument(format!(
                "{what}: the replica (port {port}, instance {instance}) is given twice"
            )));
        }
        out.push((port, instance));
    }
    Ok(out)
}

#[allow(deprecated)] // read back as the 1.x clients read it: see the module's comment
fn replica_messages(replicas: &[(u32, u16)]) -> Vec<pb::Replica> {
    replicas
        .iter()
        .map(|&(port, instance)| pb::Replica {
            instance: instance as u32,
            backup_replicas: Vec::new(),
            port_kind: Some(pb::replica::PortKind::EgressPort(port)),
        })
        .collect()
}

/// The entries a read of the replication engine asks for: every group (id 0) or the one named,
/// every clone session (id 0) or the one named. One named that is not there is NOT_FOUND.
pub(super) fn read(
    sw: &Switch,
    want: &pb::PacketReplicationEngineEntry,
    out: &mut Vec<pb::Entity>,
) -> Result<(), Status> {
    use pb::packet_replication_engine_entry::Type as T;
    let wrap = |t: T| pb::Entity {
        entity: Some(pb::entity::Entity::PacketReplicationEngineEntry(pb::PacketReplicationEngineEntry {
            r#type: Some(t),
        })),
    };
    match want.r#type.as_ref() {
        Some(T::MulticastGroupEntry(g)) => {
            let ids: Vec<u16> = match g.multicast_group_id {
                0 => sw.group_ids(),
                id => {
                    let id = u16::try_from(id).ok().filter(|&id| sw.group_replicas(id).is_some());
                    vec![id.ok_or_else(|| Status::not_found(format!("no multicast group {}", g.multicast_group_id)))?]
                }
            };
            for id in ids {
                let replicas = sw.group_replicas(id).unwrap_or_default();
                out.push(wrap(T::MulticastGroupEntry(pb::MulticastGroupEntry {
                    multicast_group_id: id as u32,
                    replicas: replica_messages(&replicas),
                    metadata: Vec::new(),
                })));
            }
        }
        Some(T::CloneSessionEntry(s)) => {
            let ids = match s.session_id {
                0 => sw.clone_session_ids(),
                id if sw.clone_session(id).is_some() => vec![id],
                id => return Err(Status::not_found(format!("no clone session {id}"))),
            };
            for id in ids {
                let session = sw.clone_session(id).cloned().unwrap_or_default();
                // A session BMv2's commands set (a port, a group's members) reads as its copies.
                let mut replicas: Vec<(u32, u16)> = session.port.map(|p| (p, 0)).into_iter().collect();
                replicas.extend(session.group.and_then(|g| sw.group_replicas(g)).unwrap_or_default());
                replicas.extend(&session.replicas);
                out.push(wrap(T::CloneSessionEntry(pb::CloneSessionEntry {
                    session_id: id,
                    replicas: replica_messages(&replicas),
                    class_of_service: session.class_of_service as u32,
                    packet_length_bytes: session.truncate.map_or(0, |n| n.min(i32::MAX as usize) as i32),
                })));
            }
        }
        None => {
            // Neither kind named: both, all of them (§11.1's wildcard over the entity).
            read(
                sw,
                &pb::PacketReplicationEngineEntry { r#type: Some(T::MulticastGroupEntry(Default::default())) },
                out,
            )?;
            read(
                sw,
                &pb::PacketReplicationEngineEntry { r#type: Some(T::CloneSessionEntry(Default::default())) },
                out,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::read::read_entities;
    use super::super::write::apply_updates;
    use super::*;
    use pb::entity::Entity as E;
    use pb::packet_replication_engine_entry::Type as T;
    use pb::update::Type::{Delete, Insert, Modify};
    use tonic::Code;

    /// Every frame floods to multicast group 1; one of ether type 0x88b5 is also cloned to
    /// session 7 as it came in.
    const PROGRAM: &str = r#"
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
struct headers_t { eth_t eth; }
struct meta_t { }
parser P(packet_in packet, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.eth); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.mcast_grp = 1;
        if (hdr.eth.kind == 0x88b5) { clone(CloneType.I2E, 32w7); }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out packet, in headers_t hdr) { apply { packet.emit(hdr.eth); } }
V1Switch(P(), V(), I(), Eg(), C(), D()) main;
"#;

    fn switch() -> Switch {
        let (program, checked) = p4::front_end("pre.p4", PROGRAM).unwrap();
        Switch::new(program, checked).unwrap()
    }

    #[allow(deprecated)]
    fn replica(port: u32, instance: u32) -> pb::Replica {
        pb::Replica { instance, backup_replicas: vec![], port_kind: Some(pb::replica::PortKind::EgressPort(port)) }
    }

    fn group(id: u32, replicas: Vec<pb::Replica>) -> T {
        T::MulticastGroupEntry(pb::MulticastGroupEntry { multicast_group_id: id, replicas, metadata: vec![] })
    }

    fn session(id: u32, replicas: Vec<pb::Replica>, class_of_service: u32, packet_length_bytes: i32) -> T {
        T::CloneSessionEntry(pb::CloneSessionEntry { session_id: id, replicas, class_of_service, packet_length_bytes })
    }

    fn entity(t: T) -> pb::Entity {
        pb::Entity {
            entity: Some(E::PacketReplicationEngineEntry(pb::PacketReplicationEngineEntry { r#type: Some(t) })),
        }
    }

    fn write(sw: &mut Switch, kind: pb::update::Type, t: T) -> Result<(), Status> {
        apply_updates(sw, &[pb::Update { r#type: kind as i32, entity: Some(entity(t)) }]).remove(0)
    }

    fn code(sw: &mut Switch, kind: pb::update::Type, t: T) -> Code {
        write(sw, kind, t).err().map_or(Code::Ok, |s| s.code())
    }

    /// The ports a frame of ether type `kind` left by, with its length and queue, in order.
    fn sent(sw: &mut Switch, kind: u16) -> Vec<(u32, usize, u8)> {
        let mut frame = vec![0u8; 60];
        frame[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        frame[12..14].copy_from_slice(&kind.to_be_bytes());
        let mut out: Vec<_> =
            sw.process(&frame, 1, 0).unwrap_or_default().iter().map(|o| (o.port, o.frame.len(), o.queue)).collect();
        out.sort_unstable();
        out
    }

    #[test]
    fn a_written_group_is_where_the_program_floods_and_its_changes_take_effect() {
        let mut sw = switch();
        assert_eq!(sent(&mut sw, 0x0800), [], "no group 1 yet: nowhere");
        assert_eq!(code(&mut sw, Modify, group(1, vec![replica(2, 0)])), Code::NotFound);
        assert_eq!(code(&mut sw, Delete, group(1, vec![])), Code::NotFound);
        assert_eq!(code(&mut sw, Insert, group(1, vec![replica(2, 0), replica(3, 1)])), Code::Ok);
        assert_eq!(sent(&mut sw, 0x0800), [(2, 60, 0), (3, 60, 0)]);
        let twice = write(&mut sw, Insert, group(1, vec![replica(4, 0)])).unwrap_err();
        assert_eq!((twice.code(), twice.message()), (Code::AlreadyExists, "multicast group 1 exists"));
        assert_eq!(sent(&mut sw, 0x0800), [(2, 60, 0), (3, 60, 0)], "the refused insert changed nothing");
        assert_eq!(code(&mut sw, Modify, group(1, vec![replica(4, 0), replica(4, 1)])), Code::Ok);
        assert_eq!(sent(&mut sw, 0x0800), [(4, 60, 0), (4, 60, 0)], "a copy per (port, instance)");
        let generation = sw.generation();
        assert_eq!(code(&mut sw, Delete, group(1, vec![])), Code::Ok);
        assert!(sw.generation() > generation, "the kernel's copy follows a deleted group too");
        assert_eq!(sent(&mut sw, 0x0800), []);
        assert_eq!(sw.group_ids(), Vec::<u16>::new());
    }

    #[test]
    fn a_refused_group_says_why_and_changes_nothing() {
        let mut sw = switch();
        let refused = |sw: &mut Switch, t| write(sw, Insert, t).unwrap_err();
        let zero = refused(&mut sw, group(0, vec![replica(2, 0)]));
        assert_eq!(
            (zero.code(), zero.message()),
            (Code::InvalidArgument, "multicast group 0: a group's id is 1 or more")
        );
        let wide = refused(&mut sw, group(65536, vec![replica(2, 0)]));
        assert_eq!(wide.code(), Code::InvalidArgument);
        assert!(wide.message().contains("1 to 65535"), "{}", wide.message());
        let twice = refused(&mut sw, group(1, vec![replica(2, 0), replica(2, 0)]));
        assert_eq!(twice.code(), Code::InvalidArgument);
        assert!(twice.message().contains("(port 2, instance 0) is given twice"), "{}", twice.message());
        let rid = refused(&mut sw, group(1, vec![replica(2, 65536)]));
        assert!(rid.code() == Code::InvalidArgument && rid.message().contains("egress_rid"), "{}", rid.message());
        let no_port = refused(&mut sw, group(1, vec![pb::Replica { instance: 0, ..Default::default() }]));
        assert!(no_port.message().contains("a replica without a port"), "{}", no_port.message());
        let backup =
            pb::Replica { backup_replicas: vec![pb::BackupReplica { port: vec![3], instance: 0 }], ..replica(2, 0) };
        let backup = refused(&mut sw, group(1, vec![backup]));
        assert!(
            backup.code() == Code::Unimplemented && backup.message().contains("backup_replicas"),
            "{}",
            backup.message()
        );
        let metadata = T::MulticastGroupEntry(pb::MulticastGroupEntry {
            multicast_group_id: 1,
            replicas: vec![replica(2, 0)],
            metadata: vec![1],
        });
        let metadata = refused(&mut sw, metadata);
        assert!(
            metadata.code() == Code::Unimplemented && metadata.message().contains("metadata"),
            "{}",
            metadata.message()
        );
        assert_eq!(sw.group_ids(), Vec::<u16>::new());
        // A port as bytes (P4Runtime 1.4's `port`) is the same port.
        let bytes = pb::Replica {
            instance: 0,
            backup_replicas: vec![],
            port_kind: Some(pb::replica::PortKind::Port(vec![0, 3])),
        };
        assert_eq!(code(&mut sw, Insert, group(1, vec![bytes])), Code::Ok);
        assert_eq!(sw.group_replicas(1), Some(vec![(3, 0)]));
    }

    #[test]
    fn a_written_clone_session_is_where_clone_sends_its_copies_cut_and_queued() {
        let mut sw = switch();
        assert_eq!(code(&mut sw, Insert, group(1, vec![replica(2, 0)])), Code::Ok);
        assert_eq!(sent(&mut sw, 0x88b5), [(2, 60, 0)], "no session 7: no clone");
        assert_eq!(code(&mut sw, Insert, session(7, vec![replica(5, 0), replica(6, 2)], 3, 20)), Code::Ok);
        assert_eq!(sent(&mut sw, 0x88b5), [(2, 60, 0), (5, 20, 3), (6, 20, 3)]);
        assert_eq!(sent(&mut sw, 0x0800), [(2, 60, 0)], "frames that clone() nothing are not cloned");
        assert_eq!(code(&mut sw, Insert, session(7, vec![replica(5, 0)], 0, 0)), Code::AlreadyExists);
        assert_eq!(code(&mut sw, Modify, session(7, vec![replica(4, 0)], 0, 0)), Code::Ok);
        assert_eq!(sent(&mut sw, 0x88b5), [(2, 60, 0), (4, 60, 0)], "uncut, queue 0");
        assert_eq!(code(&mut sw, Delete, session(7, vec![], 0, 0)), Code::Ok);
        assert_eq!(sent(&mut sw, 0x88b5), [(2, 60, 0)]);
        assert_eq!(code(&mut sw, Delete, session(7, vec![], 0, 0)), Code::NotFound);
        assert_eq!(code(&mut sw, Modify, session(8, vec![], 0, 0)), Code::NotFound);
        for (bad, why) in [
            (session(0, vec![], 0, 0), "clone session 0: a session's id is 1 or more"),
            (session(7, vec![], 8, 0), "clone session 7: class_of_service 8: the clones' queue, 0 to 7"),
            (session(7, vec![], 0, -1), "clone session 7: packet_length_bytes -1 is negative"),
        ] {
            let refused = write(&mut sw, Insert, bad).unwrap_err();
            assert_eq!((refused.code(), refused.message()), (Code::InvalidArgument, why));
        }
        assert_eq!(sw.clone_session_ids(), Vec::<u32>::new());
    }

    #[test]
    fn reads_answer_every_group_and_session_or_the_one_named() {
        let mut sw = switch();
        assert_eq!(code(&mut sw, Insert, group(2, vec![replica(3, 1), replica(2, 0)])), Code::Ok);
        assert_eq!(code(&mut sw, Insert, group(1, vec![replica(2, 0)])), Code::Ok);
        assert_eq!(code(&mut sw, Insert, session(9, vec![replica(4, 0)], 1, 128)), Code::Ok);
        let read = |sw: &Switch, t: T| read_entities(sw, &[entity(t)]);
        let all = read(&sw, group(0, vec![])).unwrap();
        assert_eq!(all, [entity(group(1, vec![replica(2, 0)])), entity(group(2, vec![replica(3, 1), replica(2, 0)]))]);
        assert_eq!(read(&sw, group(2, vec![])).unwrap(), [entity(group(2, vec![replica(3, 1), replica(2, 0)]))]);
        assert_eq!(read(&sw, group(3, vec![])).unwrap_err().code(), Code::NotFound);
        assert_eq!(read(&sw, session(0, vec![], 0, 0)).unwrap(), [entity(session(9, vec![replica(4, 0)], 1, 128))]);
        assert_eq!(read(&sw, session(5, vec![], 0, 0)).unwrap_err().code(), Code::NotFound);
        let everything = read_entities(
            &sw,
            &[pb::Entity {
                entity: Some(E::PacketReplicationEngineEntry(pb::PacketReplicationEngineEntry { r#type: None })),
            }],
        );
        assert_eq!(everything.unwrap().len(), 3);
    }
}
