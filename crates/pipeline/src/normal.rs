//! The `NORMAL` port: a MAC-learning L2 switch, used for native mode, fail-open standalone mode and
//! flows that output to NORMAL.
//!
//! The table is bounded twice: as a whole, and per port. A sender that makes up source addresses
//! (one host can send thousands a second) fills first its own port's share and then only evicts
//! its own oldest addresses; a full table gives up an address of the port that holds the most.
//! Either way the table keeps learning, so a new host is flooded to only until it first sends,
//! never for the five minutes an address takes to age out.

use std::collections::VecDeque;

use hashbrown::HashMap;

use crate::flow::Nanos;

/// How long a learned address is kept without traffic from it (as in Open vSwitch and Linux bridge).
pub const MAC_AGE: Nanos = 300_000_000_000;
pub const MAX_MACS: usize = 8192;
/// One port's share of the table by default: a quarter, so that three ports' worth of room is
/// left whatever one port's hosts claim.
pub const MAX_MACS_PER_PORT: usize = MAX_MACS / 4;

type Address = (u16, u64);

#[derive(Clone, Copy, Debug)]
struct Entry {
    port: u32,
    seen: Nanos,
}

/// One port's addresses, in the order they went in (a clock: an address seen again since it
/// went in goes round once more instead of out), so that evicting costs no scan of the table.
#[derive(Default)]
struct PortAddresses {
    held: usize,
    /// (address, when it was last seen as it went in). Items of addresses that moved or went
    /// away stay until they come to the front (or the queue is compacted).
    order: VecDeque<(Address, Nanos)>,
}

pub struct MacTable {
    entries: HashMap<Address, Entry>,
    ports: HashMap<u32, PortAddresses>,
    max: usize,
    max_per_port: usize,
    /// Addresses evicted since the caller last asked: what was decided on them is stale.
    forgotten: Vec<Address>,
    /// Addresses evicted because the table was full, or because their port held its share.
    pub evicted_table_full: u64,
    pub evicted_port_limit: u64,
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable::new(MAX_MACS, MAX_MACS_PER_PORT)
    }
}

/// Outcome of learning a source address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// Known on the same port: only the age was refreshed.
    Refreshed,
    /// New or moved: forwarding decisions that depended on it are stale.
    Changed,
    /// Multicast source: nothing learned.
    Ignored,
}

pub fn is_multicast(mac: u64) -> bool {
    mac & (1 << 40) != 0
}

