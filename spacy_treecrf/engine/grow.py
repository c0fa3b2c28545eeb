"""The one grower: best-first regression trees over (position, previous-state) examples.

A node is a product P x A: a set of positions times a set of previous states (intersected with validity). A
feature split partitions P (feature present / absent, or on a numeric column x <= u / x > u: numeric.py; a test
is a range of the rows' ids either way) and keeps A; a state split partitions A and keeps P. The leaf with the
largest candidate gain (split.py) is expanded next, until ``max_leaves``.

Growth has two sides that meet in a Landing. The data side (ShardGrowth, shard_step) owns positions and rows:
it partitions a node's positions and scans them for sums and feature histograms. The decision side (Growth,
advance) owns the tree: it turns sums into leaf values and candidate splits, picks the leaf to expand and says
what the data side does next (a Step). grow_tree runs both in one loop over one set of positions; a cluster
(engine/cluster.py) runs the data side on every worker's shard and adds their Landings up before ``advance``:
every sum is a sum over positions, so the shards' sums are the whole set's and the tree is the same.
grow_tree_threads runs two shards of one process's positions that way on two threads (a Mailbox between them),
the decision side on the first.

A node's positions sit in a segment of Slots (histogram.py) and the data side scans as little as it can.
Without missing values the slots carry each position's r_t: a feature split partitions the segment in place
(stable), moving r_t along and summing both children's G and N on the way; only the child with the smaller
weight (as the parent's histogram counted it, so every shard scans the same child) is scanned for its feature
histogram and per-state sums, the other's are the parent's minus those. A state split copies the segment for
its second child and computes both children's r_t and the first child's feature histogram in one pass (the
second's is the parent's minus it); their per-state sums are the parent's. A leaf that may still be split keeps
its histogram in compact form (the features it touches that the tree may split on, G, N) until it is split,
within a budget (GrowSettings.kept_bytes): past it, the leaves least likely to be split next give theirs up, and
a leaf without one has its second child scanned too (a RESCAN step).

Where values are missing (a MissingIndex with a routing rule), the slots carry weights instead and a split
routes its positions by missing.route, so one missing position may go to both children: a child is then no
longer its parent minus its sibling, and every new node is scanned for its own sums and histograms (its
features judged on the examples where their variable is known, surrogates ranked by split.surrogates).
"""
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from numba import njit
from numba.typed import List

from .histogram import (Hist, Pass, Slots, StateSums, Valid, clear, compact, is_low_rank, scan,
                        scan_state_split, scan_weighted, state_sums, subtract, valid_states, width)
from .intrinsics import compare_exchange, cycles, load_acquire, store_release, with_room, yield_cpu
from .partition import Marks, partition, partition_routed
from .split import (Allowed, Candidates, Compact, Known, SurrogateScratch, best_feature, best_feature_known, best_of,
                    best_state, best_threshold, record_candidate, surrogates)
from .numeric import NumericIndex
from .sparse import ColumnIndex
from .trees import (FEATURE, LEAF, TIE, GrowSettings, MissingIndex, Rows, Target, Tree, no_missing, routes_missing,
                    tie_slack)
from ..errors import Errors


TOO_MANY_POSITIONS = Errors.E016  # a constant: the compiled grower raises it

# What a Step asks of the data side: scan the root; split a node on a feature or on the previous state; scan one
# node (a child whose histogram cannot come from its parent's); nothing (the tree is grown).
ROOT, FEATURE_SPLIT, STATE_SPLIT, RESCAN, DONE = 0, 1, 2, 3, 4


class Nodes(NamedTuple):
    """The decision side's arrays of a tree being grown: its Tree (room for every node it may get) plus per node
    its residual sum (gsum, nodes x d), its per-state sums (sums: nodes x S x d and nodes x S) and the split it
    would take as a leaf (cand)."""
    tree: Tree
    gsum: np.ndarray
    sums: StateSums
    cand: Candidates


class Segments(NamedTuple):
    """Where a grown tree's nodes sit in its slots: node n's positions are pos[start[n]:start[n] + length[n]],
    ascending. The booster moves its cached potentials over the leaves' segments without evaluating the tree.
    share: each entry's weight (empty: 1 for all; the booster's segments of walks that followed the routing rule
    give a position the part of its weight that reached the node)."""
    pos: np.ndarray
    start: np.ndarray
    length: np.ndarray
    share: np.ndarray = np.empty(0)


class Grown(NamedTuple):
    """A grown tree and its Segments (empty where values were routed: a position may then sit in several
    leaves with a fraction of its weight, so the tree is evaluated instead)."""
    tree: Tree
    segments: Segments


class LeafHists(NamedTuple):
    """The compact histograms of the leaves that may still be split, per node (length 0: none kept; g: m x d),
    and the bytes they hold (held[0]; at most GrowSettings.kept_bytes once a new one has been kept)."""
    ids: list
    g: list
    n: list
    length: np.ndarray
    held: np.ndarray


class Step(NamedTuple):
    """What the data side does next (kind: ROOT, FEATURE_SPLIT, STATE_SPLIT, RESCAN, DONE) to ``node`` (the node
    split or scanned) and its children a, b (-1: none): ``feature``, the test of a feature split; ``scan``, the
    child of a feature split whose histogram (and, with_states, per-state sums) is scanned (-1: none, the
    children stay leaves); with_hist: histograms wanted at all; states (3 x S): the previous states of the
    node, a and b; share: the yes share of the split's known examples (the routing rule's weights)."""
    kind: int
    node: int
    a: int
    b: int
    feature: int
    scan: int
    with_states: bool
    with_hist: bool
    states: np.ndarray
    share: float


class Landing(NamedTuple):
    """What a Step's data side hands the decision side (a cluster adds its workers' up): g (3 x d), the residual
    sums G of children a, b (or of the scanned node in row 0; row 2 is the scans' scratch); w, their weights N;
    count, their positions; sums, the scanned node's per-state sums; hist, the scanned node's feature histogram
    and var_hist its missing variables' (routing); touched: how many entries of each were touched;
    surr_feature / surr_same: a routed feature split's surrogates (split.surrogates)."""
    g: np.ndarray
    w: np.ndarray
    count: np.ndarray
    sums: StateSums
    hist: Hist
    var_hist: Hist
    touched: np.ndarray
    surr_feature: np.ndarray
    surr_same: np.ndarray


class LeafQueue(NamedTuple):
    """The leaves that may be split, as a binary max-heap of (candidate gain, node): heap entries 0 .. size[0] -
    1 in gain and node; ``found`` and ``stack``: room for the entries of one choice's near-ties and the walk
    that finds them. The next leaf to expand is found in about log(leaves) steps; a scan of every node cost
    O(nodes) a split, quadratic in the leaves of a tree, run by the two-thread grower's driver while the helper
    waits. An entry whose leaf has been split since, or whose candidate was
    recorded anew, is dropped when it comes up."""
    gain: np.ndarray
    node: np.ndarray
    size: np.ndarray
    found: np.ndarray
    stack: np.ndarray


