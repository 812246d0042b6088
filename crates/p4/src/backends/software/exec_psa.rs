//! PSA on the compiled program (`exec.rs`), as BMv2's psa_switch runs it: an ingress pass (parser, control, deparser), the replication engine
//! (unicast, multicast with replication ids, I2E and E2E clone sessions, resubmit,
//! recirculate), and an egress pass per copy (parser, control, deparser). Each pass is a job
//! in a queue, so that the copies come out in BMv2's order.
//!
//! Every block's parameters are IR variables of their own: a pass starts those PSA gives a
//! block afresh from zero (P4's default values: headers invalid, `false`, the first
//! member of an enum, `error.NoError`), and copies what PSA carries from one block to the next
//! (headers and user metadata within a pipeline, the output metadata into its deparser, and
//! a deparser's `normal_meta`, `clone_i2e_meta`, `resubmit_meta`, `clone_e2e_meta` or
//! `recirculate_meta` into the parser of the pass it makes). The intrinsic metadata's fields are found by
//! name once, when the program is compiled; the frames of later passes are the deparsers'
//! bytes, so each block runs on an `M` of its own over the slots the passes share.

use std::collections::VecDeque;

use super::exec::{self, Compiled, Flow, M};
use super::exec_arch::{copy_slots, Layout, F};
use super::psa::{RECIRCULATE_PORT, RETURNS};
use super::{Dropped, Output, Switch};
use crate::midend::ir;

/// PSA_PacketPath_t's members, in psa.p4's order.
#[derive(Clone, Copy)]
enum Path {
    Normal,
    NormalUnicast,
    NormalMulticast,
    CloneI2E,
    CloneE2E,
    Resubmit,
    Recirculate,
}

const PATHS: [&str; 7] =
    ["NORMAL", "NORMAL_UNICAST", "NORMAL_MULTICAST", "CLONE_I2E", "CLONE_E2E", "RESUBMIT", "RECIRCULATE"];

/// The package's blocks by their parameters' variables, and the intrinsic metadata's fields
/// the switch reads and writes (their slots).
pub(super) struct Psa {
    /// Ingress parser, ingress, ingress deparser, egress parser, egress, egress deparser.
    blocks: [usize; 6],
    /// The ingress parser's headers, user metadata, input metadata, resubmit and recirculate
    /// metadata.
    ip: [usize; 5],
    /// Ingress's headers, user metadata, input and output metadata.
    ig: [usize; 4],
    /// The ingress deparser's I2E clone, resubmit and normal metadata (out), headers, user
    /// metadata and ingress's output metadata.
    id: [usize; 6],
    /// The egress parser's headers, user metadata, input metadata, normal, I2E and E2E clone
    /// metadata.
    ep: [usize; 6],
    /// Egress's headers, user metadata, input and output metadata.
    eg: [usize; 4],
    /// The egress deparser's E2E clone and recirculate metadata (out), headers, user metadata,
    /// egress's output metadata and its own input metadata.
    ed: [usize; 6],
    ip_port: F,
    ip_path: F,
    ig_port: F,
    ig_path: F,
    ig_timestamp: F,
    ig_error: F,
    i_class: F,
    i_clone: F,
    i_session: F,
    i_drop: F,
    i_resubmit: F,
    i_group: F,
    i_port: F,
    ep_port: F,
    ep_path: F,
    eg_class: F,
    eg_port: F,
    eg_path: F,
    eg_instance: F,
    eg_timestamp: F,
    eg_error: F,
    e_clone: F,
    e_session: F,
    e_drop: F,
    ed_port: F,
    /// Each PSA_PacketPath_t member's number, by `Path`.
    paths: [u128; 7],
    /// `error.NoError`'s number.
    no_error: u128,
}

