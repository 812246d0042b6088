//! A read STF script run against a program on a target (the software target, or the kernel's
//! through `Target`), and judged: each expectation against the frames that left its port, each
//! read, and the verdict. Names resolve through P4Info as p4c's runner resolves them (see
//! `stf.rs`); the switch's control-plane API is the only way in.
//!
//! Just over 600 lines, one concern: the run of one script, command by command, and its
//! judgement; the reading of scripts is `stf.rs`'s.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::{all_ones, Command, CounterCell, CounterCheck, Expected, KeyText, Script};
use crate::backends::software::{Dropped, Match, Switch};
use crate::info::{ActionInfo, ExternInfo, Info, TableInfo};

/// Where the script's port numbers meet the program's: the one place that maps them. Today
/// they are the same numbers, as p4c's runner gives BMv2 the script's ports. What a port means
/// is the architecture's: edgeflow.p4's egress port 0 drops, v1model's drop port is 511 (BMv2's
/// default); when v1model runs here, its drop port stays the program's, not a port frames leave.
pub mod ports {
    /// The program's ingress port for a frame the script sends in on `port`.
    pub fn into_program(port: u32) -> u32 {
        port
    }
    /// The script's port for a copy the program sent out of `port`.
    pub fn out_of_program(port: u32) -> u32 {
        port
    }
}

/// What a target did with one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sent {
    /// The copies that left, (program port, bytes); none: dropped.
    Out(Vec<(u32, Vec<u8>)>),
    /// The target did not decide the frame (the kernel sent it up to userspace): why.
    Up(String),
    /// The target cannot run what the frame reached: the construct.
    Unsupported(String),
}

/// Where frames run: the software target, or the kernel's. The control plane is the switch's;
/// a target follows it.
pub trait Target {
    fn send(&mut self, switch: &mut Switch, frame: &[u8], port: u32) -> Sent;
    /// Brings the switch's counters and registers up to what the target's frames did (before a
    /// read).
    fn settle(&mut self, _switch: &mut Switch) -> Result<(), String> {
        Ok(())
    }
}

/// `run::Switch::process` itself, each frame at the time since the run began.
pub struct Software {
    began: std::time::Instant,
}

impl Default for Software {
    fn default() -> Software {
        Software { began: std::time::Instant::now() }
    }
}

impl Target for Software {
    fn send(&mut self, switch: &mut Switch, frame: &[u8], port: u32) -> Sent {
        match switch.process(frame, port, self.began.elapsed().as_nanos() as u64) {
            Ok(outputs) => Sent::Out(outputs.into_iter().map(|o| (o.port, o.frame)).collect()),
            Err(Dropped::Unsupported(what)) => Sent::Unsupported(what),
            Err(_) => Sent::Out(Vec::new()),
        }
    }
}

/// The front end and the software target's switch for a program, or the first line of why not.
pub fn load(file: &str, text: &str) -> Result<Switch, String> {
    let first = |e: String| e.lines().next().unwrap_or("").to_string();
    // Read where the program lies, so that its own `#include "..."` files are found.
    let (program, checked) = crate::front_end_at(std::path::Path::new(file), text).map_err(first)?;
    Switch::new(program, checked).map_err(first)
}

/// One judged line of the script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub line: usize,
    pub held: bool,
    pub what: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    Refused(String),
}

/// A script's run: each expectation and read, and the verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub checks: Vec<Check>,
    pub verdict: Verdict,
    /// Frames the target did not decide and sent up, as the kernel does in the datapath: the
    /// `packet` line and why. The software target decided them, as userspace does there.
    pub up: Vec<(usize, String)>,
}

impl Outcome {
    pub fn refused(why: impl Into<String>) -> Outcome {
        Outcome { checks: Vec::new(), verdict: Verdict::Refused(why.into()), up: Vec::new() }
    }

