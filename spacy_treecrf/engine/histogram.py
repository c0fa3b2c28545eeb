"""One pass over a node's positions: its residual sum G, weight N, per-state sums and feature histogram.

A node's statistics come from per-position sums r_t = sum_{s in A} D[t, s] over its valid states A and counts
n_t = |A at t| (1 or 0 at a sequence start, where only state 0 exists): scanning a node costs O(its nonzeros +
|P| |A|), never O(nonzeros x K). A feature histogram is kept dense over all features while it is filled
(``Hist``: rows not touched yet have dense[f, 1] < 0; the touched ones are listed) and compacted to the features
the node holds (ids, G, N) once it is complete; a child's histogram is its parent's minus its sibling's when
every position goes to exactly one child (``subtract``).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .intrinsics import prefetch_rows


class Slots(NamedTuple):
    """A tree's position slots: every node owns a segment pos[lo:hi]; val holds, per slot, the position's r_t
    (unweighted growth) or its weight (growth that routes missing values)."""
    pos: np.ndarray
    val: np.ndarray


class Valid(NamedTuple):
    """A node's valid previous states: the weight of a sequence start (1.0 if state 0 reaches it and is
    allowed, else 0.0) and the states > 0 elsewhere, ascending in mid[:m]."""
    w_start: float
    mid: np.ndarray
    m: int


class Hist(NamedTuple):
    """A histogram being filled: dense[f] = (sum of r_t, sum of n_t) over the positions holding f; the f with
    dense[f, 1] >= 0 are listed in touched."""
    dense: np.ndarray
    touched: np.ndarray


class StateSums(NamedTuple):
    """A node's residual sum r[s] and weight n[s] per previous state s (what a state split is chosen on)."""
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


@njit(cache=True, nogil=True)
def row_sum(D, t, start, valid):
    """r_t: D[t, s] summed over the valid states, in ascending state order."""
    if start:
        return D[t, 0] if valid.w_start > 0.0 else 0.0
    rt = 0.0
    for j in range(valid.m):
        rt += D[t, valid.mid[j]]
    return rt


@njit(cache=True, nogil=True)
def scan(slots, lo, hi, what, target, valid, sums, hist, rows):
    """One pass over the positions slots.pos[lo:hi] of a node:
    - what.set_r: r_t into slots.val (else slots.val holds it already); returns G and N;
    - what.states: per-state residual sums and counts into sums;
    - what.hist: the node's feature histogram into hist.
    Returns (G, N, number of touched features)."""
    pbuf = slots.pos
    rbuf = slots.val
    D = target.D
    is_start = target.is_start
    w_start = valid.w_start
    mid = valid.mid
    m = valid.m
    rs = sums.r
    w_mid = float(m)
    if what.states:
        rs[:] = 0.0
        sums.n[:] = 0.0
    n_start = 0.0
    n_mid = 0.0
    g = 0.0
    nt = 0
    read_d = what.set_r or what.states
    for i in range(lo, hi):
        prefetch_rows(pbuf, i, hi, D, read_d, rows)
        t = pbuf[i]
        st = is_start[t]
        if what.set_r:
            rt = row_sum(D, t, st, valid)
            rbuf[i] = rt
        else:
            rt = rbuf[i]
        g += rt
        if st:
            n_start += 1.0
            if what.states and w_start > 0.0:
                rs[0] += D[t, 0]
        else:
            n_mid += 1.0
            if what.states:
                for j in range(m):
                    rs[mid[j]] += D[t, mid[j]]
        if what.hist:
            nt = add_row(hist, nt, rows, t, rt, w_start if st else w_mid)
    if what.states:
        sums.n[0] = n_start * w_start
        for j in range(m):
            sums.n[mid[j]] = n_mid
    return g, n_start * w_start + n_mid * w_mid, nt