/// Finds PSA_Switch's blocks and their intrinsic metadata in the compiled program.
pub(super) fn layout(l: &Layout) -> Result<Psa, String> {
    let blocks = l.numbers.clone().try_into().map_err(|_| "PSA_Switch's six blocks")?;
    let (ip, ig, id) = (l.params::<5>(0)?, l.params::<4>(1)?, l.params::<6>(2)?);
    let (ep, eg, ed) = (l.params::<6>(3)?, l.params::<4>(4)?, l.params::<6>(5)?);
    let paths = match l.field_ty(ip[2], "packet_path") {
        Some(ir::Ty::Enum(i)) => {
            let members = &l.ir.enums[*i].members;
            let mut paths = [0; 7];
            for (k, name) in PATHS.iter().enumerate() {
                paths[k] = members.iter().position(|m| m == name).ok_or("PSA_PacketPath_t")? as u128;
            }
            paths
        }
        _ => return Err("psa_ingress_parser_input_metadata_t.packet_path".into()),
    };
    let no_error = l.ir.errors.iter().position(|e| e == "NoError").unwrap_or(0) as u128;
    Ok(Psa {
        blocks,
        ip_port: l.field(ip[2], "ingress_port")?,
        ip_path: l.field(ip[2], "packet_path")?,
        ig_port: l.field(ig[2], "ingress_port")?,
        ig_path: l.field(ig[2], "packet_path")?,
        ig_timestamp: l.field(ig[2], "ingress_timestamp")?,
        ig_error: l.field(ig[2], "parser_error")?,
        i_class: l.field(ig[3], "class_of_service")?,
        i_clone: l.field(ig[3], "clone")?,
        i_session: l.field(ig[3], "clone_session_id")?,
        i_drop: l.field(ig[3], "drop")?,
        i_resubmit: l.field(ig[3], "resubmit")?,
        i_group: l.field(ig[3], "multicast_group")?,
        i_port: l.field(ig[3], "egress_port")?,
        ep_port: l.field(ep[2], "egress_port")?,
        ep_path: l.field(ep[2], "packet_path")?,
        eg_class: l.field(eg[2], "class_of_service")?,
        eg_port: l.field(eg[2], "egress_port")?,
        eg_path: l.field(eg[2], "packet_path")?,
        eg_instance: l.field(eg[2], "instance")?,
        eg_timestamp: l.field(eg[2], "egress_timestamp")?,
        eg_error: l.field(eg[2], "parser_error")?,
        e_clone: l.field(eg[3], "clone")?,
        e_session: l.field(eg[3], "clone_session_id")?,
        e_drop: l.field(eg[3], "drop")?,
        ed_port: l.field(ed[5], "egress_port")?,
        ip,
        ig,
        id,
        ep,
        eg,
        ed,
        paths,
        no_error,
    })
}

/// The metadata a deparser hands the parser of a later pass: the parser's parameter (its
/// variable) and the slots the deparser left in its own.
type Carried = Option<(usize, Vec<u128>)>;

/// A pass still to run.
enum Job {
    Ingress {
        frame: Vec<u8>,
        port: u32,
        path: Path,
        /// A resubmitted frame's `resubmit_meta`, a recirculated one's `recirculate_meta`.
        carried: Carried,
    },
    Egress {
        frame: Vec<u8>,
        port: u32,
        path: Path,
        instance: u16,
        class: u128,
        /// A normal copy's `normal_meta`, an I2E clone's `clone_i2e_meta`, an E2E clone's
        /// `clone_e2e_meta`.
        carried: Carried,
        /// Where a clone session cuts this copy as it leaves.
        cut: Option<usize>,
    },
}

/// A frame's passes: the slots and buffers they share, and the switch.
struct Run<'a> {
    prog: &'a Compiled,
    a: &'a Psa,
    sw: &'a mut Switch,
    slots: Vec<u128>,
    keys: Vec<u128>,
    bytes: Vec<u8>,
    /// The last deparser's bytes.
    out: Vec<u8>,
    now: u64,
}

/// Runs `frame` through the PSA program: its copies out, or why none.
pub(super) fn process(
    sw: &mut Switch,
    prog: &Compiled,
    a: &Psa,
    frame: &[u8],
    port: u32,
    now: u64,
) -> Result<Vec<Output>, Dropped> {
    let mut slots = std::mem::take(&mut sw.exec_slots);
    slots.clear();
    slots.resize(prog.slots, 0);
    let (keys, bytes, out) =
        (std::mem::take(&mut sw.exec_keys), std::mem::take(&mut sw.exec_bytes), std::mem::take(&mut sw.exec_out));
    let mut run = Run { prog, a, sw, slots, keys, bytes, out, now };
    let result = run.frame(frame, port);
    let Run { sw, slots, keys, bytes, out, .. } = run;
    sw.exec_slots = slots;
    sw.exec_keys = keys;
    sw.exec_bytes = bytes;
    sw.exec_out = out;
    result
}

/// A control's or deparser's end, for the switch: only what the target cannot run stops it.
fn ran(f: Flow) -> Result<(), Dropped> {
    match f {
        Flow::Unsupported(what) => Err(Dropped::Unsupported(what.to_string())),
        _ => Ok(()),
    }
}

