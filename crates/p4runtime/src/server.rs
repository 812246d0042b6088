//! The P4Runtime service: arbitration on the stream channel, the pipeline's P4Info, and table,
//! counter, meter and register entries written and read on the program the switch runs.
//!
//! The program's state lives on the forwarding thread, so every request becomes one [`Job`]
//! the switch runs between two frames: a write request's updates all land together, and a read
//! sees one instant. What P4Runtime has and edgeflow's target does not (action profiles, packet
//! I/O on the stream, digests, roles, idle timeouts, replacing the program) is refused as
//! UNIMPLEMENTED by name.
//!
//! About 900 lines, one concern: P4Runtime's service, its entities mapped onto the software
//! target's operations and back, with the unit tests of its rules (matches, arbitration, batch
//! errors). The P4Info message is `p4info.rs`, the value encoding `codec.rs`.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use p4::info::{ExternInfo, Info, TableInfo};
use p4::run::{Entry, Match, Switch};
use prost::Message;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};

use crate::codec::{decode, encode};
use crate::proto::google::rpc;
use crate::proto::p4::v1 as pb;
use crate::proto::p4::v1::p4_runtime_server::{P4Runtime, P4RuntimeServer};

/// The P4Runtime release whose schema edgeflow is built from (scripts/setup.sh pins the
/// `p4runtime` package).
pub const API_VERSION: &str = "1.6.0";

/// Work on the running program's state, run by the switch between frames.
pub type Job = Box<dyn FnOnce(&mut Switch) -> Deliver + Send>;
/// A job's answer, which the switch delivers once what the job changed is in force (in the
/// kernel too, where the program runs there).
pub type Deliver = Box<dyn FnOnce() + Send>;

/// The switch a P4Runtime server serves.
pub trait Device: Send + Sync + 'static {
    /// Runs `job` on the program's tables and externs; drops it unseen when the switch runs no P4
    /// program (then the request fails as UNAVAILABLE).
    fn run(&self, job: Job);
}

type Outbound = mpsc::UnboundedSender<Result<pb::StreamMessageResponse, Status>>;

/// The clients on the stream channel and who among them is primary (P4Runtime §5): the client
/// with the highest election id, provided no higher one was seen since; when the primary leaves,
/// the others are told there is none (NOT_FOUND) until one bids at least that high.
#[derive(Default)]
struct Arbiter {
    next_client: u64,
    clients: Vec<Client>,
    highest: u128,
}

struct Client {
    id: u64,
    election: Option<u128>,
    tx: Outbound,
}

impl Arbiter {
    fn primary(&self) -> Option<(u64, u128)> {
        let best = self.clients.iter().filter_map(|c| Some((c.id, c.election?))).max_by_key(|&(_, e)| e)?;
        (best.1 >= self.highest).then_some(best)
    }

    fn tell(&self, client: &Client, device_id: u64) {
        let primary = self.primary();
        let (code, message) = match primary {
            Some((id, _)) if id == client.id => (Code::Ok, "primary"),
            Some(_) => (Code::AlreadyExists, "a primary client is connected"),
            None => (Code::NotFound, "no primary client"),
        };
        let update = pb::MasterArbitrationUpdate {
            device_id,
            role: None,
            election_id: Some(uint128(self.highest)),
            status: Some(rpc::Status { code: code as i32, message: message.into(), details: vec![] }),
        };
        let msg = pb::StreamMessageResponse { update: Some(pb::stream_message_response::Update::Arbitration(update)) };
        let _ = client.tx.send(Ok(msg));
    }

    /// A client's bid; an error ends its stream.
    fn arbitrate(&mut self, id: u64, device_id: u64, update: &pb::MasterArbitrationUpdate) -> Result<(), Status> {
        if update.device_id != device_id {
            return Err(Status::not_found(format!("no device {} here (this switch is {device_id})", update.device_id)));
        }
        if update.role.as_ref().is_some_and(|r| !r.name.is_empty()) {
            return Err(Status::unimplemented("roles: edgeflow serves the default role only"));
        }
        let election = update.election_id.map(|e| ((e.high as u128) << 64) | e.low as u128);
        if election.is_some() && self.clients.iter().any(|c| c.id != id && c.election == election) {
            return Err(Status::invalid_argument("election id already used by another client"));
        }
        let before = self.primary();
        let client = self.clients.iter_mut().find(|c| c.id == id).expect("joined");
        client.election = election;
        self.highest = self.highest.max(election.unwrap_or(0));
        let changed = self.primary() != before;
        for c in &self.clients {
            if c.id == id || changed {
                self.tell(c, device_id);
            }
        }
        Ok(())
    }

    fn leave(&mut self, id: u64, device_id: u64) {
        let before = self.primary();
        self.clients.retain(|c| c.id != id);
        if self.primary() != before {
            for c in &self.clients {
                self.tell(c, device_id);
            }
        }
    }
}

fn uint128(v: u128) -> pb::Uint128 {
    pb::Uint128 { high: (v >> 64) as u64, low: v as u64 }
}

