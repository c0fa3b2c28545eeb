"""Partition of a node's position slots by its split, in place (stable), moving each slot's value along.

A feature split without missing values partitions the segment in place, absent first; a split whose variable
may be missing routes each position (missing.route): one missing with no known surrogate goes to both children
with its weight times the yes share / 1 - share (instance weighting), or to the side that got more of the
others (surrogate splits).
"""
import numpy as np
from numba import njit

from .missing import route
from .sparse import has_feature


@njit(cache=True, nogil=True)
def partition(slots, lo, hi, tmp, f, index, mark, rows, is_start, valid):
    """Stable in-place partition of a node's slots (positions and their r_t) on feature f: the positions
    without f first, then those with it (usually the fewer, they go through ``tmp``, Slots of spare room).
    Positions holding f are marked from the ColumnIndex, or looked up in their rows when that index is long for
    the node. Returns (n_present, n_absent, G and N of the present, G and N of the absent)."""
    pbuf = slots.pos
    rbuf = slots.val
    tmp_p = tmp.pos
    tmp_r = tmp.val
    c0 = index.ptr[f]
    c1 = index.ptr[f + 1]
    use_mark = (c1 - c0) <= 8 * (hi - lo)
    if use_mark:
        for q in range(c0, c1):
            mark[index.pos[q]] = True
    na = 0
    nb = 0
    ga = 0.0
    gb = 0.0
    n_start_a = 0.0
    n_start_b = 0.0
    for i in range(lo, hi):
        t = pbuf[i]
        rt = rbuf[i]
        st = is_start[t]
        if use_mark:
            present = mark[t]
        else:
            present = has_feature(rows.indptr, rows.indices, t, f)
        if present:
            tmp_p[na] = t
            tmp_r[na] = rt
            na += 1
            ga += rt
            if st:
                n_start_a += 1.0
        else:
            if na > 0:
                pbuf[lo + nb] = t
                rbuf[lo + nb] = rt
            nb += 1
            gb += rt
            if st:
                n_start_b += 1.0
    pbuf[lo + nb:hi] = tmp_p[:na]
    rbuf[lo + nb:hi] = tmp_r[:na]
    if use_mark:
        for q in range(c0, c1):
            mark[index.pos[q]] = False
    w_mid = float(valid.m)
    wa = n_start_a * valid.w_start + (na - n_start_a) * w_mid
    wb = n_start_b * valid.w_start + (nb - n_start_b) * w_mid
    return na, nb, ga, wa, gb, wb


@njit(cache=True, nogil=True)
def partition_routed(slots, lo, hi, out, spare, split, rows, missing, is_start, valid):
    """Split a node's weighted slots by the routing rule; split: (feature, yes share of the known examples, the
    node's surrogate features and directions). The no child keeps the segment's start (in place), the yes child
    is written at slot ``out``. A position missing the feature and every surrogate goes to both children with its
    weight times share / 1 - share (trees without surrogate slots), else to the side that got more of the others
    (in example counts, so that missing.yes_share of the children's counts picks that side again at prediction).
    spare: (tmp, fall) Slots of spare room.
    Returns (n_yes, n_no) slots."""
    tmp, fall = spare
    f, share, surr_feature, surr_same = split
    proportional = surr_feature.shape[0] == 0
    side_weight = np.zeros(2)  # example counts sent no (0) / yes (1)
    na = nb = nf = 0
    for i in range(lo, hi):
        t = slots.pos[i]
        w = slots.val[i]
        d = route(rows, missing, t, f, surr_feature, surr_same)
        if d < 0 and not proportional:
            fall.pos[nf] = t
            fall.val[nf] = w
            nf += 1
            continue
        units = w * (valid.w_start if is_start[t] else float(valid.m))
        if d != 0:
            tmp.pos[na] = t
            tmp.val[na] = w * share if d < 0 else w
            na += 1
            side_weight[1] += units
        if d <= 0:
            slots.pos[lo + nb] = t
            slots.val[lo + nb] = w * (1.0 - share) if d < 0 else w
            nb += 1
            side_weight[0] += units
    if side_weight[1] > side_weight[0]:
        tmp.pos[na:na + nf] = fall.pos[:nf]
        tmp.val[na:na + nf] = fall.val[:nf]
        na += nf
    else:
        slots.pos[lo + nb:lo + nb + nf] = fall.pos[:nf]
        slots.val[lo + nb:lo + nb + nf] = fall.val[:nf]
        nb += nf
    slots.pos[out:out + na] = tmp.pos[:na]
    slots.val[out:out + na] = tmp.val[:na]
    return na, nb
