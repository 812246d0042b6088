//! Arbitration on the stream channel: the clients, who among them is primary, and the notices
//! they are owed (P4Runtime §5).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::sync::mpsc;
use tonic::{Code, Status};

use super::{CLIENT_QUEUE, MAX_STREAMS};
use crate::proto::google::rpc;
use crate::proto::p4::v1 as pb;

pub(super) type Outbound = mpsc::Sender<Result<pb::StreamMessageResponse, Status>>;

/// The clients on the stream channel and who among them is primary, per role.
///
/// Each role (P4Runtime §5: a name a client gives when it arbitrates; the default role's is
/// empty) has its own primary, arbitrated among the clients of that role alone: election ids
/// are unique within a role, notices go to the role's clients, and a write names its role. No
/// role scheme is agreed with clients, so a role carries no `config` and has full access to the
/// pipeline, as P4Runtime says of a role without one; roles let separate controllers each have
/// a primary, they do not fence them apart.
///
/// A role's primary is its connected client with the highest election id; when it leaves, the
/// connected client with the next highest is primary at once. Here edgeflow departs from
/// P4Runtime (§5, "Client Arbitration"), whose primary is the client with the highest id the
/// server has *ever* seen, so that after the primary leaves nobody is until a client bids that
/// id again; like P4Runtime's reference server (PI), edgeflow forgets the ids of clients that
/// left. Otherwise one client that bid 2^128 - 1 and disconnected would leave every controller
/// whose id comes from its own election a backup until the switch restarted. What that costs:
/// a controller that is still connected with a lower id, say a stale one cut off from its
/// peers, becomes primary while the primary is away.
#[derive(Default)]
pub(super) struct Arbiter {
    pub(super) next_client: u64,
    pub(super) clients: Vec<Client>,
    /// Clients dropped for not reading their stream, not yet counted.
    pub(super) slow_dropped: u64,
}

pub(super) struct Client {
    pub(super) id: u64,
    /// The role it arbitrated for ("" the default), once it has sent a MasterArbitrationUpdate:
    /// only then is it a controller of the device, told of changes in its role.
    pub(super) role: Option<String>,
    pub(super) election: Option<u128>,
    /// The connection the stream came on: the primary's writes must come on it too.
    pub(super) peer: Option<SocketAddr>,
    pub(super) tx: Outbound,
}

/// Queues `msg` for `client`, keeping the queue's last place for the error that ends its
/// stream; false if the client has stopped reading. A client whose stream is gone is left to
/// its stream's task.
fn deliver(client: &Client, msg: Result<pb::StreamMessageResponse, Status>) -> bool {
    client.tx.is_closed() || (client.tx.capacity() > 1 && client.tx.try_send(msg).is_ok())
}

/// Who is primary in each role, under which id: a change of either is news to the role.
type Primaries = BTreeMap<String, (u64, Option<u128>)>;

impl Arbiter {
    /// The primary of `role`.
    pub(super) fn primary(&self, role: &str) -> Option<&Client> {
        self.clients
            .iter()
            .filter(|c| c.role.as_deref() == Some(role) && c.election.is_some())
            .max_by_key(|c| c.election)
    }

    fn primaries(&self) -> Primaries {
        let mut roles: Vec<&str> = self.clients.iter().filter_map(|c| c.role.as_deref()).collect();
        roles.sort_unstable();
        roles.dedup();
        roles.into_iter().filter_map(|r| self.primary(r).map(|p| (r.to_string(), (p.id, p.election)))).collect()
    }

    /// The clients of every role whose primary differs between `before` and now.
    fn told_of_change(&self, before: &Primaries) -> Vec<u64> {
        let now = self.primaries();
        self.clients
            .iter()
            .filter(|c| c.role.as_ref().is_some_and(|r| before.get(r) != now.get(r)))
            .map(|c| c.id)
            .collect()
    }

    /// A new stream's client, unless [`MAX_STREAMS`] are open.
    pub(super) fn join(&mut self, peer: Option<SocketAddr>, tx: Outbound) -> Option<u64> {
        if self.clients.len() >= MAX_STREAMS {
            return None;
        }
        self.next_client += 1;
        let id = self.next_client;
        self.clients.push(Client { id, role: None, election: None, peer, tx });
        Some(id)
    }

