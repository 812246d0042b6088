"""An OpenFlow 1.3 MAC-learning switch for os-ken (one table).

Misses go to the controller; the controller learns where each source address lives and, once the
destination is known, installs a flow for (in_port, eth_src, eth_dst) so later packets of that
conversation stay in the switch. Unknown destinations are flooded with a packet-out.
"""

import os
import time

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, packet
from os_ken.ofproto import ofproto_v1_3

FLOW_PRIORITY = 10
# Timeouts of learned flows; the gateway experiment sets a hard timeout to show what expiry costs.
IDLE_TIMEOUT = int(os.environ.get("EF_L2_IDLE_TIMEOUT", "60"))
HARD_TIMEOUT = int(os.environ.get("EF_L2_HARD_TIMEOUT", "0"))
# Where to note the time (CLOCK_REALTIME, seconds) of every learned flow installed: the gateway
# experiment counts the expiries a reactive controller really saw from it.
INSTALL_LOG = os.environ.get("EF_L2_INSTALL_LOG")


class L2Learning(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # datapath id -> {mac: port}
        self.where = {}

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        self.where.setdefault(dp.id, {})
        # Table-miss: the whole packet to the controller, unbuffered.
        to_controller = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        self._add_flow(dp, 0, parser.OFPMatch(), to_controller, idle=0, hard=0)
        self.logger.info("switch %016x connected", dp.id)

    def _add_flow(self, dp, priority, match, actions, idle=IDLE_TIMEOUT, hard=HARD_TIMEOUT):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=priority, match=match,
                                      instructions=inst, idle_timeout=idle, hard_timeout=hard))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match['in_port']
        eth = packet.Packet(msg.data).get_protocol(ethernet.ethernet)
        if eth is None:
            return
        table = self.where.setdefault(dp.id, {})
        table[eth.src] = in_port
        out_port = table.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out_port)]
        if out_port != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_src=eth.src, eth_dst=eth.dst)
            self._add_flow(dp, FLOW_PRIORITY, match, actions)
            if INSTALL_LOG:
                with open(INSTALL_LOG, "a") as log:
                    log.write(f"{time.time():.6f}\n")
        data = msg.data if msg.buffer_id == ofp.OFP_NO_BUFFER else None
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=msg.buffer_id, in_port=in_port,
                                        actions=actions, data=data))