struct Shared {
    device_id: u64,
    name: String,
    device: Arc<dyn Device>,
    arbiter: Mutex<Arbiter>,
    /// The cookie the primary last set with the pipeline.
    cookie: Mutex<u64>,
}

/// The P4Runtime service of one switch (device).
#[derive(Clone)]
pub struct Service {
    shared: Arc<Shared>,
}

impl Service {
    /// `device_id` is the id clients address (edgeflow uses the datapath id); `name` names the
    /// program in P4Info's package information.
    pub fn new(device_id: u64, name: String, device: Arc<dyn Device>) -> Service {
        Service {
            shared: Arc::new(Shared {
                device_id,
                name,
                device,
                arbiter: Mutex::new(Arbiter::default()),
                cookie: Mutex::new(0),
            }),
        }
    }

    /// Runs `f` on the switch's program and hands back what it returns.
    async fn on_switch<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Switch) -> R + Send + 'static,
    ) -> Result<R, Status> {
        let (tx, rx) = oneshot::channel();
        self.shared.device.run(Box::new(move |sw| {
            let answer = f(sw);
            Box::new(move || {
                let _ = tx.send(answer);
            })
        }));
        rx.await.map_err(|_| Status::unavailable("the switch runs no P4 program now"))
    }

    fn check_device(&self, device_id: u64) -> Result<(), Status> {
        if device_id != self.shared.device_id {
            return Err(Status::not_found(format!(
                "no device {device_id} here (this switch is {})",
                self.shared.device_id
            )));
        }
        Ok(())
    }

    /// Whether a write or pipeline request comes from the primary client.
    fn check_primary(&self, election: Option<pb::Uint128>) -> Result<(), Status> {
        let arbiter = self.shared.arbiter.lock().unwrap();
        let given = election.map(|e| ((e.high as u128) << 64) | e.low as u128);
        match arbiter.primary() {
            Some((_, primary)) if Some(primary) == given => Ok(()),
            _ => Err(Status::permission_denied("not the primary client (arbitrate on the stream channel first)")),
        }
    }
}

/// Serves P4Runtime on `addr` from now on: the address is bound before this returns, so that a
/// switch that cannot serve says so at start.
pub async fn serve(addr: SocketAddr, service: Service) -> Result<(), String> {
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("P4Runtime cannot listen on {addr}: {e}"))?;
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .add_service(P4RuntimeServer::new(service))
            .serve_with_incoming(incoming)
            .await;
        if let Err(e) = served {
            tracing::warn!("P4Runtime server stopped: {e}");
        }
    });
    Ok(())
}

/// Whether a table's entries carry a priority: a ternary, range or optional key orders them.
fn prioritised(t: &TableInfo) -> bool {
    t.keys.iter().any(|k| matches!(k.match_kind.as_str(), "ternary" | "range" | "optional"))
}

fn all_ones(width: u32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// The target's matches for an entry's fields, one per key in the table's order.
fn matches(t: &TableInfo, fields: &[pb::FieldMatch]) -> Result<Vec<Match>, Status> {
    use pb::field_match::FieldMatchType as F;
    for (i, f) in fields.iter().enumerate() {
        if !t.keys.iter().any(|k| k.id == f.field_id) {
            return Err(Status::invalid_argument(format!("{} has no match field {}", t.preamble.name, f.field_id)));
        }
        if fields[..i].iter().any(|g| g.field_id == f.field_id) {
            return Err(Status::invalid_argument(format!("match field {} given twice", f.field_id)));
        }
    }
    let mut out = Vec::new();
    for k in &t.keys {
        let what = format!("{}: {}", t.preamble.name, k.name);
        let w = k.bitwidth;
        let field = fields.iter().find(|f| f.field_id == k.id).and_then(|f| f.field_match_type.as_ref());
        out.push(match (k.match_kind.as_str(), field) {
            ("exact", None) => return Err(Status::invalid_argument(format!("{what}: an exact field must be given"))),
            ("range", None) => Match::Range { low: 0, high: all_ones(w) },
            (_, None) => Match::Any,
            ("exact", Some(F::Exact(e))) => Match::Exact(decode(&e.value, w, &what)?),
            ("ternary", Some(F::Ternary(t))) => {
                let value = decode(&t.value, w, &what)?;
                let mask = decode(&t.mask, w, &what)?;
                if mask == 0 {
                    return Err(Status::invalid_argument(format!(
                        "{what}: a wildcard is written by leaving the field out"
                    )));
                }
                if value & !mask != 0 {
                    return Err(Status::invalid_argument(format!("{what}: the value has bits outside the mask")));
                }
                Match::Ternary { value, mask }
            }
            ("lpm", Some(F::Lpm(l))) => {
                let value = decode(&l.value, w, &what)?;
                let prefix = l.prefix_len;
                if prefix <= 0 || prefix as u32 > w {
                    return Err(Status::invalid_argument(format!(
                        "{what}: prefix length {prefix} (1 to {w}; a wildcard is written by leaving the field out)"
                    )));
                }
                if value & all_ones(w - prefix as u32) != 0 {
                    return Err(Status::invalid_argument(format!("{what}: the value has bits past the prefix")));
                }
                Match::Lpm { value, prefix: prefix as u32 }
            }
            ("range", Some(F::Range(r))) => {
                let (low, high) = (decode(&r.low, w, &what)?, decode(&r.high, w, &what)?);
                if low > high {
                    return Err(Status::invalid_argument(format!("{what}: the range's low end is above its high end")));
                }
                Match::Range { low, high }
            }
            (kind, Some(_)) => return Err(Status::invalid_argument(format!("{what}: a {kind} field"))),
        });
    }
    Ok(out)
}

/// An entry's fields as P4Runtime writes them: wildcards left out.
fn fields(t: &TableInfo, keys: &[Match]) -> Vec<pb::FieldMatch> {
    use pb::field_match::{self as fm, FieldMatchType as F};
    t.keys
        .iter()
        .zip(keys)
        .filter_map(|(k, m)| {
            let kind = match *m {
                Match::Exact(v) => F::Exact(fm::Exact { value: encode(v) }),
                Match::Ternary { value, mask } => F::Ternary(fm::Ternary { value: encode(value), mask: encode(mask) }),
                Match::Lpm { prefix: 0, .. } | Match::Any => return None,
                Match::Lpm { value, prefix } => F::Lpm(fm::Lpm { value: encode(value), prefix_len: prefix as i32 }),
                Match::Range { low: 0, high } if high == all_ones(k.bitwidth) => return None,
                Match::Range { low, high } => F::Range(fm::Range { low: encode(low), high: encode(high) }),
            };
            Some(pb::FieldMatch { field_id: k.id, field_match_type: Some(kind) })
        })
        .collect()
}

/// The counter, meter or register instance with this id.
fn instance<'i>(list: &'i [ExternInfo], id: u32, kind: &str) -> Result<&'i ExternInfo, Status> {
    list.iter().find(|x| x.preamble.id == id).ok_or_else(|| Status::not_found(format!("no {kind} {id:#x}")))
}

