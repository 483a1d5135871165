"""Just enough rtnetlink (stdlib only) to make the sandbox network namespace's watched
way out: a veth pair with both ends inside, addresses and default routes. No ``ip``
program: the holder needs nothing the host may not have."""

from __future__ import annotations

import os
import socket
import struct

RTM_NEWLINK, RTM_NEWADDR, RTM_NEWROUTE = 16, 20, 24
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
NLMSG_ERROR = 2
IFLA_IFNAME, IFLA_LINKINFO, IFLA_INFO_KIND, IFLA_INFO_DATA, VETH_INFO_PEER = 3, 18, 1, 2, 1
IFA_ADDRESS, IFA_LOCAL, IFA_F_NODAD = 1, 2, 0x02
RTA_OIF, RT_TABLE_MAIN, RTPROT_BOOT, RTN_UNICAST = 4, 254, 3, 1
RT_SCOPE_UNIVERSE, RT_SCOPE_LINK = 0, 253
IFF_UP, IFF_NOARP = 0x1, 0x80


def _attr(kind: int, data: bytes) -> bytes:
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + b"\0" * (-length % 4)


def _ifinfo(index: int = 0, flags: int = 0, change: int = 0) -> bytes:
    return struct.pack("=BxHiII", socket.AF_UNSPEC, 0, index, flags, change)


class Netlink:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)   # NETLINK_ROUTE
        self.sock.bind((0, 0))
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def request(self, kind: int, body: bytes, flags: int = 0) -> None:
        """Send one request and wait for its acknowledgement; OSError with the kernel's errno."""
        self.seq += 1
        header = struct.pack("=IHHII", 16 + len(body), kind, NLM_F_REQUEST | NLM_F_ACK | flags,
                             self.seq, 0)
        self.sock.send(header + body)
        while True:
            data = self.sock.recv(65536)
            offset = 0
            while offset + 16 <= len(data):
                length, mtype, _, seq, _ = struct.unpack_from("=IHHII", data, offset)
                if mtype == NLMSG_ERROR and seq == self.seq:
                    error = -struct.unpack_from("=i", data, offset + 16)[0]
                    if error:
                        raise OSError(error, f"netlink: {os.strerror(error)}")
                    return
                offset += max(length, 16) + (-length % 4)

    def add_veth(self, name: str, peer: str) -> None:
        peer_info = _ifinfo() + _attr(IFLA_IFNAME, peer.encode() + b"\0")
        info = _attr(IFLA_INFO_KIND, b"veth\0") + _attr(IFLA_INFO_DATA, _attr(VETH_INFO_PEER, peer_info))
        body = _ifinfo() + _attr(IFLA_IFNAME, name.encode() + b"\0") + _attr(IFLA_LINKINFO, info)
        self.request(RTM_NEWLINK, body, NLM_F_CREATE | NLM_F_EXCL)

    def up(self, index: int) -> None:
        """Up, without ARP or neighbour discovery: frames go to the peer as they are."""
        flags = IFF_UP | IFF_NOARP
        self.request(RTM_NEWLINK, _ifinfo(index, flags, flags))

    def add_address(self, index: int, family: int, address: bytes) -> None:
        bits = len(address) * 8
        body = struct.pack("=BBBBI", family, bits, IFA_F_NODAD, RT_SCOPE_UNIVERSE, index)
        body += _attr(IFA_LOCAL, address) + _attr(IFA_ADDRESS, address)
        self.request(RTM_NEWADDR, body, NLM_F_CREATE | NLM_F_EXCL)

    def default_route(self, index: int, family: int) -> None:
        scope = RT_SCOPE_LINK if family == socket.AF_INET else RT_SCOPE_UNIVERSE
        body = struct.pack("=BBBBBBBBI", family, 0, 0, 0, RT_TABLE_MAIN, RTPROT_BOOT, scope,
                           RTN_UNICAST, 0)
        body += _attr(RTA_OIF, struct.pack("=I", index))
        self.request(RTM_NEWROUTE, body, NLM_F_CREATE | NLM_F_EXCL)