class Growth(NamedTuple):
    """The decision side of a tree being grown: its Nodes, the leaves' kept histograms, what it may split on
    (Allowed), its GrowSettings, the states the label(s) may follow (allowed_k), each feature's missing variable
    (fvar; empty: no routing), counts (int64: nodes, leaves), the leaves that may be split (LeafQueue) and
    scratch (gains: 3 x features, mid and left: S)."""
    nodes: Nodes
    kept: LeafHists
    ok: Allowed
    settings: GrowSettings
    allowed_k: np.ndarray
    fvar: np.ndarray
    counts: np.ndarray
    queue: LeafQueue
    gains: np.ndarray
    mid: np.ndarray
    left: np.ndarray


class ShardGrowth(NamedTuple):
    """The data side of a tree being grown over one set of positions: the rows (Rows of atoms, their ColumnIndex,
    NumericIndex and MissingIndex), the Target's residuals, the slots (grown by a copy at state splits), spare
    slots (tmp; fall: surrogate routing), Marks (a flag per position, and the span of positions from its first to
    its last), surrogate counts, each node's segment of the slots (pstart, plen), the slots in use (used[0]) and
    valid-state scratch (mid, mid_b)."""
    rows: Rows
    index: ColumnIndex
    numeric: NumericIndex
    missing: MissingIndex
    target: Target
    slots: Slots
    tmp: Slots
    fall: Slots
    marks: Marks
    counts: SurrogateScratch
    pstart: np.ndarray
    plen: np.ndarray
    used: np.ndarray
    mid: np.ndarray
    mid_b: np.ndarray


@njit(cache=True, nogil=True)
def new_nodes(max_nodes, S, d, n_surrogates):
    tree = Tree(kind=np.zeros(max_nodes, dtype=np.int8), feature=np.full(max_nodes, -1, dtype=np.int32),
                yes=np.full(max_nodes, -1, dtype=np.int32), no=np.full(max_nodes, -1, dtype=np.int32),
                value=np.zeros(max_nodes), count=np.zeros(max_nodes), states=np.zeros((max_nodes, S), dtype=np.bool_),
                surr_feature=np.full((max_nodes, n_surrogates), -1, dtype=np.int32),
                surr_same=np.zeros((max_nodes, n_surrogates), dtype=np.bool_), vector=np.zeros((max_nodes, 0)))
    cand = Candidates(gain=np.full(max_nodes, -1.0), kind=np.zeros(max_nodes, dtype=np.int8),
                      feature=np.full(max_nodes, -1, dtype=np.int32), states=np.zeros((max_nodes, S), dtype=np.bool_),
                      share=np.full(max_nodes, 0.5))
    return Nodes(tree=tree, gsum=np.zeros((max_nodes, d)),
                 sums=StateSums(np.zeros((max_nodes, S, d)), np.zeros((max_nodes, S))), cand=cand)


@njit(cache=True, nogil=True)
def new_growth(settings, S, d, feature_ok, numeric, missing, allowed_k):
    """The decision side of a new tree (feature_ok, numeric: Allowed's; missing: its fvar routes, if any)."""
    n_features = feature_ok.shape[0]
    max_nodes = max(2 * settings.max_leaves - 1, 1)
    routed = routes_missing(missing)
    ok = Allowed(keep=feature_ok,
                 binary=feature_ok & (numeric.column < 0) if numeric.column.shape[0] > 0 else feature_ok,
                 numeric=numeric, unrouted=Known(fvar=np.zeros(0, np.int32), missing=np.zeros((0, 0))))
    ids, g, n = List(), List(), List()  # typed lists: the decision side crosses into Python on a cluster
    for _ in range(max_nodes):
        ids.append(np.empty(0, dtype=np.int32))
        g.append(np.empty((0, d)))
        n.append(np.empty(0))
    kept = LeafHists(ids=ids, g=g, n=n, length=np.zeros(max_nodes, dtype=np.int64), held=np.zeros(1, dtype=np.int64))
    nodes = new_nodes(max_nodes, S, d, settings.n_surrogates if routed else 0)
    nodes.tree.states[0, :] = True
    queue = LeafQueue(gain=np.empty(max_nodes), node=np.empty(max_nodes, dtype=np.int64),
                      size=np.zeros(1, dtype=np.int64), found=np.empty(max_nodes, dtype=np.int64),
                      stack=np.empty(max_nodes + 1, dtype=np.int64))
    return Growth(nodes=nodes, kept=kept, ok=ok, settings=settings, allowed_k=allowed_k,
                  fvar=missing.fvar if routed else np.zeros(0, np.int32), counts=np.ones(2, dtype=np.int64),
                  queue=queue, gains=np.empty((3, n_features)), mid=np.empty(S, dtype=np.int64),
                  left=np.zeros(S, dtype=np.bool_))


@njit(cache=True, nogil=True)
def new_landing(n_features, n_vars, S, d, n_surrogates, compacts):
    """Room for what a Step hands over: dense histograms over n_features atoms and n_vars variables (compacts:
    whether the feature histogram is ever compacted from here, so it needs its room)."""
    dense = np.empty((n_features, d + 1))  # G (d values), N; N < 0: untouched
    dense[:, d] = -1.0
    m = n_features if compacts else 0
    hist = Hist(dense=dense, touched=np.empty(n_features, dtype=np.int32),
                room=(np.empty(m, dtype=np.int32), np.empty((m, d)), np.empty(m)))
    var_dense = np.empty((n_vars, d + 1))
    var_dense[:, d] = -1.0
    var_hist = Hist(dense=var_dense, touched=np.empty(n_vars, dtype=np.int32),
                    room=(np.empty(0, dtype=np.int32), np.empty((0, d)), np.empty(0)))
    return Landing(g=np.zeros((3, d)), w=np.zeros(2), count=np.zeros(2, dtype=np.int64),
                   sums=StateSums(np.zeros((S, d)), np.zeros(S)), hist=hist, var_hist=var_hist,
                   touched=np.zeros(2, dtype=np.int64), surr_feature=np.full(n_surrogates, -1, dtype=np.int32),
                   surr_same=np.zeros(n_surrogates, dtype=np.bool_))


