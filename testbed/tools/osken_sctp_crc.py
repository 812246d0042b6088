"""Loaded into osken-manager before the switch test tool: os-ken's SCTP checksum iterates over
`str(data)`, which under Python 3 is the text "bytearray(b'...')", so every SCTP packet the tool
expects carries a wrong CRC32c and no correct switch can match it. This replaces it with RFC 4960's
CRC32c (bitwise; the packets are small) keeping os-ken's byte-order convention."""

import struct

from os_ken.base import app_manager
from os_ken.lib.packet import sctp


def _crc32c(data):
    crc = 0xFFFFFFFF
    for byte in bytes(data):
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    crc ^= 0xFFFFFFFF
    # os-ken packs the value big-endian; the wire carries the CRC little-endian.
    return struct.unpack(">I", struct.pack("<I", crc))[0]


sctp.sctp._checksum = lambda self, data: _crc32c(data)


class SctpCrcFix(app_manager.OSKenApp):
    """Nothing to do at run time: importing this module is the fix."""
