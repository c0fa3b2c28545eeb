"""The one grower: best-first regression trees over (position, previous-state) examples.

A node is a product P x A: a set of positions times a set of previous states (intersected with validity). A
feature split partitions P (feature present / absent, or on a numeric column x <= u / x > u: numeric.py; a test
is a range of the rows' ids either way) and keeps A; a state split partitions A and keeps P. The leaf with the
largest candidate gain (split.py) is expanded next, until ``max_leaves``.

A node's positions sit in a segment of Slots (histogram.py) and the grower scans as little as it can. Without
missing values the slots carry each position's r_t: a feature split partitions the segment in place (stable),
moving r_t along and summing both children's G and N on the way; only the child with fewer positions is scanned
for its feature histogram and per-state sums, the other's are the parent's minus those. A state split copies the
segment for its second child and computes both children's r_t and the first child's feature histogram in one
pass (the second's is the parent's minus it); their per-state sums are the parent's. A leaf that may still be
split keeps its histogram in compact form (the features it touches that the tree may split on, G, N) until it
is split, within a budget (GrowSettings.kept_bytes): past it, the leaves least likely to be split next give
theirs up, and a leaf without one has both children scanned.

Where values are missing (a MissingIndex with a routing rule), the slots carry weights instead and a split
routes its positions by missing.route, so one missing position may go to both children: a child is then no
longer its parent minus its sibling, and every new node is scanned for its own sums and histograms (its
features judged on the examples where their variable is known, surrogates ranked by split.surrogates).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .histogram import (Hist, Pass, Slots, StateSums, Valid, add_low_rank, clear, compact, is_low_rank, scan,
                        scan_state_split, scan_weighted, subtract, valid_states, width)
from .intrinsics import with_room
from .partition import partition, partition_routed
from .split import (Allowed, Candidates, Compact, SurrogateScratch, best_feature, best_feature_known, best_of,
                    best_state, best_threshold, record_candidate, surrogates)
from .trees import FEATURE, LEAF, TIE, Tree, routes_missing
from ..errors import Errors


TOO_MANY_POSITIONS = Errors.E016  # a constant: the compiled grower raises it


class Nodes(NamedTuple):
    """The arrays of a tree being grown: its Tree (room for every node it may get) plus per node its residual
    sum (gsum, nodes x d), its segment of the slots (pstart, plen), its per-state sums (sums: nodes x S x d and
    nodes x S) and the split it would take as a leaf (cand)."""
    tree: Tree
    gsum: np.ndarray
    pstart: np.ndarray
    plen: np.ndarray
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


@njit(cache=True, nogil=True)
def new_nodes(max_nodes, S, d, n_surrogates):
    return Nodes(Tree(np.zeros(max_nodes, dtype=np.int8), np.full(max_nodes, -1, dtype=np.int32),
                      np.full(max_nodes, -1, dtype=np.int32), np.full(max_nodes, -1, dtype=np.int32),
                      np.zeros(max_nodes), np.zeros(max_nodes), np.zeros((max_nodes, S), dtype=np.bool_),
                      np.full((max_nodes, n_surrogates), -1, dtype=np.int32),
                      np.zeros((max_nodes, n_surrogates), dtype=np.bool_), np.zeros((max_nodes, 0))),
                 np.zeros((max_nodes, d)),
                 np.zeros(max_nodes, dtype=np.int64), np.zeros(max_nodes, dtype=np.int64),
                 StateSums(np.zeros((max_nodes, S, d)), np.zeros((max_nodes, S))),
                 Candidates(np.full(max_nodes, -1.0), np.zeros(max_nodes, dtype=np.int8),
                            np.full(max_nodes, -1, dtype=np.int32), np.zeros((max_nodes, S), dtype=np.bool_),
                            np.full(max_nodes, 0.5)))


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
        hist = Compact(hist.ids[:h].copy(), hist.g[:h].copy(), hist.n[:h].copy())
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
def _candidate(nodes, node, hist, h, kept, settings, ok, gains, left):
    """A new leaf's best split (the feature split on near-ties) from its Compact histogram (first h entries); a
    leaf that may ever be split keeps that histogram in ``kept`` until it is (within settings.kept_bytes)."""
    g = nodes.gsum[node]
    n = nodes.tree.count[node]
    fg, ff = best_feature(hist, h, g, n, settings, ok.binary, gains)
    fg, ff, _ = best_of((fg, np.int64(ff), 0.5), best_threshold(hist, h, g, n, ok.numeric, ok.unrouted, settings))
    sg = best_state(_node_sums(nodes, node), nodes.tree.states[node], g, n, settings, left)
    if record_candidate(nodes.cand, node, fg, ff, sg, left, settings):
        _keep(kept, node, hist, h, nodes.cand.gain, settings.kept_bytes)


@njit(cache=True, nogil=True)
def _fresh_candidate(nodes, node, hist, nt, kept, settings, ok, scratch):
    """A new leaf's candidate from the histogram just scanned for it (hist, nt touched). scratch: (gains, left)."""
    fresh = Compact(*compact(hist, nt, ok.keep))
    _candidate(nodes, node, fresh, fresh.ids.shape[0], kept, settings, ok, scratch[0], scratch[1])


