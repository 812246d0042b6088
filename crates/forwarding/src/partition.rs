//! Several modes in one switch, each on ports of its own (`[[port]] mode = "..."`): LESS on the
//! fabric ports and OpenFlow or a learning bridge on the rest, say. A frame goes to the mode of the
//! port it came in on, and a mode only ever sends out of its own ports, as if each part were a
//! switch of its own joined to the others by cables. A copy a mode sends to another part's port
//! (an OpenFlow action naming it) is dropped and counted as `fenced`.
//!
//! The kernel fast path serves one part's flow entries (the first part whose mode offers them) and
//! the label-switching part's tables; their entries always match on the input port and the labels
//! only on the part's own ports, so the kernel keeps the parts apart as userspace does. Another
//! part's decisions stay in userspace, and a frame-filtering mode (AFDX) shares the switch in
//! userspace only: its kernel program serves a whole switch.

use std::collections::BTreeSet;

use packet::{FlowKey, Packet};

use crate::{
    actions_outputs, not_programmable, CounterGroup, EntryId, ErrorCode, Event, FlowOffload, FromKernel, KernelEntry,
    KernelLabels, Mode, Nanos, Output, PortView, Reply, TableReport, ToKernel, Verdict,
};
use ofp::oxm::Field;

/// One mode and the ports it owns.
pub struct Part {
    pub mode: Box<dyn Mode>,
    pub ports: BTreeSet<u32>,
}

pub struct Partitioned {
    parts: Vec<Part>,
    /// The part whose decisions the kernel may hold as flow entries.
    flows: Option<usize>,
    /// The part OpenFlow controllers program.
    programmable: Option<usize>,
    /// The label-switching part's tables, limited to its ports.
    labels: Option<KernelLabels>,
    fenced: u64,
}

/// Lets through only the copies a part sends out of its own ports.
struct Fence<'a> {
    ports: &'a BTreeSet<u32>,
    out: &'a mut dyn Output,
    fenced: &'a mut u64,
}

impl Output for Fence<'_> {
    fn transmit(&mut self, egress: crate::Egress, pkt: &Packet) {
        if self.ports.contains(&egress.port) {
            self.out.transmit(egress, pkt);
        } else {
            *self.fenced += 1;
        }
    }
    fn event(&mut self, event: Event) {
        self.out.event(event);
    }
}

impl Partitioned {
    /// `parts` in order of precedence: a port no part names (one that appears later) goes to the
    /// first. A port named by two parts is the first's.
    pub fn new(parts: Vec<Part>) -> Partitioned {
        assert!(!parts.is_empty(), "a switch has at least one mode");
        let flows = parts.iter().position(|p| p.mode.kernel().flows.is_some());
        let programmable = parts.iter().position(|p| p.mode.is_programmable());
        let mut switch = Partitioned { parts, flows, programmable, labels: None, fenced: 0 };
        switch.refresh_labels();
        switch
    }

    fn owner(&self, port: u32) -> usize {
        self.parts.iter().position(|p| p.ports.contains(&port)).unwrap_or(0)
    }

    /// The label-switching part's tables as the kernel gets them: only its own ports are label
    /// ports. Copied when they change (their generation moves), which is rare against frames.
    fn refresh_labels(&mut self) {
        let Some((part, labels)) = self.parts.iter().find_map(|p| Some((p, p.mode.kernel().labels?))) else { return };
        if self.labels.as_ref().is_some_and(|l| l.generation == labels.generation) {
            return;
        }
        let mut labels = labels.clone();
        labels.ports.retain(|p| part.ports.contains(p));
        self.labels = Some(labels);
    }

    fn fenced<R>(&mut self, part: usize, out: &mut dyn Output, f: impl FnOnce(&mut dyn Mode, &mut Fence) -> R) -> R {
        let Part { mode, ports } = &mut self.parts[part];
        let mut fence = Fence { ports, out, fenced: &mut self.fenced };
        f(mode.as_mut(), &mut fence)
    }
}

