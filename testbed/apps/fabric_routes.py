"""Routes on a fabric of OpenFlow switches whose wiring the controller is told, for comparing
LESS's local reroute with the two ways OpenFlow handles the same link failure:

- `failover`: every hop of a configured path points at a fast-failover group whose second bucket
  is the next hop of the shortest way round the primary link; a switch that gets a frame back
  from the hop it sent it to (no way round there) sends it on the shortest way avoiding that hop
  (crankback). The switches switch over by themselves when a watched port goes down.
- `reactive`: plain output actions; on a port-status saying a link went down (or came back) the
  controller recomputes the paths on the links still up and rewrites the flows.

The fabric comes from the JSON file named by $EF_FABRIC:
  {"mode": "failover" | "reactive",
   "switches": {name: dpid},
   "links": [[switch, port, switch, port], ...],
   "hosts": [{"ip": ..., "mac": ..., "switch": name, "port": n}, ...],
   "paths": [{"src": ip, "dst": ip, "path": [switch names]}, ...]}
Traffic between hosts with no configured path takes the shortest path (lowest priority rules),
ARP included, so no frame ever reaches the controller.
"""

import json
import os
from collections import deque

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3

SHORTEST, PATH, CRANKBACK = 10, 20, 30


def shortest_next_hops(links, up, dst):
    """{switch: next switch toward dst} over the links in `up`, ties broken by name (so every
    switch agrees), from a breadth-first search out of dst."""
    nbrs = {}
    for a, _, b, _ in links:
        if (a, b) in up:
            nbrs.setdefault(a, []).append(b)
            nbrs.setdefault(b, []).append(a)
    dist, nxt, q = {dst: 0}, {}, deque([dst])
    while q:
        s = q.popleft()
        for n in sorted(nbrs.get(s, [])):
            if n not in dist:
                dist[n] = dist[s] + 1
                nxt[n] = s
                q.append(n)
    return nxt


