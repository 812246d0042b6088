//! PSA on the software target, as BMv2's psa_switch runs it (issue 52, item 2): an ingress
//! pipeline (parser, control, deparser) and an egress pipeline, the replication engine between
//! them. Ingress starts with `ostd.drop` true (a program must send a frame somewhere); after
//! it, an ingress-to-egress clone of the frame as it arrived, then the drop, a resubmission, or
//! the deparsed frame to its port or to each member of its multicast group. Egress parses what
//! ingress deparsed (with the bridged `normal_meta`), and after its deparser an egress-to-egress
//! clone (with the deparser's `clone_e2e_meta`), the drop, or the frame back to ingress when its
//! port is `PSA_PORT_RECIRCULATE` (with its `recirculate_meta`). Not carried yet: the ingress
//! deparser's `resubmit_meta` and `clone_i2e_meta`, since a resubmitted or cloned frame does
//! not run it here.
//! The externs only PSA has (`Hash`, `InternetChecksum`, `Checksum`, `Random`, `Digest`) are
//! here too (a checksum's state starts clear with each block, as PSA says); `Counter`,
//! `Meter` and `Register` share the software target's cells with v1model's. The compiled
//! program runs PSA in `exec_psa.rs`; this is the reference the differential test holds it to.

use std::collections::VecDeque;

use super::v1model::{hash, ones_complement_sum};
use super::*;

pub(super) const RECIRCULATE_PORT: u32 = 0xffff_fffa;
/// As v1model's: how many times a frame's copies may come back to ingress.
pub(super) const RETURNS: usize = 16;

/// A PSA extern instance whose state is not a table of cells.
#[derive(Clone, Debug)]
pub(super) enum Extern {
    Hash(String),
    /// Its algorithm, and the bytes given since the last clear.
    Checksum(String, Vec<u8>),
    /// The running ones'-complement sum (not yet complemented).
    InternetChecksum(u16),
    Random(u128, u128),
    Digest,
}

/// The metadata a deparser hands the parser of a later pass: the parser's parameter (its
/// place among the non-packet ones) and its value.
type Carried = Option<(usize, Value)>;

enum Job {
    Ingress {
        frame: Vec<u8>,
        port: u32,
        path: &'static str,
        /// A recirculated frame's `recirculate_meta`.
        carried: Carried,
    },
    Egress {
        frame: Vec<u8>,
        port: u32,
        path: &'static str,
        instance: u16,
        class: u128,
        /// A normal copy's `normal_meta`, an E2E clone's `clone_e2e_meta`.
        carried: Carried,
        /// Where a clone session cuts this copy as it leaves.
        cut: Option<usize>,
    },
}

impl Switch {
    pub(super) fn is_psa(&self) -> bool {
        Architecture::of(&self.code.checked) == Some(Architecture::Psa)
    }

