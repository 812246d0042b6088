//! The learning mode: a plain MAC-learning switch with no flow tables and no controller. It is the
//! pipeline's `NORMAL` behaviour (learn sources per VLAN, forward to the learned port, flood the
//! rest) on its own, so its decisions are cached and offered to the kernel like any megaflow.
//!
//! Native OpenFlow mode (no controller configured) is different: there `NORMAL` is a visible flow
//! that `ovs-ofctl` can replace.

use packet::{FlowKey, Packet};

use crate::openflow::{Config, OpenFlowMode};
use crate::{FromKernel, Mode, Nanos, Output, PortView, ToKernel, Verdict};

pub struct LearningMode(OpenFlowMode);

impl LearningMode {
    pub fn new() -> LearningMode {
        let mut inner =
            OpenFlowMode::new(&Config { n_tables: 1, table_limits: vec![], native: false, packet_in_rate: 0 });
        inner.set_fail_open(true);
        LearningMode(inner)
    }
}

impl Default for LearningMode {
    fn default() -> Self {
        Self::new()
    }
}

impl Mode for LearningMode {
    fn name(&self) -> &'static str {
        "learning"
    }

    fn port_changed(&mut self, port: u32, view: Option<PortView>) {
        self.0.port_changed(port, view);
    }

    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict {
        self.0.receive(pkt, key, now, out)
    }

    fn kernel(&self) -> ToKernel<'_> {
        self.0.kernel()
    }

    fn generation(&self) -> u64 {
        self.0.generation()
    }

    fn forget_decisions(&mut self) {
        self.0.forget_decisions();
    }

    fn take_retired(&mut self) -> crate::Retired {
        self.0.take_retired()
    }

    fn take_back(&mut self, back: FromKernel<'_>) {
        // Keeps learned addresses of kernel-forwarded traffic from ageing out.
        self.0.take_back(back);
    }

    fn counters(&self) -> Vec<crate::CounterGroup> {
        self.0.counters()
    }

    fn next_deadline(&self) -> Option<Nanos> {
        self.0.next_deadline()
    }

    fn tick(&mut self, now: Nanos, out: &mut dyn Output) {
        self.0.tick(now, out);
    }
}
