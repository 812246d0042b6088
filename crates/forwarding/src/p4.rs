//! A P4 program as the forwarding mode (`mode = "p4"`, docs/p4.md): the software target of the
//! `p4` crate decides every frame, and what its tables and multicast groups hold at start comes
//! from the configuration. Each copy the program sends leaves on its egress port, in the queue
//! the program chose (`standard_metadata.priority`), which the port's scheduler serves.
//!
//! Decisions are not offered to the kernel: the kernel back end for P4 programs is to come (issue
//! 36, item 2), and until then a P4 switch on tc or xdp decides every frame here.

use std::collections::BTreeMap;

pub use ::p4::run::Match;
use ::p4::run::{Dropped, Switch};
use packet::{FlowKey, Packet};

use crate::{CounterGroup, DropReason, Egress, EntryId, KernelEntry, Mode, Nanos, Output, PortView, Verdict};

/// A table entry the configuration puts in at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `Block.table`.
    pub table: String,
    pub keys: Vec<Match>,
    pub action: String,
    pub args: Vec<u128>,
    pub priority: i64,
}

/// The program, its source, and what its tables and groups hold at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The file the source was read from (what errors name).
    pub file: String,
    pub source: String,
    pub entries: Vec<Entry>,
    /// Multicast group id → its ports.
    pub groups: Vec<(u16, Vec<u32>)>,
}

/// Why a configuration cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The program does not compile (file:line:column: what).
    Program(String),
    /// Entry number `.0` of [`Config::entries`] does not fit the program.
    Entry(usize, String),
}

pub struct P4Mode {
    switch: Switch,
    /// Each copy is loaded here to be sent.
    copy: Packet,
    frames: u64,
    copies: u64,
    dropped: BTreeMap<&'static str, u64>,
}

impl P4Mode {
    pub fn new(cfg: &Config) -> Result<P4Mode, ConfigError> {
        let (program, checked) = ::p4::front_end(&cfg.file, &cfg.source).map_err(ConfigError::Program)?;
        let mut switch = Switch::new(program, checked).map_err(ConfigError::Program)?;
        for (i, e) in cfg.entries.iter().enumerate() {
            switch
                .insert(&e.table, e.keys.clone(), &e.action, e.args.clone(), e.priority)
                .map_err(|m| ConfigError::Entry(i, m))?;
        }
        for (id, ports) in &cfg.groups {
            switch.set_group(*id, ports.clone());
        }
        Ok(P4Mode { switch, copy: Packet::with_capacity(2048), frames: 0, copies: 0, dropped: BTreeMap::new() })
    }
}

impl Mode for P4Mode {
    fn name(&self) -> &'static str {
        "p4"
    }

    fn port_changed(&mut self, _port: u32, _view: Option<PortView>) {}

    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict {
        self.frames += 1;
        match self.switch.process(pkt.data(), key.in_port(), now) {
            Ok(copies) => {
                for c in copies {
                    let layout = packet::parse(&c.frame, 0).map(|(_, l)| l).unwrap_or_default();
                    // The receive offloads (a partial checksum, GSO) still describe a copy of the
                    // same length: its headers kept their places.
                    let offload = if c.frame.len() == pkt.len() { pkt.offload } else { Default::default() };
                    self.copy.load(&c.frame, offload, layout);
                    self.copies += 1;
                    out.transmit(Egress { port: c.port, queue: Some(c.queue as u32) }, &self.copy);
                }
                Verdict { dropped: None, entry: None }
            }
            Err(why) => {
                let (name, reason) = match why {
                    Dropped::Parser(_) => ("parser_rejected", DropReason::Filtered),
                    Dropped::Program => ("program_dropped", DropReason::NoAction),
                    Dropped::NoPort => ("no_egress_port", DropReason::NoAction),
                    Dropped::Unsupported(_) => ("unsupported", DropReason::NoAction),
                };
                *self.dropped.entry(name).or_default() += 1;
                Verdict { dropped: Some(reason), entry: None }
            }
        }
    }

    fn kernel_entry(&self, _id: EntryId) -> Option<KernelEntry<'_>> {
        None
    }

    fn generation(&self) -> u64 {
        0
    }

    fn counters(&self) -> Vec<CounterGroup> {
        let mut counters = vec![("frames", self.frames), ("copies", self.copies)];
        for name in ["parser_rejected", "program_dropped", "no_egress_port", "unsupported"] {
            counters.push((name, self.dropped.get(name).copied().unwrap_or(0)));
        }
        vec![CounterGroup { name: "p4".into(), counters }]
    }
}
