"""Leaf values from a grown tree's leaf segments (grow.Segments: each leaf's positions; its states are the
leaf's state set). The same segments move the training cache without evaluating the tree (moves.py).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .trees import LEAF


# How leaf_values divides a leaf's residual sum G: by its cells N (the paper's mean G / (N + lam), the grower's
# own), by its positions, or by its diagonal Hessian.
CELL_MEAN, POSITION_MEAN, NEWTON = 0, 1, 2


class LeafSums(NamedTuple):
    """Per leaf and label (nodes x G): the residual sum g and the divisor h of leaf_values."""
    g: np.ndarray
    h: np.ndarray


def leaf_values(D, is_start, allowed, tree, segments, lam, mode, l1=0.0):
    """Leaf values (nodes x G; inner nodes 0) of the labels k0 .. k0 + G - 1 whose residuals are D (T x S x G)
    and whose allowed previous states are allowed (S x G): G / (lam + h) over each leaf's cells (its segment's
    positions x its states that may precede the label), clipped to [-1, 1], with G shrunk towards 0 by ``l1``
    (values_of). mode:
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
    return values_of(sums, lam, l1)


def values_of(sums: LeafSums, lam: float, l1: float = 0.0) -> np.ndarray:
    """leaf_values' G / (lam + h), clipped to [-1, 1] (0 where lam + h is 0: inner nodes, empty leaves), with
    G soft-thresholded by l1 first: sign(G) max(|G| - l1, 0), the minimiser of the leaf's squared loss plus
    lam / 2 v^2 + l1 |v| (XGBoost's alpha). A label whose residuals in the leaf sum to at most l1 gets exactly 0:
    shared trees' leaf vectors keep only the labels that matter there (trees.LeafVectors)."""
    den = sums.h + lam
    g = np.sign(sums.g) * np.maximum(np.abs(sums.g) - l1, 0.0) if l1 > 0 else sums.g
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0.0, np.clip(g / np.where(den > 0.0, den, 1.0), -1.0, 1.0), 0.0)


@njit(cache=True, nogil=True)
def add_leaf_sums(D, a, is_start, allowed, tree, segments, mode, sums):
    """Add leaf_values' G and h of the positions a .. a + len(D) - 1 (D: their residuals, len(D) x S x G) into
    sums: a chunk of positions at a time, so that the residuals of every label need not exist at once. Each
    leaf's segment is ascending: its part in the chunk is found by bisection. A position counts with its
    segment's share (Segments) where it has one."""
    kind = tree.kind
    S = D.shape[1]
    G = D.shape[2]
    b = a + D.shape[0]
    m = np.empty(G)  # the leaf's states that may precede each label, at the position being read
    shared = segments.share.shape[0] > 0
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
            w = segments.share[i] if shared else 1.0
            first, last = (0, 1) if is_start[t] else (1, S)
            m[:] = 0.0
            for s in range(first, last):
                if not states[s]:
                    continue
                for j in range(G):
                    if allowed[s, j]:
                        d = D[t - a, s, j]
                        g[j] += w * d
                        m[j] += w
                        if mode == NEWTON:
                            h[j] += w * abs(d) * (1.0 - abs(d))
            for j in range(G):
                if mode == CELL_MEAN:
                    h[j] += m[j]
                elif mode == POSITION_MEAN and m[j] > 0.0:
                    h[j] += w
