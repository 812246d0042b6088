"""A four-table learning switch (after "Simple Switch Re-imagined", the Zodiac FX paper's SS2).

The pipeline keeps the packets in the switch and only tells the controller what to learn:

  table 0  filter   drop link-local control frames (LLDP, STP/802.1D group addresses); else goto 1
  table 1  source   known (in_port, eth_src) -> goto 2; miss -> copy to controller AND goto 2
  table 2  dest     known eth_dst -> output to its port; miss -> goto 3
  table 3  flood    flood

A packet-in only teaches the controller a source address; it never has to send the packet back.
"""

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, packet
from os_ken.ofproto import ofproto_v1_3

FILTER, SOURCE, DEST, FLOOD = 0, 1, 2, 3
IDLE_TIMEOUT = 60
# Enough of the frame for the Ethernet header: the controller only reads addresses.
LEARN_BYTES = 64


class FourTableSwitch(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def _flow(self, dp, table, priority, match, inst, idle=0):
        parser = dp.ofproto_parser
        dp.send_msg(parser.OFPFlowMod(datapath=dp, table_id=table, priority=priority, match=match,
                                      instructions=inst, idle_timeout=idle))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        goto = parser.OFPInstructionGotoTable
        apply = lambda *a: parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, list(a))
        # Table 0: filter.
        self._flow(dp, FILTER, 100, parser.OFPMatch(eth_type=0x88cc), [])
        self._flow(dp, FILTER, 100, parser.OFPMatch(eth_dst=("01:80:c2:00:00:00", "ff:ff:ff:ff:ff:f0")), [])
        self._flow(dp, FILTER, 0, parser.OFPMatch(), [goto(SOURCE)])
        # Table 1: unknown sources are copied to the controller and carry on.
        self._flow(dp, SOURCE, 0, parser.OFPMatch(),
                   [apply(parser.OFPActionOutput(ofp.OFPP_CONTROLLER, LEARN_BYTES)), goto(DEST)])
        # Table 2: unknown destinations go to the flood table.
        self._flow(dp, DEST, 0, parser.OFPMatch(), [goto(FLOOD)])
        # Table 3: flood.
        self._flow(dp, FLOOD, 0, parser.OFPMatch(), [apply(parser.OFPActionOutput(ofp.OFPP_FLOOD))])
        self.logger.info("switch %016x: four-table pipeline installed", dp.id)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        if msg.table_id != SOURCE:
            return
        eth = packet.Packet(msg.data).get_protocol(ethernet.ethernet)
        if eth is None or int(eth.src.split(":")[0], 16) & 1:
            return
        in_port = msg.match["in_port"]
        # This source is known on this port from now on...
        self._flow(dp, SOURCE, 10, parser.OFPMatch(in_port=in_port, eth_src=eth.src),
                   [parser.OFPInstructionGotoTable(DEST)], idle=IDLE_TIMEOUT)
        # ...and is reachable through it. A host that moved replaces its old destination entry.
        self._flow(dp, DEST, 10, parser.OFPMatch(eth_dst=eth.src),
                   [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(in_port)])],
                   idle=IDLE_TIMEOUT)
