//! The P4Runtime service: arbitration on the stream channel, the pipeline's P4Info, and table,
//! counter, meter and register entries written and read on the program the switch runs.
//!
//! The program's state lives on the forwarding thread, so every request becomes one [`Job`]
//! the switch runs between two frames: a write request's updates all land together, and a read
//! sees one instant. What P4Runtime has and edgeflow's target does not (action profiles, packet
//! I/O on the stream, digests, roles, idle timeouts, replacing the program) is refused as
//! UNIMPLEMENTED by name.
//!
//! About 1 100 lines, one concern: P4Runtime's service, its entities mapped onto the software
//! target's operations and back, with the unit tests of its rules (matches, arbitration, batch
//! errors). The P4Info message is `p4info.rs`, the value encoding `codec.rs`.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use p4::info::{ExternInfo, Info, TableInfo};
use p4::run::{Entry, Match, Switch};
use prost::Message;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};

use crate::codec::{decode, encode};
use crate::proto::google::rpc;
use crate::proto::p4::v1 as pb;
use crate::proto::p4::v1::p4_runtime_server::{P4Runtime, P4RuntimeServer};

/// The P4Runtime release whose schema edgeflow is built from (scripts/setup.sh pins the
/// `p4runtime` package).
pub const API_VERSION: &str = "1.6.0";

/// StreamChannel clients served at once; one more is refused with RESOURCE_EXHAUSTED (P4Runtime
/// §5.3). Each costs a task, a queue and a notice on every change of primary; P4Runtime's
/// reference server (PI) holds as many.
pub const MAX_STREAMS: usize = 16;

/// Messages that may wait for a client to read its stream. Arbitration notices come one per bid
/// and per change of primary, so a client that lets this many pile up has stopped reading (or
/// bids without reading the answers): it is dropped, the last place carrying the reason.
const CLIENT_QUEUE: usize = 16;

/// Work on the running program's state, run by the switch between frames.
pub type Job = Box<dyn FnOnce(&mut Switch) -> Deliver + Send>;
/// A job's answer, which the switch delivers once what the job changed is in force (in the
/// kernel too, where the program runs there).
pub type Deliver = Box<dyn FnOnce() + Send>;

/// What the server turned away, for the switch to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A StreamChannel past [`MAX_STREAMS`].
    Stream,
    /// A Write or SetForwardingPipelineConfig that was not the primary's.
    Write,
    /// A client dropped for not reading its stream.
    SlowReader,
}

/// The switch a P4Runtime server serves.
pub trait Device: Send + Sync + 'static {
    /// Runs `job` on the program's tables and externs; drops it unseen when the switch runs no P4
    /// program (then the request fails as UNAVAILABLE).
    fn run(&self, job: Job);
    /// Counts what the server refused.
    fn refused(&self, _what: Refusal) {}
}

type Outbound = mpsc::Sender<Result<pb::StreamMessageResponse, Status>>;

/// The clients on the stream channel and who among them is primary.
///
/// The primary is the connected client with the highest election id; when it leaves, the
/// connected client with the next highest is primary at once. Here edgeflow departs from
/// P4Runtime (§5, "Client Arbitration"), whose primary is the client with the highest id the
/// server has *ever* seen, so that after the primary leaves nobody is until a client bids that
/// id again; like P4Runtime's reference server (PI), edgeflow forgets the ids of clients that
/// left. Otherwise one client that bid 2^128 - 1 and disconnected would leave every controller
/// whose id comes from its own election a backup until the switch restarted. What that costs:
/// a controller that is still connected with a lower id, say a stale one cut off from its
/// peers, becomes primary while the primary is away.
#[derive(Default)]
struct Arbiter {
    next_client: u64,
    clients: Vec<Client>,
    /// Clients dropped for not reading their stream, not yet counted.
    slow_dropped: u64,
}

struct Client {
    id: u64,
    /// Whether it has sent a MasterArbitrationUpdate: only then is it a controller of the
    /// device, told of changes.
    arbitrated: bool,
    election: Option<u128>,
    /// The connection the stream came on: the primary's writes must come on it too.
    peer: Option<SocketAddr>,
    tx: Outbound,
}

