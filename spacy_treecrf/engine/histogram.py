"""One pass over a node's positions: its residual sum G, weight N, per-state sums and feature histogram.

Residuals are vectors of d values per (position, state) cell: d = 1 for a per-label tree (its label's residual),
d > 1 for a shared tree (the residuals of all labels projected on d directions, see booster.py), so G and every
residual sum below are d-vectors while a weight N is one number. A node's statistics come from per-position sums
r_t = sum_{s in A} D[t, s] over its valid states A and counts n_t = |A at t| (1 or 0 at a sequence start, where
only state 0 exists): scanning a node costs O(d (its nonzeros + |P| |A|)), never O(nonzeros x K). A feature
histogram is kept dense over all features while it is filled (``Hist``: rows not touched yet have a negative N;
the touched ones are listed) and compacted to the features the node holds (ids, G, N) once it is complete; a
child's histogram is its parent's minus its sibling's when every position goes to exactly one child
(``subtract``).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .intrinsics import AHEAD, prefetch


class Slots(NamedTuple):
    """A tree's position slots: every node owns a segment pos[lo:hi]; val (slots x d) holds, per slot, the
    position's r_t (unweighted growth) or its weight in val[:, 0] (growth that routes missing values)."""
    pos: np.ndarray
    val: np.ndarray


class Valid(NamedTuple):
    """A node's valid previous states: the weight of a sequence start (1.0 if state 0 reaches it and is
    allowed, else 0.0) and the states > 0 elsewhere, ascending in mid[:m]."""
    w_start: float
    mid: np.ndarray
    m: int


class Hist(NamedTuple):
    """A histogram being filled: dense[f] = (sum of r_t (d values), sum of n_t) over the positions holding f; the
    f with dense[f, d] >= 0 are listed in touched; room: (ids, g, n) with a row per feature, where compact
    gathers the complete histogram (empty where it is never compacted)."""
    dense: np.ndarray
    touched: np.ndarray
    room: tuple


class StateSums(NamedTuple):
    """A node's residual sum r[s] (S x d) and weight n[s] per previous state s (what a state split is chosen
    on)."""
    r: np.ndarray
    n: np.ndarray


class Pass(NamedTuple):
    """What a scan computes besides G and N: r_t into the slots (else read from them), the per-state sums, the
    feature histogram."""
    set_r: bool
    states: bool
    hist: bool


@njit(cache=True, nogil=True)
def valid_states(states_row, allowed_k, mid):
    """The Valid states of a state set for a label that may follow the states in allowed_k (fills ``mid``)."""
    S = states_row.shape[0]
    m = 0
    w_start = 1.0 if states_row[0] and allowed_k[0] else 0.0
    for s in range(1, S):
        if states_row[s] and allowed_k[s]:
            mid[m] = s
            m += 1
    return Valid(w_start=w_start, mid=mid, m=m)


# Speed notes (see benchmarks/results/same_speed_batch_scans.md): a kernel that calls a helper once per position
# pays for the helper's array arguments every call (numba counts references to each array a call binds, with an
# atomic operation, unless it can prove the count unneeded, which it cannot across a helper's loops and
# branches); on hyphenation's shared trees that was most of a scan's time. So the per-position work is done in
# batch kernels called once per node (residual_rows, state_sums, add_rows), each one loop over the node's slots
# reading arrays bound once; a pass more over a node's slots costs far less than the calls did. The kernels
# index rows of 2-d arrays (out[row, i]) rather than take row views, and read D through its 2-d view T x (S d)
# (see flat).


@njit(cache=True, nogil=True)
def flat(D):
    """D (T x S x d, C order) as its T x (S d) view: component q of state s is column s * d + q."""
    return D.reshape((D.shape[0], D.shape[1] * D.shape[2]))


@njit(cache=True, nogil=True)
def is_low_rank(low):
    """Whether a Target's residuals come as this LowRank (trees.NO_LOW_RANK has no directions: they are D)."""
    return low.W.shape[0] > 0


@njit(cache=True, nogil=True)
def width(target):
    """d, the values per residual cell: Target.D's, or its LowRank's."""
    return target.low.W.shape[1] if is_low_rank(target.low) else target.D.shape[2]