    /// The arbitration notice `client` is owed (P4Runtime §5.4): OK to its role's primary,
    /// ALREADY_EXISTS to a backup, NOT_FOUND when the role has no primary, with the primary's
    /// election id. Backups are told it as P4Runtime says (a client takes over by bidding above
    /// it); what keeps a backup from writing with it is that a write must come on the primary's
    /// connection.
    fn notice(&self, client: &Client, device_id: u64) -> pb::StreamMessageResponse {
        let role = client.role.clone().unwrap_or_default();
        let primary = self.primary(&role);
        let (code, message) = match primary {
            Some(p) if p.id == client.id => (Code::Ok, "primary"),
            Some(_) => (Code::AlreadyExists, "a primary client is connected"),
            None => (Code::NotFound, "no primary client"),
        };
        let update = pb::MasterArbitrationUpdate {
            device_id,
            role: (!role.is_empty()).then(|| pb::Role { name: role, ..Default::default() }),
            election_id: primary.and_then(|p| p.election).map(uint128),
            status: Some(rpc::Status { code: code as i32, message: message.into(), details: vec![] }),
        };
        pb::StreamMessageResponse { update: Some(pb::stream_message_response::Update::Arbitration(update)) }
    }

    /// Sends each client of `to` its notice. A client that has stopped reading is dropped, and
    /// if that changes its role's primary, the role's clients are told.
    fn tell(&mut self, device_id: u64, mut to: Vec<u64>) {
        loop {
            let before = self.primaries();
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
            to = self.told_of_change(&before);
            if to.is_empty() {
                return;
            }
        }
    }

    fn drop_slow(&mut self, id: u64) {
        let Some(at) = self.clients.iter().position(|c| c.id == id) else { return };
        let client = self.clients.remove(at);
        let reason = format!("dropped: {CLIENT_QUEUE} messages waited for this client to read its stream");
        let _ = client.tx.try_send(Err(Status::resource_exhausted(reason)));
        self.slow_dropped += 1;
    }

    /// Queues `msg` (a packet-in or a digest list) for each role's primary (P4Runtime §16.1:
    /// backups get none), where at least half the client's queue is free: past that the message
    /// is dropped, not the client, so that arbitration notices keep their places. How many
    /// primaries it reached.
    pub(super) fn to_primaries(&self, msg: &pb::StreamMessageResponse) -> usize {
        let mut reached = 0;
        for (role, _) in self.primaries() {
            let Some(p) = self.primary(&role) else { continue };
            if p.tx.capacity() > CLIENT_QUEUE / 2 && p.tx.try_send(Ok(msg.clone())).is_ok() {
                reached += 1;
            }
        }
        reached
    }

    /// Whether client `id` is its role's primary.
    pub(super) fn is_primary(&self, id: u64) -> bool {
        let Some(client) = self.clients.iter().find(|c| c.id == id) else { return false };
        client.role.as_deref().and_then(|r| self.primary(r)).is_some_and(|p| p.id == id)
    }

    /// A stream error for client `id` (its stream goes on), `about` the message that caused it
    /// (§16.4: the server "is required to set the appropriate field" of `details`).
    pub(super) fn stream_error(&mut self, id: u64, device_id: u64, status: Status, about: pb::stream_error::Details) {
        let error = pb::StreamError {
            canonical_code: status.code() as i32,
            message: status.message().to_string(),
            details: Some(about),
            ..Default::default()
        };
        let msg = pb::StreamMessageResponse { update: Some(pb::stream_message_response::Update::Error(error)) };
        let Some(client) = self.clients.iter().find(|c| c.id == id) else { return };
        if !deliver(client, Ok(msg)) {
            let before = self.primaries();
            self.drop_slow(id);
            self.tell(device_id, self.told_of_change(&before));
        }
    }

    /// A client's bid (§5.3); an error ends its stream ([`Arbiter::end`]).
    pub(super) fn arbitrate(
        &mut self,
        id: u64,
        device_id: u64,
        update: &pb::MasterArbitrationUpdate,
    ) -> Result<(), Status> {
        let Some(client) = self.clients.iter().find(|c| c.id == id) else { return Ok(()) };
        let role = update.role.as_ref().map_or("", |r| r.name.as_str());
        if update.device_id != device_id {
            let message = format!("no device {} here (this switch is {device_id})", update.device_id);
            return Err(match client.role {
                None => Status::not_found(message),
                Some(_) => Status::failed_precondition(message),
            });
        }
        if let Some(was) = client.role.as_deref().filter(|&was| was != role) {
            return Err(Status::failed_precondition(format!(
                "this stream's role is '{was}', not '{role}': a client changes role on a new stream"
            )));
        }
        if update.role.as_ref().is_some_and(|r| r.config.is_some()) {
            return Err(Status::invalid_argument(
                "role.config: edgeflow agrees no role scheme with clients; a role without one has full access",
            ));
        }
        let election = update.election_id.map(|e| ((e.high as u128) << 64) | e.low as u128);
        let taken = |c: &Client| c.id != id && c.role.as_deref() == Some(role) && c.election == election;
        if election.is_some() && self.clients.iter().any(taken) {
            return Err(Status::invalid_argument(format!(
                "election id already used by another client of role '{role}'"
            )));
        }
        let before = self.primaries();
        let Some(client) = self.clients.iter_mut().find(|c| c.id == id) else { return Ok(()) };
        client.role = Some(role.to_string());
        client.election = election;
        let mut to = self.told_of_change(&before);
        if !to.contains(&id) {
            to.push(id);
        }
        self.tell(device_id, to);
        Ok(())
    }

