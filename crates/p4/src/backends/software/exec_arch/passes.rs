//! v1model on the compiled program when it asks the switch for more than one pass (clone,
//! resubmit, recirculate, truncate): BMv2's queue of jobs, on slots. An ingress job parses a frame with fresh metadata and runs
//! ingress; what ingress asked for (kept in `Switch::requests` by the extern calls) then adds
//! jobs: an ingress-to-egress clone (the frame parsed again, its metadata fresh), a
//! resubmission, the replication engine's copies or the one port `egress_spec` names. An egress
//! job runs egress, an egress-to-egress clone, the checksums and the deparser, then recirculates
//! the frame or sends it out cut by `truncate`. A program without these calls runs on the
//! single pass of `exec_arch::v1model`, which this agrees with.

use std::collections::VecDeque;

use super::{compute_and_deparse, control, copy, parse_and_verify, set, V1Model, F, V1_DROP_PORT};
use crate::backends::software::exec::{self, Compiled, M};
use crate::backends::software::{v1model::Requests, Dropped, Output, Switch};

/// `standard_metadata.instance_type`, as BMv2 numbers the copies it makes.
const NORMAL: u128 = 0;
const INGRESS_CLONE: u128 = 1;
const EGRESS_CLONE: u128 = 2;
const RECIRCULATED: u128 = 4;
const REPLICA: u128 = 5;
const RESUBMITTED: u128 = 6;

/// How many times a frame's copies may come back to ingress before the rest are dropped, as
/// BMv2's simple_switch bounds them.
const RETURNS: usize = 16;

/// A frame between ingress and the wire: the slots of its headers, metadata and standard
/// metadata (laid out as egress's parameters, which have ingress's types), and the payload.
#[derive(Clone)]
struct Queued {
    hdr: Vec<u128>,
    meta: Vec<u128>,
    sm: Vec<u128>,
    payload: Vec<u8>,
    /// The frame as it arrived (its length is `packet_length`).
    length: usize,
    /// Where a clone session cuts this copy as it leaves.
    cut: Option<usize>,
}

impl Queued {
    /// Sets the standard metadata field `f` (a slot of variable `var`).
    fn set(&mut self, prog: &Compiled, var: usize, f: F, v: u128) {
        self.sm[f.0 - prog.base[var]] = v & f.1;
    }

    fn get(&self, prog: &Compiled, var: usize, f: F) -> u128 {
        self.sm[f.0 - prog.base[var]]
    }
}

enum Job {
    Ingress { frame: Vec<u8>, port: u32, instance: u128 },
    Egress { queued: Queued, port: u32 },
}

/// The buffers a run reuses, moved into each job's `M` and back.
struct Scratch {
    slots: Vec<u128>,
    keys: Vec<u128>,
    bytes: Vec<u8>,
    out: Vec<u8>,
}

/// Runs `f` on a job's run over `data`, its buffers taken from `s` and given back.
fn job<'a, T>(
    sw: &'a mut Switch,
    prog: &'a Compiled,
    s: &mut Scratch,
    data: &'a [u8],
    length: usize,
    now: u64,
    f: impl FnOnce(&mut M<'a>) -> T,
) -> T {
    let mut m = M {
        prog,
        slots: std::mem::take(&mut s.slots),
        sw,
        data,
        cursor: 0,
        out: std::mem::take(&mut s.out),
        length: length as u64,
        now,
        keys: std::mem::take(&mut s.keys),
        bytes: std::mem::take(&mut s.bytes),
        checksum_error: false,
        past_stack: false,
        matched: None,
    };
    let result = f(&mut m);
    s.slots = std::mem::take(&mut m.slots);
    s.out = std::mem::take(&mut m.out);
    s.keys = std::mem::take(&mut m.keys);
    s.bytes = std::mem::take(&mut m.bytes);
    result
}

fn slots_of(m: &M, var: usize) -> Vec<u128> {
    let (at, n) = (m.prog.base[var], m.prog.sizes[var]);
    m.slots[at..at + n].to_vec()
}

fn load(m: &mut M, var: usize, from: &[u128]) {
    let at = m.prog.base[var];
    m.slots[at..at + from.len()].copy_from_slice(from);
}

fn zero(m: &mut M, var: usize) {
    let (at, n) = (m.prog.base[var], m.prog.sizes[var]);
    m.slots[at..at + n].fill(0);
}