    /// The verdict as one line: `PASS`, `FAIL` with how many checks failed, or `REFUSED why`.
    pub fn summary(&self) -> String {
        match &self.verdict {
            Verdict::Pass if self.up.is_empty() => "PASS".into(),
            Verdict::Pass => {
                let mut whys: Vec<&str> = self.up.iter().map(|(_, why)| why.as_str()).collect();
                whys.dedup();
                format!("PASS ({} frame(s) sent up and decided in userspace: {})", self.up.len(), whys.join("; "))
            }
            Verdict::Fail => {
                let failed = self.checks.iter().filter(|c| !c.held).count();
                format!("FAIL {failed} of {} checks", self.checks.len())
            }
            Verdict::Refused(why) => format!("REFUSED {why}"),
        }
    }

    /// Each check on its line, then the summary.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for c in &self.checks {
            let _ = writeln!(s, "line {}: {}: {}", c.line, if c.held { "ok" } else { "FAILED" }, c.what);
        }
        for (line, why) in &self.up {
            let _ = writeln!(s, "line {line}: sent up, decided in userspace: {why}");
        }
        s + &self.summary() + "\n"
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn expected_text(e: &Expected) -> String {
    let mut s: String = e.nibbles.iter().map(|n| n.map_or('*', |d| char::from_digit(d as u32, 16).unwrap())).collect();
    if e.ends {
        s.push('$');
    }
    s
}

/// None where `got` meets `want`; else how it does not.
fn differs(want: &Expected, got: &[u8]) -> Option<String> {
    let nibble = |i: usize| got.get(i / 2).map(|b| if i.is_multiple_of(2) { b >> 4 } else { b & 15 });
    if got.len() * 2 < want.nibbles.len() {
        return Some(format!("{} bytes, shorter than expected", got.len()));
    }
    if let Some(i) = (0..want.nibbles.len()).find(|&i| want.nibbles[i].is_some_and(|d| Some(d) != nibble(i))) {
        return Some(format!("differs at byte {}", i / 2));
    }
    if want.ends && got.len() * 2 != want.nibbles.len() {
        return Some(format!("{} bytes where the frame should end at {}", got.len(), want.nibbles.len() / 2));
    }
    None
}

/// Picks the one object whose name is `wanted`, or else the one whose name ends in `.wanted`.
fn resolve<'a, T>(
    kind: &str,
    wanted: &str,
    items: impl Iterator<Item = &'a T> + Clone,
    names: impl Fn(&T) -> [&str; 2],
) -> Result<&'a T, String> {
    if let Some(x) = items.clone().find(|x| names(x).contains(&wanted)) {
        return Ok(x);
    }
    let suffix = format!(".{wanted}");
    let found: Vec<&T> = items.filter(|x| names(x).iter().any(|n| n.ends_with(&suffix))).collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("no {kind} '{wanted}'")),
        more => Err(format!(
            "{kind} '{wanted}' is ambiguous: {}",
            more.iter().map(|x| names(x)[0]).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// A key field's name in the script as P4Info spells it: `$N` indexes a stack, `.$valid$` and
/// `.valid` are the header's validity.
fn key_name(name: &str) -> String {
    let mut s = String::new();
    let mut rest = name;
    while let Some(at) = rest.find('$') {
        s.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            let _ = write!(s, "[{}]", &after[..digits]);
            rest = &after[digits..];
        } else {
            s.push('$');
            rest = after;
        }
    }
    s.push_str(rest);
    for valid in [".$valid$", ".valid"] {
        if let Some(h) = s.strip_suffix(valid) {
            return format!("{h}.isValid()");
        }
    }
    s
}

/// A key as the script wrote it, for a field of this width and match kind.
fn key_match(text: &KeyText, width: u32, kind: &str) -> Result<Match, String> {
    let ones = all_ones(Some(width));
    let prefix_mask = |len: u32| if len == 0 { 0 } else { ones & !all_ones(Some(width.saturating_sub(len))) };
    Ok(match (text, kind) {
        (KeyText::Value(n), "exact") if n.care == all_ones(n.bits) => Match::Exact(n.value),
        (KeyText::Value(n), "ternary") => Match::Ternary { value: n.value & n.care & ones, mask: n.care & ones },
        (KeyText::Value(n), "lpm") => {
            // p4c's runner: as many prefix bits as the digits that are not `*`.
            let len = match n.bits {
                Some(_) => n.care.count_ones().min(width),
                None => width,
            };
            Match::Lpm { value: n.value & prefix_mask(len), prefix: len }
        }
        (KeyText::Value(n), "range") if n.care == all_ones(n.bits) => Match::Range { low: n.value, high: n.value },
        (KeyText::Masked { value, mask }, "ternary") => Match::Ternary { value: value & mask, mask: *mask },
        (KeyText::Prefix { value, len }, "lpm") => Match::Lpm { value: value & prefix_mask(*len), prefix: *len },
        (KeyText::Prefix { value, len }, "ternary") => {
            Match::Ternary { value: value & prefix_mask(*len), mask: prefix_mask(*len) }
        }
        (KeyText::Range { low, high }, "range") => Match::Range { low: *low, high: *high },
        _ => return Err(format!("{text:?} does not fit a {width}-bit {kind} key")),
    })
}

/// A key field the script left out: what matches anything.
fn wildcard(width: u32, kind: &str) -> Match {
    match kind {
        "range" => Match::Range { low: 0, high: all_ones(Some(width)) },
        "exact" => Match::Exact(0),
        _ => Match::Any,
    }
}

fn action_args(action: &ActionInfo, given: &[(String, u128)]) -> Result<Vec<u128>, String> {
    for (n, _) in given {
        if !action.params.iter().any(|p| &p.name == n) {
            return Err(format!("{} has no parameter '{n}'", action.preamble.name));
        }
    }
    action
        .params
        .iter()
        .map(|p| {
            given
                .iter()
                .find(|(n, _)| *n == p.name)
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("{}: no value for '{}'", action.preamble.name, p.name))
        })
        .collect()
}

