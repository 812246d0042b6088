//! The P4Runtime service: its RPCs, each checked (device, primary) and run on the program the
//! switch runs.
//!
//! The program's state lives on the forwarding thread, so every request becomes one [`Job`]
//! the switch runs between two frames: a write request's updates all land together, and a read
//! sees one instant. What P4Runtime has and edgeflow's target does not (a program replaced
//! where the kernel runs it) is refused as UNIMPLEMENTED by name.
//!
//! One file per concern: arbitration and roles on the stream channel (`arbitration.rs`),
//! P4Runtime's entities and the target's values (`entity.rs`), writes and their batches
//! (`write.rs`), reads (`read.rs`), multicast groups and clone sessions (`pre.rs`), action
//! profile members and groups and the entries that name them (`profile.rs`), a program
//! from a pipeline config (`pipeline.rs`), packets and digests on the stream channel
//! (`packet_io.rs`), value set members (`value_set.rs`). The P4Info message is `p4info.rs`, the
//! value encoding `codec.rs`. This file, about 710 lines, is the service's one dispatch: each
//! RPC's checks and the job it hands the switch.

mod arbitration;
mod entity;
mod packet_io;
mod pipeline;
mod pre;
mod profile;
mod read;
mod value_set;
mod write;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use p4::backends::software::{Digest, Switch};
use p4::info::Info;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::proto::p4::v1 as pb;
use crate::proto::p4::v1::p4_runtime_server::{P4Runtime, P4RuntimeServer};
use crate::proto::p4::v1::stream_error::Details as StreamErrorDetails;
use arbitration::Arbiter;
pub use read::read_entities;
use write::batch_status;
pub use write::{apply_batch, apply_updates, Atomicity};

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

/// What the program sends the control plane, with its control-plane view when it sent it.
pub enum FromSwitch {
    /// A copy the program sent to the CPU port.
    PacketIn(Arc<Info>, Vec<u8>),
    Digest(Arc<Info>, Digest),
}

/// Where the switch hands [`FromSwitch`] to the server, on the forwarding thread: it never
/// blocks, and what does not fit the server's queue is dropped (and counted).
pub type ToServer = Box<dyn FnMut(FromSwitch) + Send>;

/// Packet-ins and digests that may wait between the forwarding thread and the server.
const FROM_SWITCH_QUEUE: usize = 1024;

/// What the server turned away, for the switch to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A StreamChannel past [`MAX_STREAMS`].
    Stream,
    /// A Write or SetForwardingPipelineConfig that was not the primary's.
    Write,
    /// A client dropped for not reading its stream.
    SlowReader,
    /// A packet-in no primary could take (none connected, or its stream full), or one that did
    /// not fit the server's queue.
    PacketIn,
    /// A digest that no DigestEntry asked for, or that did not fit a queue.
    Digest,
}

/// The switch a P4Runtime server serves.
pub trait Device: Send + Sync + 'static {
    /// Runs `job` on the program's tables and externs; drops it unseen when the switch runs no P4
    /// program (then the request fails as UNAVAILABLE).
    fn run(&self, job: Job);
    /// Counts what the server refused.
    fn refused(&self, _what: Refusal) {}
    /// Whether the kernel runs the program too (tc, xdp), from an object built from it at start
    /// and tables the switch writes there key by key after each change. Then another program
    /// cannot be put in place (the object would go on running the old one), and a batch is not
    /// atomic to the frames the kernel decides. Unless a device says otherwise, it does.
    fn kernel_runs_program(&self) -> bool {
        true
    }
    /// Hands the switch where packet-ins and digests go from now on; a switch without a CPU
    /// port sends only digests.
    fn to_controller(&self, _to: ToServer) {}
    /// Whether the program has a CPU port (packet-ins and packet-outs).
    fn has_cpu_port(&self) -> bool {
        false
    }
    /// A packet-out: `frame` enters the program on the CPU port.
    fn packet_out(&self, _frame: Vec<u8>) {}
}

