//! v1model on the software target, as BMv2's simple_switch runs it (issue 52, item 2): the six
//! blocks of a `V1Switch` in their order, the standard metadata the switch fills and reads, and
//! what happens between the blocks — a parser error goes on to ingress in `parser_error`, a
//! checksum that does not verify in `checksum_error`; after ingress an ingress-to-egress clone,
//! a resubmission, the replication engine's copies (one per port and replication id) or the one
//! port `egress_spec` names (511 drops); after egress an egress-to-egress clone, the drop check,
//! the checksums and the deparser, then a recirculation or the frame out (cut by `truncate`).
//!
//! Metadata is reset for every copy the switch makes (clones, resubmissions, recirculations), as
//! BMv2 resets it; `@field_list` preservation is not kept yet (the front end does not keep
//! annotations on struct fields), so the `_preserving_field_list` forms preserve nothing.

use std::collections::VecDeque;

use super::*;

/// The port that drops a frame (BMv2's default), and `egress_spec` as egress finds it (BMv2 sets
/// 512, which the 9-bit field keeps as 0).
pub(super) const DROP_PORT: u128 = 511;

/// `standard_metadata.instance_type`, as BMv2 numbers the copies it makes.
const NORMAL: u128 = 0;
const INGRESS_CLONE: u128 = 1;
const EGRESS_CLONE: u128 = 2;
const RECIRCULATED: u128 = 4;
const REPLICA: u128 = 5;
const RESUBMITTED: u128 = 6;

/// How many times a frame's copies may come back to ingress (resubmitted or recirculated)
/// before the rest are dropped: a program that always recirculates stops here.
const RETURNS: usize = 16;

/// A clone session, as the control plane configures it: BMv2's `mirroring_add` (a port) and
/// `mirroring_add_mc` (a multicast group's members), or P4Runtime's CloneSessionEntry (its own
/// replicas, a class of service, a length to cut the clones to).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Session {
    pub port: Option<u32>,
    pub group: Option<u16>,
    /// A clone to each (port, replication id), in order, besides `port`'s and `group`'s.
    pub replicas: Vec<(u32, u16)>,
    /// The clones' class of service: v1model's `priority` (their queue), PSA's
    /// `class_of_service`.
    pub class_of_service: u8,
    /// The clones cut to at most this many bytes as they leave (after the deparser).
    pub truncate: Option<usize>,
}

/// What a block asked of the switch with an extern call, besides the standard metadata: BMv2
/// keeps these in packet registers, read after the block.
#[derive(Clone, Debug, Default)]
pub(super) struct Requests {
    pub clone: Option<u32>,
    pub resubmit: bool,
    pub recirculate: bool,
    pub truncate: Option<usize>,
    pub checksum_error: bool,
}

/// A frame between ingress and the wire: its headers and metadata, and the payload the parser
/// did not read.
#[derive(Clone)]
struct Copy {
    hdr: Value,
    meta: Value,
    sm: Value,
    payload: Vec<u8>,
    /// The frame as it arrived (its length is `packet_length`).
    length: usize,
    /// Where a clone session cuts this copy as it leaves.
    cut: Option<usize>,
}

enum Job {
    Ingress { frame: Vec<u8>, port: u32, instance: u128 },
    Egress { copy: Copy, port: u32 },
}

impl Switch {
    pub(super) fn is_v1model(&self) -> bool {
        Architecture::of(&self.code.checked) == Some(Architecture::V1Model)
    }

    /// A frame through a V1Switch program: the copies that leave, in the order BMv2's queues
    /// send them on one port.
    pub(super) fn process_v1model(&mut self, frame: &[u8], port: u32, now: u64) -> Result<Vec<Output>, Dropped> {
        let mut jobs = VecDeque::from([Job::Ingress { frame: frame.to_vec(), port, instance: NORMAL }]);
        let mut out = Vec::new();
        let mut returns = 0;
        while let Some(job) = jobs.pop_front() {
            match job {
                Job::Ingress { frame, port, instance } => {
                    if instance != NORMAL {
                        returns += 1;
                        if returns > RETURNS {
                            continue;
                        }
                    }
                    self.v1model_ingress(&frame, port, instance, now, &mut jobs)?;
                }
                Job::Egress { copy, port } => {
                    if let Some(o) = self.v1model_egress(copy, port, now, &mut jobs)? {
                        out.push(o);
                    }
                }
            }
        }
        if out.is_empty() {
            return Err(Dropped::Program);
        }
        Ok(out)
    }

