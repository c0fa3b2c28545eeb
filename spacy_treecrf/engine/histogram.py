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

from .intrinsics import prefetch_rows


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
    return Valid(w_start, mid, m)


# Speed notes for the per-label grower (d = 1; see benchmarks/results/same_speed_shared_trees.md): the kernels
# index rows of 2-d arrays (out[row, i]) rather than take row views (a view in a loop over positions costs a
# reference count update each time), read D through its 2-d view T x (S d) (see flat), and the hottest loops have
# a branch for d = 1 that keeps its sums in registers, with a separate small kernel for the histogram update.


@njit(cache=True, nogil=True)
def flat(D):
    """D (T x S x d, C order) as its T x (S d) view: component q of state s is column s * d + q."""
    return D.reshape((D.shape[0], D.shape[1] * D.shape[2]))


@njit(cache=True, nogil=True)
def row_sum(D2, d, t, start, valid, out, row):
    """r_t into out[row] (d values): D[t, s] summed over the valid states, in ascending state order (D2: flat(D))."""
    if d == 1:
        r = 0.0
        if start:
            r = D2[t, 0] if valid.w_start > 0.0 else 0.0
        else:
            for j in range(valid.m):
                r += D2[t, valid.mid[j]]
        out[row, 0] = r
        return
    for i in range(d):
        out[row, i] = 0.0
    if start:
        if valid.w_start > 0.0:
            for i in range(d):
                out[row, i] = D2[t, i]
        return
    for j in range(valid.m):
        s = valid.mid[j] * d
        for i in range(d):
            out[row, i] += D2[t, s + i]


@njit(cache=True, nogil=True)
def is_low_rank(low):
    """Whether a Target's residuals come as this LowRank (trees.NO_LOW_RANK has no directions: they are D)."""
    return low.W.shape[0] > 0


@njit(cache=True, nogil=True)
def width(target):
    """d, the values per residual cell: Target.D's, or its LowRank's."""
    return target.low.W.shape[1] if is_low_rank(target.low) else target.D.shape[2]


@njit(cache=True, nogil=True)
def add_low_rank(low, t, start, valid, w, out, row):
    """w D[t, s] (d values, from a LowRank) over the valid states, in ascending state order: summed into out[row]
    (row >= 0: r_t, when out[row] is 0) or into out[s] per state (row < 0: the per-state sums)."""
    first, group, free, clamped, alpha, calpha, coef, y, gold, W = low
    d = free.shape[1]
    if start:
        if valid.w_start > 0.0:
            r = first[t] + group[t, 0]
            at = row if row >= 0 else 0
            for q in range(d):
                out[at, q] += w * free[r, q]
        return
    gold_state = y[t - 1] + 1 if gold[t] != 0.0 else -1
    cw = w * coef[t]
    for j in range(valid.m):
        s = valid.mid[j]
        at = row if row >= 0 else s
        g = group[t, s]
        if g >= 0:
            r = first[t] + g
            a = -w * alpha[t - 1, s - 1]
            for q in range(d):
                out[at, q] += a * free[r, q]
            if cw != 0.0:
                c = cw * calpha[t - 1, s - 1]
                for q in range(d):
                    out[at, q] += c * clamped[r, q]
        if s == gold_state:
            gw = w * gold[t]
            for q in range(d):
                out[at, q] += gw * W[y[t], q]


@njit(cache=True, nogil=True)
def residual_sum(D2, low, d, t, start, valid, out, row):
    """r_t into out[row]: row_sum of D, or of its LowRank where it has one."""
    if not is_low_rank(low):
        row_sum(D2, d, t, start, valid, out, row)
        return
    for i in range(d):
        out[row, i] = 0.0
    add_low_rank(low, t, start, valid, 1.0, out, row)


@njit(cache=True, nogil=True)
def add_to(acc, src, row):
    """acc += src[row] (d values)."""
    for i in range(acc.shape[0]):
        acc[i] += src[row, i]