fn table<'a>(info: &'a Info, name: &str) -> Result<&'a TableInfo, String> {
    resolve("table", name, info.tables.iter(), |t| [t.preamble.name.as_str(), t.target.as_str()])
}

fn table_action<'a>(info: &'a Info, t: &TableInfo, name: &str) -> Result<&'a ActionInfo, String> {
    let actions = info.actions.iter().filter(|a| t.action_ids.contains(&a.preamble.id));
    resolve(&format!("action of {}", t.preamble.name), name, actions, |a| [a.preamble.name.as_str(), a.target.as_str()])
}

fn instance<'a>(kind: &str, list: &'a [ExternInfo], name: &str) -> Result<&'a ExternInfo, String> {
    resolve(kind, name, list.iter(), |x| [x.preamble.name.as_str(), x.target.as_str()])
}

/// The packet-replication state the script builds: nodes (by handle, from 0, in creation order)
/// with their replication id and ports, and each group's nodes. A group reaches the switch as
/// its nodes' (port, replication id) pairs, in order.
#[derive(Default)]
struct Replication {
    nodes: Vec<(u32, Vec<u32>)>,
    groups: BTreeMap<u32, Vec<u32>>,
}

/// The run's state besides the switch's.
struct Run<'a> {
    switch: &'a mut Switch,
    target: &'a mut dyn Target,
    info: std::sync::Arc<Info>,
    replication: Replication,
    /// `= ID` of an `add`: its table and entry index.
    entries: HashMap<String, (String, usize)>,
    checks: Vec<Check>,
    /// Per script port, the frames that left it, with the `packet` line that sent them.
    received: BTreeMap<u32, Vec<(usize, Vec<u8>)>>,
    up: Vec<(usize, String)>,
    began: std::time::Instant,
}

/// Why a run stopped before its end: the target or the runner cannot do what a line asks.
struct Refusal(String);