impl Switch {
    /// A frame through a V1Switch program that asks for more than one pass: the copies that
    /// leave, in the order BMv2's queues send them on one port.
    pub(super) fn process_passes(
        &mut self,
        prog: &Compiled,
        a: &V1Model,
        frame: &[u8],
        port: u32,
        now: u64,
    ) -> Result<Vec<Output>, Dropped> {
        let mut s = Scratch {
            slots: std::mem::take(&mut self.exec_slots),
            keys: std::mem::take(&mut self.exec_keys),
            bytes: std::mem::take(&mut self.exec_bytes),
            out: std::mem::take(&mut self.exec_out),
        };
        let result = self.run_jobs(prog, a, frame, port, now, &mut s);
        self.exec_slots = s.slots;
        self.exec_keys = s.keys;
        self.exec_bytes = s.bytes;
        self.exec_out = s.out;
        result
    }

    fn run_jobs(
        &mut self,
        prog: &Compiled,
        a: &V1Model,
        frame: &[u8],
        port: u32,
        now: u64,
        s: &mut Scratch,
    ) -> Result<Vec<Output>, Dropped> {
        let mut jobs = VecDeque::from([Job::Ingress { frame: frame.to_vec(), port, instance: NORMAL }]);
        let mut out = Vec::new();
        let mut returns = 0;
        while let Some(next) = jobs.pop_front() {
            match next {
                Job::Ingress { frame, port, instance } => {
                    if instance != NORMAL {
                        returns += 1;
                        if returns > RETURNS {
                            continue;
                        }
                    }
                    self.pass_ingress(prog, a, &frame, port, instance, now, s, &mut jobs)?;
                }
                Job::Egress { queued, port } => {
                    if let Some(o) = self.pass_egress(prog, a, queued, port, now, s, &mut jobs)? {
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

    /// The parser and the checksum verification on `frame` with fresh metadata, into the
    /// slots (the headers and metadata in verify's parameters, the standard metadata in the
    /// parser's); where the payload starts.
    fn pass_parse<'f>(
        a: &V1Model,
        m: &mut M<'f>,
        frame: &'f [u8],
        port: u32,
        instance: u128,
        now: u64,
    ) -> Result<usize, Dropped> {
        m.slots.clear();
        m.slots.resize(m.prog.slots, 0);
        parse_and_verify(a, m, frame, port, instance, now)
    }

    #[allow(clippy::too_many_arguments)]
    fn pass_ingress(
        &mut self,
        prog: &Compiled,
        a: &V1Model,
        frame: &[u8],
        port: u32,
        instance: u128,
        now: u64,
        s: &mut Scratch,
        jobs: &mut VecDeque<Job>,
    ) -> Result<(), Dropped> {
        let length = frame.len();
        let (queued, requests) = job(self, prog, s, frame, length, now, |m| {
            let payload_at = Self::pass_parse(a, m, frame, port, instance, now)?;
            m.data = &frame[payload_at..];
            copy(m, a.verify[0], a.ingress[0]);
            copy(m, a.verify[1], a.ingress[1]);
            copy(m, a.parser[2], a.ingress[2]);
            m.sw.requests = Requests::default();
            control(exec::run_block(a.blocks[2], m))?;
            let requests = std::mem::take(&mut m.sw.requests);
            let copy = Queued {
                hdr: slots_of(m, a.ingress[0]),
                meta: slots_of(m, a.ingress[1]),
                sm: slots_of(m, a.ingress[2]),
                payload: frame[payload_at..].to_vec(),
                length,
                cut: None,
            };
            Ok::<_, Dropped>((copy, requests))
        })?;
        let (i_sm, e_sm) = (a.ingress[2], a.egress[2]);
        if let Some(session) = requests.clone {
            // A copy of the frame as it arrived, parsed again; then all its metadata starts
            // again (what the parser wrote, parser_error and checksum_error included).
            let clone = job(self, prog, s, frame, length, now, |m| {
                let payload_at = Self::pass_parse(a, m, frame, port, INGRESS_CLONE, now)?;
                let hdr = slots_of(m, a.verify[0]);
                zero(m, a.ingress[1]);
                zero(m, a.ingress[2]);
                let mut c = Queued {
                    hdr,
                    meta: slots_of(m, a.ingress[1]),
                    sm: slots_of(m, a.ingress[2]),
                    payload: frame[payload_at..].to_vec(),
                    length,
                    cut: None,
                };
                c.set(m.prog, i_sm, a.i_instance_type, INGRESS_CLONE);
                c.set(m.prog, e_sm, a.e_packet_length, length as u128);
                Ok::<_, Dropped>(c)
            })?;
            self.pass_clone(prog, a, clone, session, jobs);
        }
        if requests.resubmit {
            jobs.push_back(Job::Ingress { frame: frame.to_vec(), port, instance: RESUBMITTED });
            return Ok(());
        }
        let mut copy = queued;
        let group = copy.get(prog, i_sm, a.i_mcast_grp) as u16;
        if group != 0 {
            copy.set(prog, i_sm, a.i_instance_type, REPLICA);
            self.pass_replicate(prog, a, &copy, group, jobs);
            return Ok(());
        }
        let egress = copy.get(prog, i_sm, a.i_egress_spec);
        if egress == V1_DROP_PORT {
            return Ok(());
        }
        copy.set(prog, i_sm, a.i_instance_type, NORMAL);
        jobs.push_back(Job::Egress { queued: copy, port: egress as u32 });
        Ok(())
    }

    /// One copy per member of multicast group `group`, each with its replication id.
    fn pass_replicate(&self, prog: &Compiled, a: &V1Model, copy: &Queued, group: u16, jobs: &mut VecDeque<Job>) {
        for (port, rid) in self.replicas(group) {
            let mut c = copy.clone();
            c.set(prog, a.egress[2], a.e_egress_rid, rid as u128);
            jobs.push_back(Job::Egress { queued: c, port });
        }
    }

    /// A clone to clone session `session`'s port, group and replicas; none if it is not set.
    fn pass_clone(&self, prog: &Compiled, a: &V1Model, mut copy: Queued, session: u32, jobs: &mut VecDeque<Job>) {
        let Some(s) = self.sessions.get(&session) else { return };
        copy.cut = s.truncate;
        copy.set(prog, a.egress[2], a.e_priority, s.class_of_service as u128);
        if let Some(group) = s.group {
            self.pass_replicate(prog, a, &copy, group, jobs);
        }
        for &(port, rid) in &s.replicas {
            let mut c = copy.clone();
            c.set(prog, a.egress[2], a.e_egress_rid, rid as u128);
            jobs.push_back(Job::Egress { queued: c, port });
        }
        if let Some(port) = s.port {
            jobs.push_back(Job::Egress { queued: copy, port });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn pass_egress(
        &mut self,
        prog: &Compiled,
        a: &V1Model,
        queued: Queued,
        port: u32,
        now: u64,
        s: &mut Scratch,
        jobs: &mut VecDeque<Job>,
    ) -> Result<Option<Output>, Dropped> {
        let Queued { hdr, meta, sm, payload, length, cut } = queued;
        let ran = job(self, prog, s, &payload, length, now, |m| {
            m.slots.resize(m.prog.slots, 0);
            load(m, a.egress[0], &hdr);
            load(m, a.egress[1], &meta);
            load(m, a.egress[2], &sm);
            set(m, a.e_egress_port, port as u128);
            set(m, a.e_egress_spec, 0);
            set(m, a.e_packet_length, length as u128);
            set(m, a.e_egress_timestamp, (now / 1000) as u128);
            m.sw.requests = Requests::default();
            control(exec::run_block(a.blocks[3], m))?;
            let requests = std::mem::take(&mut m.sw.requests);
            // A copy of the frame as egress left it, for a clone; its metadata starts again.
            let clone_hdr = requests.clone.map(|_| slots_of(m, a.egress[0]));
            if m.slots[a.e_egress_spec.0] == V1_DROP_PORT {
                return Ok((requests, clone_hdr, None));
            }
            let bytes = compute_and_deparse(a, m, &payload)?;
            Ok((requests, clone_hdr, Some((bytes, m.slots[a.e_priority.0] as u8))))
        })?;
        let (requests, clone_hdr, sent) = ran;
        if let (Some(session), Some(hdr)) = (requests.clone, clone_hdr) {
            let n = |var: usize| prog.sizes[var];
            let mut c = Queued {
                hdr,
                meta: vec![0; n(a.egress[1])],
                sm: vec![0; n(a.egress[2])],
                payload: payload.clone(),
                length,
                cut: None,
            };
            c.set(prog, a.egress[2], a.e_instance_type, EGRESS_CLONE);
            c.set(prog, a.egress[2], a.e_packet_length, length as u128);
            self.pass_clone(prog, a, c, session, jobs);
        }
        let Some((mut bytes, queue)) = sent else { return Ok(None) };
        if requests.recirculate {
            jobs.push_back(Job::Ingress { frame: bytes, port: 0, instance: RECIRCULATED });
            return Ok(None);
        }
        if let Some(n) = requests.truncate.into_iter().chain(cut).min() {
            bytes.truncate(n);
        }
        Ok(Some(Output { port, queue, frame: bytes }))
    }
}