/// Queues `msg` for `client`, keeping the queue's last place for the error that ends its
/// stream; false if the client has stopped reading. A client whose stream is gone is left to
/// its stream's task.
fn deliver(client: &Client, msg: Result<pb::StreamMessageResponse, Status>) -> bool {
    client.tx.is_closed() || (client.tx.capacity() > 1 && client.tx.try_send(msg).is_ok())
}

impl Arbiter {
    fn primary(&self) -> Option<&Client> {
        self.clients.iter().filter(|c| c.election.is_some()).max_by_key(|c| c.election)
    }

    /// Who is primary under which id: a change of either is news to every client.
    fn primary_key(&self) -> Option<(u64, Option<u128>)> {
        self.primary().map(|c| (c.id, c.election))
    }

    /// The clients told of a change: those that have arbitrated.
    fn ids(&self) -> Vec<u64> {
        self.clients.iter().filter(|c| c.arbitrated).map(|c| c.id).collect()
    }

    /// A new stream's client, unless [`MAX_STREAMS`] are open.
    fn join(&mut self, peer: Option<SocketAddr>, tx: Outbound) -> Option<u64> {
        if self.clients.len() >= MAX_STREAMS {
            return None;
        }
        self.next_client += 1;
        let id = self.next_client;
        self.clients.push(Client { id, arbitrated: false, election: None, peer, tx });
        Some(id)
    }

    /// The arbitration notice `client` is owed (P4Runtime §5.4): OK to the primary, ALREADY_EXISTS
    /// to a backup, NOT_FOUND when there is no primary, with the primary's election id. Backups
    /// are told it as P4Runtime says (a client takes over by bidding above it); what keeps a
    /// backup from writing with it is that a write must come on the primary's connection.
    fn notice(&self, client: &Client, device_id: u64) -> pb::StreamMessageResponse {
        let primary = self.primary();
        let (code, message) = match primary {
            Some(p) if p.id == client.id => (Code::Ok, "primary"),
            Some(_) => (Code::AlreadyExists, "a primary client is connected"),
            None => (Code::NotFound, "no primary client"),
        };
        let update = pb::MasterArbitrationUpdate {
            device_id,
            role: None,
            election_id: primary.and_then(|p| p.election).map(uint128),
            status: Some(rpc::Status { code: code as i32, message: message.into(), details: vec![] }),
        };
        pb::StreamMessageResponse { update: Some(pb::stream_message_response::Update::Arbitration(update)) }
    }

    /// Sends each client of `to` its notice. A client that has stopped reading is dropped, and
    /// if that changes the primary, everyone is told.
    fn tell(&mut self, device_id: u64, mut to: Vec<u64>) {
        loop {
            let before = self.primary_key();
            let slow: Vec<u64> = to
                .iter()
                .filter_map(|&id| self.clients.iter().find(|c| c.id == id))
                .filter(|c| !deliver(c, Ok(self.notice(c, device_id))))
                .map(|c| c.id)
                .collect();
            if slow.is_empty() {
                return;
            }
            for id in slow {
                self.drop_slow(id);
            }
            if self.primary_key() == before {
                return;
            }
            to = self.ids();
        }
    }

    fn drop_slow(&mut self, id: u64) {
        let Some(at) = self.clients.iter().position(|c| c.id == id) else { return };
        let client = self.clients.remove(at);
        let reason = format!("dropped: {CLIENT_QUEUE} messages waited for this client to read its stream");
        let _ = client.tx.try_send(Err(Status::resource_exhausted(reason)));
        self.slow_dropped += 1;
    }

    /// A stream error for client `id` (its stream goes on).
    fn stream_error(&mut self, id: u64, device_id: u64, status: Status) {
        let error = pb::StreamError {
            canonical_code: status.code() as i32,
            message: status.message().to_string(),
            ..Default::default()
        };
        let msg = pb::StreamMessageResponse { update: Some(pb::stream_message_response::Update::Error(error)) };
        let Some(client) = self.clients.iter().find(|c| c.id == id) else { return };
        if !deliver(client, Ok(msg)) {
            let before = self.primary_key();
            self.drop_slow(id);
            if self.primary_key() != before {
                self.tell(device_id, self.ids());
            }
        }
    }