fn table(info: &Info, id: u32) -> Result<&TableInfo, Status> {
    info.table(id).ok_or_else(|| Status::not_found(format!("no table {id:#x}")))
}

/// The target's action name and data for an entry's action.
fn action(info: &Info, t: &TableInfo, a: Option<&pb::TableAction>) -> Result<(String, Vec<u128>), Status> {
    use pb::table_action::Type;
    let a = match a.and_then(|a| a.r#type.as_ref()) {
        Some(Type::Action(a)) => a,
        Some(_) => return Err(Status::unimplemented("action profiles: edgeflow's tables take actions only")),
        None => return Err(Status::invalid_argument(format!("{}: an entry needs an action", t.preamble.name))),
    };
    if !t.action_ids.contains(&a.action_id) {
        return Err(Status::invalid_argument(format!("{} has no action {:#x}", t.preamble.name, a.action_id)));
    }
    let info = info.action(a.action_id).ok_or_else(|| Status::not_found(format!("no action {:#x}", a.action_id)))?;
    let mut args = Vec::new();
    for p in &info.params {
        let given = a.params.iter().filter(|g| g.param_id == p.id).collect::<Vec<_>>();
        let [given] = given.as_slice() else {
            return Err(Status::invalid_argument(format!(
                "{}: parameter {} must be given once",
                info.preamble.name, p.name
            )));
        };
        args.push(decode(&given.value, p.bitwidth, &format!("{}: {}", info.preamble.name, p.name))?);
    }
    if a.params.len() != info.params.len() {
        return Err(Status::invalid_argument(format!(
            "{} takes {} parameter(s)",
            info.preamble.name,
            info.params.len()
        )));
    }
    Ok((info.target.clone(), args))
}

fn action_message(info: &Info, t: &TableInfo, name: &str, args: &[u128]) -> Option<pb::TableAction> {
    let a = t.action_ids.iter().filter_map(|&id| info.action(id)).find(|a| a.target == name)?;
    let params =
        a.params.iter().zip(args).map(|(p, &v)| pb::action::Param { param_id: p.id, value: encode(v) }).collect();
    Some(pb::TableAction {
        r#type: Some(pb::table_action::Type::Action(pb::Action { action_id: a.preamble.id, params })),
    })
}

fn rates(c: &pb::MeterConfig) -> Result<[u64; 4], Status> {
    let r = [c.cir, c.cburst, c.pir, c.pburst];
    if r.iter().any(|&x| x < 0) {
        return Err(Status::invalid_argument("meter rates and bursts are not negative"));
    }
    Ok(r.map(|x| x as u64))
}

fn meter_config(r: Option<[u64; 4]>) -> Option<pb::MeterConfig> {
    r.map(|[cir, cburst, pir, pburst]| pb::MeterConfig {
        cir: cir as i64,
        cburst: cburst as i64,
        pir: pir as i64,
        pburst: pburst as i64,
        eburst: 0,
    })
}

