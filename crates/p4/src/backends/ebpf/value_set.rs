//! Value sets in the kernel (P4-16 12.11): each set an array map of its size, a member per slot
//! (present, then per field value, mask, low and high, as a scanned table's key), which the
//! control plane writes as the software target's members change ([`value_set_member`]); a
//! select case naming the set scans the slots, a loop bounded by the set's size.

use std::fmt::Write as _;

use super::printer::Printer;
use super::{ident, no, R};
use crate::backends::software::Match;

/// A value set's map, as the datapath fills it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelValueSet {
    /// `Parser.name`, as the software target names it.
    pub target: String,
    pub map: String,
    /// Each field's width, in order.
    pub widths: Vec<u32>,
    /// Members the map holds: the set's size.
    pub size: usize,
}

/// A member's slot: present, then per field (value, mask, low, high); an empty slot is zeroes.
pub fn value_set_member(v: &KernelValueSet, member: &[Match]) -> Vec<u8> {
    let mut e = 1u64.to_ne_bytes().to_vec();
    for (m, &w) in member.iter().zip(&v.widths) {
        super::push_scanned_key(&mut e, m, w);
    }
    e
}

impl Printer<'_> {
    /// The C condition that a member of the value set `name` (the IR's) matches the select's
    /// keys `keys` (C variables): the set's map declared on first use, the scan before the
    /// condition in `s`.
    pub(super) fn value_set_match(&mut self, name: &str, keys: &[String], s: &mut String) -> R<String> {
        let set =
            self.ir.value_sets.iter().find(|v| v.name == name).ok_or_else(|| no(format!("the value_set {name}")))?;
        let target = self.switch_name(name);
        if let Some(w) = set.fields.iter().map(|f| f.width).find(|w| *w > 64) {
            return Err(no(format!("{target}'s field of {w} bits")));
        }
        if keys.len() != set.fields.len() {
            return Err(no(format!("{target} against {} select key(s)", keys.len())));
        }
        let st = format!("p4_vs_{}", ident(&target));
        if !self.value_sets.iter().any(|v| v.target == target) {
            let n = set.fields.len();
            let _ = writeln!(self.maps, "struct {st} {{ __u64 present; __u64 k[{n}][4]; }};");
            let _ = writeln!(self.maps, "EF_MAP({st}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct {st}), {});", set.size);
            self.value_sets.push(KernelValueSet {
                target: target.clone(),
                map: st.clone(),
                widths: set.fields.iter().map(|f| f.width).collect(),
                size: set.size as usize,
            });
        }
        let hit = self.temp("in_set");
        let _ = writeln!(s, "\tint {hit} = 0;");
        let _ = writeln!(s, "\tfor (__u32 i = 0; i < {}; i++) {{", set.size);
        let _ = writeln!(s, "\t\t__u32 at = i;\n\t\tstruct {st} *e = bpf_map_lookup_elem(&{st}, &at);");
        s.push_str("\t\tif (!e || !e->present)\n\t\t\tcontinue;\n");
        for (j, k) in keys.iter().enumerate() {
            super::skip_unless_scanned_key(s, k, j);
        }
        let _ = writeln!(s, "\t\t{hit} = 1;\n\t\tbreak;\n\t}}");
        Ok(hit)
    }
}
