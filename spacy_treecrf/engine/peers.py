"""The shards of a cluster fit talking among themselves while a round's trees grow (cluster.py), over plain TCP
sockets, as XGBoost's Rabit and LightGBM's network layer do: the driver starts the growth with one call and gets
the trees back, and the Steps and Landings of every leaf travel between the workers, never through the driver
(a Dask call costs the driver milliseconds per worker; a message here costs tens of microseconds).

The shards form a binomial tree over their ranks 0 .. W - 1: rank r's parent is r with its lowest set bit
cleared, its children are r + 1, r + 2, r + 4, ... below that bit (every power of two below W for rank 0). A
request goes down the tree (each shard forwards it before running its part), the Landings come back up, each
shard adding its own and its children's (in rank order, so every fit adds in the same order), so that rank 0,
which decides, receives from log2(W) shards, not W. A message is two flat arrays (wire.py) behind a header.

A peer that is lost closes its connections (the kernel does so for a killed process): the shards waiting on it
raise at once; one that stops answering raises after PEER_TIMEOUT seconds (longer than any one Step takes).
"""
import socket
import struct
import time
from typing import List, Optional, Tuple

import numpy as np

from ..errors import Errors

HEADER = struct.Struct("<qq")  # the bytes of the floats and of the ints that follow
PEER_TIMEOUT = 300.0
# A shard waiting for a message first polls its link for this long, then sleeps in the kernel: a wake-up from
# sleep costs tens of microseconds, and a Step's messages come every few hundred (rounds of 3,000-leaf trees
# were faster so than sleeping at once: docs/cluster_scaling.md).
SPIN_SECONDS = 0.001


def parent_of(rank: int) -> int:
    return rank & (rank - 1)


def children_of(rank: int, n: int) -> List[int]:
    low = rank & -rank if rank else n
    out, k = [], 1
    while k < low and rank + k < n:
        out.append(rank + k)
        k <<= 1
    return out


class PeerError(ConnectionError):
    """A peer closed its connection, sent something that is not a message, or stopped answering."""


class Peers:
    """One shard's place in the tree: its listening socket, then (join) the connections to its parent and
    children."""

    def __init__(self, host: str = "127.0.0.1"):
        self.listener = socket.create_server((host, 0), backlog=64)
        self.address = (host, self.listener.getsockname()[1])
        self.rank = 0
        self.parent: Optional[socket.socket] = None
        self.children: List[socket.socket] = []
        self.child_ranks: List[int] = []

    def join(self, rank: int, addresses: List[Tuple[str, int]], timeout: float = PEER_TIMEOUT):
        """Connect to this rank's parent and accept its children (every shard calls this at once)."""
        self.close_links()
        self.rank = rank
        self.child_ranks = children_of(rank, len(addresses))
        if rank > 0:
            self.parent = _tuned(socket.create_connection(tuple(addresses[parent_of(rank)]), timeout=timeout),
                                 timeout)
            self.parent.sendall(struct.pack("<q", rank))
        accepted = {}
        self.listener.settimeout(timeout)
        while len(accepted) < len(self.child_ranks):
            try:
                conn, _ = self.listener.accept()
            except OSError as e:
                raise PeerError(Errors.E206.format(what=f"shard {rank} waiting for its children "
                                                        f"{self.child_ranks}", error=e)) from e
            conn = _tuned(conn, timeout)
            (child,) = struct.unpack("<q", _recv_exact(conn, 8, "a child's rank"))
            accepted[child] = conn
        self.children = [accepted[c] for c in self.child_ranks]

    def send(self, sock: socket.socket, floats: np.ndarray, ints: np.ndarray):
        parts = [HEADER.pack(floats.nbytes, ints.nbytes), memoryview(np.ascontiguousarray(floats)).cast("B"),
                 memoryview(np.ascontiguousarray(ints)).cast("B")]
        try:
            sent = sock.sendmsg(parts)  # one call for a whole message (all of it, unless it is large)
            for part in parts:
                if sent >= len(part):
                    sent -= len(part)
                    continue
                sock.sendall(part[sent:])
                sent = 0
        except OSError as e:
            raise PeerError(Errors.E206.format(what=f"shard {self.rank} sending", error=e)) from e

    def receive(self, sock: socket.socket) -> Tuple[np.ndarray, np.ndarray]:
        f_bytes, i_bytes = HEADER.unpack(_recv_exact(sock, HEADER.size, "a header", self.rank))
        if f_bytes % 8 or i_bytes % 8 or f_bytes < 0 or i_bytes < 0:
            raise PeerError(Errors.E206.format(what=f"shard {self.rank} receiving",
                                               error=f"a header of {f_bytes} and {i_bytes} bytes"))
        body = _recv_exact(sock, f_bytes + i_bytes, "a message", self.rank)
        return (np.frombuffer(body, dtype=np.float64, count=f_bytes // 8),
                np.frombuffer(body, dtype=np.int64, offset=f_bytes))

    def pass_down(self, message=None) -> Tuple[np.ndarray, np.ndarray]:
        """Rank 0: send ``message`` (floats, ints) to the children; the others: receive it from the parent and
        forward it. Returns it."""
        if self.rank > 0:
            message = self.receive(self.parent)
        for child in self.children:
            self.send(child, *message)
        return message

    def from_children(self) -> list:
        return [self.receive(child) for child in self.children]

    def to_parent(self, floats: np.ndarray, ints: np.ndarray):
        self.send(self.parent, floats, ints)

    def close_links(self):
        for sock in ([self.parent] if self.parent is not None else []) + self.children:
            sock.close()
        self.parent, self.children = None, []

    def close(self):
        self.close_links()
        self.listener.close()


def _tuned(sock: socket.socket, timeout: float) -> socket.socket:
    """A link in blocking mode with the kernel's own send and receive timeouts: Python's timeout mode polls before
    every call, a system call more per message (tens of microseconds a Step)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a Step is a small message: send it now
    sock.settimeout(None)
    limit = struct.pack("ll", int(timeout), int((timeout % 1) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
    return sock


def _recv_exact(sock: socket.socket, n: int, what: str, rank: int = -1) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    spin_until = time.perf_counter() + SPIN_SECONDS
    while got < n:
        try:
            if time.perf_counter() < spin_until:
                try:
                    k = sock.recv_into(view[got:], 0, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
            else:
                k = sock.recv_into(view[got:])
        except OSError as e:  # a timeout too
            raise PeerError(Errors.E206.format(what=f"shard {rank} receiving {what}", error=e)) from e
        if k == 0:
            raise PeerError(Errors.E206.format(what=f"shard {rank} receiving {what}",
                                               error="the peer closed its connection"))
        got += k
    return buf
