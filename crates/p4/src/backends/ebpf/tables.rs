//! IR tables as kernel maps and the C functions that apply them: exact keys in a hash, a single
//! LPM key in multibit arrays (`lpm_arrays.rs`) when it has at most 32 bits and the table no direct
//! meter (not yet tried with the arrays), else in an LPM trie, any others in an array scanned in the software target's order
//! (longest prefix, then priority, then the earliest). The layouts are the contract
//! `table_key`, `table_value` and `scan_entry` (mod.rs) write entries by.

use std::fmt::Write as _;

use super::printer::{mask_c, width, Printer};
use super::{ident, no, KernelMeter, KernelTable, LpmArrays, TableKind, R, SCAN_MAX};
use crate::midend::code::expr_ty;
use crate::midend::ir::{CallArg, Expr, Place};

impl Printer<'_> {
    /// The C function that applies IR table `t`, printed (with its maps) at its first apply.
    pub fn table_fn(&mut self, t: usize) -> R<String> {
        if let Some(k) = self.table_of.get(&t) {
            return Ok(format!("p4_apply_{}", ident(&self.tables[*k].target)));
        }
        let table = self.ir.tables[t].clone();
        let saved = self.at;
        self.at = Some(table.pos);
        let target = self.switch_name(&table.name);
        if table.properties.iter().any(|(p, _)| p == "implementation") {
            return Err(no(format!("{target}'s action profile or selector (implementation = ...)")));
        }
        let mut keys = Vec::new();
        let mut key_c = Vec::new();
        for k in &table.keys {
            let w = width(&expr_ty(&k.value));
            if w > 64 {
                return Err(no(format!("{target}'s key of {w} bits")));
            }
            keys.push((w, k.match_kind.clone()));
            key_c.push(self.expr(&k.value)?);
        }
        let lpm = keys.iter().filter(|(_, k)| k == "lpm").count();
        let kind = if keys.iter().all(|(_, k)| k == "exact") && !keys.is_empty() {
            TableKind::Exact
        } else if lpm == 1 && keys.len() == 1 {
            TableKind::Lpm
        } else {
            TableKind::Scan
        };
        let declared = table.size.map_or(1024, |s| s as usize);
        // A scanned table holds SCAN_MAX entries in the kernel whatever its declared size
        // (1 024 when it declares none): while the control plane has written more, the
        // kernel's write fails and every frame goes up (`p4_config[1]`), decided in userspace.
        let size = if kind == TableKind::Scan { declared.min(SCAN_MAX) } else { declared.max(1) };
        let actions: Vec<String> = table
            .actions
            .iter()
            .map(|a| self.ir.actions[a.action].name.rsplit('.').next().unwrap_or("").to_string())
            .collect();
        for a in &table.actions {
            let action = &self.ir.actions[a.action];
            self.max_args = self.max_args.max(action.params.len() - action.bound);
        }
        let meter = match table.properties.iter().find(|(p, _)| p == "meters") {
            Some((_, instance)) => {
                let m = self.direct_meter(instance)?;
                Some(m)
            }
            None => None,
        };
        let meter = meter.map(|(name, colour, bytes)| {
            let tid = ident(&target);
            (
                KernelMeter {
                    name,
                    rates_map: format!("p4_dmr_{tid}"),
                    words_map: format!("p4_dmw_{tid}"),
                    cells: size,
                    bytes,
                },
                colour,
            )
        });
        let number = self.tables.len() as u32;
        let lpm_arrays = match kind {
            TableKind::Lpm if meter.is_none() => {
                LpmArrays::for_table(format!("p4_s_{}", ident(&target)), keys[0].0, size)
            }
            _ => None,
        };
        let kind = if lpm_arrays.is_some() { TableKind::LpmArrays } else { kind };
        let kt = KernelTable {
            target: target.clone(),
            number,
            map: format!("p4_t_{}", ident(&target)),
            hits_map: format!("p4_h_{}", ident(&target)),
            kind,
            keys,
            actions,
            size,
            meter: meter.as_ref().map(|(m, _)| m.clone()),
            lpm_arrays,
        };
        self.table_of.insert(t, self.tables.len());
        self.tables.push(kt.clone());
        let f = format!("p4_apply_{}", ident(&target));
        let body = self.table_body(&kt, &key_c, &table, meter.map(|(_, c)| c))?;
        self.funcs += &format!("static __always_inline void {f}(struct p4_run *r)\n{{\n{body}}}\n\n");
        self.at = saved;
        Ok(f)
    }

    /// A direct meter's control-plane name, its run member and whether it counts bytes.
    fn direct_meter(&mut self, instance: &str) -> R<(String, String, bool)> {
        let Some(inst) = self.ir.instances.iter().find(|i| i.name == instance).cloned() else {
            return Err(no(format!("the meter {instance}")));
        };
        let key = self.switch_name(instance);
        let bytes = matches!(inst.args.first(), Some(crate::midend::ir::Arg::Member { enumeration, index })
            if self.ir.enums[*enumeration].members[*index] == "bytes");
        let member = format!("dm_{}", ident(&key));
        if self.printed.insert(format!("instance {instance}")) {
            let _ = writeln!(self.run_members, "\t__u64 {member};");
        }
        Ok((key, format!("r->{member}"), bytes))
    }

    fn table_body(
        &mut self,
        t: &KernelTable,
        keys: &[String],
        table: &crate::midend::ir::Table,
        colour: Option<String>,
    ) -> R<String> {
        let n = t.keys.len();
        let mut s = format!("\tstruct p4_value *v = 0;\n\t__u32 tn = {};\n", t.number);
        match t.kind {
            TableKind::Exact => {
                let _ = writeln!(
                    self.maps,
                    "EF_MAP({}, BPF_MAP_TYPE_HASH, {}, sizeof(struct p4_value), {});",
                    t.map,
                    8 * n,
                    t.size
                );
                let _ = writeln!(s, "\t__u64 key[{n}];");
                for (j, k) in keys.iter().enumerate() {
                    let _ = writeln!(s, "\tkey[{j}] = {k};");
                }
                let _ = writeln!(s, "\tv = bpf_map_lookup_elem(&{}, key);", t.map);
            }
            TableKind::Lpm => {
                let bytes = t.keys[0].0.div_ceil(8);
                let _ = writeln!(
                    self.maps,
                    "EF_MAP_FLAGS({}, BPF_MAP_TYPE_LPM_TRIE, {}, sizeof(struct p4_value), {}, BPF_F_NO_PREALLOC);",
                    t.map,
                    4 + bytes,
                    t.size
                );
                // Left-aligned, as `table_key` writes the entries (see there).
                let pad = 8 * bytes - t.keys[0].0;
                let _ = writeln!(
                    s,
                    "\tstruct {{ __u32 prefixlen; __u8 data[{bytes}]; }} key;\n\t__u64 kv = (__u64)({}) << {pad};",
                    keys[0]
                );
                let _ = writeln!(s, "\tkey.prefixlen = {};", t.keys[0].0);
                for b in 0..bytes {
                    let _ = writeln!(s, "\tkey.data[{b}] = kv >> {};", 8 * (bytes - 1 - b));
                }
                let _ = writeln!(s, "\tv = bpf_map_lookup_elem(&{}, &key);", t.map);
            }
            TableKind::LpmArrays => {
                let a = t.lpm_arrays.as_ref().expect("an LpmArrays table has its arrays");
                let _ = writeln!(
                    self.maps,
                    "EF_MAP({}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct p4_value), {});",
                    t.map, a.ids
                );
                // Userspace stores each slot word whole, through a mapping of the array.
                let _ = writeln!(
                    self.maps,
                    "EF_MAP_FLAGS({}, BPF_MAP_TYPE_ARRAY, 4, {}, {}, BPF_F_MMAPABLE);",
                    a.slots_map,
                    4 * super::lpm_arrays::SLOTS,
                    a.blocks
                );
                s += &a.lookup_c(&keys[0], &t.map);
            }
            TableKind::Scan => {
                let st = format!("p4_scan_{}", ident(&t.target));
                let _ = writeln!(
                    self.maps,
                    "struct {st} {{ __u64 present; __s64 priority; __u64 k[{n}][4]; __u64 lpm; struct p4_value value; }};"
                );
                let _ =
                    writeln!(self.maps, "EF_MAP({}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct {st}), {});", t.map, t.size);
                let _ = writeln!(s, "\t__u64 kv[{}];", n.max(1));
                for (j, k) in keys.iter().enumerate() {
                    let _ = writeln!(s, "\tkv[{j}] = {k};");
                }
                let _ = writeln!(s, "\tstruct {st} *best = 0;");
                let _ = writeln!(s, "\tfor (__u32 i = 0; i < {}; i++) {{", t.size);
                let _ = writeln!(s, "\t\t__u32 at = i;\n\t\tstruct {st} *e = bpf_map_lookup_elem(&{}, &at);", t.map);
                s += "\t\tif (!e || !e->present)\n\t\t\tcontinue;\n";
                for j in 0..n {
                    super::skip_unless_scanned_key(&mut s, &format!("kv[{j}]"), j);
                }
                s += "\t\tif (!best || e->lpm > best->lpm || (e->lpm == best->lpm && e->priority > best->priority))\n\t\t\tbest = e;\n\t}\n";
                s += "\tif (best)\n\t\tv = &best->value;\n";
            }
        }
        let _ = writeln!(
            self.maps,
            "EF_MAP({}, BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(struct p4_cells), {});",
            t.hits_map, t.size
        );
        // A hit marks the entry's cell of the table's direct meter; a miss reads green.
        let (mut marked, mut missed) = (String::new(), String::new());
        if let (Some(m), Some(colour)) = (&t.meter, colour) {
            let _ = writeln!(
                self.maps,
                "EF_MAP({}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct p4_meter_rates), {});",
                m.rates_map, t.size
            );
            let _ = writeln!(
                self.maps,
                "EF_MAP({}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct p4_meter_words), {});",
                m.words_map, t.size
            );
            let units = if m.bytes { "r->sm.f_packet_length" } else { "1" };
            marked = format!(
                "\t\t{colour} = p4_meter(&{}, &{}, {}, v->index, {units}, r->sm.f_timestamp);\n",
                m.rates_map, m.words_map, t.size
            );
            missed = format!("\t\t{colour} = 0;\n");
        }
        let fallback = table.default_action.0;
        let _ = writeln!(
            s,
            "\tr->hit = v != 0;\n\tif (v) {{\n\t\tp4_count(&{}, v->index, {}, r->sm.f_packet_length);\n{marked}\t}} else {{\n{missed}\t\tv = bpf_map_lookup_elem(&p4_defaults, &tn);\n\t\tif (!v) {{\n\t\t\tr->action_run = {fallback};\n\t\t\treturn;\n\t\t}}\n\t}}",
            t.hits_map, t.size
        );
        let _ = writeln!(s, "\tr->action_run = {fallback};\n\tswitch (v->action) {{");
        for (j, ta) in table.actions.iter().enumerate() {
            let action = self.ir.actions[ta.action].clone();
            let f = self.action_fn(ta.action)?;
            // The arguments the action list binds: copied in before, out after (also on exit).
            let (mut before, mut after) = (String::new(), String::new());
            for ((var, _), arg) in action.params.iter().zip(&ta.bound) {
                let param = Place { var: *var, steps: Vec::new(), ty: self.ir.variables[*var].ty.clone() };
                match arg {
                    CallArg::In(e) => before += &self.assign(&param, e)?,
                    CallArg::InOut(p) | CallArg::Out(p) => {
                        before += &self.assign(&param, &Expr::Read(p.clone()))?;
                        after += &self.assign(p, &Expr::Read(param.clone()))?;
                    }
                    CallArg::Discard => {}
                }
            }
            // The control plane's data.
            for (k, (var, _)) in action.params[action.bound..].iter().enumerate() {
                let ty = self.ir.variables[*var].ty.clone();
                let _ = writeln!(before, "{} = v->args[{k}] & {};", self.var(*var)?, mask_c(&ty));
            }
            let _ = writeln!(
                s,
                "\tcase {}: {{\n\t\tr->action_run = {};\n{before}\t\t{f}(r);\n{after}\t\tbreak;\n\t}}",
                j + 1,
                ta.action
            );
        }
        s += "\t}\n";
        Ok(s)
    }
}