/// Why a request is refused where the kernel runs the program.
const IN_KERNEL: &str = "on tc and xdp the program runs in the kernel, from an object built from it at start";

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

/// A program saved for COMMIT, with its pipeline config's cookie and source.
struct Saved {
    switch: Switch,
    cookie: u64,
    source: Vec<u8>,
}

struct Shared {
    device_id: u64,
    name: String,
    device: Arc<dyn Device>,
    arbiter: Mutex<Arbiter>,
    /// The cookie the primary last set with the pipeline.
    cookie: Mutex<u64>,
    /// The source of the program a client put in place (empty: the configuration's program).
    source: Mutex<Vec<u8>>,
    /// A program saved (VERIFY_AND_SAVE) and not yet committed: reads and writes go to it until
    /// COMMIT puts it in place of the running one.
    saved: Arc<Mutex<Option<Saved>>>,
    streams_refused: ThrottledWarning,
    slow_readers: ThrottledWarning,
    /// The digests clients configured and their lists; `digest_woken` when an ack or a new
    /// configuration may let a list go.
    digests: Mutex<packet_io::Digests>,
    digest_woken: Notify,
    /// The running program's control-plane view, for packet-outs and digest entries (none until
    /// asked for, and again after the program is replaced).
    running_info: Mutex<Option<Arc<Info>>>,
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
                source: Mutex::new(Vec::new()),
                saved: Arc::new(Mutex::new(None)),
                streams_refused: ThrottledWarning::default(),
                slow_readers: ThrottledWarning::default(),
                digests: Mutex::new(packet_io::Digests::default()),
                digest_woken: Notify::new(),
                running_info: Mutex::new(None),
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

    /// The running program's control-plane view.
    async fn running_info(&self) -> Result<Arc<Info>, Status> {
        if let Some(info) = self.shared.running_info.lock().unwrap().clone() {
            return Ok(info);
        }
        let info = self.on_switch(|sw| sw.info()).await?;
        *self.shared.running_info.lock().unwrap() = Some(info.clone());
        Ok(info)
    }

    /// A packet-out from client `id` (§16.2): only a primary's, on a switch with a CPU port.
    async fn packet_out(&self, id: u64, out: pb::PacketOut) -> Result<(), Status> {
        if !self.shared.arbiter.lock().unwrap().is_primary(id) {
            return Err(Status::permission_denied("packet-out: only a primary client sends packets"));
        }
        if !self.shared.device.has_cpu_port() {
            return Err(Status::failed_precondition(
                "packet-out: the switch has no CPU port ([p4] cpu_port in its configuration)",
            ));
        }
        let frame = packet_io::packet_out(&*self.running_info().await?, &out)?;
        self.shared.device.packet_out(frame);
        Ok(())
    }

    /// A DigestListAck (§17.2): one naming no digest of the program is INVALID_ARGUMENT (§16.4).
    async fn digest_ack(&self, ack: &pb::DigestListAck) -> Result<(), Status> {
        if self.running_info().await?.digest(ack.digest_id).is_none() {
            return Err(Status::invalid_argument(format!(
                "digest list ack: the program has no digest {:#x}",
                ack.digest_id
            )));
        }
        self.shared.digests.lock().unwrap().ack(ack);
        self.shared.digest_woken.notify_one();
        Ok(())
    }