@njit(cache=True, nogil=True)
def _low_rank_cells(low, is_start, pbuf, lo, hi, valid, weights, out, o, per_state):
    """w_i D[t, s] (d values, from a LowRank) over the valid states of the positions t = pbuf[i], i in lo:hi, in
    ascending state order: summed into out[o + i - lo] (per_state False: r_t, rows zeroed first) or into out[s]
    (per_state: the per-state sums). w_i = weights[i] (weights empty: 1)."""
    d = low.free.shape[1]
    weighted = weights.shape[0] > 0
    for i in range(lo, hi):
        t = pbuf[i]
        w = weights[i] if weighted else 1.0
        row = o + i - lo
        if not per_state:
            for q in range(d):
                out[row, q] = 0.0
        if is_start[t]:
            if valid.w_start > 0.0:
                r = low.start[t] + low.group[t, 0]
                at = 0 if per_state else row
                for q in range(d):
                    out[at, q] += w * low.free[r, q]
            continue
        gold_state = low.y[t - 1] + 1 if low.gold[t] != 0.0 else -1
        cw = w * low.coef[t]
        for j in range(valid.m):
            s = valid.mid[j]
            at = s if per_state else row
            g = low.group[t, s]
            if g >= 0:
                r = low.start[t] + g
                a = -w * low.alpha[t - 1, s - 1]
                for q in range(d):
                    out[at, q] += a * low.free[r, q]
                if cw != 0.0:
                    c = cw * low.calpha[t - 1, s - 1]
                    for q in range(d):
                        out[at, q] += c * low.clamped[r, q]
            if s == gold_state:
                gw = w * low.gold[t]
                for q in range(d):
                    out[at, q] += gw * low.W[low.y[t], q]


@njit(cache=True, nogil=True)
def _dense_cells(D, is_start, pbuf, lo, hi, valid, weights, out, o, per_state):
    """_low_rank_cells for residuals held as D (T x S x d)."""
    D2 = flat(D)
    d = D.shape[2]
    weighted = weights.shape[0] > 0
    for i in range(lo, hi):
        if i + AHEAD < hi:  # a node's positions are scattered over D
            t_ahead = pbuf[i + AHEAD]
            for s in range(0, D.shape[1], 8):  # every 8th state (a cache line when d = 1; a hint only)
                prefetch(D, t_ahead, s)
            prefetch(D, t_ahead, D.shape[1] - 1)
        t = pbuf[i]
        w = weights[i] if weighted else 1.0
        row = o + i - lo
        if not per_state:
            for q in range(d):
                out[row, q] = 0.0
        if is_start[t]:
            if valid.w_start > 0.0:
                at = 0 if per_state else row
                for q in range(d):
                    out[at, q] += w * D2[t, q] if weighted else D2[t, q]
            continue
        for j in range(valid.m):
            s = valid.mid[j]
            at = s if per_state else row
            for q in range(d):
                out[at, q] += w * D2[t, s * d + q] if weighted else D2[t, s * d + q]


@njit(cache=True, nogil=True)
def residual_rows(target, pbuf, lo, hi, valid, weights, out, o):
    """r_t = sum over the valid states of w_i D[t, s] for the positions t = pbuf[i], i in lo:hi, into out[o + i -
    lo] (d values each); weights as _low_rank_cells'."""
    if is_low_rank(target.low):
        _low_rank_cells(target.low, target.is_start, pbuf, lo, hi, valid, weights, out, o, False)
    else:
        _dense_cells(target.D, target.is_start, pbuf, lo, hi, valid, weights, out, o, False)


@njit(cache=True, nogil=True)
def state_sums(target, pbuf, lo, hi, valid, weights, sums):
    """The per-state sums of w_i D[t, s] and of w_i over the positions t = pbuf[i], i in lo:hi, into sums
    (StateSums, cleared first); weights as _low_rank_cells'."""
    sums.r[:] = 0.0
    sums.n[:] = 0.0
    if is_low_rank(target.low):
        _low_rank_cells(target.low, target.is_start, pbuf, lo, hi, valid, weights, sums.r, 0, True)
    else:
        _dense_cells(target.D, target.is_start, pbuf, lo, hi, valid, weights, sums.r, 0, True)
    weighted = weights.shape[0] > 0
    for i in range(lo, hi):
        w = weights[i] if weighted else 1.0
        if target.is_start[pbuf[i]]:
            if valid.w_start > 0.0:
                sums.n[0] += w
        else:
            for j in range(valid.m):
                sums.n[valid.mid[j]] += w


