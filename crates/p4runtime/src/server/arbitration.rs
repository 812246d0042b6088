//! Arbitration on the stream channel: the clients, who among them is primary, and the notices
//! they are owed (P4Runtime §5).

use std::net::SocketAddr;

use tokio::sync::mpsc;
use tonic::{Code, Status};

use super::{CLIENT_QUEUE, MAX_STREAMS};
use crate::proto::google::rpc;
use crate::proto::p4::v1 as pb;

pub(super) type Outbound = mpsc::Sender<Result<pb::StreamMessageResponse, Status>>;

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
pub(super) struct Arbiter {
    pub(super) next_client: u64,
    pub(super) clients: Vec<Client>,
    /// Clients dropped for not reading their stream, not yet counted.
    pub(super) slow_dropped: u64,
}

pub(super) struct Client {
    pub(super) id: u64,
    /// Whether it has sent a MasterArbitrationUpdate: only then is it a controller of the
    /// device, told of changes.
    pub(super) arbitrated: bool,
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

impl Arbiter {
    pub(super) fn primary(&self) -> Option<&Client> {
        self.clients.iter().filter(|c| c.election.is_some()).max_by_key(|c| c.election)
    }

    /// Who is primary under which id: a change of either is news to every client.
    pub(super) fn primary_key(&self) -> Option<(u64, Option<u128>)> {
        self.primary().map(|c| (c.id, c.election))
    }

    /// The clients told of a change: those that have arbitrated.
    pub(super) fn ids(&self) -> Vec<u64> {
        self.clients.iter().filter(|c| c.arbitrated).map(|c| c.id).collect()
    }

    /// A new stream's client, unless [`MAX_STREAMS`] are open.
    pub(super) fn join(&mut self, peer: Option<SocketAddr>, tx: Outbound) -> Option<u64> {
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
    pub(super) fn stream_error(&mut self, id: u64, device_id: u64, status: Status) {
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
    pub(super) fn arbitrate(
        &mut self,
        id: u64,
        device_id: u64,
        update: &pb::MasterArbitrationUpdate,
    ) -> Result<(), Status> {
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
    pub(super) fn end(&mut self, id: u64, device_id: u64, status: Status) {
        if let Some(client) = self.clients.iter().find(|c| c.id == id) {
            // The place deliver() keeps free.
            let _ = client.tx.try_send(Err(status));
        }
        self.leave(id, device_id);
    }

    pub(super) fn leave(&mut self, id: u64, device_id: u64) {
        let before = self.primary_key();
        self.clients.retain(|c| c.id != id);
        if self.primary_key() != before {
            self.tell(device_id, self.ids());
        }
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
}