@njit(cache=True, nogil=True)
def add_row(hist, nt, rows, t, r, w):
    """Add position t's residual sum r and weight w to the histogram of every id in its row (rows: feature
    rows, or the missing variables' rows); ids met for the first time are reset and listed. Returns the new
    touched count."""
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
def scan_state_split(slots, lo, hi, out, target, va, vb, with_hist, hist, rows):
    """A state split's one pass over the node's positions slots.pos[lo:hi]: both children's r_t (the first
    child's in place, the second's with a copy of the positions at slot ``out``), their G and N and, with_hist,
    the first child's feature histogram (the second's is the parent's minus it).
    Returns (G_a, N_a, G_b, N_b, number of touched features)."""
    pbuf = slots.pos
    rbuf = slots.val
    D = target.D
    is_start = target.is_start
    ga = 0.0
    gb = 0.0
    n_start = 0.0
    nt = 0
    wa_mid = float(va.m)
    for i in range(lo, hi):
        prefetch_rows(pbuf, i, hi, D, True, rows)
        t = pbuf[i]
        st = is_start[t]
        ra = row_sum(D, t, st, va)
        rb = row_sum(D, t, st, vb)
        j = out + i - lo
        pbuf[j] = t
        rbuf[i] = ra
        rbuf[j] = rb
        ga += ra
        gb += rb
        if st:
            n_start += 1.0
        if with_hist:
            nt = add_row(hist, nt, rows, t, ra, va.w_start if st else wa_mid)
    n_mid = (hi - lo) - n_start
    return ga, n_start * va.w_start + n_mid * wa_mid, gb, n_start * vb.w_start + n_mid * float(vb.m), nt


@njit(cache=True, nogil=True)
def scan_weighted(slots, lo, hi, target, valid, sums, with_hist, hists, rows, missing):
    """One pass over a node's weighted positions (slots.val: weights): G, N, per-state sums and, with_hist, the
    weighted feature histogram (hists[0]) and missing-variable histogram (hists[1], over the rows of
    ``missing``). Returns (G, N, touched features, touched variables)."""
    D = target.D
    sums.r[:] = 0.0
    sums.n[:] = 0.0
    totals = np.zeros(2)  # G, N
    touched = np.zeros(2, dtype=np.int64)  # features, variables
    for i in range(lo, hi):
        t = slots.pos[i]
        w = slots.val[i]
        st = target.is_start[t]
        rt = w * row_sum(D, t, st, valid)
        nt_w = w * (valid.w_start if st else float(valid.m))
        totals[0] += rt
        totals[1] += nt_w
        if st:
            if valid.w_start > 0.0:
                sums.r[0] += w * D[t, 0]
                sums.n[0] += w
        else:
            for j in range(valid.m):
                sums.r[valid.mid[j]] += w * D[t, valid.mid[j]]
                sums.n[valid.mid[j]] += w
        if with_hist:
            touched[0] = add_row(hists[0], touched[0], rows, t, rt, nt_w)
            touched[1] = add_row(hists[1], touched[1], missing, t, rt, nt_w)
    return totals[0], totals[1], touched[0], touched[1]


@njit(cache=True, nogil=True)
def compact(hist, n_touched, ids, hg, hn):
    """Copy the touched features with a positive count into (ids, hg, hn); returns how many. When many are
    touched, dense is read in feature order (faster, and the ids come out ascending)."""
    dense = hist.dense
    m = 0
    in_order = 8 * n_touched > dense.shape[0]
    for i in range(dense.shape[0] if in_order else n_touched):
        f = i if in_order else hist.touched[i]
        nf = dense[f, 1]
        if nf > 0.0:
            ids[m] = f
            hg[m] = dense[f, 0]
            hn[m] = nf
            m += 1
    return m


@njit(cache=True, nogil=True)
def clear(hist, n_touched):
    """Mark the touched rows of the histogram untouched again."""
    if 8 * n_touched > hist.dense.shape[0]:
        hist.dense[:, 1] = -1.0
    else:
        for i in range(n_touched):
            hist.dense[hist.touched[i], 1] = -1.0


@njit(cache=True, nogil=True)
def subtract(p_ids, p_g, p_n, p_len, dense):
    """A child's compact histogram as its parent's minus the sibling's (held in dense), written over the
    parent's arrays (in order, so ascending ids stay ascending); returns its length."""
    h = 0
    for i in range(p_len):
        j = p_ids[i]
        gj = p_g[i]
        nj = p_n[i]
        if dense[j, 1] >= 0.0:
            gj -= dense[j, 0]
            nj -= dense[j, 1]
        if nj > 0.0:
            p_ids[h] = j
            p_g[h] = gj
            p_n[h] = nj
            h += 1
    return h