    /// Runs `f` on the program reads and writes address: the one saved for the next COMMIT, or
    /// else the one running.
    async fn on_program<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Switch) -> R + Send + 'static,
    ) -> Result<R, Status> {
        if let Some(saved) = self.shared.saved.lock().unwrap().as_mut() {
            return Ok(f(&mut saved.switch));
        }
        self.on_switch(f).await
    }

    /// Puts `new` in place of the running program, the device's multicast groups kept, or with
    /// `reconcile` all its forwarding state.
    async fn commit(&self, mut new: Switch, reconcile: bool) -> Result<(), Status> {
        if self.shared.device.kernel_runs_program() {
            return Err(Status::unimplemented(format!(
                "replacing the program: {IN_KERNEL}; change [p4] program in the configuration and reload"
            )));
        }
        self.on_switch(move |sw| {
            if reconcile {
                pipeline::carry_state(sw, &mut new)
                    .map_err(|e| Status::invalid_argument(format!("the forwarding state cannot be kept: {e}")))?;
            } else {
                pipeline::carry_groups(sw, &mut new);
            }
            *sw = new;
            Ok::<(), Status>(())
        })
        .await??;
        *self.shared.running_info.lock().unwrap() = None;
        if !reconcile {
            self.shared.digests.lock().unwrap().clear();
        }
        Ok(())
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

    /// Whether a write or pipeline request is the primary client's of the role it names: its
    /// election id, and on the connection of the primary's stream. P4Runtime names the writer by
    /// its role and election id alone and trusts clients to give their own (§5); but every
    /// backup is told the primary's id, so the id alone would let any of them, or anyone who
    /// guessed it, write. Clients send their writes on their stream's gRPC channel, which is one
    /// connection.
    fn check_primary(&self, role: &str, election: Option<pb::Uint128>, peer: Option<SocketAddr>) -> Result<(), Status> {
        let given = election.map(|e| ((e.high as u128) << 64) | e.low as u128);
        let refused = {
            let arbiter = self.shared.arbiter.lock().unwrap();
            match arbiter.primary(role) {
                None if role.is_empty() => "no client is primary (arbitrate on the stream channel first)".to_string(),
                None => format!("no client is primary in role '{role}' (arbitrate for it on the stream channel first)"),
                Some(p) if p.election != given => {
                    "not the primary's election id (arbitrate on the stream channel first)".to_string()
                }
                Some(p) if p.peer.is_none() || p.peer != peer => {
                    "the primary's election id, but not on the connection of the primary's stream".to_string()
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
/// With `tls`, only clients that pass its handshake are served (`crate::tls`).
pub async fn serve(addr: SocketAddr, service: Service, tls: Option<crate::tls::Tls>) -> Result<(), String> {
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("P4Runtime cannot listen on {addr}: {e}"))?;
    let (tx, rx) = mpsc::channel(FROM_SWITCH_QUEUE);
    let device = service.shared.device.clone();
    service.shared.device.to_controller(Box::new(move |what| {
        if let Err(e) = tx.try_send(what) {
            device.refused(match e.into_inner() {
                FromSwitch::PacketIn(..) => Refusal::PacketIn,
                FromSwitch::Digest(..) => Refusal::Digest,
            });
        }
    }));
    tokio::spawn(to_controllers(service.shared.clone(), rx));
    tokio::spawn(async move {
        // One service, served without tonic's router: the router is axum, and P4Runtime's one
        // service answers every other path UNIMPLEMENTED itself (the device image's budget).
        let service = P4RuntimeServer::new(service);
        let server = tonic::transport::Server::builder();
        let served = match tls {
            None => server.serve_with_incoming(service, tokio_stream::wrappers::TcpListenerStream::new(listener)).await,
            #[cfg(feature = "tls")]
            Some(tls) => server.serve_with_incoming(service, crate::tls::incoming(listener, tls)).await,
            #[cfg(not(feature = "tls"))]
            Some(never) => match never {},
        };
        if let Err(e) = served {
            tracing::warn!("P4Runtime server stopped: {e}");
        }
    });
    Ok(())
}

/// Sends the program's packet-ins to the primaries as they come, and its digests as their
/// DigestEntries say, until the switch stops.
async fn to_controllers(shared: Arc<Shared>, mut from_switch: mpsc::Receiver<FromSwitch>) {
    use pb::stream_message_response::Update;
    let send = |update: Update| {
        let msg = pb::StreamMessageResponse { update: Some(update) };
        shared.arbiter.lock().unwrap().to_primaries(&msg)
    };
    loop {
        let due = shared.digests.lock().unwrap().next_due();
        let sleep = async {
            match due {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            what = from_switch.recv() => match what {
                None => return,
                Some(FromSwitch::PacketIn(info, frame)) => {
                    let reached = packet_io::packet_in(&info, frame).map_or(0, |p| send(Update::Packet(p)));
                    if reached == 0 {
                        shared.device.refused(Refusal::PacketIn);
                    }
                }
                Some(FromSwitch::Digest(info, d)) => {
                    if !shared.digests.lock().unwrap().add(&info, &d.name, d.data, Instant::now()) {
                        shared.device.refused(Refusal::Digest);
                    }
                }
            },
            () = sleep => {}
            () = shared.digest_woken.notified() => {}
        }
        let lists = shared.digests.lock().unwrap().due(Instant::now());
        for list in lists {
            send(Update::Digest(list));
        }
    }
}

type Stream<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl P4Runtime for Service {
    async fn write(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        let peer = request.remote_addr();
        let w = request.into_inner();
        self.check_device(w.device_id)?;
        self.check_primary(&w.role, w.election_id, peer)?;
        let atomicity = Atomicity::try_from(w.atomicity)
            .map_err(|_| Status::invalid_argument(format!("no atomicity {}", w.atomicity)))?;
        if atomicity == Atomicity::DataplaneAtomic && self.shared.device.kernel_runs_program() {
            // P4Runtime §12.2: a batch that cannot be made atomic to the data plane is UNIMPLEMENTED.
            return Err(Status::unimplemented(format!(
                "DATAPLANE_ATOMIC: {IN_KERNEL}, and its tables are written there key by key after a batch, \
                 so its frames may see part of one; ROLLBACK_ON_ERROR applies a batch all or nothing"
            )));
        }
        let is_digest = |u: &pb::Update| {
            matches!(u.entity.as_ref().and_then(|e| e.entity.as_ref()), Some(pb::entity::Entity::DigestEntry(_)))
        };
        let digest_updates = w.updates.iter().filter(|u| is_digest(u)).count();
        if digest_updates == 0 {
            let results = self.on_program(move |sw| apply_batch(sw, &w.updates, atomicity)).await?;
            return batch_status(results).map(|()| Response::new(pb::WriteResponse {}));
        }
        if digest_updates != w.updates.len() && atomicity != Atomicity::ContinueOnError {
            return Err(Status::unimplemented(
                "a batch of digest entries and other entities is applied with CONTINUE_ON_ERROR only: \
                 the digests' configuration is the server's, the rest the program's",
            ));
        }
        // Digest entries configure the server, which sends the lists: checked and applied here,
        // the rest on the program; the answers in the updates' order.
        let info = self.running_info().await?;
        let mut digest_results = {
            let mut digests = self.shared.digests.lock().unwrap();
            let mut tried = Vec::new();
            let mut configured = digests.clone();
            for u in w.updates.iter().filter(|u| is_digest(u)) {
                let Some(pb::entity::Entity::DigestEntry(e)) = u.entity.as_ref().and_then(|e| e.entity.as_ref()) else {
                    unreachable!("filtered")
                };
                let kind = pb::update::Type::try_from(u.r#type).unwrap_or(pb::update::Type::Unspecified);
                tried.push(configured.update(&info, kind, e));
            }
            let failed = tried.iter().position(Result::is_err);
            match (failed, atomicity) {
                // All or nothing: the configuration stays as it was.
                (Some(at), a) if a != Atomicity::ContinueOnError => {
                    let cause = tried.swap_remove(at).unwrap_err();
                    tried = write::all_or_nothing(cause, at, w.updates.len());
                }
                _ => *digests = configured,
            }
            tried.into_iter()
        };
        self.shared.digest_woken.notify_one();
        let rest: Vec<pb::Update> = w.updates.iter().filter(|u| !is_digest(u)).cloned().collect();
        let mut rest_results = if rest.is_empty() {
            Vec::new()
        } else {
            self.on_program(move |sw| apply_batch(sw, &rest, atomicity)).await?
        }
        .into_iter();
        let results = w
            .updates
            .iter()
            .map(|u| if is_digest(u) { digest_results.next() } else { rest_results.next() })
            .map(Option::unwrap)
            .collect();
        batch_status(results)?;
        Ok(Response::new(pb::WriteResponse {}))
    }

    type ReadStream = Stream<pb::ReadResponse>;

    async fn read(&self, request: Request<pb::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        let r = request.into_inner();
        self.check_device(r.device_id)?;
        let digest = |e: &pb::Entity| matches!(e.entity, Some(pb::entity::Entity::DigestEntry(_)));
        if !r.entities.is_empty() && r.entities.iter().all(digest) {
            // The digests' configuration is the server's: all of it, or the digests named.
            let configured = self.shared.digests.lock().unwrap().entries();
            let entities = configured
                .into_iter()
                .filter(|c| {
                    r.entities.iter().any(|e| match &e.entity {
                        Some(pb::entity::Entity::DigestEntry(d)) => d.digest_id == 0 || d.digest_id == c.digest_id,
                        _ => false,
                    })
                })
                .map(|c| pb::Entity { entity: Some(pb::entity::Entity::DigestEntry(c)) })
                .collect();
            let reply = pb::ReadResponse { entities };
            return Ok(Response::new(Box::pin(tokio_stream::iter([Ok(reply)]))));
        }
        let entities = self.on_program(move |sw| read_entities(sw, &r.entities)).await??;
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
        self.check_primary(&r.role, r.election_id, peer)?;
        use pb::set_forwarding_pipeline_config_request::Action as A;
        let action = A::try_from(r.action).map_err(|_| Status::invalid_argument(format!("no action {}", r.action)))?;
        let name = self.shared.name.clone();
        let p4info = |sw: &Switch| crate::p4info::p4info(&sw.info(), &name);
        let p4info_on = |name: String| move |sw: &mut Switch| crate::p4info::p4info(&sw.info(), &name);
        if action == A::Commit {
            if r.config.is_some() {
                return Err(Status::invalid_argument("COMMIT puts the saved config in place: it takes none"));
            }
            let saved = self.shared.saved.lock().unwrap().take();
            let Saved { switch, cookie, source } =
                saved.ok_or_else(|| Status::not_found("no config saved (VERIFY_AND_SAVE) to commit"))?;
            let put_back = Saved { switch: switch.snapshot(), cookie, source: source.clone() };
            if let Err(refused) = self.commit(switch, false).await {
                *self.shared.saved.lock().unwrap() = Some(put_back);
                return Err(refused);
            }
            *self.shared.cookie.lock().unwrap() = cookie;
            *self.shared.source.lock().unwrap() = source;
            return Ok(Response::new(pb::SetForwardingPipelineConfigResponse {}));
        }
        if action == A::Unspecified {
            return Err(Status::invalid_argument(
                "an action: VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT, COMMIT or RECONCILE_AND_COMMIT",
            ));
        }
        let config = r.config.ok_or_else(|| Status::invalid_argument("no config"))?;
        let theirs = config.p4info.ok_or_else(|| Status::invalid_argument("the config has no P4Info"))?;
        let cookie = config.cookie.map_or(0, |c| c.cookie);
        if config.p4_device_config.is_empty() {
            // No program: the one in place, which the P4Info must describe; nothing to realize.
            let ours = self.on_program(p4info_on(name.clone())).await?;
            pipeline::describes(&theirs, &ours).map_err(|refused| {
                Status::invalid_argument(format!(
                    "{}; another program comes as its P4 source in p4_device_config",
                    refused.message()
                ))
            })?;
            if action != A::Verify {
                *self.shared.cookie.lock().unwrap() = cookie;
            }
            return Ok(Response::new(pb::SetForwardingPipelineConfigResponse {}));
        }
        // The front end, off the server's thread: the runtime is the OpenFlow agent's too.
        let source = config.p4_device_config;
        let (new, source) = tokio::task::spawn_blocking(move || pipeline::build(&source).map(|new| (new, source)))
            .await
            .map_err(|e| Status::internal(format!("checking the program: {e}")))??;
        pipeline::describes(&theirs, &p4info(&new))?;
        match action {
            A::Verify => {}
            A::VerifyAndSave => {
                if self.shared.device.kernel_runs_program() {
                    return Err(Status::unimplemented(format!("saving a program to commit: {IN_KERNEL}")));
                }
                *self.shared.saved.lock().unwrap() = Some(Saved { switch: new, cookie, source });
            }
            A::VerifyAndCommit | A::ReconcileAndCommit => {
                let reconcile = action == A::ReconcileAndCommit;
                if reconcile {
                    let running = self.on_switch(p4info_on(name.clone())).await?;
                    pipeline::describes(&p4info(&new), &running).map_err(|_| {
                        Status::invalid_argument(
                            "the forwarding state cannot be kept: the program's P4Info is not the running one's",
                        )
                    })?;
                }
                self.commit(new, reconcile).await?;
                *self.shared.saved.lock().unwrap() = None;
                *self.shared.cookie.lock().unwrap() = cookie;
                *self.shared.source.lock().unwrap() = source;
            }
            A::Commit | A::Unspecified => unreachable!("answered above"),
        }
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
        let p4info = self.on_program(move |sw| crate::p4info::p4info(&sw.info(), &name)).await?;
        // The saved program's, if there is one, as reads and writes address it.
        let (cookie, source) = match self.shared.saved.lock().unwrap().as_ref() {
            Some(saved) => (saved.cookie, saved.source.clone()),
            None => (*self.shared.cookie.lock().unwrap(), self.shared.source.lock().unwrap().clone()),
        };
        let cookie = Some(pb::forwarding_pipeline_config::Cookie { cookie });
        let wanted = T::try_from(r.response_type);
        let with_info = matches!(wanted, Ok(T::All | T::P4infoAndCookie));
        let with_source = matches!(wanted, Ok(T::All | T::DeviceConfigAndCookie));
        let config = pb::ForwardingPipelineConfig {
            p4info: with_info.then_some(p4info),
            p4_device_config: if with_source { source } else { Vec::new() },
            cookie,
        };
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
        let service = self.clone();
        tokio::spawn(async move {
            while let Ok(Some(msg)) = inbound.message().await {
                let msg = match msg.update {
                    Some(Update::Packet(out)) => {
                        // The refused packet goes back with its error, for the client to know which.
                        if let Err(refused) = service.packet_out(id, out.clone()).await {
                            let about = StreamErrorDetails::PacketOut(pb::PacketOutError { packet_out: Some(out) });
                            shared.arbiter(|a| a.stream_error(id, device_id, refused, about));
                        }
                        continue;
                    }
                    Some(Update::DigestAck(ack)) => {
                        if let Err(refused) = service.digest_ack(&ack).await {
                            let about = StreamErrorDetails::DigestListAck(pb::DigestListAckError {
                                digest_list_ack: Some(ack),
                            });
                            shared.arbiter(|a| a.stream_error(id, device_id, refused, about));
                        }
                        continue;
                    }
                    _ => msg,
                };
                let ended = shared.arbiter(|a| {
                    if !a.clients.iter().any(|c| c.id == id) {
                        return true; // dropped for not reading
                    }
                    if let Some(Update::Arbitration(u)) = msg.update {
                        match a.arbitrate(id, device_id, &u) {
                            Ok(()) => return false,
                            Err(status) => a.end(id, device_id, status),
                        }
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
