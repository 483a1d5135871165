"""Direct connection attempts from a sandbox whose ``network`` is off or a list (stdlib only).

The sandbox's network namespace gets a veth pair with both ends inside: ``ws0`` holds an
address and the default routes, ``ws1`` no address, only a packet socket the proxy reads.
Nothing forwards between them or out (the namespace has no other device but ``lo``), so a
connection that does not go through the proxy (``curl --noproxy '*' http://1.2.3.4``, a
socket's connect, a UDP send, a DNS query to a nameserver that is not on loopback) reaches
only the proxy's reader, which puts it on the record with the call that made it and answers
with an ICMP port unreachable: the connect or the resolver fails at once (ECONNREFUSED),
instead of waiting for a timeout. Without veth in the kernel, the namespace keeps only
loopback: nothing is recorded, and connections fail with "network unreachable".
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct
import time

INSIDE, WATCHED = "ws0", "ws1"
ADDRESS4 = bytes([198, 18, 0, 1])     # RFC 2544 benchmarking range: nobody's
ADDRESS6 = bytes.fromhex("fd7700000000000000000000000000a1")
ETH_P_ALL, ETH_P_IP, ETH_P_IPV6 = 0x0003, 0x0800, 0x86DD
PACKET_OUTGOING = 4
TCP, UDP, ICMP4, ICMP6 = 6, 17, 1, 58
SYN, ACK = 0x02, 0x10
DEDUP_SECONDS = 2.0     # a retransmitted SYN or a resolver's retry is one attempt
RATE = 200              # attempts recorded a second at most; the others are still refused


def setup() -> socket.socket:
    """In the new network namespace, as its root: the pair, addresses, routes; the packet
    socket on the watched end. OSError when the kernel cannot (no veth)."""
    from .netlink import Netlink

    with contextlib.suppress(OSError):
        socket.if_nametoindex(WATCHED)
        return watch()   # made already (a container's proxy started again): a new reader
    nl = Netlink()
    try:
        nl.add_veth(INSIDE, WATCHED)
        inside, watched = socket.if_nametoindex(INSIDE), socket.if_nametoindex(WATCHED)
        watcher = watch()
        nl.up(watched)
        nl.up(inside)
        nl.add_address(inside, socket.AF_INET, ADDRESS4)
        nl.default_route(inside, socket.AF_INET)
        try:
            nl.add_address(inside, socket.AF_INET6, ADDRESS6)
            nl.default_route(inside, socket.AF_INET6)
        except OSError:
            pass   # no IPv6 here: IPv6 connections fail with "network unreachable", unrecorded
    finally:
        nl.close()
    return watcher


def watch() -> socket.socket:
    """A packet socket on the watched end (the pair made)."""
    watcher = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    watcher.bind((WATCHED, ETH_P_ALL))
    return watcher


class Attempt:
    """One packet that opens a connection (a TCP SYN) or sends a datagram (UDP)."""

    def __init__(self, frame: bytes, family: int, ip: bytes, proto: int, src: bytes, dst: bytes,
                 l4: bytes) -> None:
        self.frame, self.family, self.ip, self.proto = frame, family, ip, proto
        self.src, self.dst = src, dst
        self.sport, self.dport = struct.unpack_from("!HH", l4)
        self.payload = len(l4) - 8 if proto == UDP else 0
        self.l4 = l4

    @property
    def key(self) -> tuple[object, ...]:
        """One attempt's packets: a SYN and its retries; a lookup's queries (A, AAAA, the
        resolver's retries, on whatever ports) for one name."""
        if self.proto == UDP and self.dport == 53:
            return "dns", self.dst, dns_question(self.l4[8:])
        return self.proto, self.src, self.sport, self.dst, self.dport

    def entry(self) -> dict[str, object]:
        entry: dict[str, object] = {
            "time": round(time.time(), 3), "host": str(ipaddress.ip_address(self.dst)),
            "port": self.dport, "proto": "tcp" if self.proto == TCP else "udp", "via": "direct",
            "allowed": False, "up": self.payload, "down": 0}
        if self.proto == UDP and self.dport == 53:
            name = dns_question(self.l4[8:])
            if name:
                entry["query"] = name
        return entry

    def refusal(self, own_mac: bytes) -> bytes:
        """The frame back: ICMP port unreachable, from the address it was sent to."""
        ether = self.frame[6:12] + own_mac + self.frame[12:14]
        if self.family == socket.AF_INET:
            quoted = self.ip[:548]
            icmp = bytearray(struct.pack("!BBHI", 3, 3, 0, 0) + quoted)
            struct.pack_into("!H", icmp, 2, checksum(bytes(icmp)))
            header = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 0, 0x4000, 64,
                                           ICMP4, 0, self.dst, self.src))
            struct.pack_into("!H", header, 10, checksum(bytes(header)))
            return ether + bytes(header) + bytes(icmp)
        quoted = self.ip[:1232]
        icmp = bytearray(struct.pack("!BBHI", 1, 4, 0, 0) + quoted)
        pseudo = self.dst + self.src + struct.pack("!I3xB", len(icmp), ICMP6)
        struct.pack_into("!H", icmp, 2, checksum(pseudo + bytes(icmp)))
        return ether + struct.pack("!IHBB16s16s", 6 << 28, len(icmp), ICMP6, 64, self.dst,
                                   self.src) + bytes(icmp)


