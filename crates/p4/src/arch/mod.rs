//! The architectures a program may be written for, as a target's compiler ships them: their
//! declarations (`core.p4` and the three architecture files beside this one, included by
//! name from a program) and which of them a checked program's `main` instantiates. Their
//! semantics live in each back end (`backends/software/{v1model,psa}.rs`, and the kernel back
//! end's V1Switch), which ask this module which architecture they run.

use crate::frontend::check::Checked;

/// The files a program may include, built in: a target's compiler ships its architecture.
pub const INCLUDES: [(&str, &str); 4] = [
    ("core.p4", include_str!("core.p4")),
    ("edgeflow.p4", include_str!("edgeflow.p4")),
    ("v1model.p4", include_str!("v1model.p4")),
    ("psa.p4", include_str!("psa.p4")),
];

/// Other spellings of the built-in files that programs written for p4c use: BMv2's PSA lives
/// in p4c's `bmv2/` include folder.
pub const INCLUDE_ALIASES: [(&str, &str); 1] = [("bmv2/psa.p4", "psa.p4")];

/// The package a program's `main` is, with the blocks it takes in their order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// `EdgeflowSwitch(parser, ingress, egress, deparser)`: edgeflow's own, with the AFDX and
    /// queue externs.
    Edgeflow,
    /// `V1Switch(parser, verifyChecksum, ingress, egress, computeChecksum, deparser)`: BMv2's
    /// simple_switch.
    V1Model,
    /// `PSA_Switch(IngressPipeline(parser, control, deparser), PacketReplicationEngine(),
    /// EgressPipeline(parser, control, deparser), BufferingQueueingEngine())`: six blocks once
    /// the pipelines are opened.
    Psa,
}

impl Architecture {
    /// The architecture of a checked program, or `None` for a package no back end runs.
    pub fn of(checked: &Checked) -> Option<Architecture> {
        Architecture::named(&checked.package, checked.blocks.len())
    }

    /// The architecture of a lowered program (what the back ends read).
    pub fn of_ir(program: &crate::midend::ir::Program) -> Option<Architecture> {
        Architecture::named(&program.package, program.blocks.len())
    }

    fn named(package: &str, blocks: usize) -> Option<Architecture> {
        match (package, blocks) {
            ("EdgeflowSwitch", 4) => Some(Architecture::Edgeflow),
            ("V1Switch", 6) => Some(Architecture::V1Model),
            ("PSA_Switch", 6) => Some(Architecture::Psa),
            _ => None,
        }
    }

    /// Its name in a P4Info's `pkg_info.arch`, as p4c writes it.
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Edgeflow => "edgeflow",
            Architecture::V1Model => "v1model",
            Architecture::Psa => "psa",
        }
    }
}