class FabricRoutes(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with open(os.environ["EF_FABRIC"]) as f:
            fabric = json.load(f)
        self.mode = fabric["mode"]
        self.names = {int(d): n for n, d in fabric["switches"].items()}
        self.links = [tuple(l) for l in fabric["links"]]
        self.hosts = fabric["hosts"]
        self.paths = fabric["paths"]
        # (switch, neighbour) -> port, both directions.
        self.port = {}
        for a, pa, b, pb in self.links:
            self.port[(a, b)], self.port[(b, a)] = pa, pb
        self.down = set()          # links down, as (switch, port) of either end
        self.dps = {}              # name -> datapath
        self.installed = {}        # name -> {(src, dst)}: path rules in place

    def up_links(self):
        up = set()
        for a, pa, b, pb in self.links:
            if (a, pa) not in self.down and (b, pb) not in self.down:
                up |= {(a, b), (b, a)}
        return up

    # -- rules ---------------------------------------------------------------------------------

    def flow(self, name, priority, match, actions, command=None):
        dp = self.dps[name]
        ofp, parser = dp.ofproto, dp.ofproto_parser
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)] if actions else []
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=priority, match=parser.OFPMatch(**match),
                                      command=ofp.OFPFC_ADD if command is None else command,
                                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY, instructions=inst))

    def output(self, name, port):
        return [self.dps[name].ofproto_parser.OFPActionOutput(port)]

    def to_host_or(self, name, dst_ip, nxt):
        """Where `name` sends a frame for dst_ip: the host's port at its own switch, else toward nxt."""
        host = next(h for h in self.hosts if h["ip"] == dst_ip)
        return host["port"] if host["switch"] == name else self.port[(name, nxt[name])]

    def install_shortest(self, name):
        up = self.up_links()
        for h in self.hosts:
            nxt = shortest_next_hops(self.links, up, h["switch"])
            if h["switch"] != name and name not in nxt:
                continue
            out = self.output(name, self.to_host_or(name, h["ip"], nxt))
            self.flow(name, SHORTEST, {"eth_type": 0x0800, "ipv4_dst": h["ip"]}, out)
            self.flow(name, SHORTEST, {"eth_type": 0x0806, "arp_tpa": h["ip"]}, out)

    def path_match(self, p, **extra):
        return {**extra, "eth_type": 0x0800, "ipv4_src": p["src"], "ipv4_dst": p["dst"]}

    def install_failover(self, name):
        """Each configured path through `name`: a fast-failover group (primary hop, then the way
        round it), and crankback rules for frames its next hop returns."""
        dp = self.dps[name]
        ofp, parser = dp.ofproto, dp.ofproto_parser
        every = {(a, b) for a, _, b, _ in self.links} | {(b, a) for a, _, b, _ in self.links}
        for i, p in enumerate(self.paths):
            hops = p["path"]
            if name not in hops:
                continue
            at = hops.index(name)
            dst_switch = hops[-1]
            if at == len(hops) - 1:
                self.flow(name, PATH, self.path_match(p), self.output(name, self.to_host_or(name, p["dst"], {})))
                continue
            primary = hops[at + 1]
            buckets = [(self.port[(name, primary)])]
            around = shortest_next_hops(self.links, every - {(name, primary), (primary, name)}, dst_switch)
            if name in around:
                buckets.append(self.port[(name, around[name])])
            # The way round may start back where the frames came from: OpenFlow sends a frame out
            # of its input port only when told so by name.
            came_from = self.port[(name, hops[at - 1])] if at > 0 else None
            group_id = i + 1
            dp.send_msg(parser.OFPGroupMod(dp, ofp.OFPGC_ADD, ofp.OFPGT_FF, group_id, [
                parser.OFPBucket(watch_port=port, watch_group=ofp.OFPG_ANY, actions=[
                    parser.OFPActionOutput(ofp.OFPP_IN_PORT if port == came_from else port)])
                for port in buckets]))
            self.flow(name, PATH, self.path_match(p), [parser.OFPActionGroup(group_id)])
            # Frames for this path coming back from its next hop: that hop had no way round.
            if name in around:
                self.flow(name, CRANKBACK, self.path_match(p, in_port=self.port[(name, primary)]),
                          self.output(name, self.port[(name, around[name])]))

    def current_path(self, p, up):
        """The configured path while all its links are up, else the shortest on the links up."""
        hops = p["path"]
        if all((a, b) in up for a, b in zip(hops, hops[1:])):
            return hops
        nxt = shortest_next_hops(self.links, up, hops[-1])
        if hops[0] not in nxt:
            return []
        way = [hops[0]]
        while way[-1] != hops[-1]:
            way.append(nxt[way[-1]])
        return way

    def install_reactive(self, only=None):
        """Path rules for the links up now, on every connected switch (or `only`); rules of
        switches a path left are removed."""
        up = self.up_links()
        for p in self.paths:
            way = self.current_path(p, up)
            for name in self.dps:
                if only and name != only:
                    continue
                key = (p["src"], p["dst"])
                if name in way:
                    at = way.index(name)
                    port = (self.to_host_or(name, p["dst"], {}) if at == len(way) - 1
                            else self.port[(name, way[at + 1])])
                    self.flow(name, PATH, self.path_match(p), self.output(name, port))
                    self.installed.setdefault(name, set()).add(key)
                elif key in self.installed.get(name, set()):
                    ofp = self.dps[name].ofproto
                    self.flow(name, PATH, self.path_match(p), [], command=ofp.OFPFC_DELETE_STRICT)
                    self.installed[name].discard(key)

    # -- events ----------------------------------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        name = self.names.get(dp.id)
        if name is None:
            self.logger.warning("switch %016x is not in the fabric", dp.id)
            return
        self.dps[name] = dp
        self.install_shortest(name)
        if self.mode == "failover":
            self.install_failover(name)
        else:
            self.install_reactive(only=name)
        self.logger.info("switch %s (%016x) programmed, %s", name, dp.id, self.mode)

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def on_port_status(self, ev):
        msg = ev.msg
        name = self.names.get(msg.datapath.id)
        if name is None or self.mode != "reactive":
            return
        ofp = msg.datapath.ofproto
        desc = msg.desc
        gone = msg.reason == ofp.OFPPR_DELETE or desc.state & ofp.OFPPS_LINK_DOWN or \
            desc.config & ofp.OFPPC_PORT_DOWN
        end = (name, desc.port_no)
        if bool(gone) == (end in self.down):
            return
        (self.down.add if gone else self.down.discard)(end)
        self.logger.info("port %s:%d %s: recomputing", name, desc.port_no, "down" if gone else "up")
        self.install_reactive()
        for n in self.dps:
            self.install_shortest(n)
