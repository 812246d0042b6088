//! The architectures on the compiled program (`exec.rs`): what the switch does between the
//! blocks for edgeflow.p4 and v1model, on slots — each block's parameters are IR variables of their own, so a block's results are
//! copied (a few slots) into the next block's parameters. The standard metadata's fields are
//! found by name once, when the program is compiled.
//!
//! v1model runs here with its checksums, hash, random and digest in one pass; a program that
//! asks the switch for more than one (clone, resubmit, recirculate, truncate) runs on BMv2's
//! queue of jobs in `exec_arch/passes.rs`. PSA's driver is `exec_psa.rs`, which finds its
//! blocks with the `Layout` here.

use std::sync::Arc;

use super::exec::{self, Compiled, Compiler, Flow, M};
use super::{Dropped, Output, Switch};
use crate::arch::Architecture;
use crate::midend::ir;

mod passes;

/// A standard metadata field: its slot, and the mask of its width.
pub(super) type F = (usize, u128);

#[inline]
fn set(m: &mut M, f: F, v: u128) {
    m.slots[f.0] = v & f.1;
}

/// The architecture's blocks, by their parameters' variables, and the standard metadata's
/// fields the switch reads and writes (their slots).
pub(super) enum Arch {
    Edgeflow(Box<Edgeflow>),
    V1Model(Box<V1Model>),
    Psa(Box<super::exec_psa::Psa>),
}

pub(super) struct Edgeflow {
    /// The package's blocks' numbers among the IR's blocks.
    blocks: [usize; 4],
    /// The parser's headers, metadata and standard metadata; ingress's; egress's; the
    /// deparser's headers.
    parser: [usize; 3],
    ingress: [usize; 3],
    egress: [usize; 3],
    deparser_hdr: usize,
    p_ingress_port: F,
    p_packet_length: F,
    p_timestamp: F,
    i_drop: F,
    i_mcast_grp: F,
    i_egress_port: F,
    e_egress_port: F,
    e_drop: F,
    e_priority: F,
}

pub(super) struct V1Model {
    blocks: [usize; 6],
    parser: [usize; 3],
    verify: [usize; 2],
    ingress: [usize; 3],
    egress: [usize; 3],
    compute: [usize; 2],
    deparser_hdr: usize,
    p_ingress_port: F,
    p_packet_length: F,
    p_instance_type: F,
    p_ingress_timestamp: F,
    p_parser_error: F,
    p_checksum_error: F,
    i_mcast_grp: F,
    i_egress_spec: F,
    i_instance_type: F,
    e_egress_port: F,
    e_egress_spec: F,
    e_packet_length: F,
    e_egress_timestamp: F,
    e_egress_rid: F,
    e_instance_type: F,
    e_priority: F,
}

/// The program compiled with its architecture's driver.
pub struct Program {
    pub(super) code: Compiled,
    pub(super) arch: Arch,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.code)
    }
}

/// Compiles the switch's program, or says what in it is not compiled yet.
pub(super) fn compile(sw: &Switch) -> Result<Arc<Program>, String> {
    let ir = sw.ir();
    let arch = Architecture::of_ir(ir);
    let v1model = arch == Some(Architecture::V1Model);
    if arch == Some(Architecture::Psa) {
        let c = Compiler::new(sw, ir, false)?;
        let psa = super::exec_psa::layout(&Layout::new(&c, ir)?)?;
        let code = c.finish()?;
        return Ok(Arc::new(Program { code, arch: Arch::Psa(Box::new(psa)) }));
    }
    let c = Compiler::new(sw, ir, v1model)?;
    let layout = Layout::new(&c, ir)?;
    let (field, three, two, one) = (
        |v: usize, n: &str| layout.field(v, n),
        |b: usize| layout.params::<3>(b),
        |b: usize| layout.params::<2>(b),
        |b: usize| layout.params::<1>(b).map(|[p]| p),
    );
    let numbers = layout.numbers.clone();
    let arch = if v1model {
        let (parser, ingress, egress) = (three(0)?, three(2)?, three(3)?);
        Arch::V1Model(Box::new(V1Model {
            blocks: numbers.clone().try_into().map_err(|_| "V1Switch's six blocks")?,
            parser,
            verify: two(1)?,
            ingress,
            egress,
            compute: two(4)?,
            deparser_hdr: one(5)?,
            p_ingress_port: field(parser[2], "ingress_port")?,
            p_packet_length: field(parser[2], "packet_length")?,
            p_instance_type: field(parser[2], "instance_type")?,
            p_ingress_timestamp: field(parser[2], "ingress_global_timestamp")?,
            p_parser_error: field(parser[2], "parser_error")?,
            p_checksum_error: field(parser[2], "checksum_error")?,
            i_mcast_grp: field(ingress[2], "mcast_grp")?,
            i_egress_spec: field(ingress[2], "egress_spec")?,
            i_instance_type: field(ingress[2], "instance_type")?,
            e_egress_port: field(egress[2], "egress_port")?,
            e_egress_spec: field(egress[2], "egress_spec")?,
            e_packet_length: field(egress[2], "packet_length")?,
            e_egress_timestamp: field(egress[2], "egress_global_timestamp")?,
            e_egress_rid: field(egress[2], "egress_rid")?,
            e_instance_type: field(egress[2], "instance_type")?,
            e_priority: field(egress[2], "priority")?,
        }))
    } else {
        let (parser, ingress, egress) = (three(0)?, three(1)?, three(2)?);
        Arch::Edgeflow(Box::new(Edgeflow {
            blocks: numbers.clone().try_into().map_err(|_| "EdgeflowSwitch's four blocks")?,
            parser,
            ingress,
            egress,
            deparser_hdr: one(3)?,
            p_ingress_port: field(parser[2], "ingress_port")?,
            p_packet_length: field(parser[2], "packet_length")?,
            p_timestamp: field(parser[2], "timestamp")?,
            i_drop: field(ingress[2], "drop")?,
            i_mcast_grp: field(ingress[2], "mcast_grp")?,
            i_egress_port: field(ingress[2], "egress_port")?,
            e_egress_port: field(egress[2], "egress_port")?,
            e_drop: field(egress[2], "drop")?,
            e_priority: field(egress[2], "priority")?,
        }))
    };
    let code = c.finish()?;
    Ok(Arc::new(Program { code, arch }))
}