    /// A client's bid; an error ends its stream ([`Arbiter::end`]).
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
        let before = self.primary_key();
        let Some(client) = self.clients.iter_mut().find(|c| c.id == id) else { return Ok(()) };
        client.arbitrated = true;
        client.election = election;
        let to = if self.primary_key() != before { self.ids() } else { vec![id] };
        self.tell(device_id, to);
        Ok(())
    }

    /// Ends client `id`'s stream with `status`.
    fn end(&mut self, id: u64, device_id: u64, status: Status) {
        if let Some(client) = self.clients.iter().find(|c| c.id == id) {
            // The place deliver() keeps free.
            let _ = client.tx.try_send(Err(status));
        }
        self.leave(id, device_id);
    }

    fn leave(&mut self, id: u64, device_id: u64) {
        let before = self.primary_key();
        self.clients.retain(|c| c.id != id);
        if self.primary_key() != before {
            self.tell(device_id, self.ids());
        }
    }
}

fn uint128(v: u128) -> pb::Uint128 {
    pb::Uint128 { high: (v >> 64) as u64, low: v as u64 }
}

/// A warning said at most every 10 s, with how many times it happened since: a client repeating
/// what is refused must not flood the log.
#[derive(Default)]
struct ThrottledWarning(Mutex<(Option<Instant>, u64)>);

impl ThrottledWarning {
    fn note(&self, say: impl FnOnce(u64)) {
        let mut state = self.0.lock().unwrap();
        state.1 += 1;
        if state.0.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            say(state.1);
            *state = (Some(Instant::now()), 0);
        }
    }
}

struct Shared {
    device_id: u64,
    name: String,
    device: Arc<dyn Device>,
    arbiter: Mutex<Arbiter>,
    /// The cookie the primary last set with the pipeline.
    cookie: Mutex<u64>,
    streams_refused: ThrottledWarning,
    slow_readers: ThrottledWarning,
}

impl Shared {
    /// Runs `f` on the arbiter, then counts and reports the clients it dropped for not reading.
    fn arbiter<R>(&self, f: impl FnOnce(&mut Arbiter) -> R) -> R {
        let (r, dropped) = {
            let mut arbiter = self.arbiter.lock().unwrap();
            let r = f(&mut arbiter);
            (r, std::mem::take(&mut arbiter.slow_dropped))
        };
        for _ in 0..dropped {
            self.device.refused(Refusal::SlowReader);
            self.slow_readers.note(|n| {
                tracing::warn!(
                    "P4Runtime: {n} client(s) dropped for not reading their stream ({CLIENT_QUEUE} messages waiting)"
                )
            });
        }
        r
    }
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
                streams_refused: ThrottledWarning::default(),
                slow_readers: ThrottledWarning::default(),
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