@njit(cache=True, nogil=True)
def new_shard(rows, index, numeric, missing, target, positions, max_leaves, n_surrogates):
    """The data side of a new tree over ``positions`` (sorted here if they are not ascending; int32 slots: T <
    2**31, checked by the caller): less to move while growing, and half the memory in the Segments, which the
    booster holds for every label of a round."""
    T = target.is_start.shape[0]
    d = width(target)
    n_pos = positions.shape[0]
    routed = routes_missing(missing)
    pbuf = np.empty(2 * n_pos + 16, dtype=np.int32)
    vbuf = np.empty((2 * n_pos + 16, d))  # r_t, or weights (column 0) when routing
    ascending = True
    for i in range(1, n_pos):
        if positions[i] < positions[i - 1]:
            ascending = False
            break
    pbuf[:n_pos] = positions if ascending else np.sort(positions)
    span = np.zeros(2, dtype=np.int64)
    if n_pos > 0:
        span[0] = pbuf[0]
        span[1] = pbuf[n_pos - 1] + 1
    with_surrogates = routed and n_surrogates > 0
    n_fall = n_pos + 1 if with_surrogates else 0
    n_cnt = index.ptr.shape[0] - 1 if with_surrogates else 0
    n_mcnt = missing.n_vars if with_surrogates else 0
    counts = SurrogateScratch(cnt=np.empty((n_cnt, 2)), seen=np.zeros(n_cnt, dtype=np.bool_),
                              touched=np.empty(n_cnt, np.int32), mcnt=np.empty((n_mcnt, 2)),
                              mseen=np.zeros(n_mcnt, dtype=np.bool_), mtouched=np.empty(n_mcnt, np.int32))
    max_nodes = max(2 * max_leaves - 1, 1)
    S = target.allowed_k.shape[0]
    return ShardGrowth(rows=rows, index=index, numeric=numeric, missing=missing, target=target,
                       slots=Slots(pbuf, vbuf),
                       tmp=Slots(np.empty(n_pos + 1, dtype=np.int32), np.empty((n_pos + 1, d))),
                       fall=Slots(np.empty(n_fall, dtype=np.int32), np.empty((n_fall, d))),
                       marks=Marks(np.zeros(T, dtype=np.bool_), span), counts=counts,
                       pstart=np.zeros(max_nodes, dtype=np.int64), plen=np.zeros(max_nodes, dtype=np.int64),
                       used=np.full(1, n_pos, dtype=np.int64), mid=np.empty(S, dtype=np.int64),
                       mid_b=np.empty(S, dtype=np.int64))


@njit(cache=True, nogil=True)
def _with_room(shard, need):
    """The shard, with slots for at least ``need`` entries."""
    if need <= shard.slots.pos.shape[0]:
        return shard
    slots = Slots(with_room(shard.slots.pos, need), with_room(shard.slots.val, need))
    return ShardGrowth(rows=shard.rows, index=shard.index, numeric=shard.numeric, missing=shard.missing,
                       target=shard.target, slots=slots, tmp=shard.tmp, fall=shard.fall, marks=shard.marks,
                       counts=shard.counts, pstart=shard.pstart, plen=shard.plen, used=shard.used, mid=shard.mid,
                       mid_b=shard.mid_b)


@njit(cache=True, nogil=True)
def _scan_routed(shard, node, states_row, with_hist, landing):
    """A routed node's G, N, per-state sums and (with_hist) weighted feature and missing-variable histograms."""
    valid = valid_states(states_row, shard.target.allowed_k, shard.mid)
    lo = shard.pstart[node]
    n, nt, nmt = scan_weighted(shard.slots, lo, lo + shard.plen[node], shard.target, valid, landing.sums,
                               with_hist, (landing.hist, landing.var_hist), shard.rows, shard.missing, landing.g[0])
    landing.w[0] = n
    landing.count[0] = shard.plen[node]
    landing.touched[0] = nt
    landing.touched[1] = nmt


@njit(cache=True, nogil=True)
def shard_step(shard, step, landing):
    """The data side of a Step: partition and scan this shard's positions, results into ``landing`` (which the
    decision side clears). Returns the shard (a new one when its slots had to grow)."""
    kind = step.kind
    target = shard.target
    node = step.node
    a = step.a
    b = step.b
    pstart = shard.pstart
    plen = shard.plen
    routed = routes_missing(shard.missing)
    landing.touched[:] = 0  # no histogram unless this step scans one
    if kind == ROOT:
        n_pos = shard.used[0]
        pstart[0] = 0
        plen[0] = n_pos
        if routed:
            shard.slots.val[:n_pos, 0] = 1.0
            _scan_routed(shard, 0, step.states[0], step.with_hist, landing)
            return shard
        valid = valid_states(step.states[0], target.allowed_k, shard.mid)
        first = Pass(set_r=True, states=step.with_states, hist=step.with_hist)
        n, nt = scan(shard.slots, 0, n_pos, first, target, valid,
                     landing.sums, landing.hist, shard.rows, landing.g[0])
        landing.w[0] = n
        landing.count[0] = n_pos
        landing.touched[0] = nt
        return shard
    if kind == RESCAN:
        if routed:
            _scan_routed(shard, node, step.states[0], step.with_hist, landing)
            return shard
        valid = valid_states(step.states[0], target.allowed_k, shard.mid)
        lo = pstart[node]
        again = Pass(set_r=False, states=False, hist=True)
        _, nt = scan(shard.slots, lo, lo + plen[node], again, target, valid, landing.sums,
                     landing.hist, shard.rows, landing.g[2])
        landing.touched[0] = nt
        return shard
    lo = pstart[node]
    hi = lo + plen[node]
    used = shard.used[0]
    valid = valid_states(step.states[0], target.allowed_k, shard.mid)
    if kind == FEATURE_SPLIT:
        f = step.feature
        if routed:
            shard = _with_room(shard, used + hi - lo)
            landing.surr_feature[:] = -1
            landing.surr_same[:] = False
            if landing.surr_feature.shape[0] > 0 and shard.missing.fvar[f] >= 0:
                surrogates(shard.slots, lo, hi, f, shard.rows, shard.numeric, shard.missing, shard.counts,
                           landing.surr_feature, landing.surr_same)
            split = (f, step.share, landing.surr_feature, landing.surr_same)
            na, nb = partition_routed(shard.slots, lo, hi, used, (shard.tmp, shard.fall), split, shard.rows,
                                      shard.numeric, shard.missing, target.is_start, valid)
            pstart[a] = used
            plen[a] = na
            pstart[b] = lo
            plen[b] = nb
            shard.used[0] = used + na
            _scan_routed(shard, a, step.states[1], step.with_hist, landing)
            return shard
        na, nb, wa, wb = partition(shard, lo, hi, f, valid, landing.g)
        pstart[a] = lo + nb
        plen[a] = na
        pstart[b] = lo
        plen[b] = nb
        landing.w[0] = wa
        landing.w[1] = wb
        landing.count[0] = na
        landing.count[1] = nb
        small = step.scan
        if small >= 0:
            s_lo = pstart[small]
            smaller = Pass(set_r=False, states=step.with_states, hist=True)
            _, nt = scan(shard.slots, s_lo, s_lo + plen[small], smaller, target,
                         valid, landing.sums, landing.hist, shard.rows, landing.g[2])
            landing.touched[0] = nt
        return shard
    m_len = hi - lo
    pstart[a] = lo
    plen[a] = m_len
    pstart[b] = used
    plen[b] = m_len
    shard = _with_room(shard, used + m_len)
    shard.used[0] = used + m_len
    if routed:
        shard.slots.pos[used:used + m_len] = shard.slots.pos[lo:hi]
        shard.slots.val[used:used + m_len] = shard.slots.val[lo:hi]
        _scan_routed(shard, a, step.states[1], step.with_hist, landing)
        return shard
    va = valid_states(step.states[1], target.allowed_k, shard.mid)
    vb = valid_states(step.states[2], target.allowed_k, shard.mid_b)
    wa, wb, nt = scan_state_split(shard.slots, lo, hi, used, target, va, vb, step.with_hist, landing.hist,
                                  shard.rows, landing.g[0], landing.g[1])
    landing.w[0] = wa
    landing.w[1] = wb
    landing.count[0] = m_len
    landing.count[1] = m_len
    landing.touched[0] = nt
    return shard


