//! The compiled program's calls of externs (`exec.rs`): the packet's `extract`, `lookahead`,
//! `advance` and `emit`, the architectures' functions (`mark_to_drop`, `verify`, v1model's
//! checksums, hash, random, digest, assert and assume, and the requests clone, resubmit,
//! recirculate and truncate leave for the switch) and the methods of counters, registers,
//! meters, direct meters and AFDX accounts, each resolved when the program is compiled to the
//! `Switch`'s state by number.
//!
//! About 840 lines, one concern: what each extern call does to the slots and the switch.

use super::{mask, read_field, After, Compiler, Flow, Shape, E, M, P, R, S, VARBIT};
use crate::backends::software::{v1model, Digest, Value, DIGESTS_KEPT, GREEN};
use crate::midend::ir::{self, CallArg, Callee, Expr, ExternRef, Place, Step, Ty};

impl Compiler<'_> {
    // ---- externs ----

    pub(super) fn call(&self, callee: &Callee, type_args: &[Ty], args: &[CallArg], result: Option<&Place>) -> R<S> {
        match callee {
            Callee::Method { object: ExternRef::Var(v), method } => {
                let Ty::Opaque(kind) = &self.ir.variables[*v].ty else { return Err(format!("a method {method}")) };
                match (kind.as_str(), method.as_str()) {
                    ("packet_in", "extract") if args.len() == 1 => self.extract(&args[0]),
                    ("packet_in", "extract") => self.extract_sized(&args[0], &args[1]),
                    ("packet_in", "advance") => {
                        let CallArg::In(n) = &args[0] else { return Err("advance".into()) };
                        let n = self.scalar(n)?;
                        Ok(Box::new(move |m: &mut M| {
                            let bits = n(m) as usize;
                            if m.cursor + bits > m.data.len() * 8 {
                                return Flow::Reject(m.prog.error_too_short);
                            }
                            m.cursor += bits;
                            Flow::Next
                        }))
                    }
                    ("packet_in", "lookahead") if matches!(type_args.first(), Some(Ty::Header(_))) => {
                        // A header's worth of bits, not moving on: a valid header of them.
                        let Some(Ty::Header(h)) = type_args.first() else { unreachable!() };
                        let Some(place) = result else { return Ok(Box::new(|_: &mut M| Flow::Next)) };
                        let mut widths = Vec::new();
                        for (_, t) in &self.ir.aggregates[*h].fields {
                            match t {
                                Ty::Bit(w) | Ty::Int(w) => widths.push(*w),
                                _ => return Err("lookahead of a header with fields that are not bits".into()),
                            }
                        }
                        let bits: usize = widths.iter().map(|w| *w as usize).sum();
                        let (at, _, _) = self.place(place)?;
                        Ok(Box::new(move |m: &mut M| {
                            if m.cursor + bits > m.data.len() * 8 {
                                return Flow::Reject(m.prog.error_too_short);
                            }
                            let Some(a) = at(m) else { return Flow::Next };
                            let mut cursor = m.cursor;
                            for (k, w) in widths.iter().enumerate() {
                                m.slots[a + 1 + k] = read_field(m.data, cursor, *w);
                                cursor += *w as usize;
                            }
                            m.slots[a] = 1;
                            Flow::Next
                        }))
                    }
                    ("packet_in", "lookahead") => {
                        let Some(Ty::Bit(w)) = type_args.first() else {
                            return Err("lookahead of what is not bits".into());
                        };
                        let Some(place) = result else { return Ok(Box::new(|_: &mut M| Flow::Next)) };
                        let w = *w;
                        let at = self.fixed(place).ok_or("lookahead into an indexed place")?;
                        Ok(Box::new(move |m: &mut M| {
                            if m.cursor + w as usize > m.data.len() * 8 {
                                return Flow::Reject(m.prog.error_too_short);
                            }
                            m.slots[at] = read_field(m.data, m.cursor, w);
                            Flow::Next
                        }))
                    }
                    ("packet_in", "length") => {
                        let Some(place) = result else { return Ok(Box::new(|_: &mut M| Flow::Next)) };
                        let at = self.fixed(place).ok_or("length into an indexed place")?;
                        Ok(Box::new(move |m: &mut M| {
                            m.slots[at] = m.data.len() as u128;
                            Flow::Next
                        }))
                    }
                    ("packet_out", "emit") => {
                        let CallArg::In(Expr::Read(p)) = &args[0] else {
                            return Err("emit of what is not a variable's".into());
                        };
                        let (at, shape, _) = self.place(p)?;
                        let widths = self.widths_of(&p.ty)?;
                        // Each header's place in the value and its fields' widths, found once.
                        let mut headers = Vec::new();
                        plan_emit(&shape, &widths, 0, &mut headers);
                        Ok(Box::new(move |m: &mut M| {
                            if let Some(a) = at(m) {
                                for (off, widths) in &headers {
                                    let h = a + off;
                                    if m.slots[h] != 0 {
                                        emit_header(&m.slots[h + 1..h + 1 + widths.len()], widths, &mut m.out);
                                    }
                                }
                            }
                            Flow::Next
                        }))
                    }
                    (k, meth) => Err(format!("{k}.{meth}")),
                }
            }
            Callee::Function(f) => match f.as_str() {
                "mark_to_drop" => {
                    let Some(CallArg::InOut(p)) = args.first() else { return Err("mark_to_drop".into()) };
                    let at = self.fixed(p).ok_or("mark_to_drop of an indexed place")?;
                    let Ty::Struct(i) = &p.ty else { return Err("mark_to_drop".into()) };
                    let fields = &self.ir.aggregates[*i].fields;
                    let shape = self.shape(&p.ty)?;
                    let field = |n: &str| fields.iter().position(|(f, _)| f == n).map(|k| at + shape.field_at(k));
                    if self.v1model {
                        let (spec, grp) =
                            (field("egress_spec").ok_or("egress_spec")?, field("mcast_grp").ok_or("mcast_grp")?);
                        Ok(Box::new(move |m: &mut M| {
                            m.slots[spec] = v1model::DROP_PORT;
                            m.slots[grp] = 0;
                            Flow::Next
                        }))
                    } else {
                        let drop = field("drop").ok_or("drop")?;
                        Ok(Box::new(move |m: &mut M| {
                            m.slots[drop] = 1;
                            Flow::Next
                        }))
                    }
                }
                "verify" => {
                    let (Some(CallArg::In(c)), Some(CallArg::In(e))) = (args.first(), args.get(1)) else {
                        return Err("verify".into());
                    };
                    let (c, e) = (self.scalar(c)?, self.scalar(e)?);
                    Ok(Box::new(move |m: &mut M| if c(m) != 0 { Flow::Next } else { Flow::Reject(e(m) as u32) }))
                }
                "static_assert" | "log_msg" => Ok(Box::new(|_: &mut M| Flow::Next)),
                "verify_checksum"
                | "verify_checksum_with_payload"
                | "update_checksum"
                | "update_checksum_with_payload"
                    if self.v1model =>
                {
                    let payload = f.ends_with("_with_payload");
                    let (Some(CallArg::In(c)), Some(CallArg::In(data)), Some(sum), Some(CallArg::In(algo))) =
                        (args.first(), args.get(1), args.get(2), args.get(3))
                    else {
                        return Err(f.clone());
                    };
                    let (c, data, algo) = (self.scalar(c)?, self.serialized(data)?, self.algorithm(algo)?);
                    match sum {
                        CallArg::In(want) => {
                            let width = Self::width(&self.ty_of(want));
                            let want = self.scalar(want)?;
                            Ok(Box::new(move |m: &mut M| {
                                if c(m) != 0 {
                                    let h = digest_of(&data, algo, payload, m);
                                    if h & mask(width) != want(m) {
                                        m.checksum_error = true;
                                    }
                                }
                                Flow::Next
                            }))
                        }
                        CallArg::InOut(p) | CallArg::Out(p) => {
                            let km = mask(Self::width(&p.ty));
                            let (at, _, _) = self.place(p)?;
                            Ok(Box::new(move |m: &mut M| {
                                if c(m) != 0 {
                                    let h = digest_of(&data, algo, payload, m);
                                    if let Some(a) = at(m) {
                                        m.slots[a] = h & km;
                                    }
                                }
                                Flow::Next
                            }))
                        }
                        CallArg::Discard => Err(f.clone()),
                    }
                }
                "hash" if self.v1model => {
                    let (
                        Some(CallArg::Out(p)),
                        Some(CallArg::In(algo)),
                        Some(CallArg::In(base)),
                        Some(CallArg::In(data)),
                        Some(CallArg::In(max)),
                    ) = (args.first(), args.get(1), args.get(2), args.get(3), args.get(4))
                    else {
                        return Err("hash".into());
                    };
                    let km = mask(Self::width(&p.ty));
                    let (at, _, _) = self.place(p)?;
                    let (algo, base, data, max) =
                        (self.algorithm(algo)?, self.scalar(base)?, self.serialized(data)?, self.scalar(max)?);
                    Ok(Box::new(move |m: &mut M| {
                        let b = base(m);
                        let h = if algo == v1model::Algorithm::Random {
                            m.sw.next_random() as u128
                        } else {
                            digest_of(&data, algo, false, m)
                        };
                        let mx = max(m);
                        let v = if mx == 0 { b.wrapping_add(h) } else { b.wrapping_add(h % mx) };
                        if let Some(a) = at(m) {
                            m.slots[a] = v & km;
                        }
                        Flow::Next
                    }))
                }
                "digest" if self.v1model => {
                    // Kept for the control plane under the data's type's name, each member a
                    // number (a member that is not bits counts 0, as the old evaluator keeps it).
                    let Some(CallArg::In(Expr::Read(p))) = args.get(1) else {
                        return Err("digest of what is not a variable's".into());
                    };
                    let ty = type_args.first().unwrap_or(&p.ty);
                    let (Ty::Struct(i) | Ty::Header(i)) = ty else {
                        return Err("digest of what is not a struct".into());
                    };
                    let name = self.ir.aggregates[*i].name.clone();
                    let (at, shape, _) = self.place(p)?;
                    let fields = digest_members(self.ir, ty, &shape, 0);
                    Ok(Box::new(move |m: &mut M| {
                        if m.sw.digests.len() >= DIGESTS_KEPT {
                            return Flow::Next;
                        }
                        let Some(a) = at(m) else { return Flow::Next };
                        let data = fields.iter().map(|f| f.map_or(0, |off| m.slots[a + off])).collect();
                        m.sw.digests.push(Digest { name: name.clone(), data });
                        Flow::Next
                    }))
                }
                "random" if self.v1model => {
                    let (Some(CallArg::Out(p)), Some(CallArg::In(lo)), Some(CallArg::In(hi))) =
                        (args.first(), args.get(1), args.get(2))
                    else {
                        return Err("random".into());
                    };
                    let km = mask(Self::width(&p.ty));
                    let (at, _, _) = self.place(p)?;
                    let (lo, hi) = (self.scalar(lo)?, self.scalar(hi)?);
                    Ok(Box::new(move |m: &mut M| {
                        let (lo, hi) = (lo(m), hi(m));
                        let span = hi.saturating_sub(lo).saturating_add(1);
                        let v = lo + (m.sw.next_random() as u128) % span.max(1);
                        if let Some(a) = at(m) {
                            m.slots[a] = v & km;
                        }
                        Flow::Next
                    }))
                }
                "clone" | "clone_preserving_field_list" | "clone3" if self.v1model => {
                    // clone(type, session, ...): the session, for the switch after the block.
                    let Some(CallArg::In(session)) = args.get(1) else { return Err(f.clone()) };
                    let session = self.scalar(session)?;
                    self.passes.set(true);
                    Ok(Box::new(move |m: &mut M| {
                        m.sw.requests.clone = Some(session(m) as u32);
                        Flow::Next
                    }))
                }
                "resubmit" | "resubmit_preserving_field_list" if self.v1model => {
                    self.passes.set(true);
                    Ok(Box::new(|m: &mut M| {
                        m.sw.requests.resubmit = true;
                        Flow::Next
                    }))
                }
                "recirculate" | "recirculate_preserving_field_list" if self.v1model => {
                    self.passes.set(true);
                    Ok(Box::new(|m: &mut M| {
                        m.sw.requests.recirculate = true;
                        Flow::Next
                    }))
                }
                "truncate" if self.v1model => {
                    let Some(CallArg::In(length)) = args.first() else { return Err(f.clone()) };
                    let length = self.scalar(length)?;
                    self.passes.set(true);
                    Ok(Box::new(move |m: &mut M| {
                        m.sw.requests.truncate = Some(length(m) as usize);
                        Flow::Next
                    }))
                }
                "assert" | "assume" if self.v1model => {
                    let Some(CallArg::In(c)) = args.first() else { return Err(f.clone()) };
                    let c = self.scalar(c)?;
                    let failed = self.error("AssertionFailed");
                    Ok(Box::new(move |m: &mut M| if c(m) != 0 { Flow::Next } else { Flow::Reject(failed) }))
                }
                "psa_clone_i2e" | "psa_clone_e2e" | "psa_resubmit" | "psa_normal" | "psa_recirculate" => {
                    self.psa_function(f, args, result)
                }
                // In a v1model or edgeflow.p4 program, an extern function the program declares
                // itself (p4c's extern-funcs-bmv2): nothing gives it a body, so no frame runs
                // through it: the program is refused at load (`Switch::new`).
                other => Err(format!("the extern function {other}, which the software target has no body for")),
            },
            Callee::Method { object: ExternRef::Instance(name), method } => {
                let instance =
                    self.ir.instances.iter().find(|i| &i.name == name).ok_or_else(|| format!("instance {name}"))?;
                let key = self.switch_name(name);
                let arg = |i: usize| -> R<E> {
                    match args.get(i) {
                        Some(CallArg::In(e)) => self.scalar(e),
                        _ => Err(format!("{name}.{method}'s argument {i}")),
                    }
                };
                match (instance.ty.as_str(), method.as_str()) {
                    ("Hash" | "Checksum" | "InternetChecksum" | "Random" | "Digest" | "Meter", _)
                    | ("Register", "read") => self.psa_method(instance, &key, method, args, result),
                    ("counter" | "Counter", "count") => {
                        let c = self.sw.counters.number(&key).ok_or_else(|| format!("the counter {key}"))?;
                        let index = arg(0)?;
                        Ok(Box::new(move |m: &mut M| {
                            let i = index(m) as usize;
                            let length = m.length;
                            if let Some(cell) = m.sw.counters.at_mut(c).get_mut(i) {
                                cell.0 += 1;
                                cell.1 += length;
                            }
                            Flow::Next
                        }))
                    }
                    // v1model's direct counter counts each hit as the lookup makes it.
                    ("direct_counter", "count") => Ok(Box::new(|_: &mut M| Flow::Next)),
                    ("DirectCounter", "count") => self.psa_direct_count(name),
                    ("DirectMeter", "execute") if args.is_empty() => self.psa_direct_execute(name, &key, result),
                    ("direct_meter", "read") => self.direct_meter_read(key, args),
                    ("register", "read") if args.len() == 2 => {
                        let r = self.sw.registers.number(&key).ok_or_else(|| format!("the register {key}"))?;
                        let CallArg::Out(dst) = &args[0] else { return Err("register.read".into()) };
                        if !matches!(self.shape(&dst.ty)?, Shape::Scalar) {
                            return Err("a register of aggregates".into());
                        }
                        let (dst, _, _) = self.place(dst)?;
                        let index = arg(1)?;
                        Ok(Box::new(move |m: &mut M| {
                            let i = index(m) as usize;
                            let v = m.sw.registers.at(r).get(i).map_or(0, Value::as_u128);
                            if let Some(a) = dst(m) {
                                m.slots[a] = v;
                            }
                            Flow::Next
                        }))
                    }
                    ("register" | "Register", "write") => {
                        let r = self.sw.registers.number(&key).ok_or_else(|| format!("the register {key}"))?;
                        let (index, value) = (arg(0)?, arg(1)?);
                        if self.sw.registers.at(r).iter().any(|c| !matches!(c, Value::Bits { .. } | Value::Bool(_))) {
                            return Err("a register of aggregates".into());
                        }
                        Ok(Box::new(move |m: &mut M| {
                            let i = index(m) as usize;
                            let v = value(m);
                            match m.sw.registers.at_mut(r).get_mut(i) {
                                Some(Value::Bits { width, value, .. }) => *value = v & mask(*width),
                                Some(Value::Bool(b)) => *b = v != 0,
                                _ => {}
                            }
                            Flow::Next
                        }))
                    }
                    ("afdx_account", "conforms") => {
                        let a = self.sw.accounts.number(&key).ok_or_else(|| format!("the account {key}"))?;
                        let (index, bag, jitter, smax) = (arg(0)?, arg(1)?, arg(2)?, arg(3)?);
                        let dst = result.map(|p| self.fixed(p).ok_or("conforms into an indexed place")).transpose()?;
                        Ok(Box::new(move |m: &mut M| {
                            let i = index(m) as usize;
                            let (bag, jitter, smax) = (bag(m) * 1000, jitter(m) * 1000, smax(m));
                            let now = m.now;
                            let ok = match m.sw.accounts.at_mut(a).get_mut(i) {
                                None => false,
                                Some((credit, at)) => {
                                    crate::backends::software::afdx_conforms(credit, at, now, bag, jitter, smax)
                                }
                            };
                            if let Some(d) = dst {
                                m.slots[d] = ok as u128;
                            }
                            Flow::Next
                        }))
                    }
                    ("meter", "execute_meter") => {
                        let k = self.sw.meters.number(&key).ok_or_else(|| format!("the meter {key}"))?;
                        let index = arg(0)?;
                        let Some(CallArg::Out(dst)) = args.get(1) else { return Err("execute_meter".into()) };
                        let (dst, _, _) = self.place(dst)?;
                        let km = mask(Self::width(&args_ty(&args[1])));
                        Ok(Box::new(move |m: &mut M| {
                            let i = index(m) as usize;
                            let (length, now) = (m.length, m.now);
                            let meter = m.sw.meters.at_mut(k);
                            let units = if meter.bytes { length } else { 1 };
                            let colour = meter.cells.get_mut(i).map_or(GREEN, |c| c.mark(units, now));
                            if let Some(a) = dst(m) {
                                m.slots[a] = colour as u128 & km;
                            }
                            Flow::Next
                        }))
                    }
                    (ty, meth) => Err(format!("{ty}.{meth}")),
                }
            }
        }
    }

    /// The widths of a type's scalars, in the order they sit in its slots (0 for a validity).
    pub(super) fn widths_of(&self, ty: &Ty) -> R<Vec<u32>> {
        let mut out = Vec::new();
        self.push_widths(ty, &mut out)?;
        Ok(out)
    }

    fn push_widths(&self, ty: &Ty, out: &mut Vec<u32>) -> R<()> {
        match ty {
            Ty::Bit(w) | Ty::Int(w) => out.push(*w),
            // The evaluator emits a header's bits fields only.
            Ty::Bool | Ty::Error | Ty::Enum(_) => out.push(0),
            Ty::Header(i) | Ty::Struct(i) | Ty::Union(i) => {
                let a = &self.ir.aggregates[*i];
                if a.kind == ir::AggregateKind::Header {
                    out.push(0);
                }
                for (_, t) in &a.fields {
                    self.push_widths(t, out)?;
                }
            }
            Ty::Stack(e, n) => {
                out.push(32);
                for _ in 0..*n {
                    self.push_widths(e, out)?;
                }
            }
            Ty::Tuple(items) => {
                for t in items {
                    self.push_widths(t, out)?;
                }
            }
            Ty::Opaque(_) => {}
            Ty::Varbit(max) => {
                out.push(VARBIT);
                out.extend(std::iter::repeat_n(0, max.div_ceil(8) as usize));
            }
        }
        Ok(())
    }

    /// A `HashAlgorithm` argument, a constant member.
    fn algorithm(&self, e: &Expr) -> R<v1model::Algorithm> {
        let Expr::Const { value, ty: Ty::Enum(i) } = e else {
            return Err("a hash algorithm that is not a constant".into());
        };
        let name = self.ir.enums[*i].members.get(*value as usize).ok_or("a hash algorithm")?;
        Ok(v1model::Algorithm::named(name))
    }

    /// What a checksum or hash covers, as the old evaluator's `serialize` reads it: each item's
    /// bits in order, a field of a header that is not valid left out, a header only if valid.
    pub(super) fn serialized(&self, e: &Expr) -> R<Vec<Piece>> {
        let items: Vec<&Expr> = match e {
            Expr::Aggregate { items, .. } => items.iter().collect(),
            other => vec![other],
        };
        let mut out = Vec::new();
        for item in items {
            match item {
                Expr::Read(p) if matches!(p.ty, Ty::Varbit(_)) => {
                    let mut parent = p.clone();
                    parent.steps.pop();
                    let guard = match self.place(&parent)? {
                        (at, Shape::Header(_), _) => Some(at),
                        _ => None,
                    };
                    out.push(Piece::Varbit { at: self.place(p)?.0, guard });
                }
                Expr::Read(p) if !matches!(self.shape(&p.ty)?, Shape::Scalar) => {
                    let (at, shape, _) = self.place(p)?;
                    let widths = self.widths_of(&p.ty)?;
                    if widths.contains(&0) && !matches!(shape, Shape::Header(_)) {
                        return Err("a checksum over a struct of headers".into());
                    }
                    out.push(Piece::Aggregate { at, shape, widths });
                }
                _ => {
                    let ty = self.ty_of(item);
                    let width = match ty {
                        Ty::Bit(w) | Ty::Int(w) => w,
                        Ty::Bool => 1,
                        _ => return Err("a checksum over what is not bits".into()),
                    };
                    if let Expr::Read(p) = item {
                        if let Some(at) = self.fixed(p) {
                            let mut parent = p.clone();
                            let field = matches!(parent.steps.pop(), Some(Step::Field(_)));
                            let header = match (field, self.fixed(&parent)) {
                                (true, Some(h)) => matches!(self.place(&parent)?.1, Shape::Header(_)).then_some(h),
                                _ => None,
                            };
                            out.push(Piece::Slot { at, width, header });
                            continue;
                        }
                    }
                    // A field of a header: left out while the header is not valid.
                    let guard = match item {
                        Expr::Read(p) if matches!(p.steps.last(), Some(Step::Field(_))) => {
                            let mut parent = p.clone();
                            parent.steps.pop();
                            let (at, shape, _) = self.place(&parent)?;
                            matches!(shape, Shape::Header(_)).then_some(at)
                        }
                        _ => None,
                    };
                    out.push(Piece::Scalar { value: self.scalar(item)?, width, guard });
                }
            }
        }
        Ok(out)
    }

    /// `extract(h, size)`: a header with a varbit field, `size` bits of it.
    fn extract_sized(&self, arg: &CallArg, size: &CallArg) -> R<S> {
        let (CallArg::Out(p), CallArg::In(size)) = (arg, size) else { return Err("extract".into()) };
        let Ty::Header(h) = &p.ty else { return Err("extract of what is not a header".into()) };
        let next_of =
            self.extract_next_of(p, "extract with a size into a member of a stack's last, or an element of next's")?;
        // Each field: its width, or the varbit's maximum (`VARBIT` marks it) and slots.
        let mut fields = Vec::new();
        let mut max = None;
        for (_, t) in &self.ir.aggregates[*h].fields {
            match t {
                Ty::Bit(w) | Ty::Int(w) => fields.push((*w, 1)),
                Ty::Varbit(x) => {
                    max = Some(*x);
                    fields.push((VARBIT, 1 + x.div_ceil(8) as usize));
                }
                _ => return Err("extract of a header with fields that are not bits".into()),
            }
        }
        let max = max.ok_or("extract with a size into a header without varbit")? as u128;
        let fixed: usize = fields.iter().filter(|(w, _)| *w != VARBIT).map(|(w, _)| *w as usize).sum();
        let size = self.scalar(size)?;
        let (too_long, not_bytes) = (self.error("HeaderTooShort"), self.error("ParserInvalidArgument"));
        let (at, _, union) = self.place(p)?;
        let settle = union.map(|(u, i)| self.settler(&u, i, p)).transpose()?;
        Ok(Box::new(move |m: &mut M| {
            let n = size(m);
            let Some(a) = at(m) else { return Flow::Reject(m.prog.error_out_of_bounds) };
            if n > max {
                return Flow::Reject(too_long);
            }
            if n % 8 != 0 {
                return Flow::Reject(not_bytes);
            }
            if m.cursor + fixed + n as usize > m.data.len() * 8 {
                return Flow::Reject(m.prog.error_too_short);
            }
            let mut cursor = m.cursor;
            let mut slot = a + 1;
            for &(w, slots) in &fields {
                if w == VARBIT {
                    m.slots[slot] = n;
                    for b in 0..slots - 1 {
                        m.slots[slot + 1 + b] =
                            if (b as u128) < n / 8 { read_field(m.data, cursor + 8 * b, 8) } else { 0 };
                    }
                    cursor += n as usize;
                } else {
                    m.slots[slot] = read_field(m.data, cursor, w);
                    cursor += w as usize;
                }
                slot += slots;
            }
            extracted(m, a, cursor, &settle, &next_of);
            Flow::Next
        }))
    }

    /// Into `stack.next`, or a member of it (a stack of unions' `u.next.byte`): the stack's
    /// place, whose next element then moves on. An extract through a second `next`, through
    /// `last` short of the place's end, or through an index after `next`, is refused with
    /// `refusal`.
    fn extract_next_of(&self, p: &Place, refusal: &str) -> R<Option<P>> {
        let through = |s: &Step| matches!(s, Step::Next | Step::Last);
        let n = p.steps.len();
        match p.steps.iter().position(|s| matches!(s, Step::Next)) {
            Some(k) => {
                let fields_after = p.steps[k + 1..].iter().all(|s| matches!(s, Step::Field(_)));
                if !fields_after || p.steps[..k].iter().any(through) {
                    return Err(refusal.into());
                }
                let stack = Place { var: p.var, steps: p.steps[..k].to_vec(), ty: p.ty.clone() };
                Ok(Some(self.place(&stack)?.0))
            }
            None if p.steps[..n.saturating_sub(1)].iter().any(through) => Err(refusal.into()),
            None => Ok(None),
        }
    }

    fn extract(&self, arg: &CallArg) -> R<S> {
        let CallArg::Out(p) = arg else { return Err("extract".into()) };
        let Ty::Header(h) = &p.ty else { return Err("extract of what is not a header".into()) };
        let mut widths = Vec::new();
        for (_, t) in &self.ir.aggregates[*h].fields {
            match t {
                Ty::Bit(w) | Ty::Int(w) => widths.push(*w),
                Ty::Bool => widths.push(1),
                _ => return Err("extract of a header with fields that are not bits".into()),
            }
        }
        let bits: usize = widths.iter().map(|w| *w as usize).sum();
        let next_of = self.extract_next_of(p, "extract into a member of a stack's last, or an element of next's")?;
        let (at, _, union) = self.place(p)?;
        let settle = union.map(|(u, i)| self.settler(&u, i, p)).transpose()?;
        Ok(Box::new(move |m: &mut M| {
            let Some(a) = at(m) else { return Flow::Reject(m.prog.error_out_of_bounds) };
            if m.cursor + bits > m.data.len() * 8 {
                return Flow::Reject(m.prog.error_too_short);
            }
            let mut cursor = m.cursor;
            for (k, w) in widths.iter().enumerate() {
                m.slots[a + 1 + k] = read_field(m.data, cursor, *w);
                cursor += *w as usize;
            }
            extracted(m, a, cursor, &settle, &next_of);
            Flow::Next
        }))
    }
}