    /// The parser and the checksum verification on `frame`, with fresh metadata.
    fn v1model_parse(&mut self, frame: &[u8], port: u32, instance: u128, now: u64) -> Result<Copy, Dropped> {
        let code = self.code.clone();
        let blocks = &code.checked.blocks;
        let parser = code.block(&blocks[0]);
        let Decl::Parser { params, locals, states, .. } = parser else { unreachable!("checked") };
        let [mut hdr, mut meta, mut sm] = self.initial_values(params);
        set_field(&mut sm, "ingress_port", port as u128);
        set_field(&mut sm, "packet_length", frame.len() as u128);
        set_field(&mut sm, "instance_type", instance);
        set_field(&mut sm, "ingress_global_timestamp", (now / 1000) as u128);

        let mut cx = Cx::new(&blocks[0], &code, frame, frame.len() as u64, now);
        cx.bind(params, vec![hdr, meta, sm]);
        let parsed = self.run_parser(&mut cx, locals, states);
        let payload_at = (cx.cursor / 8).min(frame.len());
        [hdr, meta, sm] = cx.unbind(params).try_into().expect("three");
        // A frame the parser rejects is not dropped: ingress sees why in parser_error.
        match parsed {
            Ok(()) | Err(Stop::Exit) | Err(Stop::Return) | Err(Stop::Returned(_) | Stop::Break | Stop::Continue) => {}
            Err(Stop::Reject(e)) => {
                if let Some(v) = sm.field_mut("parser_error") {
                    *v = Value::Error(e);
                }
            }
            Err(Stop::Unsupported(what)) => return Err(Dropped::Unsupported(what)),
        }
        let payload = frame[payload_at..].to_vec();
        self.requests = Requests::default();
        self.run_block(&code, &blocks[1], &payload, frame.len(), now, &mut [&mut hdr, &mut meta])?;
        if std::mem::take(&mut self.requests).checksum_error {
            set_field(&mut sm, "checksum_error", 1);
        }
        Ok(Copy { hdr, meta, sm, payload, length: frame.len(), cut: None })
    }

    fn v1model_ingress(
        &mut self,
        frame: &[u8],
        port: u32,
        instance: u128,
        now: u64,
        jobs: &mut VecDeque<Job>,
    ) -> Result<(), Dropped> {
        let code = self.code.clone();
        let blocks = &code.checked.blocks;
        let Copy { mut hdr, mut meta, mut sm, payload, length, .. } = self.v1model_parse(frame, port, instance, now)?;
        self.requests = Requests::default();
        self.run_block(&code, &blocks[2], &payload, length, now, &mut [&mut hdr, &mut meta, &mut sm])?;
        let requests = std::mem::take(&mut self.requests);

        if let Some(session) = requests.clone {
            // A copy of the frame as it arrived, parsed again; then BMv2 resets all metadata
            // (what the parser wrote, parser_error and checksum_error included).
            let Copy { hdr, payload, length, .. } = self.v1model_parse(frame, port, INGRESS_CLONE, now)?;
            let [_, meta, mut sm] = self.initial_values(code.parser_params());
            set_field(&mut sm, "instance_type", INGRESS_CLONE);
            set_field(&mut sm, "packet_length", length as u128);
            self.v1model_clone(Copy { hdr, meta, sm, payload, length, cut: None }, session, jobs);
        }
        if requests.resubmit {
            jobs.push_back(Job::Ingress { frame: frame.to_vec(), port, instance: RESUBMITTED });
            return Ok(());
        }
        let group = field(&sm, "mcast_grp") as u16;
        if group != 0 {
            set_field(&mut sm, "instance_type", REPLICA);
            let copy = Copy { hdr, meta, sm, payload, length, cut: None };
            self.v1model_replicate(&copy, group, jobs);
            return Ok(());
        }
        let egress = field(&sm, "egress_spec");
        if egress == DROP_PORT {
            return Ok(());
        }
        set_field(&mut sm, "instance_type", NORMAL);
        jobs.push_back(Job::Egress { copy: Copy { hdr, meta, sm, payload, length, cut: None }, port: egress as u32 });
        Ok(())
    }