class Packed(NamedTuple):
    """A shard's Landing as it travels to the driver: g and w of the step's nodes (2 x d, 2), count (2), the
    scanned node's per-state sums (r: S x d, n: S) and its feature histogram's entries with some weight (ids,
    hg: m x d, hn)."""
    g: np.ndarray
    w: np.ndarray
    count: np.ndarray
    r: np.ndarray
    n: np.ndarray
    ids: np.ndarray
    hg: np.ndarray
    hn: np.ndarray


@njit(cache=True, nogil=True)
def pack_landing(landing, keep):
    """What a shard sends of its Landing: the histogram entries of the atoms in ``keep`` (the tree's
    Allowed.keep: the decision side keeps no others); its histogram is cleared."""
    hist = landing.hist
    nt = landing.touched[0]
    ids, hg, hn = compact(hist, nt, keep)
    clear(hist, nt)
    return Packed(g=landing.g[:2].copy(), w=landing.w.copy(), count=landing.count.copy(), r=landing.sums.r.copy(),
                  n=landing.sums.n.copy(), ids=ids, hg=hg, hn=hn)


@njit(cache=True, nogil=True)
def open_landing(landing):
    """Zero a Landing's sums before the shards' Packed are added (its histograms are clear: advance clears
    them)."""
    landing.g[:] = 0.0
    landing.w[:] = 0.0
    landing.count[:] = 0
    landing.sums.r[:] = 0.0
    landing.sums.n[:] = 0.0
    landing.touched[:] = 0


@njit(cache=True, nogil=True)
def add_landing(landing, packed):
    """Add one shard's Packed into the driver's Landing."""
    landing.g[:2] += packed.g
    landing.w[:] += packed.w
    landing.count[:] += packed.count
    landing.sums.r[:] += packed.r
    landing.sums.n[:] += packed.n
    dense = landing.hist.dense
    d = dense.shape[1] - 1
    nt = landing.touched[0]
    for i in range(packed.ids.shape[0]):
        f = packed.ids[i]
        if dense[f, d] < 0.0:
            dense[f, :] = 0.0
            landing.hist.touched[nt] = f
            nt += 1
        for q in range(d):
            dense[f, q] += packed.hg[i, q]
        dense[f, d] += packed.hn[i]
    landing.touched[0] = nt


@njit(cache=True, nogil=True)
def _set_leaf(nodes, node, g, n, lam):
    """A node's G (d values) and N, and its value as a leaf: the first component's G / (N + lam) (a per-label
    tree's leaf value; a shared tree's leaves get theirs per label afterwards)."""
    nodes.gsum[node, :] = g
    nodes.tree.count[node] = n
    nodes.tree.value[node] = g[0] / (n + lam) if n + lam > 0.0 else 0.0


@njit(cache=True, nogil=True)
def _node_sums(nodes, node):
    return StateSums(nodes.sums.r[node], nodes.sums.n[node])


@njit(cache=True, nogil=True)
def _land_sums(nodes, node, landing):
    """The per-state sums a scan left in the landing, as the node's."""
    nodes.sums.r[node, :, :] = landing.sums.r
    nodes.sums.n[node, :] = landing.sums.n


@njit(cache=True, nogil=True)
def _hist_bytes(ids, g):
    """The bytes of a Compact histogram's arrays (ids int32, g and n float64)."""
    return ids.shape[0] * 4 + g.size * 8 + ids.shape[0] * 8


@njit(cache=True, nogil=True)
def _drop(kept, node):
    """Take a leaf's kept histogram off the books (its arrays may live on in the caller)."""
    kept.held[0] -= _hist_bytes(kept.ids[node], kept.g[node])
    kept.ids[node] = np.empty(0, dtype=np.int32)
    kept.g[node] = np.empty((0, kept.g[node].shape[1]))
    kept.n[node] = np.empty(0)
    kept.length[node] = 0


@njit(cache=True, nogil=True)
def _keep(kept, node, hist, h, gain, budget):
    """Keep a leaf's Compact histogram (first h entries) until it is split, in arrays of its own size when
    it sits in much larger ones (a parent's, which subtract wrote over); then, while the kept histograms hold
    more than ``budget`` bytes, drop the one of the leaf with the lowest candidate gain (gain: per node)."""
    if 2 * h < hist.ids.shape[0]:
        hist = Compact(ids=hist.ids[:h].copy(), g=hist.g[:h].copy(), n=hist.n[:h].copy())
    kept.ids[node] = hist.ids
    kept.g[node] = hist.g
    kept.n[node] = hist.n
    kept.length[node] = h
    kept.held[0] += _hist_bytes(hist.ids, hist.g)
    while kept.held[0] > budget:
        low = -1
        for v in range(kept.length.shape[0]):
            if kept.ids[v].shape[0] > 0 and (low < 0 or gain[v] < gain[low]):
                low = v
        if low < 0:
            break
        _drop(kept, low)


@njit(cache=True, nogil=True)
def _candidate(growth, node, hist, h):
    """A new leaf's best split (the feature split on near-ties) from its Compact histogram (first h entries); a
    leaf that may ever be split keeps that histogram until it is (within settings.kept_bytes). The yes share of
    a feature split tells the data side which child to scan."""
    nodes = growth.nodes
    settings = growth.settings
    ok = growth.ok
    g = nodes.gsum[node]
    n = nodes.tree.count[node]
    fg, ff, share = best_feature(hist, h, g, n, settings, ok.binary, growth.gains)
    fg, ff, share = best_of((fg, np.int64(ff), share),
                            best_threshold(hist, h, g, n, ok.numeric, ok.unrouted, settings), n)
    sg = best_state(_node_sums(nodes, node), nodes.tree.states[node], g, n, settings, growth.left)
    nodes.cand.share[node] = share
    if record_candidate(nodes.cand, node, fg, ff, sg, growth.left, settings, n):
        _queue_leaf(growth, node)
        _keep(growth.kept, node, hist, h, nodes.cand.gain, settings.kept_bytes)


@njit(cache=True, nogil=True)
def _fresh_candidate(growth, node, landing):
    """A new leaf's candidate from the histogram just scanned for it (in the landing), which is cleared."""
    hist = landing.hist
    nt = landing.touched[0]
    fresh = Compact(*compact(hist, nt, growth.ok.keep))
    clear(hist, nt)
    _candidate(growth, node, fresh, fresh.ids.shape[0])


