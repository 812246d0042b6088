//! The IR's extern calls as C: the packet's `extract`, `advance` and `emit` (in place: the
//! deparser writes a header back where the parser read it, and only there, or the frame goes
//! up), the architectures' functions (`mark_to_drop`, `verify`, v1model's checksums, hash and
//! digest), and the methods of counters, registers, meters and AFDX accounts, each instance a
//! map declared where it is first used.

use std::fmt::Write as _;

use super::expr::Lv;
use super::printer::{mask_c, scalar, width, Printer};
use super::{ident, no, ones, KernelMeter, HASH_BYTES_MAX, R};
use crate::midend::ir::{Arg, CallArg, Callee, Expr, ExternRef, Place, Step, Ty};

/// What the kernel keeps for an extern instance.
enum Kept {
    Counter(String, usize),
    Direct,
    Meter(KernelMeter),
    DirectMeter(String),
    Register(String, usize),
    Account(String, usize),
}

impl Printer<'_> {
    /// `place = v` for a scalar place and a C value `v`.
    pub fn store(&mut self, p: &Place, v: &str) -> R<String> {
        if !scalar(&p.ty) {
            return Err(no(format!("a result of type {}", self.p4_type(&p.ty))));
        }
        let v = format!("({v}) & {}", mask_c(&p.ty));
        Ok(match self.place(p)? {
            Lv::Fixed(s) => format!("{s} = {v};\n"),
            Lv::Ptr(ptr) => {
                let (t, q) = (self.temp("t"), self.temp("q"));
                format!("{{ __u64 {t} = {v}; __u64 *{q} = {ptr}; if ({q}) *{q} = {t}; }}\n")
            }
            Lv::Past => format!("(void)({v});\n"),
        })
    }

    fn in_arg(&mut self, a: Option<&CallArg>, what: &str) -> R<String> {
        match a {
            Some(CallArg::In(e)) => self.expr(e),
            _ => Err(no(what.to_string())),
        }
    }

    pub fn extern_call(
        &mut self,
        callee: &Callee,
        type_args: &[Ty],
        args: &[CallArg],
        result: Option<&Place>,
    ) -> R<String> {
        match callee {
            Callee::Method { object: ExternRef::Var(v), method } => {
                let kind = match &self.ir.variables[*v].ty {
                    Ty::Opaque(k) => k.clone(),
                    other => return Err(no(format!("a method {method} of {}", self.p4_type(other)))),
                };
                match (kind.as_str(), method.as_str(), args) {
                    ("packet_in", "extract", [CallArg::Out(p)]) => self.extract(p, None),
                    ("packet_in", "extract", [CallArg::Out(p), CallArg::In(size)]) => self.extract(p, Some(size)),
                    // The parser's cursor is in bytes here: an advance by bits that are not
                    // whole bytes goes up, as does a frame longer than the bytes copied in.
                    ("packet_in", "advance", [CallArg::In(n)]) => {
                        let n = self.expr(n)?;
                        Ok(format!(
                            "{{ __u64 bits = {n};\nif (bits % 8) {{ r->misfit = 1; goto reject; }}\n\
                             if (r->off + bits / 8 > r->len) {{ r->misfit = r->len < r->sm.f_packet_length; \
                             r->sm.f_parser_error = {}; goto reject; }}\nr->off += bits / 8; }}\n",
                            self.error_index("PacketTooShort")
                        ))
                    }
                    ("packet_in", "lookahead", []) => self.lookahead(type_args.first(), result),
                    ("packet_out", "emit", [CallArg::In(Expr::Read(p))]) => {
                        let ptr = self.place_ptr(p)?;
                        self.emit(&ptr, &p.ty.clone())
                    }
                    (k, m, _) => {
                        let targs = if type_args.is_empty() { String::new() } else { "<...>".into() };
                        Err(no(format!("{k}.{m}{targs}()")))
                    }
                }
            }
            Callee::Method { object: ExternRef::Instance(name), method } => {
                self.instance_call(name, method, args, result)
            }
            Callee::Function(f) => self.function_call(f, args),
        }
    }

    fn function_call(&mut self, f: &str, args: &[CallArg]) -> R<String> {
        match (f, args) {
            ("mark_to_drop", [CallArg::InOut(p)]) => {
                let Lv::Fixed(sm) = self.place(p)? else { return Err(no("mark_to_drop of an indexed place")) };
                // v1model drops by port (511) and cancels a multicast; edgeflow.p4 by flag.
                Ok(if self.v1model {
                    format!("{sm}.f_egress_spec = 511;\n{sm}.f_mcast_grp = 0;\n")
                } else {
                    format!("{sm}.f_drop = 1;\n")
                })
            }
            // The control plane hears of a digest from userspace only: the frame goes up.
            ("digest", _) if self.v1model => Ok("r->misfit = 1;\n".into()),
            ("log_msg" | "static_assert", _) => Ok(String::new()),
            ("verify", [CallArg::In(c), CallArg::In(e)]) => {
                let (c, e) = (self.expr(c)?, self.expr(e)?);
                Ok(format!("if (!({c})) {{ r->sm.f_parser_error = {e}; goto reject; }}\n"))
            }
            ("verify_checksum" | "update_checksum", [_, _, _, _]) if self.v1model => {
                self.checksum(f == "verify_checksum", args)
            }
            ("hash", [_, _, _, _, _]) if self.v1model => self.hash(args),
            _ => Err(no(format!("{f}()"))),
        }
    }

    /// The state an extern instance has in the kernel, its maps declared at first use.
    fn kept(&mut self, name: &str) -> R<Kept> {
        let Some(inst) = self.ir.instances.iter().find(|i| i.name == name).cloned() else {
            return Err(no(format!("the extern {name}")));
        };
        let key = self.switch_name(name);
        let map = format!("p4_x_{}", ident(&key));
        let size = |k: usize| match inst.args.get(k) {
            Some(Arg::Number { value, .. }) => Ok(*value as usize),
            _ => Err(no(format!("{key}: a size that is not a constant"))),
        };
        let member = |k: usize| match inst.args.get(k) {
            Some(Arg::Member { enumeration, index }) => self.ir.enums[*enumeration].members[*index].clone(),
            _ => String::new(),
        };
        let declared = !self.printed.insert(format!("instance {name}"));
        Ok(match inst.ty.as_str() {
            "counter" => {
                let n = size(0)?;
                if !declared {
                    let _ = writeln!(self.maps, "EF_MAP({map}, BPF_MAP_TYPE_PERCPU_ARRAY, 4, 16, {});", n.max(1));
                    self.counters.push((key, map.clone(), n));
                }
                Kept::Counter(map, n)
            }
            "direct_counter" => Kept::Direct,
            "direct_meter" => {
                let m = format!("dm_{}", ident(&key));
                if !declared {
                    let _ = writeln!(self.run_members, "\t__u64 {m};");
                }
                Kept::DirectMeter(format!("r->{m}"))
            }
            "meter" => {
                let n = size(0)?;
                let bytes = member(1) == "bytes";
                let (rates_map, words_map) = (format!("p4_mr_{}", ident(&key)), format!("p4_mw_{}", ident(&key)));
                let m = KernelMeter { name: key, rates_map, words_map, cells: n, bytes };
                if !declared {
                    let _ = writeln!(
                        self.maps,
                        "EF_MAP({}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct p4_meter_rates), {});",
                        m.rates_map,
                        n.max(1)
                    );
                    let _ = writeln!(
                        self.maps,
                        "EF_MAP({}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct p4_meter_words), {});",
                        m.words_map,
                        n.max(1)
                    );
                    self.meters.push(m.clone());
                }
                Kept::Meter(m)
            }
            "register" => {
                let n = size(0)?;
                if !declared {
                    let _ = writeln!(self.maps, "EF_MAP({map}, BPF_MAP_TYPE_ARRAY, 4, 8, {});", n.max(1));
                    self.registers.push((key, map.clone(), n));
                }
                Kept::Register(map, n)
            }
            "afdx_account" => {
                let n = size(0)?;
                if !declared {
                    let _ = writeln!(self.maps, "EF_MAP({map}, BPF_MAP_TYPE_ARRAY, 4, 8, {});", n.max(1));
                    self.accounts.push((key, map.clone(), n));
                }
                Kept::Account(map, n)
            }
            other => return Err(no(format!("the {other} extern ({key})"))),
        })
    }

    fn instance_call(&mut self, name: &str, method: &str, args: &[CallArg], result: Option<&Place>) -> R<String> {
        let kept = self.kept(name)?;
        let key = self.switch_name(name);
        let refuse = || Err(no(format!("{key}.{method}()")));
        match (kept, method, args) {
            (Kept::Counter(map, cells), "count", [CallArg::In(i)]) => {
                let i = self.expr(i)?;
                Ok(format!("p4_count(&{map}, {i}, {cells}, r->sm.f_packet_length);\n"))
            }
            // The table counts its entries' hits.
            (Kept::Direct, "count", _) => Ok(String::new()),
            (Kept::Meter(m), "execute_meter", [CallArg::In(i), CallArg::Out(p)]) => {
                let i = self.expr(i)?;
                let units = if m.bytes { "r->sm.f_packet_length" } else { "1" };
                let colour = format!(
                    "p4_meter(&{}, &{}, {}, {i}, {units}, r->sm.f_timestamp)",
                    m.rates_map, m.words_map, m.cells
                );
                self.store(p, &colour)
            }
            (Kept::DirectMeter(c), "read", [CallArg::Out(p)]) => self.store(p, &c),
            (Kept::Register(map, cells), "read", [CallArg::Out(p), CallArg::In(i)]) => {
                if width(&p.ty) > 64 || !scalar(&p.ty) {
                    return Err(no(format!("register {key} of {} bits", width(&p.ty))));
                }
                let i = self.expr(i)?;
                self.store(p, &format!("p4_reg_read(&{map}, {i}, {cells})"))
            }
            (Kept::Register(map, cells), "write", [CallArg::In(i), CallArg::In(v)]) => {
                let ty = crate::midend::code::expr_ty(v);
                if width(&ty) > 64 || !scalar(&ty) {
                    return Err(no(format!("register {key} of {} bits", width(&ty))));
                }
                let (i, v) = (self.expr(i)?, self.expr(v)?);
                Ok(format!("p4_reg_write(&{map}, {i}, {cells}, {v});\n"))
            }
            (
                Kept::Account(map, cells),
                "conforms",
                [CallArg::In(i), CallArg::In(bag), CallArg::In(jitter), CallArg::In(smax)],
            ) => {
                let mut c = format!("p4_conforms(&{map}, {cells}");
                for a in [i, bag, jitter, smax] {
                    c += &format!(", {}", self.expr(a)?);
                }
                c += ", r->sm.f_timestamp)";
                match result {
                    Some(p) => self.store(p, &c),
                    None => Ok(format!("(void){c};\n")),
                }
            }
            _ => refuse(),
        }
    }

    /// `packet.extract(h)` (and `extract(h, size)` of a header ending in a varbit): at the
    /// cursor, which moves on; into `stack.next`, the stack's next index moves on too.
    fn extract(&mut self, p: &Place, size: Option<&Expr>) -> R<String> {
        let Ty::Header(_) = &p.ty else { return Err(no(format!("extract of {}", self.p4_type(&p.ty)))) };
        let name = self.p4_type(&p.ty);
        let fields = self.fields(&p.ty);
        let varbit =
            fields.iter().find_map(|(f, t)| if let Ty::Varbit(max) = t { Some((ident(f), *max)) } else { None });
        let bits: u32 = fields.iter().map(|(_, t)| if let Ty::Varbit(_) = t { 0 } else { width(t) }).sum();
        let (c_ty, ptr) = (self.c_type(&p.ty)?, self.place_ptr(p)?);
        let h = self.temp("h");
        let mut s = format!(
            "{{ {c_ty} *{h} = {ptr};\nif (!{h}) {{ r->sm.f_parser_error = {}; goto reject; }}\n",
            self.error_index("StackOutOfBounds")
        );
        let bytes = match &varbit {
            Some((f, _)) => format!("({} + {h}->f_{f} / 8)", bits / 8),
            None => (bits / 8).to_string(),
        };
        match (&varbit, size) {
            (Some((f, max)), Some(size)) => {
                // The software target's order of errors: past the maximum, not whole bytes.
                let v = self.expr(size)?;
                let _ = writeln!(
                    s,
                    "{h}->f_{f} = {v};\nif ({h}->f_{f} > {max}) {{ r->sm.f_parser_error = {}; goto reject; }}\n\
                     if ({h}->f_{f} % 8) {{ r->sm.f_parser_error = {}; goto reject; }}",
                    self.error_index("HeaderTooShort"),
                    self.error_index("ParserInvalidArgument"),
                );
            }
            (None, None) => {}
            (Some(_), None) => return Err(no(format!("extract of the varbit header {name} without a size"))),
            (None, Some(_)) => return Err(no(format!("extract with a size of {name}, which has no varbit"))),
        }
        let _ = writeln!(
            s,
            // Past the bytes copied in, a frame longer than them is not too short: the
            // kernel cannot read it, so userspace decides it (docs/p4.md).
            "if (r->off + {bytes} > r->len) {{ r->misfit = r->len < r->sm.f_packet_length; \
             r->sm.f_parser_error = {}; goto reject; }}",
            self.error_index("PacketTooShort")
        );
        let _ = writeln!(s, "{h}->at = r->off;");
        let mut bit = 0u32;
        for (f, t) in &fields {
            if let Ty::Varbit(_) = t {
                continue;
            }
            let w = width(t);
            if (bit % 8 + w).div_ceil(8) > 8 {
                return Err(no(format!("{name}.{f}: a field over nine bytes")));
            }
            let _ = writeln!(s, "{h}->f_{} = p4_get(r->buf, r->off, {bit}, {w});\np4_field_read();", ident(f));
            bit += w;
        }
        let _ = writeln!(s, "{h}->valid = 1;\nr->off += {bytes};\n}}");
        s += &self.settle(p)?;
        // Into `stack.next`: the stack's next index moves on.
        if let Some(Step::Next) = p.steps.last() {
            let mut stack = p.clone();
            stack.steps.pop();
            stack.ty = Ty::Stack(Box::new(p.ty.clone()), 0);
            stack.steps.push(Step::NextIndex);
            stack.ty = Ty::Bit(32);
            match self.place(&stack)? {
                Lv::Fixed(n) => {
                    let _ = writeln!(s, "{n} += 1;");
                }
                _ => return Err(no("extract into a stack's next inside a stack")),
            }
        }
        Ok(s)
    }

    /// `packet.lookahead<T>()`: the bits at the cursor, which stays; of a header type, a valid
    /// header of them (made here: it has no place in the frame).
    fn lookahead(&mut self, ty: Option<&Ty>, result: Option<&Place>) -> R<String> {
        let Some(ty) = ty else { return Err(no("packet_in.lookahead()")) };
        let (widths, fields): (Vec<u32>, Vec<String>) = match ty {
            Ty::Bit(w) if *w <= 64 => (vec![*w], Vec::new()),
            Ty::Header(_) => {
                let mut widths = Vec::new();
                let mut names = Vec::new();
                for (f, t) in self.fields(ty) {
                    match t {
                        Ty::Bit(w) | Ty::Int(w) if w <= 64 => widths.push(w),
                        other => {
                            return Err(no(format!("lookahead of a header with a field of {}", self.p4_type(&other))))
                        }
                    }
                    names.push(ident(&f));
                }
                (widths, names)
            }
            other => return Err(no(format!("packet_in.lookahead<{}>()", self.p4_type(other)))),
        };
        let bits: u32 = widths.iter().sum();
        // Each field read as `extract` reads it: at most eight bytes from the one it starts in.
        let mut at = 0;
        for w in &widths {
            if (at % 8 + w).div_ceil(8) > 8 {
                return Err(no(format!("packet_in.lookahead<{}>()", self.p4_type(ty))));
            }
            at += w;
        }
        let mut s = format!(
            "if (r->off * 8 + {bits} > r->len * 8) {{ r->misfit = r->len < r->sm.f_packet_length; \
             r->sm.f_parser_error = {}; goto reject; }}\n",
            self.error_index("PacketTooShort")
        );
        let Some(p) = result else { return Ok(s) };
        match ty {
            Ty::Bit(w) => s += &self.store(p, &format!("p4_get(r->buf, r->off, 0, {w})"))?,
            _ => {
                let (c_ty, ptr) = (self.c_type(ty)?, self.place_ptr(p)?);
                let h = self.temp("h");
                let _ = write!(s, "{{ {c_ty} *{h} = {ptr}; if ({h}) {{ {h}->valid = 1; {h}->at = 0xffffffff;");
                let mut bit = 0;
                for (f, w) in fields.iter().zip(&widths) {
                    let _ = write!(s, " {h}->f_{f} = p4_get(r->buf, r->off, {bit}, {w});");
                    bit += w;
                }
                s += " } }\n";
            }
        }
        Ok(s)
    }

    /// `packet.emit(x)` of a header at `ptr` (a C pointer, maybe null), or each header of a
    /// struct, union or stack in order: a valid header goes back where it was read.
    fn emit(&mut self, ptr: &str, ty: &Ty) -> R<String> {
        let c_ty = self.c_type(ty)?;
        let h = self.temp("h");
        let mut s = format!("{{ {c_ty} *{h} = {ptr};\nif ({h}) {{\n");
        match ty {
            Ty::Header(_) => {
                let fields = self.fields(ty);
                let bits: u32 = fields.iter().map(|(_, t)| if let Ty::Varbit(_) = t { 0 } else { width(t) }).sum();
                let varbit = fields.iter().find_map(|(f, t)| matches!(t, Ty::Varbit(_)).then(|| ident(f)));
                let bytes = match &varbit {
                    Some(f) => format!("({} + {h}->f_{f} / 8)", bits / 8),
                    None => (bits / 8).to_string(),
                };
                let _ = writeln!(s, "if ({h}->valid) {{\nif ({h}->at != r->emitted) {{ r->misfit = 1; }}");
                let Ty::Header(header) = ty else { unreachable!() };
                let mut bit = 0u32;
                for (k, (f, t)) in fields.iter().enumerate() {
                    if let Ty::Varbit(_) = t {
                        continue;
                    }
                    let w = width(t);
                    // A field nothing writes holds the bits the parser read here (`at` above).
                    if self.written.field(*header, k) {
                        let _ = writeln!(s, "p4_set(r->buf, r->emitted, {bit}, {w}, {h}->f_{});", ident(f));
                    }
                    bit += w;
                }
                let _ = writeln!(s, "r->emitted += {bytes};\n}}");
            }
            Ty::Struct(_) | Ty::Union(_) => {
                for (f, t) in self.fields(ty) {
                    if scalar(&t) {
                        return Err(no(format!("emit of a struct with the field {f} of type {}", self.p4_type(&t))));
                    }
                    s += &self.emit(&format!("(&{h}->f_{})", ident(&f)), &t)?;
                }
            }
            Ty::Stack(elem, n) => {
                for k in 0..*n {
                    s += &self.emit(&format!("(&{h}->e[{k}])",), elem)?;
                }
            }
            other => return Err(no(format!("emit of {}", self.p4_type(other)))),
        }
        Ok(s + "}\n}\n")
    }

    /// The algorithm a `HashAlgorithm` argument names.
    fn algorithm(&self, a: Option<&CallArg>) -> String {
        match a {
            Some(CallArg::In(Expr::Const { value, ty: Ty::Enum(e) })) => {
                self.ir.enums[*e].members.get(*value as usize).cloned().unwrap_or_default()
            }
            _ => String::new(),
        }
    }

    /// A checksum's or hash's data as (C value, width) fields, and the headers they lie in
    /// (valid, each, or the frame goes up: BMv2 leaves their fields out, which moves the rest).
    fn data_fields(&mut self, data: &Expr, fields: &mut Vec<(String, u32)>, headers: &mut Vec<String>) -> R<()> {
        let items: Vec<Expr> = match data {
            Expr::Aggregate { items, .. } => items.clone(),
            other => vec![other.clone()],
        };
        for item in &items {
            match item {
                Expr::Read(p) if matches!(p.ty, Ty::Header(_)) => {
                    let Lv::Fixed(h) = self.place(p)? else { return Err(no("a checksum over an indexed header")) };
                    for (f, t) in self.fields(&p.ty) {
                        if let Ty::Varbit(n) = t {
                            return Err(no(format!(
                                "a checksum over the varbit<{n}> field {}.{f}",
                                self.p4_type(&p.ty)
                            )));
                        }
                        fields.push((format!("{h}.f_{}", ident(&f)), width(&t)));
                    }
                    let valid = format!("{h}.valid");
                    if !headers.contains(&valid) {
                        headers.push(valid);
                    }
                }
                Expr::Aggregate { .. } => self.data_fields(item, fields, headers)?,
                e => {
                    let ty = crate::midend::code::expr_ty(e);
                    if !scalar(&ty) || width(&ty) > 64 {
                        return Err(no(format!("a checksum over {}", self.p4_type(&ty))));
                    }
                    // A header's field: that header must be valid.
                    if let Expr::Read(p) = e {
                        let mut parent = p.clone();
                        if let Some(Step::Field(_)) = parent.steps.pop() {
                            if let (Ok(Lv::Fixed(h)), true) = (self.place(&parent), self.is_header_place(&parent)) {
                                let valid = format!("{h}.valid");
                                if !headers.contains(&valid) {
                                    headers.push(valid);
                                }
                            }
                        }
                    }
                    fields.push((self.expr(e)?, width(&ty)));
                }
            }
        }
        Ok(())
    }

    fn is_header_place(&self, p: &Place) -> bool {
        let mut ty = self.ir.variables[p.var].ty.clone();
        for s in &p.steps {
            ty = match (s, &ty) {
                (Step::Field(i), _) => match self.fields(&ty).get(*i) {
                    Some((_, t)) => t.clone(),
                    None => return false,
                },
                (Step::NextIndex, _) => return false,
                (_, Ty::Stack(e, _)) => (**e).clone(),
                _ => return false,
            };
        }
        matches!(ty, Ty::Header(_))
    }

    /// v1model's `verify_checksum` / `update_checksum` with `csum16`: the Internet checksum of
    /// the listed fields' bits, summed 16 bits at a time where each field's bits fall.
    fn checksum(&mut self, verify: bool, args: &[CallArg]) -> R<String> {
        let algo = self.algorithm(args.get(3));
        if algo != "csum16" {
            return Err(no(format!("a checksum by HashAlgorithm.{algo}")));
        }
        let cond = self.in_arg(args.first(), "a checksum's condition")?;
        let Some(CallArg::In(data)) = args.get(1) else { return Err(no("a checksum's data")) };
        let (mut fields, mut headers) = (Vec::new(), Vec::new());
        self.data_fields(data, &mut fields, &mut headers)?;
        let mut sum = String::from("\t__u64 sum = 0;\n");
        let mut bit = 0u32;
        for (c, w) in &fields {
            let mut done = 0;
            while done < *w {
                let at = (bit + done) % 16;
                let take = (16 - at).min(w - done);
                let _ = writeln!(
                    sum,
                    "\tsum += ((({c}) >> {}) & {:#x}ULL) << {};",
                    w - done - take,
                    ones(take),
                    16 - at - take
                );
                done += take;
            }
            bit += w;
        }
        sum += "\tfor (int i = 0; i < 3; i++)\n\t\tsum = (sum & 0xffff) + (sum >> 16);\n";
        let valid = if headers.is_empty() { "1".to_string() } else { headers.join(" && ") };
        let act = match (verify, args.get(2)) {
            (true, Some(CallArg::In(want))) => {
                let want = self.expr(want)?;
                format!("\tif (((~sum) & 0xffff) != (({want}) & 0xffff))\n\t\tr->sm.f_checksum_error = 1;\n")
            }
            (false, Some(CallArg::InOut(p) | CallArg::Out(p))) => format!("\t{}", self.store(p, "(~sum) & 0xffff")?),
            _ => return Err(no("a checksum's result")),
        };
        Ok(format!("if ({cond}) {{\n\tif (!({valid})) {{\n\t\tr->misfit = 1;\n\t}} else {{\n{sum}{act}\t}}\n}}\n"))
    }

    /// v1model's `hash(result, algo, base, data, max)`: `base + hash(data) % max` (`base +
    /// hash(data)` when max is 0), as BMv2 computes it over the data's bits packed into bytes.
    fn hash(&mut self, args: &[CallArg]) -> R<String> {
        let algo = self.algorithm(args.get(1));
        let Some(CallArg::In(data)) = args.get(3) else { return Err(no("a hash's data")) };
        let (mut fields, mut headers) = (Vec::new(), Vec::new());
        self.data_fields(data, &mut fields, &mut headers)?;
        let bits: u32 = fields.iter().map(|(_, w)| w).sum();
        let bytes = bits.div_ceil(8);
        if bytes > HASH_BYTES_MAX {
            return Err(no(format!("a hash over {bytes} bytes")));
        }
        let sum = match algo.as_str() {
            "crc16" => format!("p4_crc(r->hash_buf, {bytes}, 0xa001, 0, 0)"),
            "crc32" => format!("p4_crc(r->hash_buf, {bytes}, 0xedb88320, 0xffffffff, 0xffffffff)"),
            "csum16" => format!("p4_csum16(r->hash_buf, {bytes})"),
            _ => return Err(no(format!("a hash by HashAlgorithm.{algo}"))),
        };
        if !self.hash_buf {
            self.hash_buf = true;
            let _ = writeln!(self.run_members, "\t__u8 hash_buf[P4_BUF];");
        }
        let mut pack = format!("\tfor (int i = 0; i < {bytes}; i++)\n\t\tr->hash_buf[i] = 0;\n");
        let mut bit = 0;
        for (c, w) in &fields {
            let _ = writeln!(pack, "\tp4_set(r->hash_buf, 0, {bit}, {w}, {c});");
            bit += w;
        }
        let base = self.in_arg(args.get(2), "a hash's base")?;
        let max = self.in_arg(args.get(4), "a hash's maximum")?;
        let Some(CallArg::Out(p)) = args.first() else { return Err(no("a hash's result")) };
        let result = format!("({{ __u64 h = {sum}, base = {base}, max = {max}; max ? base + h % max : base + h; }})");
        let valid = if headers.is_empty() { "1".to_string() } else { headers.join(" && ") };
        Ok(format!("if (!({valid})) {{\n\tr->misfit = 1;\n}} else {{\n{pack}\t{}}}\n", self.store(p, &result)?))
    }
}