    /// One copy per member of multicast group `group`, each with its replication id.
    fn v1model_replicate(&self, copy: &Copy, group: u16, jobs: &mut VecDeque<Job>) {
        for (port, rid) in self.replicas(group) {
            let mut c = copy.clone();
            set_field(&mut c.sm, "egress_rid", rid as u128);
            jobs.push_back(Job::Egress { copy: c, port });
        }
    }

    /// A clone to clone session `session`'s port, group and replicas; none if the session is
    /// not set.
    fn v1model_clone(&self, mut copy: Copy, session: u32, jobs: &mut VecDeque<Job>) {
        let Some(s) = self.sessions.get(&session) else { return };
        copy.cut = s.truncate;
        set_field(&mut copy.sm, "priority", s.class_of_service as u128);
        if let Some(group) = s.group {
            self.v1model_replicate(&copy, group, jobs);
        }
        for &(port, rid) in &s.replicas {
            let mut c = copy.clone();
            set_field(&mut c.sm, "egress_rid", rid as u128);
            jobs.push_back(Job::Egress { copy: c, port });
        }
        if let Some(port) = s.port {
            jobs.push_back(Job::Egress { copy, port });
        }
    }

    fn v1model_egress(
        &mut self,
        copy: Copy,
        port: u32,
        now: u64,
        jobs: &mut VecDeque<Job>,
    ) -> Result<Option<Output>, Dropped> {
        let code = self.code.clone();
        let blocks = &code.checked.blocks;
        let Copy { mut hdr, mut meta, mut sm, payload, length, cut } = copy;
        set_field(&mut sm, "egress_port", port as u128);
        set_field(&mut sm, "egress_spec", 0);
        set_field(&mut sm, "packet_length", length as u128);
        set_field(&mut sm, "egress_global_timestamp", (now / 1000) as u128);
        self.requests = Requests::default();
        self.run_block(&code, &blocks[3], &payload, length, now, &mut [&mut hdr, &mut meta, &mut sm])?;
        let requests = std::mem::take(&mut self.requests);

        if let Some(session) = requests.clone {
            // A copy of the frame as egress left it; its metadata starts again.
            let [_, fresh_meta, mut fresh_sm] = self.initial_values(code.parser_params());
            set_field(&mut fresh_sm, "instance_type", EGRESS_CLONE);
            set_field(&mut fresh_sm, "packet_length", length as u128);
            let c =
                Copy { hdr: hdr.clone(), meta: fresh_meta, sm: fresh_sm, payload: payload.clone(), length, cut: None };
            self.v1model_clone(c, session, jobs);
        }
        if field(&sm, "egress_spec") == DROP_PORT {
            return Ok(None);
        }
        self.run_block(&code, &blocks[4], &payload, length, now, &mut [&mut hdr, &mut meta])?;
        let mut bytes = self.deparse(&code, &blocks[5], hdr, &payload, length, now)?;
        if requests.recirculate {
            jobs.push_back(Job::Ingress { frame: bytes, port: 0, instance: RECIRCULATED });
            return Ok(None);
        }
        if let Some(n) = requests.truncate.into_iter().chain(cut).min() {
            bytes.truncate(n);
        }
        Ok(Some(Output { port, queue: field(&sm, "priority") as u8, frame: bytes }))
    }