@njit(cache=True, nogil=True)
def scan(slots, lo, hi, what, target, valid, sums, hist, rows, g):
    """One pass over the positions slots.pos[lo:hi] of a node:
    - what.set_r: r_t into slots.val (else slots.val holds it already); G into g (d), returns N;
    - what.states: per-state residual sums and counts into sums;
    - what.hist: the node's feature histogram into hist.
    Returns (N, number of touched features)."""
    pbuf = slots.pos
    rbuf = slots.val
    D = target.D
    d = width(target)
    D2 = flat(D)
    low = target.low
    low_rank = is_low_rank(low)
    is_start = target.is_start
    w_start = valid.w_start
    mid = valid.mid
    m = valid.m
    rs = sums.r
    w_mid = float(m)
    if what.states:
        rs[:] = 0.0
        sums.n[:] = 0.0
    g[:] = 0.0
    n_start = 0.0
    n_mid = 0.0
    nt = 0
    read_d = (what.set_r or what.states) and not low_rank
    g0 = 0.0  # G when d = 1
    for i in range(lo, hi):
        prefetch_rows(pbuf, i, hi, D, read_d, rows)
        t = pbuf[i]
        st = is_start[t]
        if what.set_r:
            residual_sum(D2, low, d, t, st, valid, rbuf, i)
        if what.states and low_rank:
            add_low_rank(low, t, st, valid, 1.0, rs, -1)
        if d == 1:
            g0 += rbuf[i, 0]
        else:
            add_to(g, rbuf, i)
        if st:
            n_start += 1.0
            if what.states and w_start > 0.0 and not low_rank:
                for q in range(d):
                    rs[0, q] += D2[t, q]
        else:
            n_mid += 1.0
            if what.states and not low_rank:
                if d == 1:
                    for j in range(m):
                        rs[mid[j], 0] += D2[t, mid[j]]
                else:
                    for j in range(m):
                        s = mid[j]
                        for q in range(d):
                            rs[s, q] += D2[t, s * d + q]
        if what.hist:
            if d == 1:
                nt = _add_row_scalar(hist, nt, rows, t, rbuf[i, 0], w_start if st else w_mid)
            else:
                nt = _add_row_vector(hist, nt, rows, t, rbuf, i, w_start if st else w_mid)
    if d == 1:
        g[0] = g0
    if what.states:
        sums.n[0] = n_start * w_start
        for j in range(m):
            sums.n[mid[j]] = n_mid
    return n_start * w_start + n_mid * w_mid, nt


@njit(cache=True, nogil=True)
def add_row(hist, nt, rows, t, r, row, w):
    """Add position t's residual sum r[row] (d values) and weight w to the histogram of every id in its row
    (rows: feature rows, or the missing variables' rows); ids met for the first time are reset and listed.
    Returns the new touched count. The scans call _add_row_scalar themselves where d = 1: small enough for
    LLVM to inline, where a call per position cost the per-label grower 15%."""
    if r.shape[1] == 1:
        return _add_row_scalar(hist, nt, rows, t, r[row, 0], w)
    return _add_row_vector(hist, nt, rows, t, r, row, w)


@njit(cache=True, nogil=True)
def _add_row_scalar(hist, nt, rows, t, r, w):
    dense = hist.dense
    for p in range(rows.indptr[t], rows.indptr[t + 1]):
        f = rows.indices[p]
        if dense[f, 1] < 0.0:
            dense[f, 0] = 0.0
            dense[f, 1] = 0.0
            hist.touched[nt] = f
            nt += 1
        dense[f, 0] += r
        dense[f, 1] += w
    return nt


@njit(cache=True, nogil=True)
def _add_row_vector(hist, nt, rows, t, r, row, w):
    dense = hist.dense
    d = r.shape[1]
    for p in range(rows.indptr[t], rows.indptr[t + 1]):
        f = rows.indices[p]
        if dense[f, d] < 0.0:
            for i in range(d + 1):
                dense[f, i] = 0.0
            hist.touched[nt] = f
            nt += 1
        for i in range(d):
            dense[f, i] += r[row, i]
        dense[f, d] += w
    return nt


