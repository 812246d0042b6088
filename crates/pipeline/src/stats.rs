//! Multipart replies about flows, tables, groups and meters (spec §7.3.5).

use ofp::action::{action_type, instruction_type};
use ofp::error::{BadRequest, ErrorCode};
use ofp::group_meter::{band_type, meter_flags, OFPG_ALL, OFPM_ALL};
use ofp::message::OFPTT_ALL;
use ofp::multipart::*;
use ofp::oxm::Field;
use ofp::table_features::{OxmId, TableFeatureProp, TableFeatures, TypeId};

use crate::flow::{settable, Nanos};
use crate::group::MAX_GROUPS;
use crate::meter::{MAX_BANDS, MAX_METERS};
use crate::{match_to_key, Pipeline};

impl Pipeline {
    /// Answers the multipart requests the pipeline owns; `None` for the ones it does not (ports,
    /// queues, description), which the datapath answers.
    pub fn multipart(
        &mut self,
        req: &MultipartRequestBody,
        now: Nanos,
    ) -> Option<Result<MultipartReplyBody, ErrorCode>> {
        use MultipartRequestBody as R;
        Some(match req {
            R::Flow(r) => self.flow_stats(r, now).map(MultipartReplyBody::Flow),
            R::Aggregate(r) => self.flow_stats(r, now).map(|flows| {
                MultipartReplyBody::Aggregate(AggregateStats {
                    packet_count: flows.iter().map(|f| f.packet_count).sum(),
                    byte_count: flows.iter().map(|f| f.byte_count).sum(),
                    flow_count: flows.len() as u32,
                })
            }),
            R::Table => Ok(MultipartReplyBody::Table(
                self.tables
                    .iter()
                    .enumerate()
                    .map(|(i, t)| TableStats {
                        table_id: i as u8,
                        active_count: t.flows.len() as u32,
                        lookup_count: t.lookup_count,
                        matched_count: t.matched_count,
                    })
                    .collect(),
            )),
            R::Group { group_id } => Ok(MultipartReplyBody::Group(self.group_stats(*group_id, now))),
            R::GroupDesc => Ok(MultipartReplyBody::GroupDesc(
                self.groups
                    .groups
                    .iter()
                    .map(|(&id, g)| GroupDesc { group_type: g.group_type, group_id: id, buckets: g.buckets.clone() })
                    .collect(),
            )),
            R::GroupFeatures => Ok(MultipartReplyBody::GroupFeatures(GroupFeatures {
                types: 0b1111,
                // select weight, select liveness, chaining, chaining checks
                capabilities: 0b1111,
                max_groups: [MAX_GROUPS as u32; 4],
                actions: [supported_actions_bitmap(); 4],
            })),
            R::Meter { meter_id } => Ok(MultipartReplyBody::Meter(self.meter_stats(*meter_id, now))),
            R::MeterConfig { meter_id } => Ok(MultipartReplyBody::MeterConfig(
                self.meters
                    .meters
                    .iter()
                    .filter(|(&id, _)| *meter_id == OFPM_ALL || id == *meter_id)
                    .map(|(&id, m)| MeterConfig {
                        flags: m.flags,
                        meter_id: id,
                        bands: m.bands.iter().map(|b| b.config.clone()).collect(),
                    })
                    .collect(),
            )),
            R::MeterFeatures => Ok(MultipartReplyBody::MeterFeatures(MeterFeatures {
                max_meter: MAX_METERS,
                band_types: 1 << band_type::DROP | 1 << band_type::DSCP_REMARK,
                capabilities: (meter_flags::KBPS | meter_flags::PKTPS | meter_flags::BURST | meter_flags::STATS) as u32,
                max_bands: MAX_BANDS,
                max_color: 0,
            })),
            R::TableFeatures(tables) => {
                if tables.is_empty() {
                    Ok(MultipartReplyBody::TableFeatures(self.table_features()))
                } else {
                    self.set_table_features(tables).map(|()| MultipartReplyBody::TableFeatures(self.table_features()))
                }
            }
            R::Experimenter { .. } => Err(ErrorCode::BadRequest(BadRequest::BadExperimenter)),
            R::Desc | R::PortStats { .. } | R::Queue { .. } | R::PortDesc => return None,
        })
    }

    fn flow_stats(&self, r: &FlowStatsRequest, now: Nanos) -> Result<Vec<FlowStats>, ErrorCode> {
        if r.table_id != OFPTT_ALL && r.table_id >= self.n_tables() {
            return Err(ErrorCode::BadRequest(BadRequest::BadTableId));
        }
        r.match_.validate()?;
        let (key, mask) = match_to_key(&r.match_);
        let range =
            if r.table_id == OFPTT_ALL { 0..self.tables.len() } else { r.table_id as usize..r.table_id as usize + 1 };
        let mut out = Vec::new();
        for t in range {
            let table = &self.tables[t];
            let mut ids = table.flows.covered_by(&key, &mask);
            ids.sort();
            for id in ids {
                let f = table.flows.get(id).unwrap();
                if (f.cookie & r.cookie_mask) != (r.cookie & r.cookie_mask)
                    || !f.outputs_to(r.out_port)
                    || !f.uses_group(r.out_group)
                {
                    continue;
                }
                let (duration_sec, duration_nsec) = f.duration(now);
                out.push(FlowStats {
                    table_id: t as u8,
                    duration_sec,
                    duration_nsec,
                    priority: f.priority,
                    idle_timeout: f.idle_timeout,
                    hard_timeout: f.hard_timeout,
                    flags: f.flags,
                    cookie: f.cookie,
                    packet_count: f.packet_count,
                    byte_count: f.byte_count,
                    match_: f.match_.to_match(),
                    instructions: f.actions.instructions.clone(),
                });
            }
        }
        Ok(out)
    }

