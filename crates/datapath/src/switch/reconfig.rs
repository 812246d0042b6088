//! A configuration read again while the switch runs (SIGHUP): ports join and leave, egress
//! settings and the mode's own configuration change, and what stays is left alone — its queued
//! frames, its flows, the kernel's entries that do not go through a port that left.

use std::collections::BTreeMap;

use ofp::message::port_reason;
use ofp::port::OFPP_LOCAL;
use tracing::{info, warn};

use super::ports::SwitchPort;
use super::Switch;

impl Switch {
    /// Empties the kernel's copy of the mode's decisions, and has the mode make them (and offer
    /// them) again: emptying the kernel alone would leave the mode's cached decisions in
    /// userspace for good, since only a fresh one is offered.
    pub(super) fn forget_kernel_decisions(&mut self) {
        let before = self.mode.generation();
        self.mode.forget_decisions();
        if self.mode.generation() == before {
            if let Some(fast) = self.fast.as_mut() {
                fast.flush();
            }
        }
        // A generation that moved empties the kernel's copy here, its last hits counted first.
        self.sync_fast();
    }

    /// See [`crate::Command::Reconfigure`]. Returns what changed, or why nothing did.
    pub(super) fn reconfigure(
        &mut self,
        ports: Vec<(u32, String)>,
        egress: Vec<(u32, crate::egress::PortEgress)>,
        mode: Option<forwarding::Reconfig>,
    ) -> Result<String, String> {
        let wanted: BTreeMap<u32, &str> = ports.iter().map(|(no, name)| (*no, name.as_str())).collect();
        // A port whose interface changed is one that leaves and one that joins.
        let leaving: Vec<u32> = self
            .ports
            .iter()
            .filter(|(&no, p)| no != OFPP_LOCAL && wanted.get(&no) != Some(&p.desc.name.as_str()))
            .map(|(&no, _)| no)
            .collect();
        let joining: Vec<(u32, String)> = ports
            .iter()
            .filter(|(no, name)| self.ports.get(no).is_none_or(|p| p.desc.name != *name))
            .cloned()
            .collect();
        // What can fail, first: new ports open (a missing interface is refused, as at start) and
        // the mode takes its configuration, before anything running is touched.
        let fast_mode = self.fast.as_ref().map(|f| f.mode);
        let mut opened = Vec::new();
        for (no, name) in &joining {
            let port = SwitchPort::open(*no, name, self.cfg.ring, &self.guard, fast_mode, self.cfg.io_of(*no))
                .map_err(|e| format!("port {no} ({name}): {e}"))?;
            opened.push((*no, name.clone(), port));
        }
        if let Some(r) = &mode {
            self.mode.reconfigure(r)?;
        }

        let mut said = Vec::new();
        for &no in &leaving {
            let name = self.ports[&no].desc.name.clone();
            self.port_status(no, port_reason::DELETE);
            if let Some(fast) = self.fast.as_mut() {
                fast.detach_port(no);
            }
            self.ports.remove(&no);
            info!(port = no, %name, "port removed");
            said.push(format!("-{no} ({name})"));
        }
        for (no, name, mut port) in opened {
            if let Some(fast) = self.fast.as_mut() {
                let tag = fast.free_tag();
                if let Err(e) = fast.attach_port(no, &name, tag) {
                    warn!(port = no, "{e}: the port is served in userspace only");
                }
                if let Err(e) = port.join_fast_path(no, fast) {
                    warn!(port = no, "{e}: its AF_XDP socket receives nothing");
                }
            }
            self.ports.insert(no, port);
            self.port_status(no, port_reason::ADD);
            info!(port = no, %name, "port added");
            said.push(format!("+{no} ({name})"));
        }
        self.cfg.ports = ports;
        super::apply_egress(&mut self.ports, &egress, self.start, self.cfg.timing);
        self.cfg.egress = egress;
        // What the kernel counted is the flows' before its entries go; entries through a port
        // that left, or to one whose egress is scheduled now, must go.
        let now = self.now();
        self.harvest_fast(now);
        self.forget_kernel_decisions();
        self.precise_timers();
        if mode.is_some() {
            said.push(format!("{} configuration", self.mode.name()));
        }
        said.push(format!("egress of {} ports", self.ports.len()));
        Ok(said.join(", "))
    }
}
