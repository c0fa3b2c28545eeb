"""Leaf values other than the paper's mean, and moving cached potentials by a grown tree's leaves.

A grown tree's leaves own segments of its slots (grow.Segments): E[t, s, k] *= exp(step * value) over each
leaf's positions x states updates the training cache without evaluating the tree.
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .histogram import valid_states
from .trees import LEAF


class LeafTable(NamedTuple):
    """The leaves of a round's trees, one entry each: its tree (index into the round's slot arrays), label,
    segment lo:hi of that tree's slots, value and states (leaves x S)."""
    tree: np.ndarray
    label: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    value: np.ndarray
    states: np.ndarray


@njit(cache=True, nogil=True)
def step_leaf_values(target, tree, segments, lam, newton):
    """Leaf values sum(D) / (lam + h) over each leaf's cells, clipped to [-1, 1], in place of the paper's mean
    sum(D) / (lam + N) over its N (position, state) cells, which spreads a position's gradient
    sum_s D = I(y = k) - P(y = k) over the leaf's states and so steps a state-free leaf K + 1 times too short.

    newton: h = sum(|D| (1 - |D|)), one Newton step on the CRF loss with its diagonal Hessian (for a labelled
    cell |D| (1 - |D|) = P (1 - P); Friedman's TreeBoost step for the multinomial deviance). Otherwise h = the
    leaf's positions: a Newton step that takes 1 for each position's curvature (at most 1/4, so the step is
    conservative), which never needs the clip for the CRF loss (|sum over a position's cells| <= 1). The clip
    keeps the paper's bound |leaf value| <= 1, which the cache's float32 range relies on."""
    D = target.D
    is_start = target.is_start
    kind = tree.kind
    S = D.shape[1]
    mid = np.empty(S, np.int64)
    value = np.zeros(kind.shape[0])
    for node in range(kind.shape[0]):
        if kind[node] != LEAF:
            continue
        valid = valid_states(tree.states[node], target.allowed_k, mid)
        g = 0.0
        h = 0.0
        for i in range(segments.start[node], segments.start[node] + segments.length[node]):
            t = segments.pos[i]
            if is_start[t]:
                if valid.w_start > 0.0:
                    d = D[t, 0]
                    g += d
                    h += abs(d) * (1.0 - abs(d)) if newton else 1.0
            else:
                for j in range(valid.m):
                    d = D[t, mid[j]]
                    g += d
                    if newton:
                        h += abs(d) * (1.0 - abs(d))
                if valid.m > 0 and not newton:
                    h += 1.0
        if h + lam > 0.0:
            value[node] = min(max(g / (h + lam), -1.0), 1.0)
    return value


@njit(cache=True, nogil=True)
def apply_leaves(E, tree, segments, k, scale_by):
    """Multiply exp(scale_by * leaf value) into the cached potentials of each leaf's (positions x states)."""
    S = E.shape[1]
    sel = np.empty(S, dtype=np.int64)
    for node in range(tree.kind.shape[0]):
        if tree.kind[node] != LEAF:
            continue
        f = np.float32(np.exp(scale_by * tree.value[node]))
        m = 0
        for s in range(S):
            if tree.states[node, s]:
                sel[m] = s
                m += 1
        for i in range(segments.start[node], segments.start[node] + segments.length[node]):
            t = segments.pos[i]
            for j in range(m):
                E[t, sel[j], k] *= f


@njit(cache=True, nogil=True)
def apply_trees(E, t0, t1, pbufs, leaves, scale_by, block):
    """Several trees' apply_leaves at once, for positions t0 <= t < t1: E[t, s, label] *= exp(scale_by * value)
    over each leaf's (positions x states) of the LeafTable. Every leaf's segment pbufs[tree][lo:hi] must be
    ascending (grow_tree's are). The positions are walked in blocks of ``block``, every leaf applying its part
    of a block in turn: a block of E is loaded once for all the trees instead of once per tree (E[t, s, k] for
    one k lies on a separate cache line for every (t, s))."""
    L = leaves.tree.shape[0]
    S = E.shape[1]
    cur = np.empty(L, dtype=np.int64)
    sel = np.empty((L, S), dtype=np.int64)
    n_sel = np.zeros(L, dtype=np.int64)
    for l in range(L):
        seg = pbufs[leaves.tree[l]]
        p0 = leaves.lo[l]
        p1 = leaves.hi[l]
        while p0 < p1:  # first position >= t0
            mid = (p0 + p1) // 2
            if seg[mid] < t0:
                p0 = mid + 1
            else:
                p1 = mid
        cur[l] = p0
        m = 0
        for s in range(S):
            if leaves.states[l, s]:
                sel[l, m] = s
                m += 1
        n_sel[l] = m
    for b0 in range(t0, t1, block):
        b1 = min(b0 + block, t1)
        for l in range(L):
            seg = pbufs[leaves.tree[l]]
            c = cur[l]
            hi = leaves.hi[l]
            k = leaves.label[l]
            f = np.float32(np.exp(scale_by * leaves.value[l]))
            m = n_sel[l]
            while c < hi and seg[c] < b1:
                t = seg[c]
                for j in range(m):
                    E[t, sel[l, j], k] *= f
                c += 1
            cur[l] = c
