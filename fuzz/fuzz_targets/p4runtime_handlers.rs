//! P4Runtime's Write and Read, decoded from any bytes (as gRPC hands them to the service) and
//! handled against the software target running one of the example programs, in any order: no
//! panic; a refusal carries a message; and every table entry a read returns names itself, so that
//! inserting it again is refused as ALREADY_EXISTS (its keys read back are the keys it holds);
//! and a ROLLBACK_ON_ERROR or DATAPLANE_ATOMIC batch that fails leaves the tables as they were.
#![no_main]
use libfuzzer_sys::fuzz_target;
use p4runtime::proto::p4::v1 as pb;
use prost::Message;

const PROGRAMS: [&str; 3] = [
    include_str!("../../examples/p4/l2_switch.p4"),
    include_str!("../../examples/p4/ipv4_router.p4"),
    include_str!("../../examples/p4/afdx_switch.p4"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&which, mut rest)) = data.split_first() else { return };
    // Checked once per program (the front end costs more than the rest of a run).
    static CHECKED: std::sync::OnceLock<Vec<(p4::frontend::ast::Program, p4::frontend::check::Checked)>> =
        std::sync::OnceLock::new();
    let checked = CHECKED.get_or_init(|| PROGRAMS.iter().map(|p| p4::front_end("example.p4", p).unwrap()).collect());
    let (program, checked) = checked[which as usize % PROGRAMS.len()].clone();
    let mut sw = p4::backends::software::Switch::new(program, checked).unwrap();
    // Records: a kind byte (even: a write, odd: a read), a 2-byte length, that many bytes.
    while rest.len() >= 3 {
        let (kind, len) = (rest[0], u16::from_be_bytes([rest[1], rest[2]]) as usize);
        let body = &rest[3..(3 + len).min(rest.len())];
        rest = &rest[(3 + len).min(rest.len())..];
        if kind % 2 == 0 {
            let Ok(w) = pb::WriteRequest::decode(body) else { continue };
            use p4runtime::server::Atomicity;
            let atomicity = Atomicity::try_from(w.atomicity).unwrap_or(Atomicity::ContinueOnError);
            let before = (atomicity != Atomicity::ContinueOnError).then(|| tables(&sw));
            let results = p4runtime::server::apply_batch(&mut sw, &w.updates, atomicity);
            for r in &results {
                if let Err(s) = r {
                    assert!(!s.message().is_empty(), "a refusal without a reason: {s:?}");
                }
            }
            if let Some(before) = before.filter(|_| results.iter().any(Result::is_err)) {
                assert_eq!(tables(&sw), before, "an atomic batch that failed changed the tables");
            }
        } else {
            let Ok(r) = pb::ReadRequest::decode(body) else { continue };
            match p4runtime::server::read_entities(&sw, &r.entities) {
                Ok(entities) => names_itself(&mut sw, entities),
                Err(s) => assert!(!s.message().is_empty(), "a refusal without a reason: {s:?}"),
            }
        }
    }
});

/// Every table's entries and default action, as a control plane reads them.
fn tables(sw: &p4::backends::software::Switch) -> Vec<(String, Vec<String>, String)> {
    sw.tables()
        .into_iter()
        .map(|t| {
            let entries = sw.entries(&t).unwrap_or(&[]).iter().map(|e| format!("{e:?}")).collect();
            let default = format!("{:?}", sw.default_action(&t));
            (t, entries, default)
        })
        .collect()
}

fn names_itself(sw: &mut p4::backends::software::Switch, entities: Vec<pb::Entity>) {
    for e in entities {
        let Some(pb::entity::Entity::TableEntry(t)) = &e.entity else { continue };
        if t.is_default_action {
            continue;
        }
        let again = pb::Update { r#type: pb::update::Type::Insert as i32, entity: Some(e.clone()) };
        let r = p4runtime::server::apply_updates(sw, std::slice::from_ref(&again));
        let refusal = r[0].as_ref().expect_err("an entry read back was inserted a second time");
        // A const table's entries are the program's: refused as such before they are looked up.
        assert!(
            matches!(refusal.code(), tonic::Code::AlreadyExists | tonic::Code::PermissionDenied),
            "an entry read back is not the one held: {refusal:?}\n{t:?}"
        );
    }
}