    /// Ends client `id`'s stream with `status`.
    pub(super) fn end(&mut self, id: u64, device_id: u64, status: Status) {
        if let Some(client) = self.clients.iter().find(|c| c.id == id) {
            // The place deliver() keeps free.
            let _ = client.tx.try_send(Err(status));
        }
        self.leave(id, device_id);
    }

    pub(super) fn leave(&mut self, id: u64, device_id: u64) {
        let before = self.primaries();
        self.clients.retain(|c| c.id != id);
        self.tell(device_id, self.told_of_change(&before));
    }
}

pub(super) fn uint128(v: u128) -> pb::Uint128 {
    pb::Uint128 { high: (v >> 64) as u64, low: v as u64 }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(arbiter.primary("").map(|c| (c.id, c.election)), Some((1, Some(10))));
        // The primary bids higher: the backups hear its new id.
        arbiter.arbitrate(1, 42, &bid(12)).unwrap();
        assert_eq!((told(&mut rx[0]), told(&mut rx[2])), (Some((OK, 12)), Some((BACKUP, 12))));
        // Without a client that bid an id, there is no primary.
        arbiter.leave(1, 42);
        assert_eq!(told(&mut rx[2]), Some((NONE, 0)));
        assert!(arbiter.primary("").is_none());
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
        assert_eq!(arbiter.clients.iter().map(|c| c.id).collect::<Vec<_>>(), [2]);
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

    fn bid_in(role: &str, e: u128) -> pb::MasterArbitrationUpdate {
        pb::MasterArbitrationUpdate { role: Some(pb::Role { name: role.into(), ..Default::default() }), ..bid(e) }
    }

    /// What a client was last told of its role: (role name, status code, election id).
    fn told_role(rx: &mut Inbox) -> Option<(String, i32, u128)> {
        let mut last = None;
        while let Ok(Ok(msg)) = rx.try_recv() {
            if let Some(pb::stream_message_response::Update::Arbitration(a)) = msg.update {
                let e = a.election_id.unwrap_or_default();
                let role = a.role.map(|r| r.name).unwrap_or_default();
                last = Some((role, a.status.unwrap().code, ((e.high as u128) << 64) | e.low as u128));
            }
        }
        last
    }

    #[test]
    fn each_role_has_its_own_primary_and_election_ids() {
        let mut arbiter = Arbiter::default();
        let mut rx = clients(&mut arbiter, 4);
        arbiter.arbitrate(1, 42, &bid(10)).unwrap();
        // The same id in another role is another client's to use.
        arbiter.arbitrate(3, 42, &bid_in("acl", 10)).unwrap();
        assert_eq!(told_role(&mut rx[0]), Some(("".into(), OK, 10)));
        assert_eq!(told_role(&mut rx[2]), Some(("acl".into(), OK, 10)), "primary of its role, told its name");
        assert_eq!(arbiter.arbitrate(4, 42, &bid_in("acl", 10)).unwrap_err().code(), Code::InvalidArgument);
        // A higher bid in role acl is news to that role only.
        arbiter.arbitrate(4, 42, &bid_in("acl", 20)).unwrap();
        assert_eq!(
            (told_role(&mut rx[2]), told_role(&mut rx[3])),
            (Some(("acl".into(), BACKUP, 20)), Some(("acl".into(), OK, 20)))
        );
        assert_eq!(told_role(&mut rx[0]), None);
        let primary = |a: &Arbiter, role| a.primary(role).map(|c| c.id);
        assert_eq!((primary(&arbiter, ""), primary(&arbiter, "acl")), (Some(1), Some(4)));
        // A live client keeps its role and device; a role.config, which no scheme here reads, is refused.
        assert_eq!(arbiter.arbitrate(3, 42, &bid_in("other", 30)).unwrap_err().code(), Code::FailedPrecondition);
        assert_eq!(arbiter.arbitrate(3, 7, &bid_in("acl", 30)).unwrap_err().code(), Code::FailedPrecondition);
        let mut configured = bid_in("qos", 5);
        configured.role.as_mut().unwrap().config = Some(prost_types::Any::default());
        assert_eq!(arbiter.arbitrate(2, 42, &configured).unwrap_err().code(), Code::InvalidArgument);
        // Role acl's primary leaves: its backup takes over, and the default role hears nothing.
        arbiter.leave(4, 42);
        assert_eq!(told_role(&mut rx[2]), Some(("acl".into(), OK, 10)));
        assert_eq!(told_role(&mut rx[0]), None);
    }
}