    /// Whether a write or pipeline request is the primary client's: its election id, and on the
    /// connection of the primary's stream. P4Runtime names the writer by the election id alone
    /// and trusts clients to give their own (§5); but every backup is told the primary's id, so
    /// the id alone would let any of them, or anyone who guessed it, write. Clients send their
    /// writes on their stream's gRPC channel, which is one connection.
    fn check_primary(&self, election: Option<pb::Uint128>, peer: Option<SocketAddr>) -> Result<(), Status> {
        let given = election.map(|e| ((e.high as u128) << 64) | e.low as u128);
        let refused = {
            let arbiter = self.shared.arbiter.lock().unwrap();
            match arbiter.primary() {
                None => "no client is primary (arbitrate on the stream channel first)",
                Some(p) if p.election != given => {
                    "not the primary's election id (arbitrate on the stream channel first)"
                }
                Some(p) if p.peer.is_none() || p.peer != peer => {
                    "the primary's election id, but not on the connection of the primary's stream"
                }
                Some(_) => return Ok(()),
            }
        };
        self.shared.device.refused(Refusal::Write);
        Err(Status::permission_denied(format!("not the primary client: {refused}")))
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

/// A write request's updates applied to the running program, one by one (CONTINUE_ON_ERROR),
/// each with its outcome: what `Write` does on the forwarding thread once the request is the
/// primary's. Public for the fuzz target `p4runtime_handlers`.
pub fn apply_updates(sw: &mut Switch, updates: &[pb::Update]) -> Vec<Result<(), Status>> {
    let info = sw.info();
    updates.iter().map(|u| update(sw, &info, u)).collect()
}

/// The entities a read request asks for, as `Read` answers them on the forwarding thread.
/// Public for the fuzz target `p4runtime_handlers`.
pub fn read_entities(sw: &Switch, entities: &[pb::Entity]) -> Result<Vec<pb::Entity>, Status> {
    let info = sw.info();
    let mut out = Vec::new();
    for e in entities {
        read(sw, &info, e, &mut out)?;
    }
    Ok(out)
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
        let peer = request.remote_addr();
        let w = request.into_inner();
        self.check_device(w.device_id)?;
        self.check_primary(w.election_id, peer)?;
        if !w.role.is_empty() {
            return Err(Status::unimplemented("roles: edgeflow serves the default role only"));
        }
        if w.atomicity != pb::write_request::Atomicity::ContinueOnError as i32 {
            return Err(Status::unimplemented("atomic batches: updates are applied one by one (CONTINUE_ON_ERROR)"));
        }
        let results = self.on_switch(move |sw| apply_updates(sw, &w.updates)).await?;
        batch_status(results)?;
        Ok(Response::new(pb::WriteResponse {}))
    }

    type ReadStream = Stream<pb::ReadResponse>;

    async fn read(&self, request: Request<pb::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        let r = request.into_inner();
        self.check_device(r.device_id)?;
        let entities = self.on_switch(move |sw| read_entities(sw, &r.entities)).await??;
        let reply = pb::ReadResponse { entities };
        Ok(Response::new(Box::pin(tokio_stream::iter([Ok(reply)]))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<pb::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<pb::SetForwardingPipelineConfigResponse>, Status> {
        let peer = request.remote_addr();
        let r = request.into_inner();
        self.check_device(r.device_id)?;
        self.check_primary(r.election_id, peer)?;
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
        let peer = request.remote_addr();
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(CLIENT_QUEUE);
        let shared = self.shared.clone();
        let Some(id) = shared.arbiter(|a| a.join(peer, tx)) else {
            shared.device.refused(Refusal::Stream);
            shared
                .streams_refused
                .note(|n| tracing::warn!(?peer, "P4Runtime: {n} stream(s) refused: {MAX_STREAMS} are open"));
            return Err(Status::resource_exhausted(format!(
                "this switch serves at most {MAX_STREAMS} P4Runtime stream channels at once"
            )));
        };
        let device_id = shared.device_id;
        tokio::spawn(async move {
            while let Ok(Some(msg)) = inbound.message().await {
                let ended = shared.arbiter(|a| {
                    if !a.clients.iter().any(|c| c.id == id) {
                        return true; // dropped for not reading
                    }
                    match msg.update {
                        Some(Update::Arbitration(u)) => match a.arbitrate(id, device_id, &u) {
                            Ok(()) => return false,
                            Err(status) => a.end(id, device_id, status),
                        },
                        Some(Update::Packet(_)) => a.stream_error(
                            id,
                            device_id,
                            Status::unimplemented("packet-out: edgeflow's P4 target has no CPU port"),
                        ),
                        Some(Update::DigestAck(_)) => a.stream_error(id, device_id, Status::unimplemented("digests")),
                        _ => {}
                    }
                    !a.clients.iter().any(|c| c.id == id)
                });
                if ended {
                    break;
                }
            }
            shared.arbiter(|a| a.leave(id, device_id));
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
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

    type Inbox = mpsc::Receiver<Result<pb::StreamMessageResponse, Status>>;

    /// What a client was last told: its status code and the election id it names (0 for none).
    fn told(rx: &mut Inbox) -> Option<(i32, u128)> {
        let mut last = None;
        while let Ok(Ok(msg)) = rx.try_recv() {
            if let Some(pb::stream_message_response::Update::Arbitration(a)) = msg.update {
                let e = a.election_id.unwrap_or_default();
                last = Some((a.status.unwrap().code, ((e.high as u128) << 64) | e.low as u128));
            }
        }
        last
    }

    fn clients(arbiter: &mut Arbiter, n: usize) -> Vec<Inbox> {
        (0..n)
            .map(|_| {
                let (tx, rx) = mpsc::channel(CLIENT_QUEUE);
                arbiter.join(None, tx).unwrap();
                rx
            })
            .collect()
    }

    fn bid(e: u128) -> pb::MasterArbitrationUpdate {
        pb::MasterArbitrationUpdate { device_id: 42, election_id: Some(uint128(e)), ..Default::default() }
    }

    const OK: i32 = Code::Ok as i32;
    const BACKUP: i32 = Code::AlreadyExists as i32;
    const NONE: i32 = Code::NotFound as i32;

    #[test]
    fn the_highest_connected_bidder_is_primary_and_the_next_one_when_it_leaves() {
        let mut arbiter = Arbiter::default();
        let mut rx = clients(&mut arbiter, 3);
        arbiter.arbitrate(1, 42, &bid(10)).unwrap();
        assert_eq!(told(&mut rx[0]), Some((OK, 10)));
        assert_eq!(told(&mut rx[1]), None, "a stream that has not arbitrated is no controller yet");
        arbiter.arbitrate(2, 42, &bid(u128::MAX)).unwrap();
        assert_eq!((told(&mut rx[0]), told(&mut rx[1])), (Some((BACKUP, u128::MAX)), Some((OK, u128::MAX))));
        assert_eq!(arbiter.arbitrate(3, 42, &bid(10)).unwrap_err().code(), Code::InvalidArgument);
        assert_eq!(arbiter.arbitrate(3, 7, &bid(11)).unwrap_err().code(), Code::NotFound);
        // Client 3 bids without an id: a backup, told only.
        arbiter.arbitrate(3, 42, &pb::MasterArbitrationUpdate { device_id: 42, ..Default::default() }).unwrap();
        assert_eq!((told(&mut rx[0]), told(&mut rx[2])), (None, Some((BACKUP, u128::MAX))));
        // The primary leaves: the next highest is primary under its own id, and everyone hears.
        arbiter.leave(2, 42);
        assert_eq!((told(&mut rx[0]), told(&mut rx[2])), (Some((OK, 10)), Some((BACKUP, 10))));
        assert_eq!(arbiter.primary().map(|c| (c.id, c.election)), Some((1, Some(10))));
        // The primary bids higher: the backups hear its new id.
        arbiter.arbitrate(1, 42, &bid(12)).unwrap();
        assert_eq!((told(&mut rx[0]), told(&mut rx[2])), (Some((OK, 12)), Some((BACKUP, 12))));
        // Without a client that bid an id, there is no primary.
        arbiter.leave(1, 42);
        assert_eq!(told(&mut rx[2]), Some((NONE, 0)));
        assert!(arbiter.primary().is_none());
    }

    #[test]
    fn streams_past_the_limit_are_refused() {
        let mut arbiter = Arbiter::default();
        let _rx = clients(&mut arbiter, MAX_STREAMS);
        let (tx, _r) = mpsc::channel(CLIENT_QUEUE);
        assert_eq!(arbiter.join(None, tx.clone()), None);
        arbiter.leave(1, 42);
        assert_eq!(arbiter.join(None, tx), Some(MAX_STREAMS as u64 + 1));
    }

    #[test]
    fn a_primary_that_stops_reading_is_dropped_and_the_next_one_takes_over() {
        let mut arbiter = Arbiter::default();
        let mut rx = clients(&mut arbiter, 2);
        arbiter.arbitrate(2, 42, &bid(5)).unwrap();
        assert_eq!(told(&mut rx[1]), Some((OK, 5)));
        // Client 1 bids without ever reading an answer.
        let mut heard = None;
        for e in 0..CLIENT_QUEUE as u128 {
            arbiter.arbitrate(1, 42, &bid(100 + e)).unwrap();
            heard = told(&mut rx[1]).or(heard);
        }
        assert_eq!(arbiter.slow_dropped, 1);
        assert_eq!(arbiter.ids(), [2]);
        assert_eq!(heard, Some((OK, 5)), "primary again once the silent client is gone");
        let mut answers = 0;
        let last = loop {
            match rx[0].try_recv() {
                Ok(Ok(_)) => answers += 1,
                Ok(Err(status)) => break status,
                Err(e) => panic!("the dropped client's stream ends with an error, not {e:?}"),
            }
        };
        assert_eq!((answers, last.code()), (CLIENT_QUEUE - 1, Code::ResourceExhausted));
        assert!(last.message().contains("read its stream"), "{}", last.message());
        assert!(rx[0].try_recv().is_err(), "nothing after the error: its senders are gone");
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
