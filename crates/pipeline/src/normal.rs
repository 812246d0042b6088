//! The `NORMAL` port: a MAC-learning L2 switch, used for native mode, fail-open standalone mode and
//! flows that output to NORMAL.

use hashbrown::HashMap;

use crate::flow::Nanos;

/// How long a learned address is kept without traffic from it (as in Open vSwitch and Linux bridge).
pub const MAC_AGE: Nanos = 300_000_000_000;
pub const MAX_MACS: usize = 8192;

#[derive(Clone, Copy, Debug)]
struct Entry {
    port: u32,
    seen: Nanos,
}

#[derive(Default)]
pub struct MacTable {
    entries: HashMap<(u16, u64), Entry>,
}

/// Outcome of learning a source address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// Known on the same port: only the age was refreshed.
    Refreshed,
    /// New or moved: forwarding decisions that depended on it are stale.
    Changed,
    /// Multicast source or table full: nothing learned.
    Ignored,
}

pub fn is_multicast(mac: u64) -> bool {
    mac & (1 << 40) != 0
}

impl MacTable {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn learn(&mut self, vlan: u16, mac: u64, port: u32, now: Nanos) -> Learned {
        if is_multicast(mac) {
            return Learned::Ignored;
        }
        let full = self.entries.len() >= MAX_MACS;
        match self.entries.get_mut(&(vlan, mac)) {
            Some(e) if e.port == port => {
                e.seen = now;
                Learned::Refreshed
            }
            Some(e) => {
                *e = Entry { port, seen: now };
                Learned::Changed
            }
            None if full => Learned::Ignored,
            None => {
                self.entries.insert((vlan, mac), Entry { port, seen: now });
                Learned::Changed
            }
        }
    }

    pub fn lookup(&self, vlan: u16, mac: u64) -> Option<u32> {
        if is_multicast(mac) {
            return None;
        }
        self.entries.get(&(vlan, mac)).map(|e| e.port)
    }

    /// When the stalest entry was last refreshed.
    pub fn oldest(&self) -> Option<Nanos> {
        self.entries.values().map(|e| e.seen).min()
    }

    /// Drops entries not refreshed for [`MAC_AGE`]; returns them.
    pub fn age(&mut self, now: Nanos) -> Vec<(u16, u64)> {
        self.forget(|e| now.saturating_sub(e.seen) >= MAC_AGE)
    }

    /// Forgets everything learned on `port` (it went down or away); returns what went.
    pub fn flush_port(&mut self, port: u32) -> Vec<(u16, u64)> {
        self.forget(|e| e.port == port)
    }

    fn forget(&mut self, gone: impl Fn(&Entry) -> bool) -> Vec<(u16, u64)> {
        let keys: Vec<(u16, u64)> = self.entries.iter().filter(|(_, e)| gone(e)).map(|(&k, _)| k).collect();
        for k in &keys {
            self.entries.remove(k);
        }
        keys
    }
}