impl MacTable {
    /// A table of at most `max` addresses, `max_per_port` of them on any one port.
    pub fn new(max: usize, max_per_port: usize) -> MacTable {
        MacTable {
            entries: HashMap::new(),
            ports: HashMap::new(),
            max: max.max(1),
            max_per_port: max_per_port.clamp(1, max.max(1)),
            forgotten: Vec::new(),
            evicted_table_full: 0,
            evicted_port_limit: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Addresses on `port`.
    pub fn held_on(&self, port: u32) -> usize {
        self.ports.get(&port).map_or(0, |p| p.held)
    }

    /// Learns that `mac` on `vlan` sends from `port`. Making room may evict another address: the
    /// caller takes those with [`MacTable::take_forgotten`].
    pub fn learn(&mut self, vlan: u16, mac: u64, port: u32, now: Nanos) -> Learned {
        if is_multicast(mac) {
            return Learned::Ignored;
        }
        let address = (vlan, mac);
        let moved_from = match self.entries.get_mut(&address) {
            Some(e) if e.port == port => {
                e.seen = now;
                return Learned::Refreshed;
            }
            Some(e) => Some(e.port),
            None => None,
        };
        if let Some(from) = moved_from {
            self.entries.remove(&address);
            if let Some(p) = self.ports.get_mut(&from) {
                p.held -= 1;
            }
        }
        if self.held_on(port) >= self.max_per_port {
            self.evicted_port_limit += self.evict_oldest(port) as u64;
        } else if self.entries.len() >= self.max {
            let fullest = self.ports.iter().max_by_key(|(_, p)| p.held).map(|(&no, _)| no);
            if let Some(fullest) = fullest {
                self.evicted_table_full += self.evict_oldest(fullest) as u64;
            }
        }
        self.entries.insert(address, Entry { port, seen: now });
        let p = self.ports.entry(port).or_default();
        p.held += 1;
        p.order.push_back((address, now));
        if p.order.len() > 2 * p.held + 64 {
            self.compact(port);
        }
        Learned::Changed
    }

    /// Evicts `port`'s least recently seen address (nearly: the clock's pick); false if it has none.
    fn evict_oldest(&mut self, port: u32) -> bool {
        let Some(p) = self.ports.get_mut(&port) else { return false };
        // Each item goes round at most once (it goes back stamped with its entry's last sighting),
        // so this ends within two turns of the queue.
        while let Some((address, stamp)) = p.order.pop_front() {
            match self.entries.get(&address) {
                Some(e) if e.port == port && e.seen > stamp => p.order.push_back((address, e.seen)),
                Some(e) if e.port == port => {
                    self.entries.remove(&address);
                    p.held -= 1;
                    self.forgotten.push(address);
                    return true;
                }
                _ => {}
            }
        }
        false
    }

    /// Rebuilds `port`'s queue from the table: one item per address it holds, oldest first.
    fn compact(&mut self, port: u32) {
        let mut held: Vec<(Address, Nanos)> =
            self.entries.iter().filter(|(_, e)| e.port == port).map(|(&a, e)| (a, e.seen)).collect();
        held.sort_unstable_by_key(|&(_, seen)| seen);
        if let Some(p) = self.ports.get_mut(&port) {
            p.held = held.len();
            p.order = held.into();
        }
    }

    /// Addresses evicted to make room since the last call.
    pub fn take_forgotten(&mut self) -> Vec<Address> {
        std::mem::take(&mut self.forgotten)
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
    pub fn age(&mut self, now: Nanos) -> Vec<Address> {
        self.forget(|e| now.saturating_sub(e.seen) >= MAC_AGE)
    }

    /// Forgets everything learned on `port` (it went down or away); returns what went.
    pub fn flush_port(&mut self, port: u32) -> Vec<Address> {
        self.ports.remove(&port);
        self.forget(|e| e.port == port)
    }

    fn forget(&mut self, gone: impl Fn(&Entry) -> bool) -> Vec<Address> {
        let keys: Vec<Address> = self.entries.iter().filter(|(_, e)| gone(e)).map(|(&k, _)| k).collect();
        for k in &keys {
            if let Some(e) = self.entries.remove(k) {
                if let Some(p) = self.ports.get_mut(&e.port) {
                    p.held -= 1;
                }
            }
        }
        self.ports.retain(|_, p| p.held > 0);
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Nanos = 1_000_000_000;

    #[test]
    fn a_port_at_its_share_evicts_its_own_oldest_address() {
        let mut t = MacTable::new(16, 4);
        t.learn(0, 0x99, 2, 0);
        for mac in 1..=4 {
            t.learn(0, mac, 1, mac * SEC);
        }
        // Address 1 is seen again: 2 is now port 1's least recently seen.
        t.learn(0, 1, 1, 10 * SEC);
        assert_eq!(t.learn(0, 5, 1, 11 * SEC), Learned::Changed);
        assert_eq!(t.held_on(1), 4);
        assert_eq!(t.lookup(0, 2), None);
        assert_eq!(t.lookup(0, 1), Some(1));
        assert_eq!(t.lookup(0, 5), Some(1));
        assert_eq!(t.lookup(0, 0x99), Some(2), "another port's address stays");
        assert_eq!(t.take_forgotten(), vec![(0, 2)]);
        assert_eq!((t.evicted_port_limit, t.evicted_table_full), (1, 0));
    }

    #[test]
    fn a_full_table_gives_up_an_address_of_the_port_holding_most() {
        let mut t = MacTable::new(6, 4);
        for mac in 1..=4 {
            t.learn(0, mac, 1, mac * SEC);
        }
        t.learn(0, 0x10, 2, 5 * SEC);
        t.learn(0, 0x11, 2, 6 * SEC);
        assert_eq!(t.len(), 6);
        t.learn(0, 0x20, 3, 7 * SEC);
        assert_eq!(t.len(), 6);
        assert_eq!(t.lookup(0, 1), None, "port 1 holds most: its oldest went");
        assert_eq!(t.lookup(0, 0x20), Some(3));
        assert_eq!((t.held_on(1), t.held_on(2), t.held_on(3)), (3, 2, 1));
        assert_eq!(t.evicted_table_full, 1);
    }

    #[test]
    fn a_stream_of_made_up_sources_leaves_other_hosts_learned() {
        let mut t = MacTable::default();
        t.learn(0, 0xaa, 2, 0);
        for mac in 0..100_000u64 {
            t.learn(0, 0x0200_0000_0000 | mac, 1, mac);
        }
        assert_eq!(t.held_on(1), MAX_MACS_PER_PORT);
        assert_eq!(t.lookup(0, 0xaa), Some(2));
        // The newcomer on a third port is learned at once.
        assert_eq!(t.learn(0, 0xbb, 3, 200_000), Learned::Changed);
        assert_eq!(t.lookup(0, 0xbb), Some(3));
        assert_eq!(t.evicted_port_limit, 100_000 - MAX_MACS_PER_PORT as u64);
        let ports = &t.ports[&1];
        assert!(ports.order.len() <= 2 * ports.held + 64, "the queue stays bounded: {}", ports.order.len());
    }

    #[test]
    fn moving_ages_and_flushes_keep_the_counts() {
        let mut t = MacTable::new(8, 8);
        t.learn(0, 1, 1, 0);
        t.learn(0, 2, 1, 0);
        assert_eq!(t.learn(0, 1, 2, SEC), Learned::Changed);
        assert_eq!((t.held_on(1), t.held_on(2)), (1, 1));
        assert_eq!(t.age(MAC_AGE), vec![(0, 2)]);
        assert_eq!((t.held_on(1), t.held_on(2)), (0, 1));
        assert_eq!(t.flush_port(2), vec![(0, 1)]);
        assert!(t.is_empty());
        // Item left behind by the move is skipped when port 1 next evicts.
        let mut t = MacTable::new(8, 1);
        t.learn(0, 1, 1, 0);
        t.learn(0, 1, 2, SEC);
        t.learn(0, 3, 1, 2 * SEC);
        assert_eq!(t.lookup(0, 1), Some(2));
        assert_eq!(t.take_forgotten(), vec![]);
        t.learn(0, 4, 1, 3 * SEC);
        assert_eq!(t.take_forgotten(), vec![(0, 3)]);
    }

    #[test]
    fn multicast_sources_are_not_learned() {
        let mut t = MacTable::default();
        assert_eq!(t.learn(0, 0x0100_0000_0001, 1, 0), Learned::Ignored);
        assert!(t.is_empty());
    }
}
