//! A LESS-aware host (docs/less.md §2): what its edge switch's HELLO tells it — the switch's
//! addresses and the port the host is on, so the host's own addresses — and the route from there
//! to another host's address, which it then writes as labels itself.

use forwarding::less::protocol::{Message, GROUP_MAC};
use packet::less::{route, Address, PROTOCOL_ETHERTYPE};

/// What one HELLO from the edge switch says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Learned {
    pub switch: u64,
    /// The switch's port this host is on.
    pub port: u8,
    /// The switch's addresses.
    pub switch_addresses: Vec<Address>,
}

impl Learned {
    /// Reads a frame as a HELLO from a switch (None for anything else).
    pub fn from_frame(frame: &[u8]) -> Option<Learned> {
        if frame.len() < 14 || frame[0..6] != GROUP_MAC || frame[12..14] != PROTOCOL_ETHERTYPE.to_be_bytes() {
            return None;
        }
        match Message::decode(&frame[14..]) {
            Ok(Message::Hello(h)) => Some(Learned {
                switch: h.switch,
                port: h.port,
                switch_addresses: h.addresses.into_iter().map(|a| a.addr).collect(),
            }),
            _ => None,
        }
    }

    /// This host's addresses: each of its switch's, and its port.
    pub fn host_addresses(&self) -> Vec<Address> {
        self.switch_addresses.iter().map(|a| Address { hops: a.hops.clone(), edge: Some(self.port) }).collect()
    }

    /// The shortest route (output port per hop, the edge switch's first) from this host to any of
    /// `to`, over any of its addresses; None before the switch has an address.
    pub fn route_to(&self, to: &[Address]) -> Option<Vec<u8>> {
        let mut best: Option<Vec<u8>> = None;
        for from in &self.switch_addresses {
            for dst in to {
                let r = route(from, dst);
                if best.as_ref().is_none_or(|b| r.len() < b.len()) {
                    best = Some(r);
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forwarding::less::protocol::{Hello, PathAddress};

    fn addr(s: &str) -> Address {
        s.parse().unwrap()
    }

    #[test]
    fn a_hello_gives_the_host_its_addresses_and_routes() {
        let hello = Message::Hello(Hello {
            switch: 7,
            port: 3,
            root: false,
            addresses: vec![
                PathAddress { addr: addr("1/1.2/1.2/1"), ids: vec![1, 2, 3, 7] },
                PathAddress { addr: addr("2/1.3/2"), ids: vec![1, 4, 7] },
            ],
        });
        let learned = Learned::from_frame(&hello.encode([2, 0, 0, 0, 0, 7])).unwrap();
        assert_eq!(learned.port, 3);
        let mine: Vec<String> = learned.host_addresses().iter().map(|a| a.to_string()).collect();
        assert_eq!(mine, ["1/1.2/1.2/1.e3", "2/1.3/2.e3"]);
        // To a host on the switch at 2/1, the parent along the second address: up its port 2,
        // then that switch's port 4 (the first address would climb to the root and back down).
        assert_eq!(learned.route_to(&[addr("2/1.e4")]).unwrap(), vec![2, 4]);
        // Another host on the same switch: just its port.
        assert_eq!(learned.route_to(&[addr("2/1.3/2.e5")]).unwrap(), vec![5]);
        assert_eq!(Learned::from_frame(&[0u8; 60]), None);
    }
}