/// Where the package's blocks and their parameters are, for an architecture's driver.
pub(super) struct Layout<'c> {
    c: &'c Compiler<'c>,
    pub ir: &'c ir::Program,
    /// The package's blocks in its order, by their numbers among the IR's blocks (sub-blocks
    /// may sit between them in `blocks_code`).
    pub numbers: Vec<usize>,
}

impl<'c> Layout<'c> {
    fn new(c: &'c Compiler<'c>, ir: &'c ir::Program) -> Result<Layout<'c>, String> {
        let numbers = ir
            .blocks
            .iter()
            .map(|n| ir.blocks_code.iter().position(|b| &b.name == n).ok_or_else(|| format!("the block {n}")))
            .collect::<Result<_, _>>()?;
        Ok(Layout { c, ir, numbers })
    }

    /// The `N` parameters of the package's block `b` that are not packet_in or packet_out.
    pub fn params<const N: usize>(&self, b: usize) -> Result<[usize; N], String> {
        let ir = self.ir;
        let block = self.numbers.get(b).and_then(|&b| ir.blocks_code.get(b)).ok_or("the package's blocks")?;
        let params: Vec<usize> = block
            .params
            .iter()
            .map(|(v, _)| *v)
            .filter(|v| !matches!(ir.variables[*v].ty, ir::Ty::Opaque(_)))
            .collect();
        params.try_into().map_err(|_| format!("{}: parameters other than its architecture's", block.name))
    }

    /// Field `name` of the struct variable `var` (an intrinsic metadata parameter).
    pub fn field(&self, var: usize, name: &str) -> Result<F, String> {
        let (ir, c) = (self.ir, self.c);
        let ir::Ty::Struct(i) = &ir.variables[var].ty else { return Err("standard metadata".into()) };
        let k = ir.aggregates[*i]
            .fields
            .iter()
            .position(|(f, _)| f == name)
            .ok_or_else(|| format!("standard_metadata.{name}"))?;
        let shape = c.shape(&ir.variables[var].ty)?;
        let width = match &ir.aggregates[*i].fields[k].1 {
            ir::Ty::Bit(w) | ir::Ty::Int(w) => *w,
            _ => 32,
        };
        Ok((base_of(c, ir, var)? + shape.field_at(k), super::mask(width)))
    }

    /// The type of field `name` of the struct variable `var`.
    pub fn field_ty(&self, var: usize, name: &str) -> Option<&'c ir::Ty> {
        let ir = self.ir;
        let ir::Ty::Struct(i) = &ir.variables[var].ty else { return None };
        ir.aggregates[*i].fields.iter().find(|(f, _)| f == name).map(|(_, t)| t)
    }
}

fn base_of(c: &Compiler, ir: &ir::Program, var: usize) -> Result<usize, String> {
    let mut at = 0;
    for v in &ir.variables[..var] {
        at += c.shape(&v.ty)?.size();
    }
    Ok(at)
}

/// Copies variable `from`'s slots into variable `to` (of the same type).
#[inline]
fn copy(m: &mut M, from: usize, to: usize) {
    copy_slots(m.prog, &mut m.slots, from, to);
}