fn index(i: Option<&pb::Index>, size: usize, what: &str) -> Result<Option<usize>, Status> {
    match i {
        None => Ok(None),
        Some(i) if i.index >= 0 && (i.index as usize) < size => Ok(Some(i.index as usize)),
        Some(i) => Err(Status::out_of_range(format!("{what} has {size} cells; {} is not one", i.index))),
    }
}

/// One update of a write request, on the switch.
fn update(sw: &mut Switch, info: &Info, u: &pb::Update) -> Result<(), Status> {
    use pb::entity::Entity as E;
    use pb::update::Type as U;
    let kind = U::try_from(u.r#type).map_err(|_| Status::invalid_argument("an update of unknown type"))?;
    let entity = u.entity.as_ref().and_then(|e| e.entity.as_ref());
    let invalid = |e: String| Status::invalid_argument(e);
    match entity {
        Some(E::TableEntry(e)) => {
            let t = table(info, e.table_id)?;
            if e.is_default_action {
                if kind != U::Modify {
                    return Err(invalid(format!("{}: the default entry is only modified", t.preamble.name)));
                }
                let (name, args) = action(info, t, e.action.as_ref())?;
                return sw.set_default_action(&t.target, &name, args).map_err(Status::permission_denied);
            }
            if t.is_const {
                return Err(Status::permission_denied(format!("{}: its entries are the program's", t.preamble.name)));
            }
            let keys = matches(t, &e.r#match)?;
            let priority = e.priority as i64;
            if prioritised(t) != (priority != 0) || priority < 0 {
                return Err(invalid(format!(
                    "{}: {}",
                    t.preamble.name,
                    if prioritised(t) { "its entries need a priority above 0" } else { "its entries take no priority" }
                )));
            }
            let exists =
                sw.entries(&t.target).is_some_and(|es| es.iter().any(|x| x.keys == keys && x.priority == priority));
            match kind {
                U::Insert | U::Modify => {
                    if kind == U::Insert && exists {
                        return Err(Status::already_exists(format!("{}: the entry exists", t.preamble.name)));
                    }
                    if kind == U::Modify && !exists {
                        return Err(Status::not_found(format!("{}: no such entry", t.preamble.name)));
                    }
                    if kind == U::Insert && sw.entries(&t.target).map_or(0, |es| es.len()) as u64 >= t.size {
                        return Err(Status::resource_exhausted(format!(
                            "{} is full ({} entries)",
                            t.preamble.name, t.size
                        )));
                    }
                    let (name, args) = action(info, t, e.action.as_ref())?;
                    sw.insert(&t.target, keys.clone(), &name, args, priority).map_err(invalid)?;
                    if let Some(c) = &e.meter_config {
                        sw.set_entry_meter(&t.target, &keys, priority, rates(c)?).map_err(invalid)?;
                    }
                    Ok(())
                }
                U::Delete => sw.delete(&t.target, &keys, priority).map_err(Status::not_found),
                U::Unspecified => Err(invalid("an update of unspecified type".into())),
            }
        }
        Some(E::CounterEntry(c)) if kind == U::Modify => {
            let x = instance(&info.counters, c.counter_id, "counter")?;
            let data = c.data.unwrap_or_default();
            let cells = sw.cells(&x.target).unwrap_or(0);
            let at = match index(c.index.as_ref(), cells, &x.preamble.name)? {
                Some(i) => i..i + 1,
                None => 0..cells,
            };
            for i in at {
                sw.set_counter(&x.target, i, data.packet_count as u64, data.byte_count as u64).map_err(invalid)?;
            }
            Ok(())
        }
        Some(E::MeterEntry(m)) if kind == U::Modify => {
            let x = instance(&info.meters, m.meter_id, "meter")?;
            let cells = sw.cells(&x.target).unwrap_or(0);
            let i = index(m.index.as_ref(), cells, &x.preamble.name)?
                .ok_or_else(|| invalid(format!("{}: a meter cell is written by its index", x.preamble.name)))?;
            let config = m.config.as_ref().ok_or_else(|| invalid("a meter entry needs its config".into()))?;
            let [cir, cburst, pir, pburst] = rates(config)?;
            sw.set_meter(&x.target, i, cir, cburst, pir, pburst).map_err(invalid)
        }
        Some(E::DirectMeterEntry(m)) if kind == U::Modify => {
            let e =
                m.table_entry.as_ref().ok_or_else(|| invalid("a direct meter entry names its table entry".into()))?;
            let t = table(info, e.table_id)?;
            let keys = matches(t, &e.r#match)?;
            let config = m.config.as_ref().ok_or_else(|| invalid("a direct meter entry needs its config".into()))?;
            sw.set_entry_meter(&t.target, &keys, e.priority as i64, rates(config)?).map_err(invalid)
        }
        Some(E::RegisterEntry(r)) if kind == U::Modify => {
            let x = instance(&info.registers, r.register_id, "register")?;
            let cells = sw.cells(&x.target).unwrap_or(0);
            let i = index(r.index.as_ref(), cells, &x.preamble.name)?
                .ok_or_else(|| invalid(format!("{}: a register cell is written by its index", x.preamble.name)))?;
            let value = match r.data.as_ref().and_then(|d| d.data.as_ref()) {
                Some(pb::p4_data::Data::Bitstring(b)) => decode(b, x.bitwidth, &x.preamble.name)?,
                _ => return Err(invalid(format!("{}: its cells are bitstrings", x.preamble.name))),
            };
            sw.set_register(&x.target, i, value).map_err(invalid)
        }
        Some(E::CounterEntry(_) | E::MeterEntry(_) | E::DirectMeterEntry(_) | E::RegisterEntry(_)) => {
            Err(invalid("counter, meter and register entries are only modified".into()))
        }
        Some(E::DirectCounterEntry(_)) => Err(Status::unimplemented("writing direct counters")),
        Some(other) => Err(Status::unimplemented(format!("{} entities", entity_kind(other)))),
        None => Err(invalid("an update without an entity".into())),
    }
}

fn entity_kind(e: &pb::entity::Entity) -> &'static str {
    use pb::entity::Entity as E;
    match e {
        E::ExternEntry(_) => "extern",
        E::TableEntry(_) => "table",
        E::ActionProfileMember(_) | E::ActionProfileGroup(_) => "action profile",
        E::MeterEntry(_) | E::DirectMeterEntry(_) => "meter",
        E::CounterEntry(_) | E::DirectCounterEntry(_) => "counter",
        E::PacketReplicationEngineEntry(_) => "packet replication engine",
        E::ValueSetEntry(_) => "value set",
        E::RegisterEntry(_) => "register",
        E::DigestEntry(_) => "digest",
    }
}

/// The entries a read asks for, of `tables` (every one for table id 0, else the one named): all
/// of them, or the one with the request's match and priority.
fn entries_wanted<'s, 'i>(
    sw: &'s Switch,
    info: &'i Info,
    tables: impl Iterator<Item = &'i TableInfo>,
    want: &pb::TableEntry,
) -> Result<Vec<(&'i TableInfo, &'s Entry)>, Status> {
    let tables: Vec<&TableInfo> = match want.table_id {
        0 => tables.collect(),
        id => vec![table(info, id)?],
    };
    let mut out = Vec::new();
    for t in tables {
        let wanted = if want.r#match.is_empty() { None } else { Some(matches(t, &want.r#match)?) };
        for e in sw.entries(&t.target).unwrap_or(&[]) {
            if wanted.as_ref().is_none_or(|k| *k == e.keys && e.priority == want.priority as i64) {
                out.push((t, e));
            }
        }
    }
    Ok(out)
}

/// The cells a read of counters, meters or registers asks for: of every instance (id 0) or the
/// one named, every cell or the one indexed.
fn cells_wanted<'i>(
    sw: &Switch,
    list: &'i [ExternInfo],
    id: u32,
    at: Option<&pb::Index>,
    kind: &str,
) -> Result<Vec<(&'i ExternInfo, usize)>, Status> {
    if id != 0 {
        instance(list, id, kind)?;
    }
    let mut out = Vec::new();
    for x in list.iter().filter(|x| id == 0 || x.preamble.id == id) {
        let cells = sw.cells(&x.target).unwrap_or(0);
        match index(at, cells, &x.preamble.name)? {
            Some(i) => out.push((x, i)),
            None => out.extend((0..cells).map(|i| (x, i))),
        }
    }
    Ok(out)
}

/// The entries one read entity asks for.
fn read(sw: &Switch, info: &Info, entity: &pb::Entity, out: &mut Vec<pb::Entity>) -> Result<(), Status> {
    use pb::entity::Entity as E;
    let wrap = |e: E| pb::Entity { entity: Some(e) };
    let counts =
        |(packets, bytes): (u64, u64)| pb::CounterData { packet_count: packets as i64, byte_count: bytes as i64 };
    let index = |i: usize| Some(pb::Index { index: i as i64 });
    match entity.entity.as_ref() {
        Some(E::TableEntry(want)) if want.is_default_action => {
            let tables: Vec<&TableInfo> = match want.table_id {
                0 => info.tables.iter().collect(),
                id => vec![table(info, id)?],
            };
            for t in tables {
                let (name, args) = sw.default_action(&t.target).unwrap_or(("NoAction", &[]));
                out.push(wrap(E::TableEntry(pb::TableEntry {
                    table_id: t.preamble.id,
                    action: action_message(info, t, name, args),
                    is_default_action: true,
                    ..Default::default()
                })));
            }
        }
        Some(E::TableEntry(want)) => {
            for (t, e) in entries_wanted(sw, info, info.tables.iter(), want)? {
                let meter = t.direct_meter.and_then(|_| sw.entry_meter(&t.target, &e.keys, e.priority).flatten());
                out.push(wrap(E::TableEntry(pb::TableEntry {
                    table_id: t.preamble.id,
                    r#match: fields(t, &e.keys),
                    action: action_message(info, t, &e.action, &e.args),
                    priority: e.priority as i32,
                    counter_data: t.direct_counter.map(|_| counts((e.packets, e.bytes))),
                    meter_config: meter_config(meter),
                    is_const: t.is_const,
                    ..Default::default()
                })));
            }
        }
        Some(E::DirectCounterEntry(want)) => {
            let want = want.table_entry.clone().unwrap_or_default();
            let tables = info.tables.iter().filter(|t| t.direct_counter.is_some());
            for (t, e) in entries_wanted(sw, info, tables, &want)? {
                out.push(wrap(E::DirectCounterEntry(pb::DirectCounterEntry {
                    table_entry: Some(pb::TableEntry {
                        table_id: t.preamble.id,
                        r#match: fields(t, &e.keys),
                        priority: e.priority as i32,
                        ..Default::default()
                    }),
                    data: Some(counts((e.packets, e.bytes))),
                })));
            }
        }
        Some(E::CounterEntry(want)) => {
            for (x, i) in cells_wanted(sw, &info.counters, want.counter_id, want.index.as_ref(), "counter")? {
                out.push(wrap(E::CounterEntry(pb::CounterEntry {
                    counter_id: x.preamble.id,
                    index: index(i),
                    data: sw.counter(&x.target, i).map(counts),
                })));
            }
        }
        Some(E::MeterEntry(want)) => {
            for (x, i) in cells_wanted(sw, &info.meters, want.meter_id, want.index.as_ref(), "meter")? {
                out.push(wrap(E::MeterEntry(pb::MeterEntry {
                    meter_id: x.preamble.id,
                    index: index(i),
                    config: meter_config(sw.meter(&x.target, i).flatten()),
                    counter_data: None,
                })));
            }
        }
        Some(E::RegisterEntry(want)) => {
            for (x, i) in cells_wanted(sw, &info.registers, want.register_id, want.index.as_ref(), "register")? {
                let value = sw.register(&x.target, i).unwrap_or(0);
                out.push(wrap(E::RegisterEntry(pb::RegisterEntry {
                    register_id: x.preamble.id,
                    index: index(i),
                    data: Some(pb::P4Data { data: Some(pb::p4_data::Data::Bitstring(encode(value))) }),
                })));
            }
        }
        Some(other) => return Err(Status::unimplemented(format!("reading {} entities", entity_kind(other)))),
        None => return Err(Status::invalid_argument("a read of no entity")),
    }
    Ok(())
}

/// A write's outcome as P4Runtime reports a batch (§12.3): OK, or UNKNOWN with one p4.v1.Error
/// per update in the details, in the updates' order.
fn batch_status(results: Vec<Result<(), Status>>) -> Result<(), Status> {
    let failed = results.iter().filter(|r| r.is_err()).count();
    if failed == 0 {
        return Ok(());
    }
    let details = results
        .iter()
        .map(|r| {
            let error = match r {
                Ok(()) => pb::Error { canonical_code: Code::Ok as i32, ..Default::default() },
                Err(s) => pb::Error {
                    canonical_code: s.code() as i32,
                    message: s.message().to_string(),
                    ..Default::default()
                },
            };
            prost_types::Any { type_url: "type.googleapis.com/p4.v1.Error".into(), value: error.encode_to_vec() }
        })
        .collect();
    let first = results.into_iter().find_map(Result::err).expect("one failed");
    let message = format!("{failed} update(s) failed; the first: {}", first.message());
    let status = rpc::Status { code: Code::Unknown as i32, message: message.clone(), details };
    Err(Status::with_details(Code::Unknown, message, status.encode_to_vec().into()))
}

type Stream<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl P4Runtime for Service {
    async fn write(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        let w = request.into_inner();
        self.check_device(w.device_id)?;
        self.check_primary(w.election_id)?;
        if !w.role.is_empty() {
            return Err(Status::unimplemented("roles: edgeflow serves the default role only"));
        }
        if w.atomicity != pb::write_request::Atomicity::ContinueOnError as i32 {
            return Err(Status::unimplemented("atomic batches: updates are applied one by one (CONTINUE_ON_ERROR)"));
        }
        let results = self
            .on_switch(move |sw| {
                let info = sw.info();
                w.updates.iter().map(|u| update(sw, &info, u)).collect::<Vec<_>>()
            })
            .await?;
        batch_status(results)?;
        Ok(Response::new(pb::WriteResponse {}))
    }

    type ReadStream = Stream<pb::ReadResponse>;

    async fn read(&self, request: Request<pb::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        let r = request.into_inner();
        self.check_device(r.device_id)?;
        let entities = self
            .on_switch(move |sw| {
                let info = sw.info();
                let mut out = Vec::new();
                for e in &r.entities {
                    read(sw, &info, e, &mut out)?;
                }
                Ok::<_, Status>(out)
            })
            .await??;
        let reply = pb::ReadResponse { entities };
        Ok(Response::new(Box::pin(tokio_stream::iter([Ok(reply)]))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<pb::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<pb::SetForwardingPipelineConfigResponse>, Status> {
        let r = request.into_inner();
        self.check_device(r.device_id)?;
        self.check_primary(r.election_id)?;
        let config = r.config.unwrap_or_default();
        let name = self.shared.name.clone();
        let ours = self.on_switch(move |sw| crate::p4info::p4info(&sw.info(), &name)).await?;
        if config.p4info.as_ref() != Some(&ours) {
            return Err(Status::unimplemented(
                "replacing the program: edgeflow runs the program its configuration names ([p4] program); \
                 change it there and reload, and push only the P4Info the switch publishes",
            ));
        }
        *self.shared.cookie.lock().unwrap() = config.cookie.map_or(0, |c| c.cookie);
        Ok(Response::new(pb::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<pb::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<pb::GetForwardingPipelineConfigResponse>, Status> {
        use pb::get_forwarding_pipeline_config_request::ResponseType as T;
        let r = request.into_inner();
        self.check_device(r.device_id)?;
        let name = self.shared.name.clone();
        let p4info = self.on_switch(move |sw| crate::p4info::p4info(&sw.info(), &name)).await?;
        let cookie = Some(pb::forwarding_pipeline_config::Cookie { cookie: *self.shared.cookie.lock().unwrap() });
        let with_info = matches!(T::try_from(r.response_type), Ok(T::All | T::P4infoAndCookie));
        let config =
            pb::ForwardingPipelineConfig { p4info: with_info.then_some(p4info), p4_device_config: Vec::new(), cookie };
        Ok(Response::new(pb::GetForwardingPipelineConfigResponse { config: Some(config) }))
    }

    type StreamChannelStream = Stream<pb::StreamMessageResponse>;

    async fn stream_channel(
        &self,
        request: Request<Streaming<pb::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        use pb::stream_message_request::Update;
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::unbounded_channel();
        let id = {
            let mut arbiter = self.shared.arbiter.lock().unwrap();
            arbiter.next_client += 1;
            let id = arbiter.next_client;
            arbiter.clients.push(Client { id, election: None, tx: tx.clone() });
            id
        };
        let shared = self.shared.clone();
        tokio::spawn(async move {
            while let Ok(Some(msg)) = inbound.message().await {
                let refused = match msg.update {
                    Some(Update::Arbitration(a)) => {
                        shared.arbiter.lock().unwrap().arbitrate(id, shared.device_id, &a).err().map(|e| (e, true))
                    }
                    Some(Update::Packet(_)) => {
                        Some((Status::unimplemented("packet-out: edgeflow's P4 target has no CPU port"), false))
                    }
                    Some(Update::DigestAck(_)) => Some((Status::unimplemented("digests"), false)),
                    _ => None,
                };
                match refused {
                    Some((status, true)) => {
                        let _ = tx.send(Err(status));
                        break;
                    }
                    Some((status, false)) => {
                        let error = pb::StreamError {
                            canonical_code: status.code() as i32,
                            message: status.message().to_string(),
                            ..Default::default()
                        };
                        let update = pb::stream_message_response::Update::Error(error);
                        let _ = tx.send(Ok(pb::StreamMessageResponse { update: Some(update) }));
                    }
                    None => {}
                }
            }
            shared.arbiter.lock().unwrap().leave(id, shared.device_id);
        });
        Ok(Response::new(Box::pin(UnboundedReceiverStream::new(rx))))
    }

    async fn capabilities(
        &self,
        _request: Request<pb::CapabilitiesRequest>,
    ) -> Result<Response<pb::CapabilitiesResponse>, Status> {
        Ok(Response::new(pb::CapabilitiesResponse { p4runtime_api_version: API_VERSION.into(), experimental: None }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p4::info::{KeyField, Preamble};

    fn table(kinds: &[(&str, u32)]) -> TableInfo {
        TableInfo {
            preamble: Preamble { id: 0x0200_0001, name: "I.t".into(), alias: "t".into() },
            target: "I.t".into(),
            keys: kinds
                .iter()
                .enumerate()
                .map(|(i, (kind, width))| KeyField {
                    id: i as u32 + 1,
                    name: format!("k{}", i + 1),
                    bitwidth: *width,
                    match_kind: kind.to_string(),
                })
                .collect(),
            action_ids: vec![],
            default_action: None,
            size: 16,
            is_const: false,
            direct_counter: None,
            direct_meter: None,
        }
    }

    fn field(id: u32, kind: pb::field_match::FieldMatchType) -> pb::FieldMatch {
        pb::FieldMatch { field_id: id, field_match_type: Some(kind) }
    }

    #[test]
    fn matches_follow_p4runtimes_rules_and_read_back_as_written() {
        use pb::field_match::{Exact, FieldMatchType as F, Lpm, Range, Ternary};
        let t = table(&[("exact", 16), ("lpm", 32), ("ternary", 8), ("range", 8)]);
        let exact = field(1, F::Exact(Exact { value: vec![0, 0, 7] }));
        // Left out: a wildcard, a full range.
        let keys = matches(&t, std::slice::from_ref(&exact)).unwrap();
        assert_eq!(keys, [Match::Exact(7), Match::Any, Match::Any, Match::Range { low: 0, high: 255 }]);
        assert_eq!(fields(&t, &keys), [field(1, F::Exact(Exact { value: vec![7] }))], "canonical, wildcards out");
        let full = vec![
            exact.clone(),
            field(2, F::Lpm(Lpm { value: vec![10, 1, 0, 0], prefix_len: 16 })),
            field(3, F::Ternary(Ternary { value: vec![0x10], mask: vec![0xf0] })),
            field(4, F::Range(Range { low: vec![2], high: vec![9] })),
        ];
        let keys = matches(&t, &full).unwrap();
        let mut canonical = full.clone();
        canonical[0] = field(1, F::Exact(Exact { value: vec![7] }));
        assert_eq!(fields(&t, &keys), canonical);
        let refused = |fs: Vec<pb::FieldMatch>| matches(&t, &fs).unwrap_err();
        assert_eq!(refused(vec![]).message(), "I.t: k1: an exact field must be given");
        let mut f = full.clone();
        f[2] = field(3, F::Ternary(Ternary { value: vec![0], mask: vec![0] }));
        assert!(refused(f).message().contains("a wildcard is written by leaving the field out"));
        let mut f = full.clone();
        f[1] = field(2, F::Lpm(Lpm { value: vec![10, 1, 0, 1], prefix_len: 16 }));
        assert!(refused(f).message().contains("bits past the prefix"));
        let mut f = full.clone();
        f[3] = field(4, F::Range(Range { low: vec![9], high: vec![2] }));
        assert!(refused(f).message().contains("low end is above its high end"));
        let mut f = full.clone();
        f[0] = field(1, F::Exact(Exact { value: vec![1, 0, 0] }));
        assert_eq!(refused(f).code(), Code::OutOfRange);
        let mut f = full.clone();
        f[1] = field(2, F::Exact(Exact { value: vec![1] }));
        assert_eq!(refused(f).message(), "I.t: k2: a lpm field");
        assert!(refused(vec![exact.clone(), exact.clone()]).message().contains("given twice"));
        assert!(refused(vec![field(9, F::Exact(Exact { value: vec![1] }))]).message().contains("no match field 9"));
    }

    /// What each client was last told: its status code and the election id it names.
    fn told(rx: &mut mpsc::UnboundedReceiver<Result<pb::StreamMessageResponse, Status>>) -> Option<(i32, u128)> {
        let mut last = None;
        while let Ok(Ok(msg)) = rx.try_recv() {
            if let Some(pb::stream_message_response::Update::Arbitration(a)) = msg.update {
                let e = a.election_id.unwrap();
                last = Some((a.status.unwrap().code, ((e.high as u128) << 64) | e.low as u128));
            }
        }
        last
    }

    #[test]
    fn the_highest_bidder_is_primary_until_it_leaves() {
        let mut arbiter = Arbiter::default();
        let mut rx = Vec::new();
        for id in 1..=3 {
            let (tx, r) = mpsc::unbounded_channel();
            arbiter.clients.push(Client { id, election: None, tx });
            rx.push(r);
        }
        let bid = |e: u128| pb::MasterArbitrationUpdate {
            device_id: 42,
            election_id: Some(uint128(e)),
            ..Default::default()
        };
        let (ok, backup, none) = (Code::Ok as i32, Code::AlreadyExists as i32, Code::NotFound as i32);
        arbiter.arbitrate(1, 42, &bid(10)).unwrap();
        assert_eq!(told(&mut rx[0]), Some((ok, 10)));
        arbiter.arbitrate(2, 42, &bid(1 << 70)).unwrap();
        assert_eq!((told(&mut rx[0]), told(&mut rx[1])), (Some((backup, 1 << 70)), Some((ok, 1 << 70))));
        assert_eq!(arbiter.arbitrate(3, 42, &bid(10)).unwrap_err().code(), Code::InvalidArgument);
        assert_eq!(arbiter.arbitrate(3, 7, &bid(11)).unwrap_err().code(), Code::NotFound);
        // The primary leaves: nobody is primary until a bid at least as high as its.
        arbiter.leave(2, 42);
        assert_eq!(told(&mut rx[0]), Some((none, 1 << 70)));
        arbiter.arbitrate(1, 42, &bid(1 << 70)).unwrap();
        assert_eq!(told(&mut rx[0]), Some((ok, 1 << 70)));
        assert_eq!(arbiter.primary(), Some((1, 1 << 70)));
    }

    #[test]
    fn a_failed_batch_names_each_updates_outcome_in_order() {
        let status = batch_status(vec![Ok(()), Err(Status::already_exists("twice")), Ok(())]).unwrap_err();
        assert_eq!((status.code(), status.message()), (Code::Unknown, "1 update(s) failed; the first: twice"));
        let details = rpc::Status::decode(status.details()).unwrap();
        let codes: Vec<i32> =
            details.details.iter().map(|a| pb::Error::decode(a.value.as_slice()).unwrap().canonical_code).collect();
        assert_eq!(codes, [Code::Ok as i32, Code::AlreadyExists as i32, Code::Ok as i32]);
        assert!(batch_status(vec![Ok(())]).is_ok());
    }
}
