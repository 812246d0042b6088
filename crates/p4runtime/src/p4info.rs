//! The P4Info message for a checked program, from the front end's control-plane view of it
//! (`p4::info`).

use p4::info::{DigestInfo, ExternInfo, Info, KeyField, Preamble, Unit};

use crate::proto::p4::config::v1 as cfg;

fn preamble(p: &Preamble) -> Option<cfg::Preamble> {
    Some(cfg::Preamble { id: p.id, name: p.name.clone(), alias: p.alias.clone(), ..Default::default() })
}

fn counter_spec(x: &ExternInfo) -> Option<cfg::CounterSpec> {
    use cfg::counter_spec::Unit as U;
    let unit = match x.unit {
        Unit::Packets => U::Packets,
        Unit::Bytes => U::Bytes,
        Unit::Both => U::Both,
    };
    Some(cfg::CounterSpec { unit: unit as i32 })
}

fn meter_spec(x: &ExternInfo) -> Option<cfg::MeterSpec> {
    use cfg::meter_spec::Unit as U;
    let unit = if x.unit == Unit::Bytes { U::Bytes } else { U::Packets };
    Some(cfg::MeterSpec { unit: unit as i32, r#type: cfg::meter_spec::Type::TwoRateThreeColor as i32 })
}

fn bits(bitwidth: u32) -> Option<cfg::P4DataTypeSpec> {
    use cfg::p4_bitstring_like_type_spec::TypeSpec as B;
    use cfg::p4_data_type_spec::TypeSpec as D;
    Some(cfg::P4DataTypeSpec {
        type_spec: Some(D::Bitstring(cfg::P4BitstringLikeTypeSpec {
            type_spec: Some(B::Bit(cfg::P4BitTypeSpec { bitwidth: bitwidth as i32 })),
            ..Default::default()
        })),
    })
}

fn match_type(kind: &str) -> cfg::match_field::Match {
    use cfg::match_field::{Match, MatchType as T};
    let t = match kind {
        "exact" => T::Exact,
        "lpm" => T::Lpm,
        "ternary" => T::Ternary,
        "range" => T::Range,
        "optional" => T::Optional,
        other => return Match::OtherMatchType(other.to_string()),
    };
    Match::MatchType(t as i32)
}

fn match_field(k: &KeyField) -> cfg::MatchField {
    cfg::MatchField {
        id: k.id,
        name: k.name.clone(),
        bitwidth: k.bitwidth as i32,
        r#match: Some(match_type(&k.match_kind)),
        ..Default::default()
    }
}

/// A digest's type: the struct P4Info's type information names, its members bitstrings.
fn digest_type(d: &DigestInfo) -> (Option<cfg::P4DataTypeSpec>, cfg::P4StructTypeSpec) {
    use cfg::p4_data_type_spec::TypeSpec as D;
    let named = cfg::P4NamedType { name: d.type_name.clone() };
    let members = d
        .members
        .iter()
        .map(|m| cfg::p4_struct_type_spec::Member { name: m.name.clone(), type_spec: bits(m.bitwidth) })
        .collect();
    (
        Some(cfg::P4DataTypeSpec { type_spec: Some(D::Struct(named)) }),
        cfg::P4StructTypeSpec { members, ..Default::default() },
    )
}

/// P4Info for `info`; `arch` names the architecture (`edgeflow`).
pub fn p4info(info: &Info, name: &str) -> cfg::P4Info {
    let digest_types: Vec<_> = info.digests.iter().map(digest_type).collect();
    let type_info = (!info.digests.is_empty()).then(|| cfg::P4TypeInfo {
        structs: info
            .digests
            .iter()
            .zip(&digest_types)
            .map(|(d, (_, spec))| (d.type_name.clone(), spec.clone()))
            .collect(),
        ..Default::default()
    });
    cfg::P4Info {
        controller_packet_metadata: info
            .controller_headers
            .iter()
            .map(|c| cfg::ControllerPacketMetadata {
                preamble: preamble(&c.preamble),
                metadata: c
                    .metadata
                    .iter()
                    .map(|m| cfg::controller_packet_metadata::Metadata {
                        id: m.id,
                        name: m.name.clone(),
                        bitwidth: m.bitwidth as i32,
                        ..Default::default()
                    })
                    .collect(),
            })
            .collect(),
        digests: info
            .digests
            .iter()
            .zip(digest_types)
            .map(|(d, (type_spec, _))| cfg::Digest { preamble: preamble(&d.preamble), type_spec })
            .collect(),
        type_info,
        pkg_info: Some(cfg::PkgInfo {
            name: name.to_string(),
            arch: info.architecture.map_or("edgeflow", |a| a.name()).into(),
            ..Default::default()
        }),
        value_sets: info
            .value_sets
            .iter()
            .map(|v| cfg::ValueSet {
                preamble: preamble(&v.preamble),
                r#match: v.keys.iter().map(match_field).collect(),
                size: v.size as i32,
            })
            .collect(),
        tables: info
            .tables
            .iter()
            .map(|t| cfg::Table {
                preamble: preamble(&t.preamble),
                match_fields: t.keys.iter().map(match_field).collect(),
                action_refs: t.action_ids.iter().map(|&id| cfg::ActionRef { id, ..Default::default() }).collect(),
                const_default_action_id: t.default_action.filter(|(_, fixed)| *fixed).map_or(0, |(id, _)| id),
                direct_resource_ids: t.direct_counter.iter().chain(&t.direct_meter).copied().collect(),
                implementation_id: t.implementation.unwrap_or(0),
                size: t.size as i64,
                is_const_table: t.is_const,
                has_initial_entries: t.is_const,
                ..Default::default()
            })
            .collect(),
        actions: info
            .actions
            .iter()
            .map(|a| cfg::Action {
                preamble: preamble(&a.preamble),
                params: a
                    .params
                    .iter()
                    .map(|p| cfg::action::Param {
                        id: p.id,
                        name: p.name.clone(),
                        bitwidth: p.bitwidth as i32,
                        ..Default::default()
                    })
                    .collect(),
            })
            .collect(),
        counters: info
            .counters
            .iter()
            .map(|c| cfg::Counter {
                preamble: preamble(&c.preamble),
                spec: counter_spec(c),
                size: c.size as i64,
                ..Default::default()
            })
            .collect(),
        direct_counters: info
            .direct_counters
            .iter()
            .map(|c| cfg::DirectCounter {
                preamble: preamble(&c.preamble),
                spec: counter_spec(c),
                direct_table_id: c.table.unwrap_or(0),
            })
            .collect(),
        meters: info
            .meters
            .iter()
            .map(|m| cfg::Meter {
                preamble: preamble(&m.preamble),
                spec: meter_spec(m),
                size: m.size as i64,
                ..Default::default()
            })
            .collect(),
        direct_meters: info
            .direct_meters
            .iter()
            .map(|m| cfg::DirectMeter {
                preamble: preamble(&m.preamble),
                spec: meter_spec(m),
                direct_table_id: m.table.unwrap_or(0),
            })
            .collect(),
        registers: info
            .registers
            .iter()
            .map(|r| cfg::Register {
                preamble: preamble(&r.preamble),
                type_spec: bits(r.bitwidth),
                size: r.size as i32,
                ..Default::default()
            })
            .collect(),
        action_profiles: info
            .action_profiles
            .iter()
            .map(|p| cfg::ActionProfile {
                preamble: preamble(&p.preamble),
                table_ids: p.table_ids.clone(),
                with_selector: p.with_selector,
                size: p.size as i64,
                max_group_size: p.max_group_size as i32,
                // As p4c: a selector's @max_group_size bounds the sum of its members' weights.
                selector_size_semantics: (p.with_selector && p.max_group_size > 0).then_some(
                    cfg::action_profile::SelectorSizeSemantics::SumOfWeights(cfg::action_profile::SumOfWeights {}),
                ),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}