/// Runs `script` on `switch` (fresh from the program) through `target`.
pub fn run(script: &Script, switch: &mut Switch, target: &mut dyn Target) -> Outcome {
    let info = switch.info();
    let mut run = Run {
        switch,
        target,
        info,
        replication: Replication::default(),
        entries: HashMap::new(),
        checks: Vec::new(),
        received: BTreeMap::new(),
        up: Vec::new(),
        began: std::time::Instant::now(),
    };
    for (line, command) in &script.commands {
        match run.command(*line, command) {
            Ok(()) => {}
            Err(Refusal(why)) => return Outcome::refused(format!("line {line}: {why}")),
        }
    }
    run.judge_frames(script);
    // In the script's order: a reader goes down both together.
    run.checks.sort_by_key(|c| c.line);
    let verdict = if run.checks.iter().all(|c| c.held) { Verdict::Pass } else { Verdict::Fail };
    Outcome { checks: run.checks, verdict, up: run.up }
}

impl Run<'_> {
    fn fail(&mut self, line: usize, what: String) {
        self.checks.push(Check { line, held: false, what });
    }

    fn command(&mut self, line: usize, command: &Command) -> Result<(), Refusal> {
        let done = match command {
            Command::Add { table, priority, keys, action, args, id } => {
                self.add(table, *priority, keys, action, args, id.as_deref()).map_err(|e| format!("add: {e}"))
            }
            Command::SetDefault { table: name, action, args } => (|| {
                let t = table(&self.info, name)?;
                let a = table_action(&self.info, t, action)?;
                let args = action_args(a, args)?;
                self.switch.set_default_action(&t.target, &a.target, args)
            })()
            .map_err(|e| format!("setdefault: {e}")),
            Command::RemoveAll => {
                for t in self.switch.tables() {
                    let entries: Vec<_> = self.switch.entries(&t).unwrap_or_default().to_vec();
                    for e in entries {
                        let _ = self.switch.delete(&t, &e.keys, e.priority);
                    }
                }
                Ok(())
            }
            Command::Packet { port, frame } => {
                match self.target.send(self.switch, frame, ports::into_program(*port)) {
                    Sent::Out(copies) => {
                        for (p, bytes) in copies {
                            self.received.entry(ports::out_of_program(p)).or_default().push((line, bytes));
                        }
                    }
                    // The datapath's answer: userspace (the software target) decides the frame.
                    Sent::Up(why) => {
                        self.up.push((line, why));
                        let now = self.began.elapsed().as_nanos() as u64;
                        match self.switch.process(frame, ports::into_program(*port), now) {
                            Ok(outputs) => {
                                for o in outputs {
                                    let p = ports::out_of_program(o.port);
                                    self.received.entry(p).or_default().push((line, o.frame));
                                }
                            }
                            Err(Dropped::Unsupported(what)) => {
                                return Err(Refusal(format!("the software target cannot run {what}")))
                            }
                            Err(_) => {}
                        }
                    }
                    Sent::Unsupported(what) => return Err(Refusal(format!("the target cannot run {what}"))),
                }
                Ok(())
            }
            Command::Expect { .. } => Ok(()),
            Command::NoPacket => return Err(Refusal("no_packet is not run here".into())),
            Command::McGroupCreate { group } => {
                self.replication.groups.entry(*group).or_default();
                self.write_group(*group)
            }
            Command::McNodeCreate { rid, ports } => {
                self.replication.nodes.push((*rid, ports.clone()));
                Ok(())
            }
            Command::McNodeAssociate { group, node } => {
                if self.replication.nodes.get(*node as usize).is_none() {
                    Err(format!("mc_node_associate: no node {node}"))
                } else {
                    self.replication.groups.entry(*group).or_default().push(*node);
                    self.write_group(*group)
                }
            }
            Command::MirroringAdd { session, port } => {
                let mut s = self.switch.clone_session(*session).cloned().unwrap_or_default();
                s.port = Some(ports::into_program(*port));
                self.switch.set_clone_session(*session, s);
                Ok(())
            }
            Command::MirroringAddMc { session, group } => (|| {
                let group =
                    u16::try_from(*group).map_err(|_| format!("group {group}: the switch numbers groups to 65535"))?;
                let mut s = self.switch.clone_session(*session).cloned().unwrap_or_default();
                s.group = Some(group);
                self.switch.set_clone_session(*session, s);
                Ok(())
            })(),
            Command::MirroringGet { .. } => Ok(()),
            Command::CheckCounter { name, cell, check } => self.check_counter(line, name, cell, check.as_ref()),
            Command::RegisterRead { name, index } => (|| {
                self.target.settle(self.switch)?;
                let r = instance("register", &self.info.registers, name)?;
                let v = self.switch.register(&r.target, *index).ok_or(format!("{name} has no cell {index}"))?;
                self.checks.push(Check { line, held: true, what: format!("register {name}[{index}] = {v:#x}") });
                Ok(())
            })(),
            Command::RegisterWrite { name, index, value } => (|| {
                let r = instance("register", &self.info.registers, name)?;
                self.switch.set_register(&r.target, *index, *value)
            })(),
            Command::RegisterReset { name } => (|| {
                let r = instance("register", &self.info.registers, name)?;
                for i in 0..self.switch.cells(&r.target).unwrap_or(0) {
                    self.switch.set_register(&r.target, i, 0)?;
                }
                Ok(())
            })(),
            Command::MeterSetRates { name, index, rates } => (|| {
                let m = instance("meter", &self.info.meters, name)?;
                let [(cir, cburst), (pir, pburst)] = rates[..] else { return Err("two RATE:BURST".to_string()) };
                // BMv2's rates are per microsecond; the switch's per second.
                let per_second = |r: f64| (r * 1e6).round() as u64;
                let cells = match index {
                    Some(i) => *i..*i + 1,
                    None => 0..self.switch.cells(&m.target).unwrap_or(0),
                };
                for i in cells {
                    self.switch.set_meter(&m.target, i, per_second(cir), cburst, per_second(pir), pburst)?;
                }
                Ok(())
            })(),
            Command::MeterGetRates { name, index } => (|| {
                let m = instance("meter", &self.info.meters, name)?;
                let rates = self.switch.meter(&m.target, *index).ok_or(format!("{name} has no cell {index}"))?;
                self.checks.push(Check { line, held: true, what: format!("meter {name}[{index}] rates {rates:?}") });
                Ok(())
            })(),
            Command::Wait => self.target.settle(self.switch),
        };
        if let Err(e) = done {
            self.fail(line, e);
        }
        Ok(())
    }

    fn write_group(&mut self, group: u32) -> Result<(), String> {
        let id = u16::try_from(group).map_err(|_| format!("group {group}: the switch numbers groups to 65535"))?;
        let nodes = self.replication.groups.get(&group).cloned().unwrap_or_default();
        let replicas = nodes.iter().flat_map(|&n| {
            let (rid, ports) = &self.replication.nodes[n as usize];
            ports.iter().map(move |&p| (ports::into_program(p), *rid as u16))
        });
        self.switch.set_replicas(id, replicas.collect());
        Ok(())
    }

    fn add(
        &mut self,
        name: &str,
        priority: Option<i64>,
        keys: &[(String, KeyText)],
        action: &str,
        args: &[(String, u128)],
        id: Option<&str>,
    ) -> Result<(), String> {
        let t = table(&self.info, name)?;
        let mut matches: Vec<Option<Match>> = vec![None; t.keys.len()];
        for (field, text) in keys {
            let wanted = key_name(field);
            let k = resolve(&format!("key field of {}", t.preamble.name), &wanted, t.keys.iter(), |k| {
                [k.name.as_str(), k.name.as_str()]
            })?;
            let at = t.keys.iter().position(|x| x.id == k.id).expect("a key of this table");
            matches[at] = Some(key_match(text, k.bitwidth, &k.match_kind).map_err(|e| format!("{}: {e}", k.name))?);
        }
        let keys: Vec<Match> = matches
            .into_iter()
            .zip(&t.keys)
            .map(|(m, k)| m.unwrap_or_else(|| wildcard(k.bitwidth, &k.match_kind)))
            .collect();
        let a = table_action(&self.info, t, action)?;
        let args = action_args(a, args)?;
        // A higher STF priority wins, as a higher one does in the switch (p4c's runner turns it
        // round for BMv2, where the lower wins).
        let priority = priority.unwrap_or(0);
        self.switch.insert(&t.target, keys.clone(), &a.target, args, priority)?;
        if let Some(id) = id {
            let entries = self.switch.entries(&t.target).unwrap_or_default();
            let index = entries.iter().position(|e| e.keys == keys && e.priority == priority).expect("just inserted");
            self.entries.insert(id.to_string(), (t.target.clone(), index));
        }
        Ok(())
    }

    fn check_counter(
        &mut self,
        line: usize,
        name: &str,
        cell: &CounterCell,
        check: Option<&CounterCheck>,
    ) -> Result<(), String> {
        self.target.settle(self.switch)?;
        let (packets, bytes) = match cell {
            CounterCell::Index(i) => {
                let c = instance("counter", &self.info.counters, name)?;
                self.switch.counter(&c.target, *i).ok_or(format!("{name} has no cell {i}"))?
            }
            CounterCell::Entry(id) => {
                let (t, i) = self.entries.get(id).ok_or(format!("no entry named {id} (add ... = {id})"))?;
                self.switch.entry_counts(t).and_then(|c| c.get(*i).copied()).ok_or(format!("no entry {id}"))?
            }
        };
        let Some(check) = check else {
            self.checks.push(Check {
                line,
                held: true,
                what: format!("counter {name}: {packets} packets, {bytes} bytes"),
            });
            return Ok(());
        };
        let got = if check.bytes { bytes } else { packets };
        let want = check.value;
        let held = match check.op.as_str() {
            "==" => got == want,
            "!=" => got != want,
            "<=" => got <= want,
            "<" => got < want,
            ">=" => got >= want,
            _ => got > want,
        };
        let kind = if check.bytes { "bytes" } else { "packets" };
        self.checks.push(Check { line, held, what: format!("counter {name}: {kind} {got} {} {want}", check.op) });
        Ok(())
    }

    /// Each expectation against the frames its port sent, in order; then every frame no
    /// expectation claimed, on a port that has expectations or none ("expect PORT" alone: any).
    fn judge_frames(&mut self, script: &Script) {
        if let Err(e) = self.target.settle(self.switch) {
            self.fail(script.commands.last().map_or(0, |c| c.0), e);
        }
        let any: Vec<u32> = script
            .commands
            .iter()
            .filter_map(|(_, c)| match c {
                Command::Expect { port, frame: None } => Some(*port),
                _ => None,
            })
            .collect();
        let mut claimed: BTreeMap<u32, usize> = BTreeMap::new();
        for (line, c) in &script.commands {
            let Command::Expect { port, frame: Some(want) } = c else { continue };
            if any.contains(port) {
                continue;
            }
            let nth = claimed.entry(*port).or_default();
            let got = self.received.get(port).and_then(|r| r.get(*nth));
            *nth += 1;
            let (held, what) = match got {
                None => (false, format!("expect {port} {}: no frame left port {port}", expected_text(want))),
                Some((_, bytes)) => match differs(want, bytes) {
                    None => (true, format!("expect {port} {}", expected_text(want))),
                    Some(how) => (
                        false,
                        format!("expect {port} {}: port {port} sent {} ({how})", expected_text(want), hex(bytes)),
                    ),
                },
            };
            self.checks.push(Check { line: *line, held, what });
        }
        let received = std::mem::take(&mut self.received);
        for (port, frames) in &received {
            if any.contains(port) {
                continue;
            }
            let skip = claimed.get(port).copied().unwrap_or(0);
            for (line, bytes) in frames.iter().skip(skip) {
                self.fail(*line, format!("port {port} sent a frame no expect names: {}", hex(bytes)));
            }
        }
    }
}