    /// The deparser's headers, then the payload.
    fn deparse(
        &mut self,
        code: &Code,
        name: &str,
        hdr: Value,
        payload: &[u8],
        length: usize,
        now: u64,
    ) -> Result<Vec<u8>, Dropped> {
        let Decl::Control { params, apply, .. } = code.block(name) else { unreachable!("checked") };
        let mut cx = Cx::new(name, code, payload, length as u64, now);
        cx.bind(params, vec![hdr]);
        match self.block_stmts(&mut cx, apply) {
            Ok(())
            | Err(Stop::Exit)
            | Err(Stop::Return)
            | Err(Stop::Returned(_) | Stop::Break | Stop::Continue)
            | Err(Stop::Reject(_)) => {}
            Err(Stop::Unsupported(w)) => return Err(Dropped::Unsupported(w)),
        }
        let mut bytes = cx.out;
        bytes.extend_from_slice(payload);
        Ok(bytes)
    }

    /// The headers, metadata and standard metadata a parser with these parameters starts from.
    fn initial_values(&mut self, params: &[Param]) -> [Value; 3] {
        match &self.initial {
            Some(values) => values.clone(),
            None => {
                let values = [1, 2, 3].map(|i| self.default_of(&self.code.checked.resolve(&params[i].ty)));
                self.initial = Some(values.clone());
                values
            }
        }
    }

    /// Sets clone session `id` (`mirroring_add`): its copies go to `port` and to multicast
    /// `group`'s members.
    pub fn set_clone_session(&mut self, id: u32, session: Session) {
        self.sessions.insert(id, session);
        self.generation += 1;
    }

    pub fn clone_session(&self, id: u32) -> Option<&Session> {
        self.sessions.get(&id)
    }

    /// Removes clone session `id`; whether it was set.
    pub fn delete_clone_session(&mut self, id: u32) -> bool {
        let was = self.sessions.remove(&id).is_some();
        self.generation += was as u64;
        was
    }

    /// The clone sessions' ids, in order.
    pub fn clone_session_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.sessions.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Multicast group `id`'s (port, replication id) pairs, in order; none if it is not set.
    pub fn group_replicas(&self, id: u16) -> Option<Vec<(u32, u16)>> {
        self.groups.contains_key(&id).then(|| self.replicas(id))
    }

    /// Removes multicast group `id`; whether it was set. Its frames then go nowhere, as a
    /// group never set sends them.
    pub fn delete_group(&mut self, id: u16) -> bool {
        let was = self.groups.remove(&id).is_some();
        self.replica_ids.remove(&id);
        self.generation += was as u64;
        was
    }

    /// Sets multicast group `id` to send a copy to each (port, replication id) of `replicas`,
    /// in order.
    pub fn set_replicas(&mut self, id: u16, replicas: Vec<(u32, u16)>) {
        let (ports, rids) = replicas.into_iter().unzip();
        self.groups.insert(id, ports);
        self.replica_ids.insert(id, rids);
        self.generation += 1;
    }

