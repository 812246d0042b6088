//! OpenFlow requests: the ones about ports, queues and the switch itself are answered here; the
//! rest (flows, groups, meters, tables, packet-out, switch config) go to the forwarding mode.

use forwarding::{Mode, PreparedFlowMod, Reply};
use ofp::error::{BadRequest, ErrorCode, QueueOpFailed};
use ofp::message::*;
use ofp::multipart::*;
use ofp::port::OFPP_ANY;
use ofp::Message;

use super::ports::Transmit;
use super::Switch;
use crate::egress::N_QUEUES;
use crate::Replier;

/// `OFPQ_ALL`.
const ALL_QUEUES: u32 = 0xffff_ffff;

impl Switch {
    /// Runs one request at `now` (the caller's clock reading: one a command). Returns whether
    /// it put frames on a port's socket, which the caller then kicks ([`Switch::flush_all`]):
    /// a run of packet-outs leaves with one kick, not one each.
    #[must_use = "frames it sent wait on the sockets until they are kicked"]
    pub(super) fn openflow(&mut self, xid: u32, msg: Message, head: &[u8], reply: &Replier, now: u64) -> bool {
        // Only a request the mode sent frames for (packet-out, a flow-mod naming a buffer) has
        // anything for the ports; the rest do not pay a pass over every port.
        let mut transmitted = true;
        let answer = match msg {
            Message::FeaturesRequest => Ok(Some(Reply::Message(Message::FeaturesReply(self.features())))),
            Message::BarrierRequest => {
                // Everything the controller sent before it is in the mode: the entries a kept
                // fast path inherited from the last run have served their time.
                self.release_inherited("the first barrier");
                Ok(Some(Reply::Message(Message::BarrierReply)))
            }
            Message::PortMod(pm) => self.port_mod(&pm).map(|()| None),
            Message::QueueGetConfigRequest { port } => self.queue_config(port).map(|m| Some(Reply::Message(m))),
            Message::Experimenter(_) => Err(ErrorCode::BadRequest(BadRequest::BadExperimenter)),
            Message::MultipartRequest(req) => {
                self.harvest_fast_within(now, self.stats_age());
                match self.multipart(&req.body) {
                    Some(body) => body.map(|b| Some(Reply::Multipart(b))),
                    None => {
                        self.ask_mode(now, |mode, now, out| mode.openflow(Message::MultipartRequest(req), now, out)).0
                    }
                }
            }
            other => {
                let (answer, went) = self.ask_mode(now, |mode, now, out| mode.openflow(other, now, out));
                transmitted = went;
                answer
            }
        };
        self.answer(xid, answer, head, reply);
        transmitted
    }

    /// Runs a prepared flow-mod at `now`, as [`Switch::openflow`] the flow-mod it was made from
    /// (and returns, as it does, whether frames wait for a kick).
    #[must_use = "frames it sent wait on the sockets until they are kicked"]
    pub(super) fn flow_mod(&mut self, xid: u32, fm: PreparedFlowMod, head: &[u8], reply: &Replier, now: u64) -> bool {
        let (answer, transmitted) = self.ask_mode(now, |mode, now, out| mode.prepared_flow_mod(fm, now, out));
        self.answer(xid, answer, head, reply);
        transmitted
    }

    /// Sends a request's answer: its reply, or the error it met.
    fn answer(&self, xid: u32, answer: Result<Option<Reply>, ErrorCode>, head: &[u8], reply: &Replier) {
        let send = |m: Message| reply(m.encode(xid));
        let error = |code: ErrorCode| reply(Message::Error(ErrorMsg::reply_to(code, head)).encode(xid));
        match answer {
            Ok(Some(Reply::Message(m))) => send(m),
            Ok(Some(Reply::Multipart(body))) => {
                encode_multipart_reply(xid, body).into_iter().for_each(|part| reply(part))
            }
            Ok(None) => {}
            Err(code) => error(code),
        }
    }

    /// The mode's answer, and whether it sent frames to any port.
    fn ask_mode(
        &mut self,
        now: u64,
        ask: impl FnOnce(&mut dyn Mode, u64, &mut Transmit) -> Result<Option<Reply>, ErrorCode>,
    ) -> (Result<Option<Reply>, ErrorCode>, bool) {
        let mut out = Transmit {
            ports: &mut self.ports,
            events: &mut *self.events,
            drops: &mut self.drops,
            sent: &mut self.sent,
            now,
        };
        let answer = ask(&mut *self.mode, now, &mut out);
        let went = !self.sent.is_empty();
        self.sent.clear();
        (answer, went)
    }

    /// Whether controllers see port `no`: on a switch shared by modes, only the OpenFlow part's.
    pub(super) fn seen(&self, no: u32) -> bool {
        self.mode.controller_sees(no)
    }

    fn queue_config(&self, port: u32) -> Result<Message, ErrorCode> {
        if port != OFPP_ANY && (!self.ports.contains_key(&port) || !self.seen(port)) {
            return Err(ErrorCode::QueueOpFailed(QueueOpFailed::BadPort));
        }
        let queues = self
            .ports
            .iter()
            .filter(|(&n, p)| (port == OFPP_ANY || n == port) && p.tx.is_some() && self.seen(n))
            .flat_map(|(&n, _)| {
                (0..N_QUEUES as u32).map(move |q| PacketQueue { queue_id: q, port: n, properties: vec![] })
            })
            .collect();
        Ok(Message::QueueGetConfigReply { port, queues })
    }