    pub(super) fn process_psa(&mut self, frame: &[u8], port: u32, now: u64) -> Result<Vec<Output>, Dropped> {
        let mut jobs = VecDeque::from([Job::Ingress { frame: frame.to_vec(), port, path: "NORMAL", carried: None }]);
        let mut out = Vec::new();
        let mut returns = 0;
        while let Some(job) = jobs.pop_front() {
            match job {
                Job::Ingress { frame, port, path, carried } => {
                    if path != "NORMAL" {
                        returns += 1;
                        if returns > RETURNS {
                            continue;
                        }
                    }
                    self.psa_ingress(&frame, port, path, carried, now, &mut jobs)?;
                }
                Job::Egress { frame, port, path, instance, class, carried, cut } => {
                    if let Some(mut o) =
                        self.psa_egress(&frame, port, path, instance, class, carried, now, &mut jobs)?
                    {
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

    #[allow(clippy::too_many_arguments)]
    fn psa_ingress(
        &mut self,
        frame: &[u8],
        port: u32,
        path: &'static str,
        carried: Carried,
        now: u64,
        jobs: &mut VecDeque<Job>,
    ) -> Result<(), Dropped> {
        let code = self.code.clone();
        let blocks = &code.checked.blocks;
        // The parser: headers, metadata, its input metadata, resubmit and recirculate metadata.
        let mut values = self.fresh(&code, &blocks[0]);
        put(&mut values[2], "ingress_port", Value::Number(port as i128));
        put(&mut values[2], "packet_path", Value::Enum(path.into()));
        carry(&mut values, carried);
        let parsed = self.stage(&code, &blocks[0], frame, frame.len(), now, values)?;
        let payload = frame[parsed.cursor.min(frame.len())..].to_vec();
        let [hdr, meta, ..] = <[Value; 5]>::try_from(parsed.values).map_err(|_| arity(&blocks[0]))?;

        // The control: headers, metadata, input metadata, output metadata.
        let mut values = self.fresh(&code, &blocks[1]);
        values[0] = hdr;
        values[1] = meta;
        put(&mut values[2], "ingress_port", Value::Number(port as i128));
        put(&mut values[2], "packet_path", Value::Enum(path.into()));
        put(&mut values[2], "ingress_timestamp", Value::Number((now / 1000) as i128));
        put(&mut values[2], "parser_error", Value::Error(parsed.error.unwrap_or_else(|| "NoError".into())));
        put(&mut values[3], "drop", Value::Bool(true));
        let ran = self.stage(&code, &blocks[1], &payload, frame.len(), now, values)?;
        let [hdr, meta, _, ostd] = <[Value; 4]>::try_from(ran.values).map_err(|_| arity(&blocks[1]))?;

        if flag(&ostd, "clone") {
            let session = field(&ostd, "clone_session_id") as u32;
            self.psa_clone(frame.to_vec(), session, "CLONE_I2E", None, jobs);
        }
        if flag(&ostd, "drop") {
            return Ok(());
        }
        if flag(&ostd, "resubmit") {
            jobs.push_back(Job::Ingress { frame: frame.to_vec(), port, path: "RESUBMIT", carried: None });
            return Ok(());
        }
        // The deparser: clone, resubmit and normal metadata out, headers, metadata, ostd.
        let mut values = self.fresh(&code, &blocks[2]);
        values[3] = hdr;
        values[4] = meta;
        values[5] = ostd.clone();
        let deparsed = self.stage(&code, &blocks[2], &payload, frame.len(), now, values)?;
        // normal_meta, to the egress parser's fourth.
        let bridged = deparsed.values.get(2).cloned().map(|v| (3, v));
        let mut bytes = deparsed.out;
        bytes.extend_from_slice(&payload);

        let class = field(&ostd, "class_of_service");
        let group = field(&ostd, "multicast_group") as u16;
        if group != 0 {
            for (port, rid) in self.replicas(group) {
                let (frame, carried) = (bytes.clone(), bridged.clone());
                jobs.push_back(Job::Egress {
                    frame,
                    port,
                    path: "NORMAL_MULTICAST",
                    instance: rid,
                    class,
                    carried,
                    cut: None,
                });
            }
            return Ok(());
        }
        let port = field(&ostd, "egress_port") as u32;
        jobs.push_back(Job::Egress {
            frame: bytes,
            port,
            path: "NORMAL_UNICAST",
            instance: 0,
            class,
            carried: bridged,
            cut: None,
        });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn psa_egress(
        &mut self,
        frame: &[u8],
        port: u32,
        path: &'static str,
        instance: u16,
        class: u128,
        carried: Carried,
        now: u64,
        jobs: &mut VecDeque<Job>,
    ) -> Result<Option<Output>, Dropped> {
        let code = self.code.clone();
        let blocks = &code.checked.blocks;
        // The parser: headers, metadata, input metadata, then normal, I2E and E2E clone metadata.
        let mut values = self.fresh(&code, &blocks[3]);
        put(&mut values[2], "egress_port", Value::Number(port as i128));
        put(&mut values[2], "packet_path", Value::Enum(path.into()));
        carry(&mut values, carried);
        let parsed = self.stage(&code, &blocks[3], frame, frame.len(), now, values)?;
        let payload = frame[parsed.cursor.min(frame.len())..].to_vec();
        let mut parsed_values = parsed.values.into_iter();
        let (hdr, meta) = (parsed_values.next().unwrap_or(Value::Void), parsed_values.next().unwrap_or(Value::Void));

        let mut values = self.fresh(&code, &blocks[4]);
        values[0] = hdr;
        values[1] = meta;
        put(&mut values[2], "class_of_service", Value::Number(class as i128));
        put(&mut values[2], "egress_port", Value::Number(port as i128));
        put(&mut values[2], "packet_path", Value::Enum(path.into()));
        put(&mut values[2], "instance", Value::Number(instance as i128));
        put(&mut values[2], "egress_timestamp", Value::Number((now / 1000) as i128));
        put(&mut values[2], "parser_error", Value::Error(parsed.error.unwrap_or_else(|| "NoError".into())));
        let ran = self.stage(&code, &blocks[4], &payload, frame.len(), now, values)?;
        let [hdr, meta, _, ostd] = <[Value; 4]>::try_from(ran.values).map_err(|_| arity(&blocks[4]))?;

        // The deparser: E2E clone and recirculate metadata out, headers, metadata, ostd, edstd.
        let mut values = self.fresh(&code, &blocks[5]);
        values[2] = hdr;
        values[3] = meta;
        values[4] = ostd.clone();
        put(&mut values[5], "egress_port", Value::Number(port as i128));
        let deparsed = self.stage(&code, &blocks[5], &payload, frame.len(), now, values)?;
        let mut bytes = deparsed.out;
        bytes.extend_from_slice(&payload);

        if flag(&ostd, "clone") {
            let session = field(&ostd, "clone_session_id") as u32;
            // clone_e2e_meta, to the egress parser's sixth.
            let meta = deparsed.values.first().cloned().map(|v| (5, v));
            self.psa_clone(bytes.clone(), session, "CLONE_E2E", meta, jobs);
        }
        if flag(&ostd, "drop") {
            return Ok(None);
        }
        if port == RECIRCULATE_PORT {
            // recirculate_meta, to the ingress parser's fifth.
            let carried = deparsed.values.get(1).cloned().map(|v| (4, v));
            jobs.push_back(Job::Ingress { frame: bytes, port: RECIRCULATE_PORT, path: "RECIRCULATE", carried });
            return Ok(None);
        }
        Ok(Some(Output { port, queue: class as u8, frame: bytes }))
    }

    fn psa_clone(&self, frame: Vec<u8>, session: u32, path: &'static str, carried: Carried, jobs: &mut VecDeque<Job>) {
        let Some(s) = self.sessions.get(&session) else { return };
        let (class, cut) = (s.class_of_service as u128, s.truncate);
        let group = s.group.map(|g| self.replicas(g)).unwrap_or_default();
        for &(port, rid) in group.iter().chain(&s.replicas) {
            let frame = frame.clone();
            let carried = carried.clone();
            jobs.push_back(Job::Egress { frame, port, path, instance: rid, class, carried, cut });
        }
        if let Some(port) = s.port {
            jobs.push_back(Job::Egress { frame, port, path, instance: 0, class, carried, cut });
        }
    }

    /// Multicast group `group`'s (port, replication id) pairs.
    pub(super) fn replicas(&self, group: u16) -> Vec<(u32, u16)> {
        let ports = self.groups.get(&group).cloned().unwrap_or_default();
        let rids = self.replica_ids.get(&group).cloned().unwrap_or_default();
        ports.into_iter().enumerate().map(|(i, p)| (p, rids.get(i).copied().unwrap_or(0))).collect()
    }

    /// Each non-packet parameter of block `name` as it starts.
    fn fresh(&self, code: &Code, name: &str) -> Vec<Value> {
        let (Decl::Parser { params, .. } | Decl::Control { params, .. }) = code.block(name) else {
            unreachable!("checked")
        };
        params.iter().filter(|p| !is_packet(p)).map(|p| self.default_of(&code.checked.resolve(&p.ty))).collect()
    }

    /// Parser or control `name` on `data` with its non-packet parameters bound to `values`: the
    /// values after, the parser's error and cursor, the deparser's bytes.
    fn stage(
        &mut self,
        code: &Code,
        name: &str,
        data: &[u8],
        length: usize,
        now: u64,
        values: Vec<Value>,
    ) -> Result<Stage, Dropped> {
        self.clear_checksums();
        let block = code.block(name);
        let mut cx = Cx::new(name, code, data, length as u64, now);
        let result = match block {
            Decl::Parser { params, locals, states, .. } => {
                cx.bind(params, values);
                self.run_parser(&mut cx, locals, states)
            }
            Decl::Control { params, locals, apply, .. } => {
                cx.bind(params, values);
                cx.scopes.push(Names::default());
                let r = locals.iter().try_for_each(|l| self.local(&mut cx, l));
                r.and_then(|()| self.block_stmts(&mut cx, apply))
            }
            _ => unreachable!("checked"),
        };
        let (Decl::Parser { params, .. } | Decl::Control { params, .. }) = block else { unreachable!("checked") };
        let error = match result {
            Ok(()) | Err(Stop::Exit) | Err(Stop::Return) | Err(Stop::Returned(_) | Stop::Break | Stop::Continue) => {
                None
            }
            Err(Stop::Reject(e)) => Some(e),
            Err(Stop::Unsupported(what)) => return Err(Dropped::Unsupported(what)),
        };
        let cursor = cx.cursor / 8;
        let out = std::mem::take(&mut cx.out);
        Ok(Stage { values: cx.unbind(params), error, cursor, out })
    }

    /// Every `Checksum` and `InternetChecksum` as if cleared, as each of the package's blocks
    /// starts: their state is the packet's, not the switch's ("automatically initialized as
    /// if clear() had been called on it, once for each time the parser or control it is
    /// instantiated within is executed", psa.p4). An instance of a sub-block starts clear at
    /// its package block's start, not at each of its own applications.
    pub(super) fn clear_checksums(&mut self) {
        for e in self.externs.values_mut() {
            match e {
                Extern::Checksum(_, bytes) => bytes.clear(),
                Extern::InternetChecksum(sum) => *sum = 0,
                _ => {}
            }
        }
    }

    /// An instance of one of PSA's externs without cells; false if `ty` is not one.
    pub(super) fn psa_instance(&mut self, key: &str, ty: &str, args: &[Value]) -> bool {
        let algo = |i: usize| match args.get(i) {
            Some(Value::Enum(n)) => n.clone(),
            _ => String::new(),
        };
        let made = match ty {
            "Hash" => Extern::Hash(algo(0)),
            "Checksum" => Extern::Checksum(algo(0), Vec::new()),
            "InternetChecksum" => Extern::InternetChecksum(0),
            "Random" => Extern::Random(args.first().map_or(0, Value::as_u128), args.get(1).map_or(0, Value::as_u128)),
            "Digest" => Extern::Digest,
            _ => return false,
        };
        self.externs.insert(key.to_string(), made);
        true
    }

    /// A method of a PSA extern instance without cells.
    pub(super) fn psa_method(&mut self, cx: &mut Cx, key: &str, method: &str, args: &[Expr]) -> Run<Value> {
        let Some(instance) = self.externs.get(key).cloned() else {
            return Err(Stop::Unsupported(format!("{key}.{method}")));
        };
        let updated = match (instance, method) {
            (Extern::Hash(algo), "get_hash") => {
                let (data, base_max) = match args {
                    [data] => (data, None),
                    [base, data, max] => (data, Some((base, max))),
                    _ => return Err(Stop::Unsupported(format!("{key}.get_hash with {} arguments", args.len()))),
                };
                let h = hash(psa_algorithm(&algo), &self.serialize(cx, data)?);
                let v = match base_max {
                    None => h,
                    Some((base, max)) => {
                        let (base, max) = (self.eval(cx, base)?.as_u128(), self.eval(cx, max)?.as_u128());
                        if max == 0 {
                            base
                        } else {
                            base.wrapping_add(h % max)
                        }
                    }
                };
                return Ok(Value::Number(v as i128));
            }
            (Extern::Checksum(algo, _), "clear") => Extern::Checksum(algo, Vec::new()),
            (Extern::Checksum(algo, mut bytes), "update") => {
                bytes.extend(self.serialize(cx, &args[0])?);
                Extern::Checksum(algo, bytes)
            }
            (Extern::Checksum(algo, bytes), "get") => {
                return Ok(Value::Number(hash(psa_algorithm(&algo), &bytes) as i128));
            }
            (Extern::InternetChecksum(_), "clear") => Extern::InternetChecksum(0),
            (Extern::InternetChecksum(sum), "add") => {
                let words = ones_complement_sum(&self.serialize(cx, &args[0])?);
                Extern::InternetChecksum(add_ones_complement(sum, words))
            }
            (Extern::InternetChecksum(sum), "subtract") => {
                let words = ones_complement_sum(&self.serialize(cx, &args[0])?);
                Extern::InternetChecksum(add_ones_complement(sum, !words))
            }
            (Extern::InternetChecksum(sum), "get") => return Ok(Value::bits(16, !sum as u128)),
            (Extern::InternetChecksum(sum), "get_state") => return Ok(Value::bits(16, sum as u128)),
            (Extern::InternetChecksum(_), "set_state") => {
                Extern::InternetChecksum(self.eval(cx, &args[0])?.as_u128() as u16)
            }
            (Extern::Random(lo, hi), "read") => {
                let span = hi.saturating_sub(lo).saturating_add(1).max(1);
                return Ok(Value::Number((lo + self.next_random() as u128 % span) as i128));
            }
            (Extern::Digest, "pack") => {
                let data = self.eval(cx, &args[0])?;
                self.record_digest(key.to_string(), &data);
                return Ok(Value::Void);
            }
            (_, other) => return Err(Stop::Unsupported(format!("{key}.{other}"))),
        };
        self.externs.insert(key.to_string(), updated);
        Ok(Value::Void)
    }

    /// PSA's functions on the output metadata: which paths a frame takes.
    pub(super) fn psa_function(&mut self, cx: &mut Cx, name: &str, args: &[Expr]) -> Option<Run<Value>> {
        let mut values = Vec::new();
        for a in args {
            match self.eval(cx, a) {
                Ok(v) => values.push(v),
                Err(e) => return Some(Err(e)),
            }
        }
        let istd = values.first()?;
        Some(Ok(Value::Bool(match name {
            "psa_clone_i2e" | "psa_clone_e2e" => flag(istd, "clone"),
            "psa_resubmit" => !flag(istd, "drop") && flag(istd, "resubmit"),
            "psa_normal" => !flag(istd, "drop") && !flag(istd, "resubmit"),
            "psa_recirculate" => {
                !flag(istd, "drop") && values.get(1).is_some_and(|e| field(e, "egress_port") as u32 == RECIRCULATE_PORT)
            }
            _ => return None,
        })))
    }
}

/// What one block's run left.
struct Stage {
    values: Vec<Value>,
    error: Option<String>,
    /// Bytes the parser read.
    cursor: usize,
    /// Bytes the deparser wrote.
    out: Vec<u8>,
}

/// A parser's parameter set to what an earlier pass's deparser carried.
fn carry(values: &mut [Value], carried: Carried) {
    if let Some((k, v)) = carried {
        if let Some(slot) = values.get_mut(k) {
            *slot = v;
        }
    }
}

fn arity(block: &str) -> Dropped {
    Dropped::Unsupported(format!("{block}: parameters other than PSA's"))
}

/// Field `name` of a struct set to `v`, sized as the field is.
fn put(s: &mut Value, name: &str, v: Value) {
    if let Some(slot) = s.field_mut(name) {
        *slot = v.sized_as(slot);
    }
}

fn flag(s: &Value, name: &str) -> bool {
    s.fields().and_then(|f| f.iter().find(|(n, _)| &**n == name)).is_some_and(|(_, v)| v.as_bool())
}

/// PSA's algorithm names as v1model's (the hash functions are the same).
pub(super) fn psa_algorithm(name: &str) -> &'static str {
    match name {
        "IDENTITY" => "identity",
        "CRC32" | "CRC32_CUSTOM" => "crc32",
        "CRC16" | "CRC16_CUSTOM" | "TARGET_DEFAULT" => "crc16",
        "ONES_COMPLEMENT16" => "csum16",
        _ => "",
    }
}

/// One's-complement addition of two 16-bit sums.
pub(super) fn add_ones_complement(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}
