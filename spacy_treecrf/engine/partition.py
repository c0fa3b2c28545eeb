"""Partition of a node's position slots by its split, in place (stable), moving each slot's value along.

A feature split without missing values partitions the segment in place, absent first; a split whose variable
may be missing routes each position (missing.route): one missing with no known surrogate goes to both children
with its weight times the yes share / 1 - share (instance weighting), or to the side that got more of the
others (surrogate splits).
"""
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
def partition_routed(slots, lo, hi, out, spare, nodes, node, rows, missing, is_start, valid):
    """Split a node's weighted slots on its feature by the routing rule: the no child keeps the segment's start
    (in place), the yes child is written at slot ``out``. A position missing the feature and every surrogate goes
    to both children with its weight times the node's candidate share / 1 - share (trees without surrogate slots),
    else to the side that got more of the others (in example counts, so that missing.yes_share of the children's
    counts picks that side again at prediction). spare: (tmp, fall) Slots of spare room.
    Returns (n_yes, n_no) slots."""
    pbuf = slots.pos
    wbuf = slots.val
    tmp, fall = spare
    f = nodes.tree.feature[node]
    share = nodes.cand.share[node]
    proportional = nodes.tree.surr_feature.shape[1] == 0
    surr_feature = nodes.tree.surr_feature[node]
    surr_same = nodes.tree.surr_same[node]
    na = 0
    nb = 0
    nf = 0
    n_yes = 0.0
    n_no = 0.0
    for i in range(lo, hi):
        t = pbuf[i]
        w = wbuf[i]
        d = route(rows, missing, t, f, surr_feature, surr_same)
        if d < 0 and not proportional:
            fall.pos[nf] = t
            fall.val[nf] = w
            nf += 1
            continue
        if d != 0:
            tmp.pos[na] = t
            tmp.val[na] = w * share if d < 0 else w
            na += 1
            n_yes += w * (valid.w_start if is_start[t] else float(valid.m))
        if d <= 0:
            pbuf[lo + nb] = t
            wbuf[lo + nb] = w * (1.0 - share) if d < 0 else w
            nb += 1
            n_no += w * (valid.w_start if is_start[t] else float(valid.m))
    if n_yes > n_no:
        tmp.pos[na:na + nf] = fall.pos[:nf]
        tmp.val[na:na + nf] = fall.val[:nf]
        na += nf
    else:
        pbuf[lo + nb:lo + nb + nf] = fall.pos[:nf]
        wbuf[lo + nb:lo + nb + nf] = fall.val[:nf]
        nb += nf
    pbuf[out:out + na] = tmp.pos[:na]
    wbuf[out:out + na] = tmp.val[:na]
    return na, nb