/// A part of what a checksum or hash covers.
pub(super) enum Piece {
    /// A value at a fixed slot (a header's field, most often): read in place rather than by
    /// a closure, the checksums of the IPv4 header being a fifth of a router's time.
    Slot {
        at: usize,
        width: u32,
        /// Its header's validity slot, where it is a header's field.
        header: Option<usize>,
    },
    Scalar {
        value: E,
        width: u32,
        guard: Option<P>,
    },
    /// A varbit's bytes (left out while its header is not valid).
    Varbit {
        at: P,
        guard: Option<P>,
    },
    /// A header (its fields, if valid).
    Aggregate {
        at: P,
        shape: Shape,
        widths: Vec<u32>,
    },
}

/// Bits packed most significant first into bytes, the last byte's rest zero.
struct BitWriter {
    acc: u64,
    n: u32,
}

impl BitWriter {
    fn push(&mut self, out: &mut Vec<u8>, value: u128, width: u32) {
        // Whole bytes onto a byte boundary (most fields of most headers): copied as they are.
        if self.n == 0 && width.is_multiple_of(8) && width <= 128 {
            out.extend_from_slice(&value.to_be_bytes()[16 - (width / 8) as usize..]);
            return;
        }
        let mut left = width;
        while left > 0 {
            let take = left.min(32);
            let part = ((value >> (left - take)) & mask(take)) as u64;
            self.acc = (self.acc << take) | part;
            self.n += take;
            left -= take;
            while self.n >= 8 {
                out.push((self.acc >> (self.n - 8)) as u8);
                self.n -= 8;
                self.acc &= (1u64 << self.n) - 1;
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        if self.n > 0 {
            out.push((self.acc << (8 - self.n)) as u8);
        }
    }
}

/// The hash `algo` of `pieces` (and the payload, where asked).
fn digest_of(pieces: &[Piece], algo: v1model::Algorithm, payload: bool, m: &mut M) -> u128 {
    let mut out = std::mem::take(&mut m.bytes);
    out.clear();
    serialize(pieces, m, &mut out);
    if payload {
        out.extend_from_slice(m.data);
    }
    let h = algo.hash(&out);
    m.bytes = out;
    h
}

/// The bytes `pieces` cover, after `out`'s.
pub(super) fn serialize(pieces: &[Piece], m: &mut M, out: &mut Vec<u8>) {
    let mut w = BitWriter { acc: 0, n: 0 };
    for p in pieces {
        match p {
            Piece::Slot { at, width, header } => {
                if header.is_some_and(|h| m.slots[h] == 0) {
                    continue;
                }
                w.push(out, m.slots[*at], *width);
            }
            Piece::Scalar { value, width, guard } => {
                if let Some(g) = guard {
                    if g(m).is_some_and(|a| m.slots[a] == 0) {
                        continue;
                    }
                }
                let v = value(m);
                w.push(out, v, *width);
            }
            Piece::Varbit { at, guard } => {
                if let Some(g) = guard {
                    if g(m).is_some_and(|a| m.slots[a] == 0) {
                        continue;
                    }
                }
                let Some(a) = at(m) else { continue };
                for b in 0..(m.slots[a] / 8) as usize {
                    w.push(out, m.slots[a + 1 + b], 8);
                }
            }
            Piece::Aggregate { at, shape, widths } => {
                let Some(a) = at(m) else { continue };
                if let Shape::Header(_) = shape {
                    if m.slots[a] == 0 {
                        continue;
                    }
                }
                for (k, width) in widths.iter().enumerate() {
                    if *width == VARBIT {
                        for b in 0..(m.slots[a + k] / 8) as usize {
                            w.push(out, m.slots[a + k + 1 + b], 8);
                        }
                    } else if *width > 0 {
                        w.push(out, m.slots[a + k], *width);
                    }
                }
            }
        }
    }
    w.finish(out);
}

fn args_ty(a: &CallArg) -> Ty {
    match a {
        CallArg::Out(p) | CallArg::InOut(p) => p.ty.clone(),
        _ => Ty::Bit(128),
    }
}

/// The headers of a value of `shape` in the order they are emitted: each one's place (from
/// `at`) and its fields' widths (0 for what is not emitted: bools, errors, enums).
fn plan_emit(shape: &Shape, widths: &[u32], at: usize, out: &mut Vec<(usize, Vec<u32>)>) -> usize {
    match shape {
        Shape::Header(_) => {
            let size = shape.size();
            out.push((at, widths[at + 1..at + size].to_vec()));
            size
        }
        Shape::Struct(fields) | Shape::Union(fields) => {
            let mut off = 0;
            for f in fields {
                off += plan_emit(f, widths, at + off, out);
            }
            off
        }
        Shape::Stack(e, n) => {
            let size = e.size();
            for i in 0..*n {
                plan_emit(e, widths, at + 1 + i * size, out);
            }
            1 + size * n
        }
        Shape::Scalar => 1,
        Shape::Varbit(_) => shape.size(),
        Shape::Nothing => 0,
    }
}

/// A valid header's fields, packed into bytes most significant first (a header whose bits
/// end mid-byte ends with what is left, as the old evaluator writes it).
#[inline]
fn emit_header(fields: &[u128], widths: &[u32], out: &mut Vec<u8>) {
    let mut w = BitWriter { acc: 0, n: 0 };
    let mut k = 0;
    while k < fields.len() {
        let width = widths[k];
        if width == VARBIT {
            let bytes = (fields[k] / 8) as usize;
            for b in &fields[k + 1..k + 1 + bytes] {
                w.push(out, *b, 8);
            }
        } else if width > 0 {
            w.push(out, fields[k], width);
        }
        k += 1;
    }
    // A header whose bits end mid-byte ends with what is left, as the old evaluator writes it.
    if w.n > 0 {
        out.push(w.acc as u8);
    }
}

/// What every extract does once a header's fields are read up to `cursor`: the header valid at
/// `a`, the parser moved on, a union's other members made invalid, a stack's next moved on.
fn extracted(m: &mut M<'_>, a: usize, cursor: usize, settle: &Option<After>, next_of: &Option<P>) {
    m.slots[a] = 1;
    m.cursor = cursor;
    if let Some(settle) = settle {
        settle(m);
    }
    if let Some(stack) = next_of {
        if let Some(s) = stack(m) {
            m.slots[s] += 1;
        }
    }
}

/// Where each member of a digest's data sits, from `base` in the data's slots, in the order
/// P4Info lists them (`info::DigestInfo::members`): a nested struct's or header's fields in its
/// place, flattened, each bit field or bool its slot, anything else (which P4Info gives a width
/// of 0) none, sent as 0.
pub(super) fn digest_members(ir: &ir::Program, ty: &Ty, shape: &Shape, base: usize) -> Vec<Option<usize>> {
    match ty {
        Ty::Struct(i) | Ty::Header(i) => ir.aggregates[*i]
            .fields
            .iter()
            .enumerate()
            .flat_map(|(k, (_, t))| digest_members(ir, t, shape.field(k), base + shape.field_at(k)))
            .collect(),
        Ty::Bit(_) | Ty::Int(_) | Ty::Bool => vec![Some(base)],
        _ => vec![None],
    }
}
