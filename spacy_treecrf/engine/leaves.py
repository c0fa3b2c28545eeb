"""Leaf values from a grown tree's leaf segments, and moving cached potentials by its leaves.

A grown tree's leaves own segments of its slots (grow.Segments): E[t, s, k] *= exp(step * value) over each
leaf's positions x states updates the training cache without evaluating the tree.
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .trees import LEAF


class LeafTable(NamedTuple):
    """The leaves of a round's trees, one entry each: its tree (index into the round's slot arrays), label (-1:
    a shared tree's leaf, for every label), segment lo:hi of that tree's slots, value (leaves x W: W = 1 for
    per-label trees, K for shared ones) and states (leaves x S)."""
    tree: np.ndarray
    label: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    value: np.ndarray
    states: np.ndarray


# How leaf_values divides a leaf's residual sum G: by its cells N (the paper's mean G / (N + lam), the grower's
# own), by its positions, or by its diagonal Hessian.
CELL_MEAN, POSITION_MEAN, NEWTON = 0, 1, 2


class LeafSums(NamedTuple):
    """Per leaf and label (nodes x G): the residual sum g and the divisor h of leaf_values."""
    g: np.ndarray
    h: np.ndarray


def leaf_values(D, is_start, allowed, tree, segments, lam, mode):
    """Leaf values (nodes x G; inner nodes 0) of the labels k0 .. k0 + G - 1 whose residuals are D (T x S x G)
    and whose allowed previous states are allowed (S x G): G / (lam + h) over each leaf's cells (its segment's
    positions x its states that may precede the label), clipped to [-1, 1]. mode:
    - CELL_MEAN: h = the leaf's N cells, the paper's mean (Eq. 1). A shared tree's leaves get this per label:
      its split was chosen on a projection of the residuals, its values come from each label's own.
    - POSITION_MEAN: h = the leaf's positions: the paper's mean spreads a position's gradient
      sum_s D = I(y = k) - P(y = k) over the leaf's states and so steps a state-free leaf K + 1 times too short;
      this is a Newton step that takes 1 for each position's curvature (at most 1/4, so the step is
      conservative), which never needs the clip for the CRF loss (|sum over a position's cells| <= 1).
    - NEWTON: h = sum(|D| (1 - |D|)), one Newton step on the CRF loss with its diagonal Hessian (for a labelled
      cell |D| (1 - |D|) = P (1 - P); Friedman's TreeBoost step for the multinomial deviance).
    The clip keeps the paper's bound |leaf value| <= 1, which the cache's float32 range relies on."""
    sums = LeafSums(np.zeros((len(tree.kind), D.shape[2])), np.zeros((len(tree.kind), D.shape[2])))
    add_leaf_sums(D, 0, is_start, allowed, tree, segments, mode, sums)
    return values_of(sums, lam)


def values_of(sums: LeafSums, lam: float) -> np.ndarray:
    """leaf_values' G / (lam + h), clipped to [-1, 1] (0 where lam + h is 0: inner nodes, empty leaves)."""
    den = sums.h + lam
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0.0, np.clip(sums.g / np.where(den > 0.0, den, 1.0), -1.0, 1.0), 0.0)


@njit(cache=True, nogil=True)
def add_leaf_sums(D, a, is_start, allowed, tree, segments, mode, sums):
    """Add leaf_values' G and h of the positions a .. a + len(D) - 1 (D: their residuals, len(D) x S x G) into
    sums: a chunk of positions at a time, so that the residuals of every label need not exist at once. Each
    leaf's segment is ascending: its part in the chunk is found by bisection."""
    kind = tree.kind
    S = D.shape[1]
    G = D.shape[2]
    b = a + D.shape[0]
    m = np.empty(G)  # the leaf's states that may precede each label, at the position being read
    for node in range(kind.shape[0]):
        if kind[node] != LEAF:
            continue
        states = tree.states[node]
        g = sums.g[node]
        h = sums.h[node]
        lo = segments.start[node]
        end = lo + segments.length[node]
        hi = end
        while lo < hi:  # the first position >= a
            mid = (lo + hi) // 2
            if segments.pos[mid] < a:
                lo = mid + 1
            else:
                hi = mid
        for i in range(lo, end):
            t = segments.pos[i]
            if t >= b:
                break
            first, last = (0, 1) if is_start[t] else (1, S)
            m[:] = 0.0
            for s in range(first, last):
                if not states[s]:
                    continue
                for j in range(G):
                    if allowed[s, j]:
                        d = D[t - a, s, j]
                        g[j] += d
                        m[j] += 1.0
                        if mode == NEWTON:
                            h[j] += abs(d) * (1.0 - abs(d))
            for j in range(G):
                if mode == CELL_MEAN:
                    h[j] += m[j]
                elif mode == POSITION_MEAN and m[j] > 0.0:
                    h[j] += 1.0


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
    over each leaf's (positions x states) of the LeafTable (a shared tree's leaf: E[t, s, :] *= exp(scale_by *
    its value vector)). Every leaf's segment pbufs[tree][lo:hi] must be
    ascending (grow_tree's are). The positions are walked in blocks of ``block``, every leaf applying its part
    of a block in turn: a block of E is loaded once for all the trees instead of once per tree (E[t, s, k] for
    one k lies on a separate cache line for every (t, s))."""
    L = leaves.tree.shape[0]
    S = E.shape[1]
    W = leaves.value.shape[1]
    factor = np.empty((L, W), dtype=np.float32)
    for l in range(L):
        for w in range(W):
            factor[l, w] = np.float32(np.exp(scale_by * leaves.value[l, w]))
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
            f = factor[l, 0]
            m = n_sel[l]
            while c < hi and seg[c] < b1:
                t = seg[c]
                if k >= 0:
                    for j in range(m):
                        E[t, sel[l, j], k] *= f
                else:
                    for j in range(m):
                        for w in range(W):
                            E[t, sel[l, j], w] *= factor[l, w]
                c += 1
            cur[l] = c