    fn group_stats(&self, group_id: u32, now: Nanos) -> Vec<GroupStats> {
        let mut refs = std::collections::BTreeMap::<u32, u32>::new();
        for t in &self.tables {
            for (_, f) in t.flows.iter() {
                for g in self.groups.groups.keys() {
                    if f.uses_group(*g) {
                        *refs.entry(*g).or_default() += 1;
                    }
                }
            }
        }
        self.groups
            .groups
            .iter()
            .filter(|(&id, _)| group_id == OFPG_ALL || id == group_id)
            .map(|(&id, g)| {
                let d = now.saturating_sub(g.created);
                GroupStats {
                    group_id: id,
                    ref_count: refs.get(&id).copied().unwrap_or(0),
                    packet_count: g.packet_count,
                    byte_count: g.byte_count,
                    duration_sec: (d / 1_000_000_000) as u32,
                    duration_nsec: (d % 1_000_000_000) as u32,
                    bucket_stats: g.bucket_counts.clone(),
                }
            })
            .collect()
    }

    fn meter_stats(&self, meter_id: u32, now: Nanos) -> Vec<MeterStats> {
        self.meters
            .meters
            .iter()
            .filter(|(&id, _)| meter_id == OFPM_ALL || id == meter_id)
            .map(|(&id, m)| {
                let flow_count = self
                    .tables
                    .iter()
                    .map(|t| t.flows.iter().filter(|(_, f)| f.actions.program.meter == Some(id)).count() as u32)
                    .sum();
                let d = now.saturating_sub(m.created);
                MeterStats {
                    meter_id: id,
                    flow_count,
                    packet_in_count: m.packet_count,
                    byte_in_count: m.byte_count,
                    duration_sec: (d / 1_000_000_000) as u32,
                    duration_nsec: (d % 1_000_000_000) as u32,
                    band_stats: m.bands.iter().map(|b| (b.packet_count, b.byte_count)).collect(),
                }
            })
            .collect()
    }

    /// What each table supports: everything, in every table.
    pub fn table_features(&self) -> Vec<TableFeatures> {
        let n = self.n_tables();
        let instructions: Vec<TypeId> = instruction_type::ALL.iter().map(|&t| TypeId::standard(t)).collect();
        let actions: Vec<TypeId> = action_type::ALL.iter().map(|&t| TypeId::standard(t)).collect();
        let all_fields: Vec<OxmId> = Field::ALL.iter().map(|&f| OxmId::basic(f)).collect();
        let set_fields: Vec<OxmId> = Field::ALL.iter().filter(|&&f| settable(f)).map(|&f| OxmId::basic(f)).collect();
        (0..n)
            .filter(|&t| self.tables[t as usize].enabled)
            .map(|t| {
                if let Some(spec) = &self.tables[t as usize].spec {
                    return spec.features.clone();
                }
                let next: Vec<u8> = (t + 1..n).collect();
                let mut properties = Vec::new();
                for miss in [false, true] {
                    let inst = if t + 1 == n {
                        instructions.iter().copied().filter(|i| i.typ != instruction_type::GOTO_TABLE).collect()
                    } else {
                        instructions.clone()
                    };
                    properties.push(TableFeatureProp::Instructions { miss, ids: inst });
                    properties.push(TableFeatureProp::NextTables { miss, tables: next.clone() });
                    properties.push(TableFeatureProp::WriteActions { miss, ids: actions.clone() });
                    properties.push(TableFeatureProp::ApplyActions { miss, ids: actions.clone() });
                    properties.push(TableFeatureProp::WriteSetfield { miss, ids: set_fields.clone() });
                    properties.push(TableFeatureProp::ApplySetfield { miss, ids: set_fields.clone() });
                }
                properties.push(TableFeatureProp::Match(all_fields.clone()));
                properties.push(TableFeatureProp::Wildcards(all_fields.clone()));
                TableFeatures {
                    table_id: t,
                    name: format!("table{t}"),
                    metadata_match: u64::MAX,
                    metadata_write: u64::MAX,
                    config: self.tables[t as usize].config,
                    max_entries: self.tables[t as usize].max_entries,
                    properties,
                }
            })
            .collect()
    }
}

/// Bitmap of supported action types (bit n = action type n).
fn supported_actions_bitmap() -> u32 {
    action_type::ALL.iter().fold(0, |acc, &t| acc | 1 << t)
}