/// Copies variable `from`'s slots into variable `to` (of the same type).
#[inline]
pub(super) fn copy_slots(prog: &Compiled, slots: &mut [u128], from: usize, to: usize) {
    let (a, b, n) = (prog.base[from], prog.base[to], prog.sizes[from]);
    slots.copy_within(a..a + n, b);
}

/// How a control's run ends for the switch: on (its end, a return, an exit) or the frame's end.
fn control(f: Flow) -> Result<(), Dropped> {
    match f {
        Flow::Unsupported(what) => Err(Dropped::Unsupported(what.to_string())),
        Flow::Reject(_) => Err(Dropped::Program),
        _ => Ok(()),
    }
}

const V1_DROP_PORT: u128 = super::v1model::DROP_PORT;
const V1_REPLICA: u128 = 5;

impl Switch {
    /// Runs `frame` on the compiled program.
    pub(super) fn process_compiled(
        &mut self,
        program: &Program,
        frame: &[u8],
        port: u32,
        now: u64,
    ) -> Result<Vec<Output>, Dropped> {
        if let Arch::Psa(a) = &program.arch {
            return super::exec_psa::process(self, &program.code, a, frame, port, now);
        }
        if let (true, Arch::V1Model(a)) = (program.code.passes, &program.arch) {
            return self.process_passes(&program.code, a, frame, port, now);
        }
        let mut slots = std::mem::take(&mut self.exec_slots);
        slots.clear();
        slots.resize(program.code.slots, 0);
        let keys = std::mem::take(&mut self.exec_keys);
        let bytes = std::mem::take(&mut self.exec_bytes);
        let deparsed = std::mem::take(&mut self.exec_out);
        let mut m = M {
            prog: &program.code,
            slots,
            sw: self,
            data: frame,
            cursor: 0,
            out: deparsed,
            length: frame.len() as u64,
            now,
            keys,
            bytes,
            checksum_error: false,
            past_stack: false,
            matched: None,
        };
        let result = match &program.arch {
            Arch::Edgeflow(a) => edgeflow(a, &mut m, frame, port, now),
            Arch::V1Model(a) => v1model(a, &mut m, frame, port, now),
            Arch::Psa(_) => unreachable!("run above"),
        };
        let (slots, keys, bytes, deparsed) = (
            std::mem::take(&mut m.slots),
            std::mem::take(&mut m.keys),
            std::mem::take(&mut m.bytes),
            std::mem::take(&mut m.out),
        );
        self.exec_slots = slots;
        self.exec_keys = keys;
        self.exec_bytes = bytes;
        self.exec_out = deparsed;
        result
    }
}

fn edgeflow<'f>(a: &Edgeflow, m: &mut M<'f>, frame: &'f [u8], port: u32, now: u64) -> Result<Vec<Output>, Dropped> {
    set(m, a.p_ingress_port, port as u128);
    set(m, a.p_packet_length, frame.len() as u128);
    set(m, a.p_timestamp, now as u128);
    match exec::run_block(a.blocks[0], m) {
        Flow::Next => {}
        Flow::Reject(e) => return Err(Dropped::Parser(m.prog.errors.get(e as usize).cloned().unwrap_or_default())),
        Flow::Unsupported(what) => return Err(Dropped::Unsupported(what.to_string())),
        _ => return Err(Dropped::Parser("NoError".into())),
    }
    let payload_at = (m.cursor / 8).min(frame.len());
    for k in 0..3 {
        copy(m, a.parser[k], a.ingress[k]);
    }
    control(exec::run_block(a.blocks[1], m))?;
    if m.slots[a.i_drop.0] != 0 {
        return Err(Dropped::Program);
    }
    let group = m.slots[a.i_mcast_grp.0] as u16;
    let copies = match group {
        0 => match m.slots[a.i_egress_port.0] as u32 {
            0 => return Err(Dropped::NoPort),
            _ => 1,
        },
        g => m.sw.groups.get(&g).map_or(0, Vec::len),
    };
    let mut out = Vec::new();
    for i in 0..copies {
        let p = match group {
            0 => m.slots[a.i_egress_port.0] as u32,
            g => m.sw.groups[&g][i],
        };
        for k in 0..3 {
            copy(m, a.ingress[k], a.egress[k]);
        }
        set(m, a.e_egress_port, p as u128);
        control(exec::run_block(a.blocks[2], m))?;
        if m.slots[a.e_drop.0] != 0 {
            continue;
        }
        copy(m, a.egress[0], a.deparser_hdr);
        m.out.clear();
        match exec::run_block(a.blocks[3], m) {
            Flow::Unsupported(what) => return Err(Dropped::Unsupported(what.to_string())),
            Flow::Reject(_) => continue,
            _ => {}
        }
        let mut bytes = Vec::with_capacity(m.out.len() + frame.len() - payload_at);
        bytes.extend_from_slice(&m.out);
        bytes.extend_from_slice(&frame[payload_at..]);
        out.push(Output { port: p, queue: m.slots[a.e_priority.0] as u8, frame: bytes });
    }
    let _ = now;
    if out.is_empty() {
        return Err(Dropped::Program);
    }
    Ok(out)
}