    /// v1model's functions (not methods of an instance): what they ask of the switch is kept in
    /// `self.requests` for the architecture to act on after the block.
    pub(super) fn v1model_function(&mut self, cx: &mut Cx, name: &str, args: &[Expr]) -> Run<Value> {
        match name {
            "clone" | "clone_preserving_field_list" | "clone3" => {
                let session = self.eval(cx, &args[1])?.as_u128() as u32;
                self.requests.clone = Some(session);
            }
            "resubmit" | "resubmit_preserving_field_list" => self.requests.resubmit = true,
            "recirculate" | "recirculate_preserving_field_list" => self.requests.recirculate = true,
            "truncate" => self.requests.truncate = Some(self.eval(cx, &args[0])?.as_u128() as usize),
            "verify_checksum" | "verify_checksum_with_payload" => {
                if self.eval(cx, &args[0])?.as_bool() {
                    let algo = self.algorithm(cx, &args[3])?;
                    let mut data = self.serialize(cx, &args[1])?;
                    if name.ends_with("_with_payload") {
                        data.extend_from_slice(cx.data);
                    }
                    let want = self.eval(cx, &args[2])?;
                    let width = if let Value::Bits { width, .. } = want { width } else { 16 };
                    if hash(&algo, &data) & mask(width) != want.as_u128() {
                        self.requests.checksum_error = true;
                    }
                }
            }
            "update_checksum" | "update_checksum_with_payload" => {
                if self.eval(cx, &args[0])?.as_bool() {
                    let algo = self.algorithm(cx, &args[3])?;
                    let mut data = self.serialize(cx, &args[1])?;
                    if name.ends_with("_with_payload") {
                        data.extend_from_slice(cx.data);
                    }
                    self.assign(cx, &args[2], Value::Number(hash(&algo, &data) as i128))?;
                }
            }
            "hash" => {
                // result = base + hash(data) mod max, as BMv2's modify_field_with_hash_based_offset.
                let algo = self.algorithm(cx, &args[1])?;
                let base = self.eval(cx, &args[2])?.as_u128();
                let data = self.serialize(cx, &args[3])?;
                let max = self.eval(cx, &args[4])?.as_u128();
                let h = if algo == "random" { self.next_random() as u128 } else { hash(&algo, &data) };
                let v = if max == 0 { base.wrapping_add(h) } else { base.wrapping_add(h % max) };
                self.assign(cx, &args[0], Value::Number(v as i128))?;
            }
            "random" => {
                let (lo, hi) = (self.eval(cx, &args[1])?.as_u128(), self.eval(cx, &args[2])?.as_u128());
                let span = hi.saturating_sub(lo).saturating_add(1);
                let v = lo + (self.next_random() as u128) % span.max(1);
                self.assign(cx, &args[0], Value::Number(v as i128))?;
            }
            "assert" | "assume" => {
                if !self.eval(cx, &args[0])?.as_bool() {
                    return Err(Stop::Reject("AssertionFailed".into()));
                }
            }
            // A log has no reader here.
            "log_msg" => {}
            other => return Err(Stop::Unsupported(format!("the function '{other}'"))),
        }
        Ok(Value::Void)
    }

    /// `digest<T>(receiver, data)`: `data` as the call made it, kept for the control plane
    /// ([`Switch::take_digests`]) under `T`'s name. The receiver is BMv2's learn-list id, which
    /// P4Runtime does not use. Data of a type P4Info cannot name (a list without a type
    /// argument) is not kept.
    pub(super) fn v1model_digest(&mut self, cx: &mut Cx, type_args: &[Type], args: &[Expr]) -> Run<Value> {
        let code = self.code.clone();
        let data = self.eval(cx, &args[1])?;
        if let Some(name) = crate::info::digest_type(&code.program, &code.checked, cx.block, type_args, &args[1]) {
            self.record_digest(name, &data);
        }
        Ok(Value::Void)
    }

    /// A `HashAlgorithm` argument's member name.
    pub(super) fn algorithm(&mut self, cx: &mut Cx, e: &Expr) -> Run<String> {
        match self.eval(cx, e)? {
            Value::Enum(n) => Ok(n),
            _ => Err(Stop::Unsupported("a hash algorithm that is not a HashAlgorithm member".into())),
        }
    }

    /// The bytes a checksum or hash covers: each field's bits in order, fields of headers that
    /// are not valid left out (as BMv2 leaves them out), zeros after the last bit to a whole byte.
    pub(super) fn serialize(&mut self, cx: &mut Cx, e: &Expr) -> Run<Vec<u8>> {
        let mut bits = Vec::new();
        let items: Vec<&Expr> = match &e.kind {
            ExprKind::List(items) => items.iter().collect(),
            _ => vec![e],
        };
        for item in items {
            if let ExprKind::Member(inner, _) = &item.kind {
                if matches!(self.eval(cx, inner)?, Value::Header { valid: false, .. }) {
                    continue;
                }
            }
            push_bits(&self.eval(cx, item)?, &mut bits);
        }
        Ok(bits
            .chunks(8)
            .map(|b| b.iter().enumerate().fold(0u8, |byte, (i, &x)| byte | ((x as u8) << (7 - i))))
            .collect())
    }