@njit(cache=True, nogil=True)
def _children_candidates(growth, pair, landing, parent):
    """Best splits of two new children pair = (scanned, other, do_scanned, do_other): the scanned child's from its
    fresh histogram (in the landing), the other's from the parent's Compact histogram (parent[0], of length
    parent[1]) minus it."""
    scanned, other, do_scanned, do_other = pair
    hist = landing.hist
    nt = landing.touched[0]
    if do_scanned:
        fresh = Compact(*compact(hist, nt, growth.ok.keep))
        _candidate(growth, scanned, fresh, fresh.ids.shape[0])
    if do_other:
        p_hist, p_len = parent
        h = subtract(p_hist.ids, p_hist.g, p_hist.n, p_len, hist.dense)
        _candidate(growth, other, p_hist, h)
    clear(hist, nt)


@njit(cache=True, nogil=True)
def _routed_candidate(growth, node, with_hist, landing):
    """A routed node's sums and value from its scan (in the landing) and, with_hist, its candidate split with
    each feature judged where its variable is known. Clears the landing's histograms."""
    nodes = growth.nodes
    settings = growth.settings
    ok = growth.ok
    g = landing.g[0]
    n = landing.w[0]
    _land_sums(nodes, node, landing)
    _set_leaf(nodes, node, g, n, settings.lam)
    hists = (landing.hist, landing.var_hist)
    if with_hist and n >= 2.0 * settings.min_leaf and n > 0.0:
        hist = Compact(*compact(hists[0], landing.touched[0], ok.keep))
        m = hist.ids.shape[0]
        fg, ff, share = best_feature_known(hist, m, g, n, growth.fvar, hists[1].dense, settings, ok.binary,
                                           growth.gains)
        known = Known(fvar=growth.fvar, missing=hists[1].dense)
        fg, ff, share = best_of((fg, np.int64(ff), share), best_threshold(hist, m, g, n, ok.numeric, known, settings),
                                n)
        sg = best_state(_node_sums(nodes, node), nodes.tree.states[node], g, n, settings, growth.left)
        if record_candidate(nodes.cand, node, fg, ff, sg, growth.left, settings, n):
            _queue_leaf(growth, node)
        nodes.cand.share[node] = share
    clear(hists[0], landing.touched[0])
    clear(hists[1], landing.touched[1])


@njit(cache=True, nogil=True)
def _is_queued_leaf(nodes, queue, i):
    """Whether heap entry i is still a leaf that may be split with the gain it was queued with."""
    node = queue.node[i]
    return (nodes.tree.kind[node] == LEAF and nodes.tree.yes[node] < 0
            and nodes.cand.gain[node] == queue.gain[i])


@njit(cache=True, nogil=True)
def _sift_down(queue, i):
    """Move heap entry i down until neither child holds a larger gain."""
    gain, node = queue.gain, queue.node
    n = queue.size[0]
    while True:
        top = i
        for c in (2 * i + 1, 2 * i + 2):
            if c < n and gain[c] > gain[top]:
                top = c
        if top == i:
            return
        gain[i], gain[top] = gain[top], gain[i]
        node[i], node[top] = node[top], node[i]
        i = top


