"""What travels between the shards of a cluster fit while a tree grows (cluster.py, peers.py): the Steps the
decision side asks for and the shards' Packed Landings, each as two flat arrays (float64 and int64) that a socket
sends without pickling. Compiled both ways: a Step or a Landing crosses several times a tree's leaves per round.

A request (encode_steps): ints = [n, S] + per Step [tree, kind, node, a, b, feature, scan, with_states,
with_hist] + per Step its states (3 x S, 0 / 1); floats = per Step its share. n = 0: the trees are grown.

Replies (encode_packed): ints = [n, d, S] + per Packed its number of histogram entries m, then every Packed's ids;
floats = per Packed g (2 x d), w (2), count (2), r (S x d), n (S), hg (m x d), hn (m), one after the other.
"""
import numpy as np
from numba import njit
from numba.typed import List

from .grow import DONE, Packed, Step, shard_steps

STEP_FIELDS = 9  # the ints of a Step before its states


@njit(cache=True, nogil=True)
def encode_steps(steps, S):
    """The request of every Step in ``steps`` (a typed List, a Step per tree growing) that is not DONE, each
    under its tree's index; none left: the request that ends growth."""
    n = 0
    for j in range(len(steps)):
        if steps[j].kind != DONE:
            n += 1
    ints = np.zeros(2 + n * (STEP_FIELDS + 3 * S), dtype=np.int64)
    floats = np.empty(n)
    ints[0] = n
    ints[1] = S
    c = 2
    i = 0
    for j in range(len(steps)):
        step = steps[j]
        if step.kind == DONE:
            continue
        ints[c] = j
        ints[c + 1] = step.kind
        ints[c + 2] = step.node
        ints[c + 3] = step.a
        ints[c + 4] = step.b
        ints[c + 5] = step.feature
        ints[c + 6] = step.scan
        ints[c + 7] = step.with_states
        ints[c + 8] = step.with_hist
        c += STEP_FIELDS
        for row in range(3):
            for s in range(S):
                ints[c] = step.states[row, s]
                c += 1
        floats[i] = step.share
        i += 1
    return floats, ints


@njit(cache=True, nogil=True)
def active_steps(steps):
    """(which, the Steps) that encode_steps puts in a request, as decode_steps reads them back: what the shard
    that made the request runs of it."""
    which = List()
    todo = List()
    for j in range(len(steps)):
        if steps[j].kind != DONE:
            which.append(j)
            todo.append(steps[j])
    out = np.empty(len(which), dtype=np.int64)
    for i in range(len(which)):
        out[i] = which[i]
    return out, todo


@njit(cache=True, nogil=True)
def decode_steps(floats, ints):
    """(which, a typed List of the Steps) of a request."""
    n = ints[0]
    S = ints[1]
    which = np.empty(n, dtype=np.int64)
    steps = List()
    c = 2
    for i in range(n):
        which[i] = ints[c]
        states = np.empty((3, S), dtype=np.bool_)
        for row in range(3):
            for s in range(S):
                states[row, s] = ints[c + STEP_FIELDS + row * S + s] != 0
        steps.append(Step(kind=ints[c + 1], node=ints[c + 2], a=ints[c + 3], b=ints[c + 4], feature=ints[c + 5],
                          scan=ints[c + 6], with_states=ints[c + 7] != 0, with_hist=ints[c + 8] != 0, states=states,
                          share=floats[i]))
        c += STEP_FIELDS + 3 * S
    return which, steps


@njit(cache=True, nogil=True)
def encode_packed(packed):
    """A typed List of Packed Landings (all of one width d and S states) as (floats, ints)."""
    n = len(packed)
    d = packed[0].g.shape[1] if n > 0 else 0
    S = packed[0].n.shape[0] if n > 0 else 0
    n_ids = 0
    n_floats = 0
    for p in packed:
        m = p.ids.shape[0]
        n_ids += m
        n_floats += 2 * d + 4 + S * d + S + m * d + m
    ints = np.empty(3 + n + n_ids, dtype=np.int64)
    floats = np.empty(n_floats)
    ints[0] = n
    ints[1] = d
    ints[2] = S
    c = 3 + n
    f = 0
    for i in range(n):
        p = packed[i]
        m = p.ids.shape[0]
        ints[3 + i] = m
        ints[c:c + m] = p.ids
        c += m
        for part in (p.g.ravel(), p.w, p.count.astype(np.float64), p.r.ravel(), p.n, p.hg.ravel(), p.hn):
            floats[f:f + part.shape[0]] = part
            f += part.shape[0]
    return floats, ints


@njit(cache=True, nogil=True)
def steps_message(shards, which, steps, landing, keeps):
    """grow.shard_steps' Packed Landings as one message (what a shard with no shards below it sends up), in one
    call from Python."""
    return encode_packed(shard_steps(shards, which, steps, landing, keeps))


@njit(cache=True, nogil=True)
def decode_packed(floats, ints):
    """The typed List of Packed Landings of encode_packed's arrays (views of ``floats``: a message's arrays are
    its own, read once)."""
    n = ints[0]
    d = ints[1]
    S = ints[2]
    out = List()
    c = 3 + n
    f = 0
    for i in range(n):
        m = ints[3 + i]
        ids = ints[c:c + m].astype(np.int32)
        c += m
        g = floats[f:f + 2 * d].reshape((2, d))
        f += 2 * d
        w = floats[f:f + 2]
        f += 2
        count = floats[f:f + 2].astype(np.int64)
        f += 2
        r = floats[f:f + S * d].reshape((S, d))
        f += S * d
        sums_n = floats[f:f + S]
        f += S
        hg = floats[f:f + m * d].reshape((m, d))
        f += m * d
        hn = floats[f:f + m]
        f += m
        out.append(Packed(g=g, w=w, count=count, r=r, n=sums_n, ids=ids, hg=hg, hn=hn))
    return out


@njit(cache=True, nogil=True)
def replies_of(packed):
    """The replies of a request, this shard's Packed Landings first (the others: add_reply), as advance_all and
    add_up take them. Made here: a typed List made or filled from Python compiles anew in every process."""
    out = List()
    out.append(packed)
    return out


@njit(cache=True, nogil=True)
def add_reply(replies, floats, ints):
    """Another shard's Packed Landings (its message's arrays) after the replies there are."""
    replies.append(decode_packed(floats, ints))