@njit(cache=True, nogil=True)
def add_rows(hist, nt, rows, pbuf, lo, hi, is_start, valid, r, o, weights):
    """Add each position t = pbuf[i], i in lo:hi, to the histogram of every id in its row (rows: feature rows,
    or the missing variables' rows): its residual sum r[o + i - lo] (d values, as they are) and its weight w_i
    n_t (n_t: valid.w_start at a sequence start, else valid.m; w_i = weights[i], 1 when weights is empty); ids
    met for the first time are reset and listed. Returns the new touched count."""
    dense = hist.dense
    touched = hist.touched
    indptr = rows.indptr
    indices = rows.indices
    d = r.shape[1]
    weighted = weights.shape[0] > 0
    w_mid = float(valid.m)
    for i in range(lo, hi):
        if i + AHEAD < hi:  # a node's positions are scattered over the rows
            prefetch(indptr, pbuf[i + AHEAD], 0)
        if i + AHEAD // 2 < hi:
            p_ahead = indptr[pbuf[i + AHEAD // 2]]
            prefetch(indices, p_ahead, 0)
            prefetch(indices, p_ahead + 15, 0)
        t = pbuf[i]
        n = valid.w_start if is_start[t] else w_mid
        if weighted:
            n = weights[i] * n
        row = o + i - lo
        for p in range(indptr[t], indptr[t + 1]):
            f = indices[p]
            if dense[f, d] < 0.0:
                for q in range(d + 1):
                    dense[f, q] = 0.0
                touched[nt] = f
                nt += 1
            for q in range(d):
                dense[f, q] += r[row, q]
            dense[f, d] += n
    return nt


@njit(cache=True, nogil=True)
def _sum_rows(r, lo, hi, g):
    """g = the sum of the rows r[lo:hi] (d values), in row order."""
    g[:] = 0.0
    for i in range(lo, hi):
        for q in range(r.shape[1]):
            g[q] += r[i, q]


@njit(cache=True, nogil=True)
def _n_starts(pbuf, lo, hi, is_start):
    """How many of the positions pbuf[lo:hi] start a sequence."""
    n_start = 0.0
    for i in range(lo, hi):
        if is_start[pbuf[i]]:
            n_start += 1.0
    return n_start


@njit(cache=True, nogil=True)
def _weight(n, n_start, valid):
    """N of n unweighted positions, n_start of them sequence starts: valid.w_start per start, valid.m per other."""
    return n_start * valid.w_start + (n - n_start) * float(valid.m)


@njit(cache=True, nogil=True)
def scan(slots, lo, hi, what, target, valid, sums, hist, rows, g):
    """One pass over the positions slots.pos[lo:hi] of a node:
    - what.set_r: r_t into slots.val (else slots.val holds it already); G into g (d), returns N;
    - what.states: per-state residual sums and counts into sums;
    - what.hist: the node's feature histogram into hist.
    Returns (N, number of touched features)."""
    pbuf = slots.pos
    rbuf = slots.val
    none = np.empty(0)  # unweighted: every w_i is 1
    if what.set_r:
        residual_rows(target, pbuf, lo, hi, valid, none, rbuf, lo)
    if what.states:
        state_sums(target, pbuf, lo, hi, valid, none, sums)
    _sum_rows(rbuf, lo, hi, g)
    nt = add_rows(hist, 0, rows, pbuf, lo, hi, target.is_start, valid, rbuf, lo, none) if what.hist else 0
    return _weight(hi - lo, _n_starts(pbuf, lo, hi, target.is_start), valid), nt


@njit(cache=True, nogil=True)
def scan_state_split(slots, lo, hi, out, target, va, vb, with_hist, hist, rows, ga, gb):
    """A state split's pass over the node's positions slots.pos[lo:hi]: both children's r_t (the first
    child's in place, the second's with a copy of the positions at slot ``out``), their G (into ga, gb) and N
    and, with_hist, the first child's feature histogram (the second's is the parent's minus it).
    Returns (N_a, N_b, number of touched features)."""
    pbuf = slots.pos
    rbuf = slots.val
    none = np.empty(0)  # unweighted: every w_i is 1
    m = hi - lo
    pbuf[out:out + m] = pbuf[lo:hi]
    residual_rows(target, pbuf, lo, hi, vb, none, rbuf, out)
    residual_rows(target, pbuf, lo, hi, va, none, rbuf, lo)
    _sum_rows(rbuf, lo, hi, ga)
    _sum_rows(rbuf, out, out + m, gb)
    nt = add_rows(hist, 0, rows, pbuf, lo, hi, target.is_start, va, rbuf, lo, none) if with_hist else 0
    n_start = _n_starts(pbuf, lo, hi, target.is_start)
    return _weight(m, n_start, va), _weight(m, n_start, vb), nt


@njit(cache=True, nogil=True)
def scan_weighted(slots, lo, hi, target, valid, sums, with_hist, hists, rows, missing, g):
    """One pass over a node's weighted positions (slots.val[:, 0]: weights): G (into g), N, per-state sums and,
    with_hist, the weighted feature histogram (hists[0]) and missing-variable histogram (hists[1], over the rows
    of ``missing``). Returns (N, touched features, touched variables)."""
    pbuf = slots.pos
    weights = slots.val[:, 0]  # per slot
    d = width(target)
    rt = np.empty((hi - lo, d))  # w_i r_t
    residual_rows(target, pbuf, lo, hi, valid, np.empty(0), rt, 0)
    total_n = 0.0
    for i in range(lo, hi):
        w = weights[i]
        for q in range(d):
            rt[i - lo, q] *= w
        total_n += w * (valid.w_start if target.is_start[pbuf[i]] else float(valid.m))
    _sum_rows(rt, 0, hi - lo, g)
    state_sums(target, pbuf, lo, hi, valid, weights, sums)
    if not with_hist:
        return total_n, 0, 0
    n_f = add_rows(hists[0], 0, rows, pbuf, lo, hi, target.is_start, valid, rt, 0, weights)
    n_v = add_rows(hists[1], 0, missing, pbuf, lo, hi, target.is_start, valid, rt, 0, weights)
    return total_n, n_f, n_v


@njit(cache=True, nogil=True)
def compact(hist, n_touched, feature_ok):
    """The touched features that have a positive count and that the tree may split on (feature_ok): (ids, g
    (m x d), n), sized to fit. A leaf keeps this until it is split, so features the tree may not use are left
    out: with column subsampling they would be half of what the leaves hold. They are gathered in hist.room
    (no allocation in proportion to what was touched) and copied out. When many are touched, dense is read in
    feature order (faster, and the ids come out ascending)."""
    dense = hist.dense
    d = dense.shape[1] - 1
    ids, hg, hn = hist.room
    in_order = 8 * n_touched > dense.shape[0]
    m = 0
    for i in range(dense.shape[0] if in_order else n_touched):
        f = i if in_order else hist.touched[i]
        nf = dense[f, d]
        if nf > 0.0 and feature_ok[f]:
            ids[m] = f
            if d == 1:
                hg[m, 0] = dense[f, 0]
            else:
                for q in range(d):
                    hg[m, q] = dense[f, q]
            hn[m] = nf
            m += 1
    return ids[:m].copy(), hg[:m].copy(), hn[:m].copy()


@njit(cache=True, nogil=True)
def clear(hist, n_touched):
    """Mark the touched rows of the histogram untouched again."""
    d = hist.dense.shape[1] - 1
    if 8 * n_touched > hist.dense.shape[0]:
        hist.dense[:, d] = -1.0
    else:
        for i in range(n_touched):
            hist.dense[hist.touched[i], d] = -1.0


@njit(cache=True, nogil=True)
def subtract(p_ids, p_g, p_n, p_len, dense):
    """A child's compact histogram as its parent's minus the sibling's (held in dense), written over the
    parent's arrays (in order, so ascending ids stay ascending); returns its length."""
    d = p_g.shape[1]
    h = 0
    for i in range(p_len):
        j = p_ids[i]
        nj = p_n[i]
        sib = dense[j, d] >= 0.0
        if sib:
            nj -= dense[j, d]
        if nj > 0.0:
            p_ids[h] = j
            if d == 1:
                p_g[h, 0] = p_g[i, 0] - dense[j, 0] if sib else p_g[i, 0]
            else:
                for q in range(d):
                    p_g[h, q] = p_g[i, q] - dense[j, q] if sib else p_g[i, q]
            p_n[h] = nj
            h += 1
    return h
