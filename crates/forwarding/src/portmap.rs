//! The port-map mode: every frame received on a port leaves on the port the map names for it,
//! untouched; frames on unmapped ports are dropped. A test rig's patch panel, and the smallest
//! complete mode: it shows what a mode must provide (a decision per frame, and the same decision
//! in a form the kernel fast path can hold).

use std::collections::BTreeMap;

use ofp::oxm::Field;
use packet::{FlowKey, Packet};

use crate::{
    Credits, DpAction, DropReason, Egress, EntryId, FlowOffload, KernelEntry, Mode, Nanos, Output, PortView, ToKernel,
    Verdict,
};

pub struct PortMapMode {
    /// In port → (out port, the one action the kernel replays).
    map: BTreeMap<u32, (u32, [DpAction; 1])>,
    /// Only the ingress port decides.
    mask: FlowKey,
    credits: Credits,
}

impl PortMapMode {
    /// `pairs`: (in port, out port). A port may appear as an input once.
    pub fn new(pairs: &[(u32, u32)]) -> PortMapMode {
        let mut mask = FlowKey::default();
        mask.set(Field::InPort, u32::MAX as u128);
        PortMapMode {
            map: pairs.iter().map(|&(i, o)| (i, (o, [DpAction::Output(o)]))).collect(),
            mask,
            credits: Credits::default(),
        }
    }
}

impl Mode for PortMapMode {
    fn name(&self) -> &'static str {
        "portmap"
    }

    fn port_changed(&mut self, _port: u32, _view: Option<PortView>) {}

    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, _now: Nanos, out: &mut dyn Output) -> Verdict {
        let in_port = key.in_port();
        match self.map.get(&in_port) {
            Some(&(port, _)) => {
                out.transmit(Egress { port, queue: None }, pkt);
                Verdict { dropped: None, entry: Some(EntryId(in_port)) }
            }
            None => Verdict { dropped: Some(DropReason::NoAction), entry: None },
        }
    }

    fn kernel(&self) -> ToKernel<'_> {
        ToKernel { flows: Some(self), ..Default::default() }
    }

    fn generation(&self) -> u64 {
        0
    }
}

impl FlowOffload for PortMapMode {
    fn entry(&self, id: EntryId) -> Option<KernelEntry<'_>> {
        let (_, actions) = self.map.get(&id.0)?;
        Some(KernelEntry { mask: &self.mask, actions, credits: &self.credits, meters: vec![] })
    }
}