impl Run<'_> {
    fn frame(&mut self, frame: &[u8], port: u32) -> Result<Vec<Output>, Dropped> {
        let mut jobs =
            VecDeque::from([Job::Ingress { frame: frame.to_vec(), port, path: Path::Normal, carried: None }]);
        let mut out = Vec::new();
        let mut returns = 0;
        while let Some(job) = jobs.pop_front() {
            match job {
                Job::Ingress { frame, port, path, carried } => {
                    if !matches!(path, Path::Normal) {
                        returns += 1;
                        if returns > RETURNS {
                            continue;
                        }
                    }
                    self.ingress(&frame, (port, path), carried.as_ref(), &mut jobs)?;
                }
                Job::Egress { frame, port, path, instance, class, carried, cut } => {
                    let copy = (port, path, instance, class);
                    if let Some(mut o) = self.egress(&frame, copy, carried.as_ref(), &mut jobs)? {
                        o.frame.truncate(cut.unwrap_or(usize::MAX));
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

    /// Runs package block `b` on `data` (`length` the frame's, for counters and meters), its
    /// checksums clear: how it ended, and how many bits a parser read.
    fn block(&mut self, b: usize, data: &[u8], length: usize) -> (Flow, usize) {
        self.sw.clear_checksums();
        let mut m = M {
            prog: self.prog,
            slots: std::mem::take(&mut self.slots),
            sw: &mut *self.sw,
            data,
            cursor: 0,
            out: std::mem::take(&mut self.out),
            length: length as u64,
            now: self.now,
            keys: std::mem::take(&mut self.keys),
            bytes: std::mem::take(&mut self.bytes),
            checksum_error: false,
            past_stack: false,
            matched: None,
        };
        let flow = exec::run_block(self.a.blocks[b], &mut m);
        let cursor = m.cursor;
        (self.slots, self.out, self.keys, self.bytes) = (m.slots, m.out, m.keys, m.bytes);
        (flow, cursor)
    }

    #[inline]
    fn set(&mut self, f: F, v: u128) {
        self.slots[f.0] = v & f.1;
    }

    #[inline]
    fn get(&self, f: F) -> u128 {
        self.slots[f.0]
    }

    /// These variables as PSA gives them to a block afresh: zero.
    fn fresh(&mut self, vars: &[usize]) {
        for &v in vars {
            let (at, n) = (self.prog.base[v], self.prog.sizes[v]);
            self.slots[at..at + n].fill(0);
        }
    }

    fn copy(&mut self, from: usize, to: usize) {
        copy_slots(self.prog, &mut self.slots, from, to);
    }

    /// Variable `var`'s slots, to carry to a later pass's parser.
    fn take(&self, var: usize) -> Vec<u128> {
        let (at, n) = (self.prog.base[var], self.prog.sizes[var]);
        self.slots[at..at + n].to_vec()
    }

    /// What an earlier pass's deparser carried, into its parser's parameter.
    fn carry(&mut self, carried: Option<&(usize, Vec<u128>)>) {
        if let Some((var, values)) = carried {
            let (at, n) = (self.prog.base[*var], self.prog.sizes[*var]);
            if n == values.len() {
                self.slots[at..at + n].copy_from_slice(values);
            }
        }
    }

    /// A parser's end: the error ingress or egress sees in `parser_error`.
    fn parsed(&self, f: Flow) -> Result<u128, Dropped> {
        match f {
            Flow::Reject(e) => Ok(e as u128),
            Flow::Unsupported(what) => Err(Dropped::Unsupported(what.to_string())),
            _ => Ok(self.a.no_error),
        }
    }

    /// The deparser's bytes before the payload.
    fn deparsed(&self, payload: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.out.len() + payload.len());
        bytes.extend_from_slice(&self.out);
        bytes.extend_from_slice(payload);
        bytes
    }

    fn ingress(
        &mut self,
        frame: &[u8],
        (port, path): (u32, Path),
        carried: Option<&(usize, Vec<u128>)>,
        jobs: &mut VecDeque<Job>,
    ) -> Result<(), Dropped> {
        let a = self.a;
        let path_number = a.paths[path as usize];
        self.fresh(&a.ip);
        self.set(a.ip_port, port as u128);
        self.set(a.ip_path, path_number);
        self.carry(carried);
        let (f, cursor) = self.block(0, frame, frame.len());
        let error = self.parsed(f)?;
        let payload = &frame[(cursor / 8).min(frame.len())..];

        self.copy(a.ip[0], a.ig[0]);
        self.copy(a.ip[1], a.ig[1]);
        self.fresh(&a.ig[2..]);
        self.set(a.ig_port, port as u128);
        self.set(a.ig_path, path_number);
        self.set(a.ig_timestamp, (self.now / 1000) as u128);
        self.set(a.ig_error, error);
        // A program must send a frame somewhere: ingress starts with it dropped.
        self.set(a.i_drop, 1);
        ran(self.block(1, payload, frame.len()).0)?;

        // The deparser runs for every frame (PSA 6.2): a clone's `clone_i2e_meta` and a
        // resubmission's `resubmit_meta` are its out parameters, even where ingress dropped
        // the frame or resubmits it and its bytes go nowhere.
        self.fresh(&a.id[..3]);
        self.copy(a.ig[0], a.id[3]);
        self.copy(a.ig[1], a.id[4]);
        self.copy(a.ig[3], a.id[5]);
        self.out.clear();
        ran(self.block(2, payload, frame.len()).0)?;

        if self.get(a.i_clone) != 0 {
            let session = self.get(a.i_session) as u32;
            let meta = (a.ep[4], self.take(a.id[0]));
            self.clone_to(frame, session, Path::CloneI2E, Some(meta), jobs);
        }
        if self.get(a.i_drop) != 0 {
            return Ok(());
        }
        if self.get(a.i_resubmit) != 0 {
            let carried = Some((a.ip[3], self.take(a.id[1])));
            jobs.push_back(Job::Ingress { frame: frame.to_vec(), port, path: Path::Resubmit, carried });
            return Ok(());
        }
        let bridged = (a.ep[3], self.take(a.id[2]));
        let bytes = self.deparsed(payload);

        let class = self.get(a.i_class);
        let group = self.get(a.i_group) as u16;
        if group != 0 {
            for (port, rid) in self.sw.replicas(group) {
                jobs.push_back(Job::Egress {
                    frame: bytes.clone(),
                    port,
                    path: Path::NormalMulticast,
                    instance: rid,
                    class,
                    carried: Some(bridged.clone()),
                    cut: None,
                });
            }
            return Ok(());
        }
        let port = self.get(a.i_port) as u32;
        jobs.push_back(Job::Egress {
            frame: bytes,
            port,
            path: Path::NormalUnicast,
            instance: 0,
            class,
            carried: Some(bridged),
            cut: None,
        });
        Ok(())
    }

    /// One copy's egress pass (its port, path, replication id and class of service): the
    /// copy out, or none (dropped, recirculated).
    fn egress(
        &mut self,
        frame: &[u8],
        (port, path, instance, class): (u32, Path, u16, u128),
        carried: Option<&(usize, Vec<u128>)>,
        jobs: &mut VecDeque<Job>,
    ) -> Result<Option<Output>, Dropped> {
        let a = self.a;
        let path_number = a.paths[path as usize];
        self.fresh(&a.ep);
        self.set(a.ep_port, port as u128);
        self.set(a.ep_path, path_number);
        self.carry(carried);
        let (f, cursor) = self.block(3, frame, frame.len());
        let error = self.parsed(f)?;
        let payload = &frame[(cursor / 8).min(frame.len())..];

        self.copy(a.ep[0], a.eg[0]);
        self.copy(a.ep[1], a.eg[1]);
        self.fresh(&a.eg[2..]);
        self.set(a.eg_class, class);
        self.set(a.eg_port, port as u128);
        self.set(a.eg_path, path_number);
        self.set(a.eg_instance, instance as u128);
        self.set(a.eg_timestamp, (self.now / 1000) as u128);
        self.set(a.eg_error, error);
        ran(self.block(4, payload, frame.len()).0)?;

        self.fresh(&a.ed[..2]);
        self.copy(a.eg[0], a.ed[2]);
        self.copy(a.eg[1], a.ed[3]);
        self.copy(a.eg[3], a.ed[4]);
        self.fresh(&a.ed[5..]);
        self.set(a.ed_port, port as u128);
        self.out.clear();
        ran(self.block(5, payload, frame.len()).0)?;
        let bytes = self.deparsed(payload);

        if self.get(a.e_clone) != 0 {
            let session = self.get(a.e_session) as u32;
            let meta = (a.ep[5], self.take(a.ed[0]));
            self.clone_to(&bytes, session, Path::CloneE2E, Some(meta), jobs);
        }
        if self.get(a.e_drop) != 0 {
            return Ok(None);
        }
        if port == RECIRCULATE_PORT {
            let carried = Some((a.ip[4], self.take(a.ed[1])));
            jobs.push_back(Job::Ingress { frame: bytes, port: RECIRCULATE_PORT, path: Path::Recirculate, carried });
            return Ok(None);
        }
        Ok(Some(Output { port, queue: class as u8, frame: bytes }))
    }

    /// The copies clone session `session` makes of `frame` (none if it is not set up).
    fn clone_to(&self, frame: &[u8], session: u32, path: Path, carried: Carried, jobs: &mut VecDeque<Job>) {
        let Some(s) = self.sw.sessions.get(&session) else { return };
        let (class, cut) = (s.class_of_service as u128, s.truncate);
        let group = s.group.map(|g| self.sw.replicas(g)).unwrap_or_default();
        for &(port, rid) in group.iter().chain(&s.replicas) {
            let frame = frame.to_vec();
            let carried = carried.clone();
            jobs.push_back(Job::Egress { frame, port, path, instance: rid, class, carried, cut });
        }
        if let Some(port) = s.port {
            let frame = frame.to_vec();
            jobs.push_back(Job::Egress { frame, port, path, instance: 0, class, carried, cut });
        }
    }
}