@njit(cache=True, nogil=True)
def _children_candidates(nodes, pair, hist, nt, parent, kept, settings, ok, scratch):
    """Best splits of two new children pair = (scanned, other, do_scanned, do_other): the scanned child's from its
    fresh histogram (hist, nt touched), the other's from the parent's Compact histogram (parent[0], of length
    parent[1]) minus it. scratch: (gains, left)."""
    scanned, other, do_scanned, do_other = pair
    gains, left = scratch
    if do_scanned:
        _fresh_candidate(nodes, scanned, hist, nt, kept, settings, ok, scratch)
    if do_other:
        p_hist, p_len = parent
        h = subtract(p_hist.ids, p_hist.g, p_hist.n, p_len, hist.dense)
        _candidate(nodes, other, p_hist, h, kept, settings, ok, gains, left)
    clear(hist, nt)


@njit(cache=True, nogil=True)
def _rescanned(nodes, node, where, target, valid, hist, rows, kept, settings, ok, scratch):
    """A new leaf's candidate from a scan of its own, where its parent gave its histogram up (kept_bytes) and
    the leaf cannot be its parent minus its sibling. where: (slots, g scratch of d values); its r_t are set."""
    slots, g = where
    lo = nodes.pstart[node]
    _, nt = scan(slots, lo, lo + nodes.plen[node], Pass(False, False, True), target, valid, _node_sums(nodes, node),
                 hist, rows, g)
    _fresh_candidate(nodes, node, hist, nt, kept, settings, ok, scratch)
    clear(hist, nt)


@njit(cache=True, nogil=True)
def _routed_candidate(nodes, node, slots, target, with_hist, hists, rows, missing, settings, scratch):
    """A new node's sums (and value) from a scan of its weighted slots and, with_hist, its candidate split with
    each feature judged where its variable is known. scratch: (Allowed, gains, mid, left)."""
    ok, gains, mid, left = scratch
    lo = nodes.pstart[node]
    valid = valid_states(nodes.tree.states[node], target.allowed_k, mid)
    sums = _node_sums(nodes, node)
    g = np.empty(nodes.gsum.shape[1])
    n, nt, nmt = scan_weighted(slots, lo, lo + nodes.plen[node], target, valid, sums, with_hist, hists, rows,
                               missing, g)
    _set_leaf(nodes, node, g, n, settings.lam)
    if with_hist and n >= 2.0 * settings.min_leaf and n > 0.0:
        hist = Compact(*compact(hists[0], nt, ok.keep))
        m = hist.ids.shape[0]
        fg, ff, share = best_feature_known(hist, m, g, n, missing.fvar, hists[1].dense, settings, ok.binary, gains)
        fg, ff, share = best_of((fg, np.int64(ff), share),
                                best_threshold(hist, m, g, n, ok.numeric, (missing.fvar, hists[1].dense), settings))
        sg = best_state(sums, nodes.tree.states[node], g, n, settings, left)
        record_candidate(nodes.cand, node, fg, ff, sg, left, settings)
        nodes.cand.share[node] = share
    clear(hists[0], nt)
    clear(hists[1], nmt)


@njit(cache=True, nogil=True)
def _best_leaf(nodes, n_nodes, min_gain):
    """The leaf to expand next: the largest candidate gain, the lowest node id among near-ties; -1 if none."""
    kind = nodes.tree.kind
    yes = nodes.tree.yes
    cgain = nodes.cand.gain
    top = 0.0
    for node in range(n_nodes):
        if kind[node] == LEAF and yes[node] < 0 and cgain[node] > min_gain and cgain[node] > top:
            top = cgain[node]
    if top <= 0.0:
        return -1
    for node in range(n_nodes):
        if kind[node] == LEAF and yes[node] < 0 and cgain[node] >= top * (1.0 - TIE) and cgain[node] > min_gain:
            return node
    return -1