def parse(frame: bytes) -> Attempt | None:
    """An attempt, or None (anything else: the kernel's own neighbour and router chatter)."""
    if len(frame) < 34:
        return None
    ether_type = struct.unpack_from("!H", frame, 12)[0]
    ip = frame[14:]
    if ether_type == ETH_P_IP and ip[0] >> 4 == 4:
        ihl = (ip[0] & 15) * 4
        total = struct.unpack_from("!H", ip, 2)[0]
        if struct.unpack_from("!H", ip, 6)[0] & 0x1FFF:
            return None   # a later fragment: its first one was the attempt
        family, proto, src, dst, l4 = socket.AF_INET, ip[9], ip[12:16], ip[16:20], ip[ihl:total]
        ip = ip[:total]
    elif ether_type == ETH_P_IPV6 and ip[0] >> 4 == 6 and len(ip) >= 40:
        length = struct.unpack_from("!H", ip, 4)[0]
        family, proto, src, dst, l4 = socket.AF_INET6, ip[6], ip[8:24], ip[24:40], ip[40:40 + length]
        ip = ip[:40 + length]
    else:
        return None
    if proto not in (TCP, UDP) or len(l4) < (20 if proto == TCP else 8):
        return None
    if proto == TCP and (l4[13] & (SYN | ACK)) != SYN:
        return None
    return Attempt(frame, family, ip, proto, src, dst, l4)


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def dns_question(message: bytes) -> str:
    """The name a DNS query asks for ("" when it is not one)."""
    from .dns import question

    return question(message)[0]


class Limiter:
    """Which attempts go on the record: each once (a retry is the same attempt), at most
    RATE a second (a flood is refused all the same, but cannot fill the disk quickly)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[object, ...], float] = {}
        self.second, self.count = 0, 0

    def new(self, key: tuple[object, ...]) -> bool:
        now = time.monotonic()
        if len(self.seen) > 4096:
            self.seen = {k: t for k, t in self.seen.items() if now - t < DEDUP_SECONDS}
        new = now - self.seen.get(key, -DEDUP_SECONDS) >= DEDUP_SECONDS
        self.seen[key] = now
        if int(now) != self.second:
            self.second, self.count = int(now), 0
        self.count += new
        return new and self.count <= RATE


class Watcher:
    """The proxy's side: reads the watched end, records each attempt once, refuses it."""

    def __init__(self, sock: socket.socket, limiter: Limiter) -> None:
        self.sock = sock
        self.mac = sock.getsockname()[4]
        self.limiter = limiter

    def read(self) -> tuple[Attempt, bool] | None:
        """The next attempt and whether to record it (new, and under the rate); None for
        a frame that is none."""
        frame, address = self.sock.recvfrom(1 << 16)
        if address[2] == PACKET_OUTGOING:
            return None   # our own refusals
        try:
            attempt = parse(frame)
        except (ValueError, IndexError, struct.error):
            return None   # a frame a command forged (root inside can write to ws0): not one
        if attempt is None:
            return None
        return attempt, self.limiter.new(attempt.key)

    def refuse(self, attempt: Attempt) -> None:
        with contextlib.suppress(OSError):   # the pair gone with the namespace: none to answer
            self.sock.send(attempt.refusal(self.mac))