@njit(cache=True, nogil=True)
def scan_state_split(slots, lo, hi, out, target, va, vb, with_hist, hist, rows, ga, gb):
    """A state split's one pass over the node's positions slots.pos[lo:hi]: both children's r_t (the first
    child's in place, the second's with a copy of the positions at slot ``out``), their G (into ga, gb) and N
    and, with_hist, the first child's feature histogram (the second's is the parent's minus it).
    Returns (N_a, N_b, number of touched features)."""
    pbuf = slots.pos
    rbuf = slots.val
    D = target.D
    D2 = flat(D)
    d = width(target)
    low = target.low
    is_start = target.is_start
    ga[:] = 0.0
    gb[:] = 0.0
    ga0 = 0.0  # ga, gb when d = 1
    gb0 = 0.0
    n_start = 0.0
    nt = 0
    wa_mid = float(va.m)
    for i in range(lo, hi):
        prefetch_rows(pbuf, i, hi, D, not is_low_rank(low), rows)
        t = pbuf[i]
        st = is_start[t]
        j = out + i - lo
        pbuf[j] = t
        residual_sum(D2, low, d, t, st, vb, rbuf, j)
        residual_sum(D2, low, d, t, st, va, rbuf, i)
        if d == 1:
            ga0 += rbuf[i, 0]
            gb0 += rbuf[j, 0]
        else:
            add_to(ga, rbuf, i)
            add_to(gb, rbuf, j)
        if st:
            n_start += 1.0
        if with_hist:
            if d == 1:
                nt = _add_row_scalar(hist, nt, rows, t, rbuf[i, 0], va.w_start if st else wa_mid)
            else:
                nt = _add_row_vector(hist, nt, rows, t, rbuf, i, va.w_start if st else wa_mid)
    if d == 1:
        ga[0] = ga0
        gb[0] = gb0
    n_mid = (hi - lo) - n_start
    return n_start * va.w_start + n_mid * wa_mid, n_start * vb.w_start + n_mid * float(vb.m), nt


@njit(cache=True, nogil=True)
def scan_weighted(slots, lo, hi, target, valid, sums, with_hist, hists, rows, missing, g):
    """One pass over a node's weighted positions (slots.val[:, 0]: weights): G (into g), N, per-state sums and,
    with_hist, the weighted feature histogram (hists[0]) and missing-variable histogram (hists[1], over the rows
    of ``missing``). Returns (N, touched features, touched variables)."""
    D = target.D
    d = width(target)
    D2 = flat(D)
    low = target.low
    low_rank = is_low_rank(low)
    sums.r[:] = 0.0
    sums.n[:] = 0.0
    g[:] = 0.0
    rt = np.empty((1, d))
    total_n = 0.0
    touched = np.zeros(2, dtype=np.int64)  # features, variables
    for i in range(lo, hi):
        t = slots.pos[i]
        w = slots.val[i, 0]
        st = target.is_start[t]
        residual_sum(D2, low, d, t, st, valid, rt, 0)
        for q in range(d):
            rt[0, q] *= w
        add_to(g, rt, 0)
        nt_w = w * (valid.w_start if st else float(valid.m))
        total_n += nt_w
        if low_rank:
            add_low_rank(low, t, st, valid, w, sums.r, -1)
        if st:
            if valid.w_start > 0.0:
                if not low_rank:
                    for q in range(d):
                        sums.r[0, q] += w * D2[t, q]
                sums.n[0] += w
        else:
            for j in range(valid.m):
                s = valid.mid[j]
                if not low_rank:
                    for q in range(d):
                        sums.r[s, q] += w * D2[t, s * d + q]
                sums.n[s] += w
        if with_hist:
            touched[0] = add_row(hists[0], touched[0], rows, t, rt, 0, nt_w)
            touched[1] = add_row(hists[1], touched[1], missing, t, rt, 0, nt_w)
    return total_n, touched[0], touched[1]


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
