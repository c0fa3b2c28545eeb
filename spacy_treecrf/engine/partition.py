"""Partition of a node's position slots by its split, in place (stable), moving each slot's value along.

A feature split without missing values partitions the segment in place, absent first; a split whose variable
may be missing routes each position (missing.route): one missing with no known surrogate goes to both children
with its weight times the yes share / 1 - share (instance weighting), or to the side that got more of the
others (surrogate splits).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .missing import route
from .numeric import test_range
from .sparse import has_id_in


class Marks(NamedTuple):
    """Scratch for marking the positions that pass a split: a flag per position (all False between splits) and
    the positions [span[0], span[1]) the data side holds. A shard of a tree grown on two threads holds half of
    them and marks only the ColumnIndex entries in its span, not the whole column."""
    flag: np.ndarray
    span: np.ndarray


@njit(cache=True, nogil=True)
def _span_entries(index, a, span):
    """The entries of atom a's column in the ColumnIndex (positions ascending) that lie in span: (q0, q1)."""
    q0, q1 = index.ptr[a], index.ptr[a + 1]
    if q1 > q0 and index.pos[q0] < span[0]:
        q0 = np.searchsorted(index.pos[q0:q1], span[0]) + q0
    if q1 > q0 and index.pos[q1 - 1] >= span[1]:
        q1 = np.searchsorted(index.pos[q0:q1], span[1]) + q0
    return q0, q1


@njit(cache=True, nogil=True)
def _set_marks(index, a_lo, a_hi, marks, on):
    """Flag (on) or clear the positions in marks' span that hold an atom in [a_lo, a_hi]."""
    for a in range(a_lo, a_hi + 1):
        q0, q1 = _span_entries(index, a, marks.span)
        for q in range(q0, q1):
            marks.flag[index.pos[q]] = on


@njit(cache=True, nogil=True)
def partition(shard, lo, hi, f, valid, g):
    """Stable in-place partition of the slots lo:hi of ``shard`` (grow.ShardGrowth: a node's positions and their
    r_t) on test f (a feature's presence or a numeric threshold: an atom in [lo, hi], see numeric.py): the positions
    failing it first, then those passing (usually the fewer, they go through the shard's ``tmp``, Slots of spare
    room). Positions passing are marked from the shard's ColumnIndex (Marks: those in the data side's span), or
    looked up in their rows when that is long for the node. The residual sums G of the present and absent
    positions go to g[0], g[1] (d values each); ``valid``: the node's ValidStates.
    Returns (n_present, n_absent, N of the present, N of the absent)."""
    slots, tmp, index, marks, rows, numeric = shard.slots, shard.tmp, shard.index, shard.marks, shard.rows, \
        shard.numeric
    is_start = shard.target.is_start
    ga, gb = g[0], g[1]
    pbuf = slots.pos
    rbuf = slots.val
    tmp_p = tmp.pos
    tmp_r = tmp.val
    a_lo, a_hi = test_range(numeric, f)
    n_entries = 0
    for a in range(a_lo, a_hi + 1):
        q0, q1 = _span_entries(index, a, marks.span)
        n_entries += q1 - q0
    use_mark = n_entries <= 8 * (hi - lo)
    mark = marks.flag
    if use_mark:
        _set_marks(index, a_lo, a_hi, marks, True)
    d = rbuf.shape[1]
    na = 0
    nb = 0
    ga[:] = 0.0
    gb[:] = 0.0
    n_start_a = 0.0
    n_start_b = 0.0
    ga0 = 0.0  # G of the present / absent positions when d = 1 (kept in registers)
    gb0 = 0.0
    for i in range(lo, hi):
        t = pbuf[i]
        st = is_start[t]
        if use_mark:
            present = mark[t]
        else:
            present = has_id_in(rows.indptr, rows.indices, t, a_lo, a_hi)
        r0 = rbuf[i, 0]
        if present:
            tmp_p[na] = t
            if d == 1:
                tmp_r[na, 0] = r0
                ga0 += r0
            else:
                for q in range(d):
                    tmp_r[na, q] = rbuf[i, q]
                    ga[q] += rbuf[i, q]
            na += 1
            if st:
                n_start_a += 1.0
        else:
            if d == 1:
                gb0 += r0
            else:
                for q in range(d):
                    gb[q] += rbuf[i, q]
            if na > 0:
                pbuf[lo + nb] = t
                if d == 1:
                    rbuf[lo + nb, 0] = r0
                else:
                    for q in range(d):
                        rbuf[lo + nb, q] = rbuf[i, q]
            nb += 1
            if st:
                n_start_b += 1.0
    if d == 1:
        ga[0] = ga0
        gb[0] = gb0
    pbuf[lo + nb:hi] = tmp_p[:na]
    rbuf[lo + nb:hi] = tmp_r[:na]
    if use_mark:
        _set_marks(index, a_lo, a_hi, marks, False)
    w_mid = float(valid.m)
    wa = n_start_a * valid.w_start + (na - n_start_a) * w_mid
    wb = n_start_b * valid.w_start + (nb - n_start_b) * w_mid
    return na, nb, wa, wb


@njit(cache=True, nogil=True)
def partition_routed(slots, lo, hi, out, spare, split, rows, numeric, missing, is_start, valid):
    """Split a node's weighted slots (weights in val[:, 0]) by the routing rule; split: (feature, yes share of
    the known examples, the node's surrogate features and directions). The no child keeps the segment's start (in place), the yes child
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
        w = slots.val[i, 0]
        d = route(rows, numeric, missing, t, f, surr_feature, surr_same)
        if d < 0 and not proportional:
            fall.pos[nf] = t
            fall.val[nf, 0] = w
            nf += 1
            continue
        units = w * (valid.w_start if is_start[t] else float(valid.m))
        if d != 0:
            tmp.pos[na] = t
            tmp.val[na, 0] = w * share if d < 0 else w
            na += 1
            side_weight[1] += units
        if d <= 0:
            slots.pos[lo + nb] = t
            slots.val[lo + nb, 0] = w * (1.0 - share) if d < 0 else w
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