@njit(cache=True, nogil=True)
def _queue_leaf(growth, node):
    """Queue a leaf whose candidate (gain > min_gain) was just recorded. A full heap is first rebuilt from the
    leaves it holds that are still live, one entry per node (then it has room: a leaf is a node)."""
    queue = growth.queue
    gain, heap_node = queue.gain, queue.node
    if queue.size[0] == gain.shape[0]:
        kept = np.zeros(gain.shape[0], dtype=np.bool_)
        n = 0
        for i in range(queue.size[0]):
            if _is_queued_leaf(growth.nodes, queue, i) and not kept[heap_node[i]]:
                kept[heap_node[i]] = True
                gain[n] = gain[i]
                heap_node[n] = heap_node[i]
                n += 1
        queue.size[0] = n
        for i in range(n // 2 - 1, -1, -1):
            _sift_down(queue, i)
    i = queue.size[0]
    queue.size[0] += 1
    gain[i] = growth.nodes.cand.gain[node]
    heap_node[i] = node
    while i > 0 and gain[(i - 1) // 2] < gain[i]:
        up = (i - 1) // 2
        gain[i], gain[up] = gain[up], gain[i]
        heap_node[i], heap_node[up] = heap_node[up], heap_node[i]
        i = up


@njit(cache=True, nogil=True)
def _best_leaf(nodes, queue):
    """The leaf to expand next: the largest candidate gain, the lowest node id among near-ties (TIE, and the
    tie_slack of both leaves' weights); -1 if none. Entries of leaves no longer live are popped off the top;
    the near-ties are the heap's entries within the widest slack any two weights give (the root's weight is the
    largest), checked against the exact rule."""
    gain, heap_node, found, stack = queue.gain, queue.node, queue.found, queue.stack
    while queue.size[0] > 0 and not _is_queued_leaf(nodes, queue, 0):
        last = queue.size[0] - 1
        gain[0] = gain[last]
        heap_node[0] = heap_node[last]
        queue.size[0] = last
        _sift_down(queue, 0)
    if queue.size[0] == 0:
        return -1
    count = nodes.tree.count
    top = gain[0]
    bound = top * (1.0 - TIE) - tie_slack(4.0 * count[0])  # (2: two weights; 4: a routed child's rounding)
    n_found = 0
    stack[0] = 0
    depth = 1
    top_node = heap_node[0]
    while depth > 0:
        depth -= 1
        i = stack[depth]
        if gain[i] < bound:
            continue  # (and its subtree: no entry below is larger)
        if _is_queued_leaf(nodes, queue, i):
            found[n_found] = heap_node[i]
            n_found += 1
            if gain[i] == top and heap_node[i] < top_node:
                top_node = heap_node[i]
        for c in (2 * i + 1, 2 * i + 2):
            if c < queue.size[0]:
                stack[depth] = c
                depth += 1
    top_n = count[top_node]
    best = -1
    for j in range(n_found):
        node = found[j]
        if nodes.cand.gain[node] >= top * (1.0 - TIE) - tie_slack(top_n + count[node]) and (best < 0 or node < best):
            best = node
    return best


@njit(cache=True, nogil=True)
def _step(kind, node, a, b, feature, scan_child, with_states, with_hist, states, share):
    return Step(kind=np.int64(kind), node=np.int64(node), a=np.int64(a), b=np.int64(b), feature=np.int64(feature),
                scan=np.int64(scan_child), with_states=with_states, with_hist=with_hist, states=states,
                share=float(share))


@njit(cache=True, nogil=True)
def _states_of(tree, node, a, b):
    """The Step's states: of the node and of its children a, b (-1: the node's)."""
    S = tree.states.shape[1]
    out = np.empty((3, S), dtype=np.bool_)
    out[0] = tree.states[node]
    out[1] = tree.states[a if a >= 0 else node]
    out[2] = tree.states[b if b >= 0 else node]
    return out


@njit(cache=True, nogil=True)
def first_step(growth, n_positions):
    """The root's Step: scan every position (its histogram only if the tree may split)."""
    splittable = growth.settings.max_leaves > 1 and n_positions > 0
    return _step(ROOT, 0, -1, -1, -1, -1, splittable, splittable, _states_of(growth.nodes.tree, 0, -1, -1), 0.5)


@njit(cache=True, nogil=True)
def _next_split(growth):
    """Expand the leaf with the largest gain (the lowest node id among near-ties): its children's node arrays
    and the Step that partitions its positions; DONE when the tree has its leaves or no leaf gains."""
    nodes = growth.nodes
    tree = nodes.tree
    cand = nodes.cand
    counts = growth.counts
    settings = growth.settings
    routed = growth.fvar.shape[0] > 0
    if counts[1] >= settings.max_leaves:
        return _step(DONE, -1, -1, -1, -1, -1, False, False, np.zeros((3, 0), dtype=np.bool_), 0.5)
    best = _best_leaf(nodes, growth.queue)
    if best < 0:
        return _step(DONE, -1, -1, -1, -1, -1, False, False, np.zeros((3, 0), dtype=np.bool_), 0.5)
    a = counts[0]
    b = a + 1
    counts[0] += 2
    counts[1] += 1
    last = counts[1] >= settings.max_leaves  # the children stay leaves: no histograms needed
    tree.kind[best] = cand.kind[best]
    tree.yes[best] = a
    tree.no[best] = b
    S = tree.states.shape[1]
    if tree.kind[best] == FEATURE:
        f = cand.feature[best]
        tree.feature[best] = f
        tree.states[a, :] = tree.states[best]
        tree.states[b, :] = tree.states[best]
        valid = valid_states(tree.states[best], growth.allowed_k, growth.mid)
        with_states = (valid.w_start > 0.0) + valid.m >= 2
        # the child with the smaller weight is scanned, the other is its parent minus it
        small = -1 if last or routed else (a if cand.share[best] <= 0.5 else b)
        return _step(FEATURE_SPLIT, best, a, b, f, small, with_states, not last, _states_of(tree, best, a, b),
                     cand.share[best])
    rs, ns = nodes.sums
    for s in range(S):
        tree.states[a, s] = tree.states[best, s] and cand.states[best, s]
        tree.states[b, s] = tree.states[best, s] and not cand.states[best, s]
        if not routed:  # a state split's children have their parent's sums for the states they keep
            for child in (a, b):
                on = tree.states[child, s]
                for q in range(rs.shape[2]):
                    rs[child, s, q] = rs[best, s, q] if on else 0.0
                ns[child, s] = ns[best, s] if on else 0.0
    return _step(STATE_SPLIT, best, a, b, -1, -1, False, not last, _states_of(tree, best, a, b), 0.5)


@njit(cache=True, nogil=True)
def advance(growth, step, landing):
    """The decision side of a Step done: the new nodes' sums, values and candidate splits from the landing (whose
    histograms it clears), then the next Step."""
    nodes = growth.nodes
    settings = growth.settings
    lam = settings.lam
    min_leaf = settings.min_leaf
    kind = step.kind
    if growth.fvar.shape[0] > 0:  # routing: every new node was scanned on its own, a then b
        if kind == FEATURE_SPLIT and landing.surr_feature.shape[0] > 0:
            nodes.tree.surr_feature[step.node, :] = landing.surr_feature
            nodes.tree.surr_same[step.node, :] = landing.surr_same
        if kind == FEATURE_SPLIT or kind == STATE_SPLIT:
            _routed_candidate(growth, step.a, step.with_hist, landing)
            return _step(RESCAN, step.b, -1, -1, -1, -1, False, step.with_hist,
                         _states_of(nodes.tree, step.b, -1, -1), 0.5)
        _routed_candidate(growth, step.node, step.with_hist, landing)
        return _next_split(growth)
    if kind == ROOT:
        _set_leaf(nodes, 0, landing.g[0], landing.w[0], lam)
        if step.with_hist:
            _land_sums(nodes, 0, landing)
            _fresh_candidate(growth, 0, landing)
        return _next_split(growth)
    if kind == RESCAN:
        _fresh_candidate(growth, step.node, landing)
        return _next_split(growth)
    node = step.node
    a = step.a
    b = step.b
    kept = growth.kept
    parent = (Compact(ids=kept.ids[node], g=kept.g[node], n=kept.n[node]), kept.length[node])
    rescan = parent[1] == 0  # no histogram kept (kept_bytes): the second child is scanned as well
    _drop(kept, node)
    wa = landing.w[0]
    wb = landing.w[1]
    _set_leaf(nodes, a, landing.g[0], wa, lam)
    _set_leaf(nodes, b, landing.g[1], wb, lam)
    if not step.with_hist:
        return _next_split(growth)
    split_a = wa >= 2.0 * min_leaf and wa > 0.0
    split_b = wb >= 2.0 * min_leaf and wb > 0.0
    if kind == FEATURE_SPLIT:
        small = step.scan
        large = b if small == a else a
        split_small, split_large = (split_a, split_b) if small == a else (split_b, split_a)
        if step.with_states:
            _land_sums(nodes, small, landing)
            rs, ns = nodes.sums
            rs[large] = rs[node] - rs[small]
            ns[large] = ns[node] - ns[small]
    else:
        small, large, split_small, split_large = a, b, split_a, split_b
    _children_candidates(growth, (small, large, split_small, split_large and not rescan), landing, parent)
    if rescan and split_large:
        return _step(RESCAN, large, -1, -1, -1, -1, False, True, _states_of(nodes.tree, large, -1, -1), 0.5)
    return _next_split(growth)


@njit(cache=True, nogil=True)
def shard_steps(shards, which, steps, landing, keeps):
    """shard_step of steps[i] on the tree which[i] of ``shards`` (a typed List of one shard's ShardGrowth, each
    replaced by its successor) for every i: their Packed Landings, in order (keeps: per tree, pack_landing's
    keep)."""
    out = List()
    for i in range(which.shape[0]):
        j = which[i]
        shards[j] = shard_step(shards[j], steps[i], landing)
        out.append(pack_landing(landing, keeps[j]))
    return out


@njit(cache=True, nogil=True)
def advance_all(growths, steps, active, landing, replies):
    """advance for the trees ``active`` (indices into the typed Lists growths and steps) whose Steps every shard
    has done: replies[w][i] is shard w's Packed Landing of tree active[i]; each tree's are added up into
    ``landing`` and the tree decides its next Step, all in one compiled call: passing a Growth between Python
    and compiled code costs more than most Steps take."""
    for i in range(active.shape[0]):
        j = active[i]
        open_landing(landing)
        for w in range(len(replies)):
            add_landing(landing, replies[w][i])
        steps[j] = advance(growths[j], steps[j], landing)


@njit(cache=True, nogil=True)
def add_up(landing, replies, which, keeps):
    """Each tree's Packed Landings in ``replies`` (replies[w][i]: part w's of tree which[i]) added up into one
    Packed per tree (keeps: per tree, pack_landing's keep): what a shard passes up the cluster's reduction tree
    (cluster.py) for itself and the shards below it."""
    out = List()
    for i in range(which.shape[0]):
        open_landing(landing)
        for w in range(len(replies)):
            add_landing(landing, replies[w][i])
        out.append(pack_landing(landing, keeps[which[i]]))
    return out


@njit(cache=True, nogil=True)
def grown_tree(growth):
    """The Tree grown so far, in arrays of its own size."""
    n = growth.counts[0]
    t = growth.nodes.tree
    return Tree(kind=t.kind[:n].copy(), feature=t.feature[:n].copy(), yes=t.yes[:n].copy(), no=t.no[:n].copy(),
                value=t.value[:n].copy(), count=t.count[:n].copy(), states=t.states[:n].copy(),
                surr_feature=t.surr_feature[:n].copy(), surr_same=t.surr_same[:n].copy(), vector=t.vector[:n].copy())


@njit(cache=True, nogil=True)
def grown_trees(growths):
    """grown_tree of each Growth of a typed List, as a typed List (a Growth is costly to box into Python)."""
    out = List()
    for growth in growths:
        out.append(grown_tree(growth))
    return out


@njit(cache=True, nogil=True)
def shard_segments(shard, n_nodes):
    """The Segments of a shard's positions in a grown tree's n_nodes nodes (empty where values were routed)."""
    if routes_missing(shard.missing):
        return Segments(pos=shard.slots.pos[:0].copy(), start=shard.pstart[:0].copy(), length=shard.plen[:0].copy(),
                        share=np.empty(0))
    return Segments(pos=shard.slots.pos[:shard.used[0]].copy(), start=shard.pstart[:n_nodes].copy(),
                    length=shard.plen[:n_nodes].copy(), share=np.empty(0))


@njit(cache=True, nogil=True)
def influential_positions(target, positions, trim):
    """Influence trimming: the positions with some residual (the Target's, D or its LowRank) of magnitude >=
    ``trim`` (all of them if none has), without the T x S temporaries a numpy expression would make for every
    label of a round."""
    S = target.allowed_k.shape[0]
    d = width(target)
    low_rank = is_low_rank(target.low)
    every = Valid(w_start=1.0, mid=np.arange(1, S), m=S - 1)
    cells = StateSums(np.empty((S, d)), np.empty(S))  # a LowRank position's D[t, s] (invalid cells hold 0)
    unweighted = np.empty(0)
    keep = np.empty(positions.shape[0], dtype=positions.dtype)
    n = 0
    for i in range(positions.shape[0]):
        t = positions[i]
        if low_rank:
            state_sums(target, positions, i, i + 1, every, unweighted, cells)
        big = False
        for s in range(S):
            for q in range(d):
                if abs(cells.r[s, q] if low_rank else target.D[t, s, q]) >= trim:
                    big = True
        if big:
            keep[n] = t
            n += 1
    return keep[:n].copy() if n > 0 else positions


@njit(cache=True, nogil=True)
def grow_tree(rows, index, target, positions, settings, feature_ok, missing, numeric):
    """Grow one tree best-first to at most settings.max_leaves leaves on the residuals of ``target`` (D: T x S x
    d, d = 1 for a per-label tree), both sides of growth in one loop.

    rows: the training Rows (of atoms); index: their ColumnIndex (sparse.csc_index, built once per training set);
    positions: the positions this tree is fitted on (sorted here if they are not ascending); feature_ok (bool
    per atom): the features and numeric columns' bins it may split on (column subsampling); missing: a
    MissingIndex (trees.no_missing() for rows without missing values); numeric: the atoms' NumericIndex
    (numeric.no_numeric() for binary rows). Returns a Grown tree: the Tree and, without missing
    values, the Segments of its nodes."""
    if target.is_start.shape[0] >= 2 ** 31:
        raise ValueError(TOO_MANY_POSITIONS)
    S = target.allowed_k.shape[0]
    d = width(target)
    n_surrogates = settings.n_surrogates if routes_missing(missing) else 0
    growth = new_growth(settings, S, d, feature_ok, numeric, missing, target.allowed_k)
    shard = new_shard(rows, index, numeric, missing, target, positions, settings.max_leaves, n_surrogates)
    landing = new_landing(feature_ok.shape[0], missing.n_vars if routes_missing(missing) else 0, S, d,
                          n_surrogates, True)
    step = first_step(growth, positions.shape[0])
    while step.kind != DONE:
        shard = shard_step(shard, step, landing)
        step = advance(growth, step, landing)
    return Grown(grown_tree(growth), shard_segments(shard, growth.counts[0]))


# The int64 fields of a Mailbox: the number of the Step posted last, of the Step claimed last (by the helper, or by
# the driver when the helper had not taken it), of the Step the helper finished last, whether the driver goes on
# alone, a stop flag (either side failed), then the posted Step's own fields.
(POSTED, CLAIMED, FINISHED, SOLO, STOPPED, KIND, NODE, CHILD_A, CHILD_B, TEST, SCAN, WITH_STATES,
 WITH_HIST) = range(13)
SPINS = 2000  # reads of a flag a waiting thread makes before it yields the CPU between reads (about 10 us)
# The driver goes on alone once it has waited for the helper longer than this share of its own work, plus
# STALL_CYCLES (a few ms): the helper is not getting a core (a busy machine). On a free one the waits are the
# halves' imbalance, a small share.
STALL_SHARE = 0.5
STALL_CYCLES = 10_000_000


class Mailbox(NamedTuple):
    """What grow_tree_threads' two threads share: ``box`` (int64: the fields above), the posted Step's share
    (float64, 1) and states (3 x S), and ``second``, the second shard's ShardGrowth (a typed List of one: the
    thread that runs a Step on it puts its successor there).

    The driver writes a Step, then its number with release ordering; whoever claims that number first (an atomic
    compare-exchange) runs the second shard's part of it. The helper, spinning on the number, claims it at once
    when it has a core. When it has none (a busy machine), the driver claims the Steps it has not taken; and once
    the driver has waited too long for it (STALL_SHARE), the driver goes on alone (SOLO) and the helper returns.
    Either way the second shard's part is the same arithmetic, so the tree does not depend on which thread ran
    what."""
    box: np.ndarray
    share: np.ndarray
    states: np.ndarray
    second: object


@njit(cache=True, nogil=True)
def new_mailbox(second, S):
    """A Mailbox holding the second shard (made here: typed List calls from Python compile anew in every
    process)."""
    held = List()
    held.append(second)
    return Mailbox(box=np.zeros(WITH_HIST + 1, dtype=np.int64), share=np.zeros(1),
                   states=np.zeros((3, S), dtype=np.bool_), second=held)


@njit(cache=True, nogil=True)
def _post(mail, step, number):
    box = mail.box
    box[KIND] = step.kind
    box[NODE] = step.node
    box[CHILD_A] = step.a
    box[CHILD_B] = step.b
    box[TEST] = step.feature
    box[SCAN] = step.scan
    box[WITH_STATES] = step.with_states
    box[WITH_HIST] = step.with_hist
    mail.share[0] = step.share
    if step.states.shape[1] == mail.states.shape[1]:  # (a DONE Step has none)
        mail.states[:] = step.states
    store_release(box, POSTED, number)


@njit(cache=True, nogil=True)
def _posted(mail):
    box = mail.box
    return _step(box[KIND], box[NODE], box[CHILD_A], box[CHILD_B], box[TEST], box[SCAN], box[WITH_STATES] != 0,
                 box[WITH_HIST] != 0, mail.states, mail.share[0])


@njit(cache=True, nogil=True)
def _wait(box, field, number):
    """Wait until box[field] reaches ``number``: True, or False once a side has stopped."""
    spins = 0
    while load_acquire(box, field) < number:
        if load_acquire(box, STOPPED) != 0:
            return False
        spins += 1
        if spins > SPINS:
            yield_cpu()
    return True


@njit(cache=True, nogil=True)
def grow_driver(growth, shard, landing, other, mail, n_positions):
    """The first thread of grow_tree_threads: both sides of growth over its shard, each Step posted for the second
    shard first (unless SOLO is set: then this thread runs both parts); the second shard's Landing (``other``, from
    the helper or from this thread) is added to its own before the decision. Returns the shard (its last
    successor)."""
    box = mail.box
    step = first_step(growth, n_positions)
    number = 0
    worked = 0  # cycles spent on this shard's parts, and waiting for the helper's
    waited = 0
    while step.kind != DONE:
        number += 1
        if box[SOLO] != 0:  # (no clock: nothing is waited for any more)
            shard = shard_step(shard, step, landing)
            mail.second[0] = shard_step(mail.second[0], step, other)
        else:
            _post(mail, step, number)
            t0 = cycles()
            shard = shard_step(shard, step, landing)
            t1 = cycles()
            worked += t1 - t0
            if compare_exchange(box, CLAIMED, number - 1, number):
                mail.second[0] = shard_step(mail.second[0], step, other)
            else:
                if not _wait(box, FINISHED, number):
                    return shard
                waited += cycles() - t1
                if waited > STALL_SHARE * worked + STALL_CYCLES:
                    store_release(box, SOLO, 1)
        add_landing(landing, pack_landing(other, growth.ok.keep))
        step = advance(growth, step, landing)
    _post(mail, step, number + 1)
    return shard


@njit(cache=True, nogil=True)
def grow_helper(landing, mail):
    """The second thread of grow_tree_threads: the second shard's part of every posted Step it claims, into
    ``landing``. Returns when a DONE Step is posted, the driver goes on alone or a side has stopped."""
    box = mail.box
    seen = 0
    spins = 0
    while load_acquire(box, STOPPED) == 0 and load_acquire(box, SOLO) == 0:
        number = load_acquire(box, POSTED)
        if number == seen:
            spins += 1
            if spins > SPINS:
                yield_cpu()
            continue
        seen = number
        spins = 0
        if not compare_exchange(box, CLAIMED, number - 1, number):
            continue  # the driver ran it
        step = _posted(mail)  # the driver posts no other Step until this one is finished
        if step.kind == DONE:
            return
        mail.second[0] = shard_step(mail.second[0], step, landing)
        store_release(box, FINISHED, number)


@njit(cache=True, nogil=True)
def joined_segments(kind, shard, mail):
    """The Segments of a tree's leaves from its two shards' (the first shard's, then the Mailbox's second: each
    leaf's positions ascending, as the first shard's all come before the second's). Internal nodes get empty
    segments: what reads Segments reads leaves."""
    n = kind.shape[0]
    first = shard_segments(shard, n)
    second = shard_segments(mail.second[0], n)
    start = np.zeros(n, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    for node in range(n):
        if kind[node] == LEAF:
            length[node] = first.length[node] + second.length[node]
    pos = np.empty(length.sum(), dtype=first.pos.dtype)
    c = 0
    for node in range(n):
        if kind[node] != LEAF:
            continue
        start[node] = c
        for part in (first, second):
            m = part.length[node]
            pos[c:c + m] = part.pos[part.start[node]:part.start[node] + m]
            c += m
    return Segments(pos=pos, start=start, length=length, share=np.empty(0))


def _helper(landing, mail):
    try:
        grow_helper(landing, mail)
    except BaseException:
        mail.box[STOPPED] = 1  # the driver stops waiting
        raise


def grow_tree_threads(rows, index, target, positions, settings, feature_ok, numeric, threads: int = 2) -> Grown:
    """grow_tree over two shards of the positions, on two threads, for rows without missing values: the first and
    second half of the positions (ascending) are a shard each, each shard's data side is run by its own thread (the
    kernels release the GIL; see Mailbox) and their Landings are added up before every decision, as a cluster's
    are. The tree is grow_tree's up to the order of the additions (a sum of two halves), and the same whichever
    thread ran which part, with ``threads`` 1 (one thread runs both shards) too. Its Segments hold the
    leaves'."""
    if target.is_start.shape[0] >= 2 ** 31:
        raise ValueError(TOO_MANY_POSITIONS)
    positions = np.sort(positions) if np.any(np.diff(positions) < 0) else positions
    half = len(positions) // 2
    S = target.allowed_k.shape[0]
    d = width(target)
    missing = no_missing()
    growth = new_growth(settings, S, d, feature_ok, numeric, missing, target.allowed_k)
    shards = [new_shard(rows, index, numeric, missing, target, part, settings.max_leaves, 0)
              for part in (positions[:half], positions[half:])]
    landings = [new_landing(feature_ok.shape[0], 0, S, d, 0, True) for _ in shards]
    mail = new_mailbox(shards[1], S)
    if threads < 2:
        mail.box[SOLO] = 1
        first = grow_driver(growth, shards[0], landings[0], landings[1], mail, len(positions))
        return _grown(growth, first, mail)
    with ThreadPoolExecutor(1) as pool:
        helper = pool.submit(_helper, landings[1], mail)
        try:
            first = grow_driver(growth, shards[0], landings[0], landings[1], mail, len(positions))
        finally:
            mail.box[STOPPED] = 1  # the helper stops waiting, whatever happened here
        helper.result()  # raises the helper's exception: the driver stops early only on one
    return _grown(growth, first, mail)


def _grown(growth, first, mail) -> Grown:
    tree = grown_tree(growth)
    return Grown(tree, joined_segments(tree.kind, first, mail))