    /// The multipart requests about the switch and its ports; `None` for the mode's.
    fn multipart(&mut self, req: &MultipartRequestBody) -> Option<Result<MultipartReplyBody, ErrorCode>> {
        use MultipartRequestBody as R;
        Some(match req {
            R::Desc => Ok(MultipartReplyBody::Desc(Desc {
                mfr_desc: "edgeflow project".into(),
                hw_desc: "Linux userspace datapath (AF_PACKET rings)".into(),
                sw_desc: format!("edgeflow {}", env!("CARGO_PKG_VERSION")),
                serial_num: "none".into(),
                dp_desc: self.cfg.dp_desc.clone(),
            })),
            R::PortDesc => Ok(MultipartReplyBody::PortDesc(
                self.ports
                    .iter()
                    .filter(|(&n, p)| p.tx.is_some() && self.seen(n))
                    .map(|(_, p)| p.desc.clone())
                    .collect(),
            )),
            R::PortStats { port_no } => {
                if *port_no != OFPP_ANY && (!self.ports.contains_key(port_no) || !self.seen(*port_no)) {
                    return Some(Err(ErrorCode::BadRequest(BadRequest::BadPort)));
                }
                let mode = &self.mode;
                Ok(MultipartReplyBody::PortStats(
                    self.ports
                        .iter_mut()
                        .filter(|(&n, _)| (*port_no == OFPP_ANY || n == *port_no) && mode.controller_sees(n))
                        .map(|(&n, p)| p.stats(n))
                        .collect(),
                ))
            }
            R::Queue { port_no, queue_id } => self.queue_stats(*port_no, *queue_id),
            R::Experimenter { experimenter: super::EXPERIMENTER, exp_type: super::STATS_REPORT, .. } => {
                Ok(MultipartReplyBody::Experimenter {
                    experimenter: super::EXPERIMENTER,
                    exp_type: super::STATS_REPORT,
                    data: self.report().to_string().into_bytes(),
                })
            }
            R::Experimenter { experimenter: super::EXPERIMENTER, exp_type: super::LOG_FILTER, data } => {
                Ok(MultipartReplyBody::Experimenter {
                    experimenter: super::EXPERIMENTER,
                    exp_type: super::LOG_FILTER,
                    data: super::report::log_filter(data).to_string().into_bytes(),
                })
            }
            R::Experimenter { experimenter: super::EXPERIMENTER, exp_type: super::MODE_CONTROL, data } => {
                let request = String::from_utf8_lossy(data);
                let answer = self.mode.control(&request);
                // What the request changed is in the kernel before the answer leaves.
                self.sync_fast();
                let answer = match answer {
                    Some(Ok(text)) => serde_json::json!({ "ok": text }),
                    Some(Err(why)) => serde_json::json!({ "error": why }),
                    None => {
                        serde_json::json!({ "error": format!("mode {} takes no control requests", self.mode.name()) })
                    }
                };
                Ok(MultipartReplyBody::Experimenter {
                    experimenter: super::EXPERIMENTER,
                    exp_type: super::MODE_CONTROL,
                    data: answer.to_string().into_bytes(),
                })
            }
            R::Experimenter { experimenter: super::EXPERIMENTER, exp_type: super::TEST_PANIC, .. }
                if super::report::test_panic_armed() =>
            {
                panic!("the test panic was requested (EDGEFLOW_TEST_PANIC armed it)")
            }
            R::Experimenter { experimenter: super::EXPERIMENTER, exp_type: super::KERNEL_DUMP, .. } => {
                let dump = match &self.fast {
                    Some(fast) => fast.dump(),
                    None => serde_json::json!({"error": "this switch has no kernel fast path (datapath user)"}),
                };
                Ok(MultipartReplyBody::Experimenter {
                    experimenter: super::EXPERIMENTER,
                    exp_type: super::KERNEL_DUMP,
                    data: dump.to_string().into_bytes(),
                })
            }
            _ => return None,
        })
    }

    fn queue_stats(&self, port_no: u32, queue_id: u32) -> Result<MultipartReplyBody, ErrorCode> {
        if port_no != OFPP_ANY && (!self.ports.contains_key(&port_no) || !self.seen(port_no)) {
            return Err(ErrorCode::QueueOpFailed(QueueOpFailed::BadPort));
        }
        if queue_id != ALL_QUEUES && queue_id as usize >= N_QUEUES {
            return Err(ErrorCode::QueueOpFailed(QueueOpFailed::BadQueue));
        }
        let mut out = Vec::new();
        let wanted = |n: u32| (port_no == OFPP_ANY || n == port_no) && self.seen(n);
        for (&n, p) in self.ports.iter().filter(|(&n, p)| wanted(n) && p.tx.is_some()) {
            let d = p.created.elapsed();
            for q in (0..N_QUEUES as u32).filter(|&q| queue_id == ALL_QUEUES || q == queue_id) {
                let s = p.egress.stats(q as usize);
                out.push(QueueStats {
                    port_no: n,
                    queue_id: q,
                    tx_bytes: s.tx_bytes,
                    tx_packets: s.tx_packets,
                    tx_errors: s.dropped,
                    duration_sec: d.as_secs() as u32,
                    duration_nsec: d.subsec_nanos(),
                });
            }
        }
        Ok(MultipartReplyBody::Queue(out))
    }
}