@njit(cache=True, nogil=True)
def influential_positions(target, positions, trim):
    """Influence trimming: the positions with some residual (the Target's, D or its LowRank) of magnitude >=
    ``trim`` (all of them if none has), without the T x S temporaries a numpy expression would make for every
    label of a round."""
    D = target.D
    S = D.shape[1]
    d = width(target)
    low_rank = is_low_rank(target.low)
    cells = np.empty((S if low_rank else 0, d))
    every = Valid(1.0, np.arange(1, S), S - 1)
    keep = np.empty(positions.shape[0], dtype=positions.dtype)
    n = 0
    for i in range(positions.shape[0]):
        t = positions[i]
        big = False
        if low_rank:
            cells[:] = 0.0
            add_low_rank(target.low, t, target.is_start[t], every, 1.0, cells, -1)
        for s in range(S):
            for q in range(d):
                if abs(cells[s, q] if low_rank else D[t, s, q]) >= trim:
                    big = True
        if big:
            keep[n] = t
            n += 1
    return keep[:n].copy() if n > 0 else positions


@njit(cache=True, nogil=True)
def grow_tree(rows, index, target, positions, settings, feature_ok, missing, numeric):
    """Grow one tree best-first to at most settings.max_leaves leaves on the residuals of ``target`` (D: T x S x
    d, d = 1 for a per-label tree).

    rows: the training Rows (of atoms); index: their ColumnIndex (sparse.csc_index, built once per training set);
    positions: the positions this tree is fitted on (sorted here if they are not ascending); feature_ok (bool
    per atom): the features and numeric columns' bins it may split on (column subsampling); missing: a
    MissingIndex (trees.no_missing() for rows without missing values); numeric: the atoms' NumericIndex
    (numeric.no_numeric() for binary rows). Returns a Grown tree: the Tree and, without missing
    values, the Segments of its nodes."""
    T = target.D.shape[0]
    S = target.D.shape[1]
    d = width(target)
    n_features = index.ptr.shape[0] - 1
    if T >= 2 ** 31:
        raise ValueError(TOO_MANY_POSITIONS)
    routed = routes_missing(missing)
    ok = Allowed(feature_ok, feature_ok & (numeric.column < 0) if numeric.column.shape[0] > 0 else feature_ok,
                 numeric, (np.zeros(0, np.int32), np.zeros((0, 0))))
    max_leaves = settings.max_leaves
    lam = settings.lam
    min_leaf = settings.min_leaf
    max_nodes = max(2 * max_leaves - 1, 1)
    nodes = new_nodes(max_nodes, S, d, settings.n_surrogates if routed else 0)
    grown = nodes.tree
    kind, feature, yes, no, states = grown.kind, grown.feature, grown.yes, grown.no, grown.states
    pstart, plen, cand = nodes.pstart, nodes.plen, nodes.cand
    rs, ns = nodes.sums
    kept = LeafHists([np.empty(0, dtype=np.int32) for _ in range(max_nodes)],
                     [np.empty((0, d)) for _ in range(max_nodes)], [np.empty(0) for _ in range(max_nodes)],
                     np.zeros(max_nodes, dtype=np.int64), np.zeros(1, dtype=np.int64))

    n_pos = positions.shape[0]
    # positions as int32 (T < 2**31, checked above): less to move while growing, and half the memory in the
    # result, which the booster holds for every label of a round; grows by a copy of the node at each state split
    pbuf = np.empty(2 * n_pos + 16, dtype=np.int32)
    vbuf = np.empty((2 * n_pos + 16, d))  # r_t, or weights (column 0) when routing
    ascending = True
    for i in range(1, n_pos):
        if positions[i] < positions[i - 1]:
            ascending = False
            break
    pbuf[:n_pos] = positions if ascending else np.sort(positions)
    used = n_pos
    tmp = Slots(np.empty(n_pos + 1, dtype=np.int32), np.empty((n_pos + 1, d)))
    mark = np.zeros(T, dtype=np.bool_)
    dense = np.empty((n_features, d + 1))  # G (d values), N; N < 0: untouched
    dense[:, d] = -1.0
    hist = Hist(dense, np.empty(n_features, dtype=np.int32),
                (np.empty(n_features, dtype=np.int32), np.empty((n_features, d)), np.empty(n_features)))
    gains = np.empty((3, n_features))  # best_feature's scratch
    mid = np.empty(S, dtype=np.int64)
    mid_b = np.empty(S, dtype=np.int64)
    left = np.zeros(S, dtype=np.bool_)
    # routing only: the variables' histogram, the slots that fall to the majority side, surrogate counts
    n_vars = missing.n_vars if routed else 0
    var_dense = np.empty((n_vars, d + 1))
    var_dense[:, d] = -1.0
    var_hist = Hist(var_dense, np.empty(n_vars, dtype=np.int32),
                    (np.empty(0, dtype=np.int32), np.empty((0, d)), np.empty(0)))
    with_surrogates = routed and settings.n_surrogates > 0
    fall = Slots(np.empty(n_pos + 1 if with_surrogates else 0, dtype=np.int32),
                 np.empty((n_pos + 1 if with_surrogates else 0, d)))
    n_cnt = n_features if with_surrogates else 0
    n_mcnt = n_vars if with_surrogates else 0
    counts = SurrogateScratch(np.empty((n_cnt, 2)), np.zeros(n_cnt, dtype=np.bool_), hist.touched,
                              np.empty((n_mcnt, 2)), np.zeros(n_mcnt, dtype=np.bool_), var_hist.touched)

    states[0, :] = True
    plen[0] = n_pos
    n_nodes = 1
    n_leaves = 1
    slots = Slots(pbuf, vbuf)
    ga = np.empty(d)  # the G of a split's two children
    gb = np.empty(d)
    if routed:
        vbuf[:n_pos, 0] = 1.0
        _routed_candidate(nodes, 0, slots, target, max_leaves > 1, (hist, var_hist), rows, missing, settings,
                          (ok, gains, mid, left))
    else:
        # root: r_t, G, N, per-state sums and the feature histogram in one pass
        valid = valid_states(states[0], target.allowed_k, mid)
        splittable = max_leaves > 1 and n_pos > 0
        n, nt = scan(slots, 0, n_pos, Pass(True, splittable, splittable), target, valid, _node_sums(nodes, 0),
                     hist, rows, ga)
        _set_leaf(nodes, 0, ga, n, lam)
        if splittable:
            root = Compact(*compact(hist, nt, ok.keep))
            clear(hist, nt)
            _candidate(nodes, 0, root, root.ids.shape[0], kept, settings, ok, gains, left)

    while n_leaves < max_leaves:
        # expand the leaf with the largest gain (the lowest node id among near-ties)
        best = _best_leaf(nodes, n_nodes, settings.min_gain)
        if best < 0:
            break
        a = n_nodes
        b = n_nodes + 1
        n_nodes += 2
        n_leaves += 1
        last = n_leaves >= max_leaves  # the children stay leaves: no candidates needed
        kind[best] = cand.kind[best]
        yes[best] = a
        no[best] = b
        lo = pstart[best]
        hi = lo + plen[best]
        valid = valid_states(states[best], target.allowed_k, mid)
        parent = (Compact(kept.ids[best], kept.g[best], kept.n[best]), kept.length[best])
        rescan = parent[1] == 0  # no histogram kept (kept_bytes): both children are scanned
        _drop(kept, best)
        if routed:
            pbuf = with_room(pbuf, used + hi - lo)
            vbuf = with_room(vbuf, used + hi - lo)
            slots = Slots(pbuf, vbuf)
        if kind[best] == FEATURE:
            f = cand.feature[best]
            feature[best] = f
            states[a, :] = states[best]
            states[b, :] = states[best]
            if routed:
                if with_surrogates and missing.fvar[f] >= 0:
                    surrogates(slots, lo, hi, f, rows, numeric, missing, counts, grown.surr_feature[best],
                               grown.surr_same[best])
                split = (f, cand.share[best], grown.surr_feature[best], grown.surr_same[best])
                na, nb = partition_routed(slots, lo, hi, used, (tmp, fall), split, rows, numeric, missing,
                                          target.is_start, valid)
                pstart[a] = used
                plen[a] = na
                pstart[b] = lo
                plen[b] = nb
                used += na
            else:
                na, nb, wa, wb = partition(slots, lo, hi, tmp, f, index, mark, rows, numeric, target.is_start,
                                           valid, ga, gb)
                pstart[a] = lo + nb
                plen[a] = na
                pstart[b] = lo
                plen[b] = nb
                _set_leaf(nodes, a, ga, wa, lam)
                _set_leaf(nodes, b, gb, wb, lam)
                if last:
                    break
                split_a = wa >= 2.0 * min_leaf and wa > 0.0
                split_b = wb >= 2.0 * min_leaf and wb > 0.0
                if not (split_a or split_b):
                    continue
                # the child with fewer positions from the data, the other one by subtraction
                small, large = (a, b) if na <= nb else (b, a)
                split_small, split_large = (split_a, split_b) if na <= nb else (split_b, split_a)
                s_lo = pstart[small]
                with_states = (valid.w_start > 0.0) + valid.m >= 2
                _, nt = scan(slots, s_lo, s_lo + plen[small], Pass(False, with_states, True), target, valid,
                             _node_sums(nodes, small), hist, rows, ga)
                if with_states:
                    for s in range(S):
                        for q in range(d):
                            rs[large, s, q] = rs[best, s, q] - rs[small, s, q]
                        ns[large, s] = ns[best, s] - ns[small, s]
                _children_candidates(nodes, (small, large, split_small, split_large and not rescan), hist, nt,
                                     parent, kept, settings, ok, (gains, left))
                if rescan and split_large:
                    _rescanned(nodes, large, (slots, ga), target, valid, hist, rows, kept, settings, ok,
                               (gains, left))
                continue
        else:
            for s in range(S):
                states[a, s] = states[best, s] and cand.states[best, s]
                states[b, s] = states[best, s] and not cand.states[best, s]
            m_len = hi - lo
            pstart[a] = lo
            plen[a] = m_len
            pstart[b] = used
            plen[b] = m_len
            if routed:
                pbuf[used:used + m_len] = pbuf[lo:hi]
                vbuf[used:used + m_len] = vbuf[lo:hi]
                used += m_len
            else:
                for s in range(S):
                    for child in (a, b):
                        on = states[child, s]
                        for q in range(d):
                            rs[child, s, q] = rs[best, s, q] if on else 0.0
                        ns[child, s] = ns[best, s] if on else 0.0
                pbuf = with_room(pbuf, used + m_len)
                vbuf = with_room(vbuf, used + m_len)
                slots = Slots(pbuf, vbuf)
                va = valid_states(states[a], target.allowed_k, mid)
                vb = valid_states(states[b], target.allowed_k, mid_b)
                wa, wb, nt = scan_state_split(slots, lo, hi, used, target, va, vb, not last, hist, rows, ga, gb)
                used += m_len
                _set_leaf(nodes, a, ga, wa, lam)
                _set_leaf(nodes, b, gb, wb, lam)
                if last:
                    break
                split_b = wb >= 2.0 * min_leaf and wb > 0.0
                _children_candidates(nodes, (a, b, wa >= 2.0 * min_leaf and wa > 0.0, split_b and not rescan), hist,
                                     nt, parent, kept, settings, ok, (gains, left))
                if rescan and split_b:
                    _rescanned(nodes, b, (slots, ga), target, vb, hist, rows, kept, settings, ok,
                               (gains, left))
                continue
        for child in (a, b):  # routing: the new nodes' sums and candidates from scans of their own
            _routed_candidate(nodes, child, slots, target, not last, (hist, var_hist), rows, missing, settings,
                              (ok, gains, mid, left))
    tree = Tree(kind[:n_nodes].copy(), feature[:n_nodes].copy(), yes[:n_nodes].copy(), no[:n_nodes].copy(),
                grown.value[:n_nodes].copy(), grown.count[:n_nodes].copy(), states[:n_nodes].copy(),
                grown.surr_feature[:n_nodes].copy(), grown.surr_same[:n_nodes].copy(), grown.vector[:n_nodes].copy())
    if routed:
        return Grown(tree, Segments(pbuf[:0].copy(), pstart[:0].copy(), plen[:0].copy(), np.empty(0)))
    return Grown(tree, Segments(pbuf[:used].copy(), pstart[:n_nodes].copy(), plen[:n_nodes].copy(), np.empty(0)))
