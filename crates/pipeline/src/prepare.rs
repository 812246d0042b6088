//! The part of a flow-mod that needs nothing of the pipeline's state: the match checked on its
//! own, turned into the classifier's key and mask and into the stored form an added flow keeps,
//! and the instructions put in the order the spec runs them. A switch does it where the message
//! was decoded (the connection's thread), so that the forwarding thread, which every flow-mod
//! must pass through, does only what reads or changes its tables.
//!
//! `Pipeline::flow_mod` does the same on the spot: both give the same answer and the same
//! errors, in the same order (`tests/prepared.rs`).

use std::sync::Arc;

use ofp::action::Instruction;
use ofp::error::ErrorCode;
use ofp::message::{flow_mod_command as cmd, FlowMod};
use packet::FlowKey;

use crate::flow::{order, FlowActions, StoredMatch};
use crate::match_to_key;

/// A flow-mod with its pure part done (see the module's note).
pub struct PreparedFlowMod {
    /// As decoded, but for an add's or modify's instructions, which are in the prepared part's
    /// action list.
    pub fm: FlowMod,
    pub(crate) parts: Parts,
}

/// What a flow-mod's handling needs that the message alone decides.
pub(crate) struct Parts {
    /// The match's own check, reported where `flow_mod` reports it (after the flags, command
    /// and table): a flow-mod wrong in two ways names the same one either way.
    pub(crate) valid: Result<(), ErrorCode>,
    pub(crate) key: FlowKey,
    pub(crate) mask: FlowKey,
    /// The match as an added flow stores it (an ADD with a valid match only).
    pub(crate) stored: Option<StoredMatch>,
    /// The instructions, compiled (an ADD's or MODIFY's only: a delete's are not read).
    pub(crate) actions: Option<Arc<FlowActions>>,
}

impl Parts {
    /// `fm`'s parts, its instructions given as `actions` (when the command reads them) and its
    /// match's stored form as `stored` (when it is an add's).
    pub(crate) fn of(
        fm: &FlowMod,
        actions: impl FnOnce() -> Arc<FlowActions>,
        stored: impl FnOnce() -> StoredMatch,
    ) -> Parts {
        let valid = fm.match_.validate();
        let (key, mask) = if valid.is_ok() { match_to_key(&fm.match_) } else { Default::default() };
        let adding = fm.command == cmd::ADD;
        let stored = (adding && valid.is_ok()).then(stored);
        Parts { valid, key, mask, stored, actions: reads_actions(fm.command).then(actions) }
    }

    pub(crate) fn instructions(&self) -> &[Instruction] {
        self.actions.as_deref().map_or(&[], |a| &a.instructions)
    }
}

impl PreparedFlowMod {
    /// Prepares `fm`, sharing its action list with the recent flow-mods' in `lists`.
    pub fn new(mut fm: FlowMod, lists: &mut ActionLists) -> PreparedFlowMod {
        let instructions = if reads_actions(fm.command) { std::mem::take(&mut fm.instructions) } else { Vec::new() };
        let parts = Parts::of(&fm, || lists.share(instructions), || StoredMatch::new(&fm.match_));
        PreparedFlowMod { fm, parts }
    }

    /// As [`PreparedFlowMod::new`], `message` being the bytes `fm` was decoded from: its match's
    /// stored form is copied from them (see [`StoredMatch::from_wire`]) rather than encoded again.
    pub fn from_message(mut fm: FlowMod, message: &[u8], lists: &mut ActionLists) -> PreparedFlowMod {
        /// Where a flow-mod's `ofp_match` starts: after its header and 40 bytes of fixed fields.
        const MATCH_AT: usize = 48;
        let instructions = if reads_actions(fm.command) { std::mem::take(&mut fm.instructions) } else { Vec::new() };
        let stored = || {
            let copied = message.get(MATCH_AT..).and_then(StoredMatch::from_wire);
            debug_assert!(copied.as_ref().is_none_or(|c| *c == StoredMatch::new(&fm.match_)), "{fm:?}");
            copied.unwrap_or_else(|| StoredMatch::new(&fm.match_))
        };
        let parts = Parts::of(&fm, || lists.share(instructions), stored);
        PreparedFlowMod { fm, parts }
    }

    /// The flow-mod as it was decoded, for a mode that takes it whole.
    pub fn into_flow_mod(self) -> FlowMod {
        let mut fm = self.fm;
        if let Some(actions) = &self.parts.actions {
            fm.instructions = actions.instructions.clone();
        }
        fm
    }
}

/// Whether a flow-mod's command reads its instructions (a delete's are ignored).
fn reads_actions(command: u8) -> bool {
    matches!(command, cmd::ADD | cmd::MODIFY | cmd::MODIFY_STRICT)
}

/// The action lists of the last few flow-mods from one source (a connection, the pipeline's own
/// callers). A controller installs flows of a kind together (a million flows out of a few ports):
/// a list seen among the last few is shared (a compare of a few, not a hash of every list ever),
/// neither copied nor ordered again.
#[derive(Default)]
pub struct ActionLists {
    recent: Vec<Arc<FlowActions>>,
}

impl ActionLists {
    const RECENT: usize = 8;

    fn find(&self, instructions: &[Instruction]) -> Option<Arc<FlowActions>> {
        self.recent.iter().find(|a| a.instructions == instructions).cloned()
    }

    fn remember(&mut self, instructions: Vec<Instruction>) -> Arc<FlowActions> {
        let program = order(&instructions);
        let shared = Arc::new(FlowActions { instructions, program });
        if self.recent.len() == Self::RECENT {
            self.recent.remove(0);
        }
        self.recent.push(shared.clone());
        shared
    }

    /// One copy of `instructions` for every flow that has them (taking them: no copy of a new list).
    pub fn share(&mut self, instructions: Vec<Instruction>) -> Arc<FlowActions> {
        self.find(&instructions).unwrap_or_else(|| self.remember(instructions))
    }

    /// As [`ActionLists::share`], copying the list only when it is new.
    pub(crate) fn share_copy(&mut self, instructions: &[Instruction]) -> Arc<FlowActions> {
        self.find(instructions).unwrap_or_else(|| self.remember(instructions.to_vec()))
    }
}
