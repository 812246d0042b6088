"""Pass-through: port 1 <-> port 2, installed once when the switch connects; no packet ever
reaches the controller (the Zodiac FX paper's "PT" application)."""

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3

PORT_A, PORT_B = 1, 2


class PassThrough(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        for src, dst in ((PORT_A, PORT_B), (PORT_B, PORT_A)):
            inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(dst)])]
            dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=1, match=parser.OFPMatch(in_port=src),
                                          instructions=inst))
        self.logger.info("switch %016x: %d <-> %d", dp.id, PORT_A, PORT_B)
