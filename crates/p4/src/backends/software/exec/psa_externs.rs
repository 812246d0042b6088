//! The compiled program's calls of PSA's own externs (`externs.rs` has those PSA shares with
//! v1model: `Counter`, `Register.write`): `Hash`, `Checksum`,
//! `InternetChecksum`, `Random`, `Digest`, `Register.read`, `Meter.execute`,
//! `DirectCounter.count` and `DirectMeter.execute` (on the entry the table matched) and the functions
//! on the output metadata (`psa_normal`, ...). The instances without cells keep their state
//! in `Switch::externs` (made at load by `psa.rs`, cleared as each of the package's blocks
//! starts), found by number when the program is compiled.

use super::externs::{digest_members, serialize, Piece};
use super::{mask, Compiler, Flow, Shape, E, M, P, R, S};
use crate::backends::software::psa::{add_ones_complement, psa_algorithm, Extern, RECIRCULATE_PORT};
use crate::backends::software::v1model::{self, ones_complement_sum};
use crate::backends::software::{Digest, Value, DIGESTS_KEPT, GREEN, YELLOW};
use crate::midend::ir::{self, CallArg, Expr, Place, Ty};

impl Compiler<'_> {
    /// Where a method's result goes, and its width's mask (none: the result is not kept).
    fn psa_result(&self, result: Option<&Place>) -> R<Option<(P, u128)>> {
        let Some(place) = result else { return Ok(None) };
        if !matches!(self.shape(&place.ty)?, Shape::Scalar) {
            return Err("a PSA extern's result that is not a scalar".into());
        }
        Ok(Some((self.place(place)?.0, mask(Self::width(&place.ty)))))
    }

    /// A method of one of PSA's extern instances (`key` the switch's name for it).
    pub(super) fn psa_method(
        &self,
        instance: &ir::Instance,
        key: &str,
        method: &str,
        args: &[CallArg],
        result: Option<&Place>,
    ) -> R<S> {
        let name = &instance.name;
        let arg = |i: usize| -> R<&Expr> {
            match args.get(i) {
                Some(CallArg::In(e)) => Ok(e),
                _ => Err(format!("{name}.{method}'s argument {i}")),
            }
        };
        let dst = self.psa_result(result)?;
        let write = move |m: &mut M, v: u128| {
            if let Some((at, km)) = &dst {
                if let Some(a) = at(m) {
                    m.slots[a] = v & km;
                }
            }
        };
        let kind = instance.ty.as_str();
        if kind == "Register" {
            let r = self.sw.registers.number(key).ok_or_else(|| format!("the register {key}"))?;
            if self.sw.registers.at(r).iter().any(|c| !matches!(c, Value::Bits { .. } | Value::Bool(_))) {
                return Err("a register of aggregates".into());
            }
            let index = self.scalar(arg(0)?)?;
            // Past the register's size: 0, as the old evaluator reads it.
            return Ok(Box::new(move |m: &mut M| {
                let i = index(m) as usize;
                let v = m.sw.registers.at(r).get(i).map_or(0, Value::as_u128);
                write(m, v);
                Flow::Next
            }));
        }
        if kind == "Meter" {
            if method != "execute" || args.len() != 1 {
                return Err(format!("{name}.{method}"));
            }
            let k = self.sw.meters.number(key).ok_or_else(|| format!("the meter {key}"))?;
            let colours = self.psa_colours(result)?;
            let index = self.scalar(arg(0)?)?;
            return Ok(Box::new(move |m: &mut M| {
                let i = index(m) as usize;
                let (length, now) = (m.length, m.now);
                let meter = m.sw.meters.at_mut(k);
                let units = if meter.bytes { length } else { 1 };
                let colour = meter.cells.get_mut(i).map_or(GREEN, |c| c.mark(units, now));
                write(m, colours[colour.min(2) as usize]);
                Flow::Next
            }));
        }
        let n = self.sw.externs.number(key).ok_or_else(|| format!("the {kind} {key}"))?;
        let made = self.sw.externs.at(n).clone();
        Ok(match (made, method) {
            (Extern::Hash(algo), "get_hash") => {
                let algo = v1model::Algorithm::named(psa_algorithm(&algo));
                let (data, base_max) = match args.len() {
                    1 => (self.serialized(arg(0)?)?, None),
                    3 => (self.serialized(arg(1)?)?, Some((self.scalar(arg(0)?)?, self.scalar(arg(2)?)?))),
                    k => return Err(format!("{name}.get_hash with {k} arguments")),
                };
                Box::new(move |m: &mut M| {
                    let h = with_bytes(&data, m, |_, bytes| algo.hash(bytes));
                    let v = match &base_max {
                        None => h,
                        Some((base, max)) => {
                            let (base, max) = (base(m), max(m));
                            if max == 0 {
                                base
                            } else {
                                base.wrapping_add(h % max)
                            }
                        }
                    };
                    write(m, v);
                    Flow::Next
                })
            }
            (Extern::Checksum(..), "clear") => Box::new(move |m: &mut M| {
                if let Extern::Checksum(_, bytes) = m.sw.externs.at_mut(n) {
                    bytes.clear();
                }
                Flow::Next
            }),
            (Extern::Checksum(..), "update") => {
                let data = self.serialized(arg(0)?)?;
                Box::new(move |m: &mut M| {
                    with_bytes(&data, m, |m, more| {
                        if let Extern::Checksum(_, bytes) = m.sw.externs.at_mut(n) {
                            bytes.extend_from_slice(more);
                        }
                    });
                    Flow::Next
                })
            }
            (Extern::Checksum(algo, _), "get") => {
                let algo = v1model::Algorithm::named(psa_algorithm(&algo));
                Box::new(move |m: &mut M| {
                    let v = match m.sw.externs.at(n) {
                        Extern::Checksum(_, bytes) => algo.hash(bytes),
                        _ => 0,
                    };
                    write(m, v);
                    Flow::Next
                })
            }
            (Extern::InternetChecksum(_), "clear") => internet(n, |_| 0),
            (Extern::InternetChecksum(_), "set_state") => {
                let v = self.scalar(arg(0)?)?;
                Box::new(move |m: &mut M| {
                    let state = v(m) as u16;
                    *m.sw.externs.at_mut(n) = Extern::InternetChecksum(state);
                    Flow::Next
                })
            }
            (Extern::InternetChecksum(_), "add" | "subtract") => {
                let data = self.serialized(arg(0)?)?;
                let subtract = method == "subtract";
                Box::new(move |m: &mut M| {
                    let words = with_bytes(&data, m, |_, bytes| ones_complement_sum(bytes));
                    let words = if subtract { !words } else { words };
                    if let Extern::InternetChecksum(sum) = m.sw.externs.at_mut(n) {
                        *sum = add_ones_complement(*sum, words);
                    }
                    Flow::Next
                })
            }
            (Extern::InternetChecksum(_), "get" | "get_state") => {
                let complement = method == "get";
                Box::new(move |m: &mut M| {
                    let sum = match m.sw.externs.at(n) {
                        Extern::InternetChecksum(sum) => *sum,
                        _ => 0,
                    };
                    write(m, if complement { !sum } else { sum } as u128);
                    Flow::Next
                })
            }
            (Extern::Random(lo, hi), "read") => Box::new(move |m: &mut M| {
                let span = hi.saturating_sub(lo).saturating_add(1).max(1);
                let v = lo + m.sw.next_random() as u128 % span;
                write(m, v);
                Flow::Next
            }),
            (Extern::Digest, "pack") => self.psa_digest(key, arg(0)?)?,
            (_, other) => return Err(format!("{name}.{other}")),
        })
    }

    /// PSA_MeterColor_t's numbers of v1model's colours (green, yellow, red), from the type the
    /// result is kept in.
    fn psa_colours(&self, result: Option<&Place>) -> R<[u128; 3]> {
        let Some(Ty::Enum(i)) = result.map(|p| &p.ty) else { return Ok([0; 3]) };
        let members = &self.ir.enums[*i].members;
        let number = |n: &str| members.iter().position(|m| m == n).map(|k| k as u128).ok_or("PSA_MeterColor_t");
        let mut colours = [0; 3];
        colours[GREEN as usize] = number("GREEN")?;
        colours[YELLOW as usize] = number("YELLOW")?;
        colours[2] = number("RED")?;
        Ok(colours)
    }

    /// The tables (their states' numbers) whose `property` (`psa_direct_counter`,
    /// `psa_direct_meter`) names IR instance `instance`.
    fn tables_with(&self, property: &str, instance: &str) -> Vec<usize> {
        self.ir
            .tables
            .iter()
            .filter(|t| t.properties.iter().any(|(p, i)| p == property && i == instance))
            .filter_map(|t| self.sw.tables.number(&self.switch_name(&t.name)))
            .collect()
    }

    /// `DirectCounter.count()`: the entry its table matched counts the frame (PSA 7.7: the
    /// counter counts only where an action calls it). Elsewhere (a miss, another table's
    /// action) it counts nothing, as there is no entry of its own.
    pub(super) fn psa_direct_count(&self, instance: &str) -> R<S> {
        let tables = self.tables_with("psa_direct_counter", instance);
        if tables.is_empty() {
            return Err(format!("{instance}.count(): the DirectCounter is no table's psa_direct_counter"));
        }
        Ok(Box::new(move |m: &mut M| {
            if let Some((table, i)) = m.matched.filter(|(t, _)| tables.contains(t)) {
                let length = m.length;
                if let Some(e) = m.sw.tables.at_mut(table).entries.get_mut(i) {
                    e.packets += 1;
                    e.bytes += length;
                }
            }
            Flow::Next
        }))
    }

    /// `DirectMeter.execute()`: the colour the matched entry's own cell marks the frame (PSA
    /// 7.8), green where no entry of its table matched (the default action after a miss).
    pub(super) fn psa_direct_execute(&self, instance: &str, key: &str, result: Option<&Place>) -> R<S> {
        let tables = self.tables_with("psa_direct_meter", instance);
        if tables.is_empty() {
            return Err(format!("{instance}.execute(): the DirectMeter is no table's psa_direct_meter"));
        }
        let bytes = self.sw.direct_meters.get(key).copied().unwrap_or(false);
        let colours = self.psa_colours(result)?;
        let dst = self.psa_result(result)?;
        Ok(Box::new(move |m: &mut M| {
            let (length, now) = (m.length, m.now);
            let units = if bytes { length } else { 1 };
            let cell = m.matched.filter(|(t, _)| tables.contains(t));
            let colour = cell
                .and_then(|(table, i)| m.sw.tables.at_mut(table).entries.get_mut(i))
                .map_or(GREEN, |e| e.meter.mark(units, now));
            if let Some((at, km)) = &dst {
                if let Some(a) = at(m) {
                    m.slots[a] = colours[colour.min(2) as usize] & km;
                }
            }
            Flow::Next
        }))
    }

    /// `Digest.pack(data)`: kept for the control plane under the instance's name, each member
    /// of `data` a number, a nested struct's flattened (`digest_members`).
    fn psa_digest(&self, key: &str, data: &Expr) -> R<S> {
        let name = key.to_string();
        let Expr::Read(p) = data else { return Err("Digest.pack of what is not a variable's".into()) };
        let (at, shape, _) = self.place(p)?;
        let fields = digest_members(self.ir, &p.ty, &shape, 0);
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

    /// PSA's functions on the output metadata: which of the paths a frame takes.
    pub(super) fn psa_function(&self, f: &str, args: &[CallArg], result: Option<&Place>) -> R<S> {
        let field = |i: usize, name: &str| -> R<usize> {
            let Some(CallArg::In(Expr::Read(p))) = args.get(i) else { return Err(format!("{f}'s argument {i}")) };
            let at = self.fixed(p).ok_or_else(|| format!("{f} of an indexed place"))?;
            let Ty::Struct(s) = &p.ty else { return Err(format!("{f} of what is not PSA's metadata")) };
            let k = self.ir.aggregates[*s].fields.iter().position(|(n, _)| n == name).ok_or_else(|| f.to_string())?;
            Ok(at + self.shape(&p.ty)?.field_at(k))
        };
        let Some(place) = result else { return Ok(Box::new(|_: &mut M| Flow::Next)) };
        let dst = self.fixed(place).ok_or_else(|| format!("{f} into an indexed place"))?;
        let holds: E = match f {
            "psa_clone_i2e" | "psa_clone_e2e" => {
                let clone = field(0, "clone")?;
                Box::new(move |m: &mut M| (m.slots[clone] != 0) as u128)
            }
            "psa_resubmit" | "psa_normal" => {
                let (drop, resubmit) = (field(0, "drop")?, field(0, "resubmit")?);
                let want = (f == "psa_resubmit") as u128;
                Box::new(move |m: &mut M| (m.slots[drop] == 0 && (m.slots[resubmit] != 0) as u128 == want) as u128)
            }
            "psa_recirculate" => {
                let (drop, port) = (field(0, "drop")?, field(1, "egress_port")?);
                Box::new(move |m: &mut M| (m.slots[drop] == 0 && m.slots[port] as u32 == RECIRCULATE_PORT) as u128)
            }
            other => return Err(format!("the function {other}")),
        };
        Ok(Box::new(move |m: &mut M| {
            m.slots[dst] = holds(m);
            Flow::Next
        }))
    }
}

/// An `InternetChecksum` instance's sum set by `f` of what it was.
fn internet(n: usize, f: fn(u16) -> u16) -> S {
    Box::new(move |m: &mut M| {
        if let Extern::InternetChecksum(sum) = m.sw.externs.at_mut(n) {
            *sum = f(*sum);
        }
        Flow::Next
    })
}

/// `f` of the bytes `pieces` cover (written into the frame's reused buffer).
fn with_bytes<T>(pieces: &[Piece], m: &mut M, f: impl FnOnce(&mut M, &[u8]) -> T) -> T {
    let mut out = std::mem::take(&mut m.bytes);
    out.clear();
    serialize(pieces, m, &mut out);
    let v = f(m, &out);
    m.bytes = out;
    v
}