impl Mode for Partitioned {
    fn name(&self) -> &'static str {
        "partitioned"
    }

    fn port_changed(&mut self, port: u32, view: Option<PortView>) {
        let part = self.owner(port);
        // A port that appeared after start (no part named it) joins the first part.
        self.parts[part].ports.insert(port);
        self.parts[part].mode.port_changed(port, view);
        self.refresh_labels();
    }

    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict {
        let part = self.owner(key.in_port());
        let mut verdict = self.fenced(part, out, |mode, fence| mode.receive(pkt, key, now, fence));
        if Some(part) != self.flows {
            verdict.entry = None;
        }
        self.refresh_labels();
        verdict
    }

    /// The flows part's decisions, and the label-switching part's tables limited to its ports.
    /// Virtual links and P4 programs are decided in userspace on a shared switch.
    fn kernel(&self) -> ToKernel<'_> {
        ToKernel {
            flows: self.flows.map(|_| self as &dyn FlowOffload),
            labels: self.labels.as_ref(),
            ..Default::default()
        }
    }

    fn take_back(&mut self, back: FromKernel<'_>) {
        if let (Some(f), FromKernel::FlowHits { .. } | FromKernel::MeterCounts { .. }) = (self.flows, back) {
            self.parts[f].mode.take_back(back);
        }
    }

    fn generation(&self) -> u64 {
        self.flows.map_or(0, |f| self.parts[f].mode.generation())
    }

    fn take_retired(&mut self) -> crate::Retired {
        self.flows.map(|f| self.parts[f].mode.take_retired()).unwrap_or_default()
    }

    fn next_deadline(&self) -> Option<Nanos> {
        self.parts.iter().filter_map(|p| p.mode.next_deadline()).min()
    }

    fn tick(&mut self, now: Nanos, out: &mut dyn Output) {
        for part in 0..self.parts.len() {
            if self.parts[part].mode.next_deadline().is_some_and(|d| d <= now) {
                self.fenced(part, out, |mode, fence| mode.tick(now, fence));
            }
        }
        self.refresh_labels();
    }

    fn openflow(&mut self, msg: ofp::Message, now: Nanos, out: &mut dyn Output) -> Result<Option<Reply>, ErrorCode> {
        match self.programmable {
            Some(part) => self.fenced(part, out, |mode, fence| mode.openflow(msg, now, fence)),
            None => not_programmable(msg),
        }
    }

    fn prepared_flow_mod(
        &mut self,
        fm: crate::PreparedFlowMod,
        now: Nanos,
        out: &mut dyn Output,
    ) -> Result<Option<Reply>, ErrorCode> {
        match self.programmable {
            Some(part) => self.fenced(part, out, |mode, fence| mode.prepared_flow_mod(fm, now, fence)),
            None => not_programmable(ofp::Message::FlowMod(fm.into_flow_mod())),
        }
    }

    fn is_programmable(&self) -> bool {
        self.programmable.is_some()
    }

    fn controller_sees(&self, port: u32) -> bool {
        self.programmable.is_none_or(|p| self.owner(port) == p)
    }

    fn tables(&self) -> Vec<TableReport> {
        self.programmable.map_or_else(Vec::new, |p| self.parts[p].mode.tables())
    }

    fn control(&mut self, request: &str) -> Option<Result<String, String>> {
        self.parts.iter_mut().find_map(|p| p.mode.control(request))
    }

    /// The first part that offers itself (the configuration has one P4 program at most).
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        self.parts.iter_mut().find_map(|p| p.mode.as_any_mut())
    }

    fn counters(&self) -> Vec<CounterGroup> {
        let mut groups: Vec<CounterGroup> = self.parts.iter().flat_map(|p| p.mode.counters()).collect();
        groups.push(CounterGroup {
            name: "partitions".into(),
            counters: vec![("parts", self.parts.len() as u64), ("fenced", self.fenced)],
        });
        groups
    }

    fn set_fail_open(&mut self, on: bool) {
        self.parts.iter_mut().for_each(|p| p.mode.set_fail_open(on));
    }

    fn forget_decisions(&mut self) {
        self.parts.iter_mut().for_each(|p| p.mode.forget_decisions());
    }
}

impl FlowOffload for Partitioned {
    fn entry(&self, id: EntryId) -> Option<KernelEntry<'_>> {
        let part = &self.parts[self.flows?];
        let entry = part.mode.kernel().flows?.entry(id)?;
        // An entry that does not pin the input port would take other parts' frames in the kernel,
        // and one that sends elsewhere would cross the fence there.
        let pinned = entry.mask.get(Field::InPort) == u32::MAX as u128;
        (pinned && actions_outputs(entry.actions).iter().all(|p| part.ports.contains(p))).then_some(entry)
    }
}