    pub(super) fn next_random(&mut self) -> u64 {
        // xorshift64*: the software target's randomness needs no more than spread.
        let mut x = self.random;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.random = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A value's bits, most significant first: bits, a valid header's fields, a struct's members.
pub(super) fn push_bits(v: &Value, bits: &mut Vec<bool>) {
    match v {
        Value::Bits { width, value, .. } => (0..*width).rev().for_each(|i| bits.push((value >> i) & 1 == 1)),
        Value::Bool(b) => bits.push(*b),
        Value::Header { valid: true, fields } | Value::Struct(fields) | Value::Union(fields) => {
            fields.iter().for_each(|(_, f)| push_bits(f, bits))
        }
        Value::Varbit { len, bytes, .. } => {
            (0..*len as usize).for_each(|i| bits.push(bytes[i / 8] >> (7 - i % 8) & 1 == 1))
        }
        Value::List(items) | Value::Stack { elems: items, .. } => items.iter().for_each(|v| push_bits(v, bits)),
        _ => {}
    }
}

/// v1model's `HashAlgorithm`s, resolved from a member's name once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Algorithm {
    Crc16,
    Crc32,
    Csum16,
    Xor16,
    Identity,
    Random,
    /// One the software target does not compute: 0.
    Other,
}

impl Algorithm {
    pub(super) fn named(algo: &str) -> Algorithm {
        match algo {
            "crc16" | "crc16_custom" => Algorithm::Crc16,
            "crc32" | "crc32_custom" => Algorithm::Crc32,
            "csum16" => Algorithm::Csum16,
            "xor16" => Algorithm::Xor16,
            "identity" => Algorithm::Identity,
            "random" => Algorithm::Random,
            _ => Algorithm::Other,
        }
    }

    /// The algorithm over `data`, as BMv2 computes each (its `_custom` forms with their
    /// default parameters, the same as the plain ones).
    pub(super) fn hash(self, data: &[u8]) -> u128 {
        match self {
            Algorithm::Crc16 => crc_reflected(data, 0xa001, 0, 0) as u128,
            Algorithm::Crc32 => crc_reflected(data, 0xedb8_8320, 0xffff_ffff, 0xffff_ffff) as u128,
            Algorithm::Csum16 => ones_complement(data) as u128,
            Algorithm::Xor16 => {
                data.chunks(2).fold(0u16, |x, w| x ^ u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])) as u128
            }
            Algorithm::Identity => data.iter().take(8).fold(0u128, |v, &b| (v << 8) | b as u128),
            Algorithm::Random | Algorithm::Other => 0,
        }
    }
}

/// v1model's `HashAlgorithm` named `algo` over `data`.
pub(super) fn hash(algo: &str, data: &[u8]) -> u128 {
    Algorithm::named(algo).hash(data)
}

/// A CRC computed least significant bit first (reflected input and output), with `poly`
/// reflected too: CRC-16/ARC and CRC-32 as BMv2's crc16 and crc32 give them.
fn crc_reflected(data: &[u8], poly: u32, init: u32, xor_out: u32) -> u32 {
    let mut crc = init;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ poly } else { crc >> 1 };
        }
    }
    crc ^ xor_out
}

/// The Internet checksum (RFC 1071) of `data`, an odd last byte padded with zero.
pub(super) fn ones_complement(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// The ones'-complement sum of `data`'s 16-bit words (the checksum before its complement).
pub(super) fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|w| u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u32).sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_give_the_published_check_values() {
        // The catalogue's check value: each algorithm over the ASCII digits 1 to 9.
        assert_eq!(hash("crc16", b"123456789"), 0xbb3d);
        assert_eq!(hash("crc32", b"123456789"), 0xcbf4_3926);
        assert_eq!(hash("identity", &[1, 2, 3]), 0x010203);
        assert_eq!(hash("xor16", &[0x12, 0x34, 0x56]), 0x1234 ^ 0x5600);
        // RFC 1071's example words sum to 0xddf2; the checksum is its complement.
        assert_eq!(ones_complement(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
    }
}