/// v1model's parser and verify-checksum control on `frame` arriving on `port` as copy kind
/// `instance`: returns where the payload the parser left starts, which is `m.data` from before
/// verify runs (`verify_checksum_with_payload` reads it).
pub(super) fn parse_and_verify<'f>(
    a: &V1Model,
    m: &mut M<'f>,
    frame: &'f [u8],
    port: u32,
    instance: u128,
    now: u64,
) -> Result<usize, Dropped> {
    set(m, a.p_ingress_port, port as u128);
    set(m, a.p_packet_length, frame.len() as u128);
    set(m, a.p_instance_type, instance);
    set(m, a.p_ingress_timestamp, (now / 1000) as u128);
    // A frame the parser rejects goes on to ingress, which sees why in parser_error.
    match exec::run_block(a.blocks[0], m) {
        Flow::Reject(e) => m.slots[a.p_parser_error.0] = e as u128,
        Flow::Unsupported(what) => return Err(Dropped::Unsupported(what.to_string())),
        _ => {}
    }
    let payload_at = (m.cursor / 8).min(frame.len());
    m.data = &frame[payload_at..];
    copy(m, a.parser[0], a.verify[0]);
    copy(m, a.parser[1], a.verify[1]);
    m.checksum_error = false;
    control(exec::run_block(a.blocks[1], m))?;
    if m.checksum_error {
        set(m, a.p_checksum_error, 1);
    }
    Ok(payload_at)
}

fn v1model<'f>(a: &V1Model, m: &mut M<'f>, frame: &'f [u8], port: u32, now: u64) -> Result<Vec<Output>, Dropped> {
    let payload = &frame[parse_and_verify(a, m, frame, port, 0, now)?..];
    copy(m, a.verify[0], a.ingress[0]);
    copy(m, a.verify[1], a.ingress[1]);
    copy(m, a.parser[2], a.ingress[2]);
    control(exec::run_block(a.blocks[2], m))?;
    let group = m.slots[a.i_mcast_grp.0] as u16;
    let mut out = Vec::new();
    if group != 0 {
        set(m, a.i_instance_type, V1_REPLICA);
        for (p, rid) in m.sw.replicas(group) {
            v1model_egress(a, m, p, Some(rid), payload, frame.len(), now, &mut out)?;
        }
    } else {
        let spec = m.slots[a.i_egress_spec.0];
        if spec != V1_DROP_PORT {
            set(m, a.i_instance_type, 0);
            v1model_egress(a, m, spec as u32, None, payload, frame.len(), now, &mut out)?;
        }
    }
    if out.is_empty() {
        return Err(Dropped::Program);
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn v1model_egress(
    a: &V1Model,
    m: &mut M,
    port: u32,
    rid: Option<u16>,
    payload: &[u8],
    length: usize,
    now: u64,
    out: &mut Vec<Output>,
) -> Result<(), Dropped> {
    for k in 0..3 {
        copy(m, a.ingress[k], a.egress[k]);
    }
    if let Some(rid) = rid {
        set(m, a.e_egress_rid, rid as u128);
    }
    set(m, a.e_egress_port, port as u128);
    set(m, a.e_egress_spec, 0);
    set(m, a.e_packet_length, length as u128);
    set(m, a.e_egress_timestamp, (now / 1000) as u128);
    let _ = a.e_instance_type;
    control(exec::run_block(a.blocks[3], m))?;
    if m.slots[a.e_egress_spec.0] == V1_DROP_PORT {
        return Ok(());
    }
    let frame = compute_and_deparse(a, m, payload)?;
    out.push(Output { port, queue: m.slots[a.e_priority.0] as u8, frame });
    Ok(())
}

/// v1model's compute-checksum control and deparser on what egress left: the frame that leaves,
/// the deparser's bytes and then the payload the parser did not read.
fn compute_and_deparse(a: &V1Model, m: &mut M, payload: &[u8]) -> Result<Vec<u8>, Dropped> {
    copy(m, a.egress[0], a.compute[0]);
    copy(m, a.egress[1], a.compute[1]);
    control(exec::run_block(a.blocks[4], m))?;
    copy(m, a.compute[0], a.deparser_hdr);
    m.out.clear();
    if let Flow::Unsupported(what) = exec::run_block(a.blocks[5], m) {
        return Err(Dropped::Unsupported(what.to_string()));
    }
    let mut bytes = Vec::with_capacity(m.out.len() + payload.len());
    bytes.extend_from_slice(&m.out);
    bytes.extend_from_slice(payload);
    Ok(bytes)
}
