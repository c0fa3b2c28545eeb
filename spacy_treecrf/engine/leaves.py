"""Leaf values from a grown tree's leaf segments (grow.Segments: each leaf's positions; its states are the
leaf's state set). The same segments move the training cache without evaluating the tree (moves.py).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .crf import label_residual, next_factors
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


def leaf_nodes(tree) -> np.ndarray:
    """The tree's leaves (node ids, ascending)."""
    return np.flatnonzero(tree.kind == LEAF)


def covering_leaves(tree, allowed) -> np.ndarray:
    """Per node: a leaf whose state set holds every state that may precede some label (allowed: S x K), so that
    its cells at a position are all of that position's cells and its sums come from add_label_leaf_sums."""
    return (tree.kind == LEAF) & np.all(tree.states | ~allowed.any(axis=1)[None, :], axis=1)


@njit(cache=True, nogil=True, inline="always")
def _add_divisor(h, m, w, mode):
    """Add to h (per label) leaf_values' divisor of one position of weight w whose cells in the leaf weigh m
    (per label): CELL_MEAN counts the cells, POSITION_MEAN the position once where it has some (NEWTON's is
    added cell by cell)."""
    for j in range(h.shape[0]):
        if mode == CELL_MEAN:
            h[j] += m[j]
        elif mode == POSITION_MEAN and m[j] > 0.0:
            h[j] += w


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
            _add_divisor(h, m, w, mode)


@njit(cache=True, nogil=True)
def add_label_leaf_sums(targets, allowed, tree, segments, leaves, covering, mode, sums):
    """add_leaf_sums for ``leaves`` over all their positions without the T x S x K residuals, from the LabelTargets
    ``targets``: a leaf that holds every state that may precede a label (``covering``, per leaf: covering_leaves)
    adds crf.label_residual, the residuals summed over a position's states, and its h from the number of states
    that may precede each label (at a sequence's first position only the start state); the others (below a split
    on the previous label: few positions) add their states' cells (_add_state_cells). CELL_MEAN and
    POSITION_MEAN only (NEWTON's h needs every cell)."""
    S, G = allowed.shape
    n_first = np.zeros(G)  # the cells of each label at a first position / at any other
    n_other = np.zeros(G)
    for j in range(G):
        n_first[j] = 1.0 if allowed[0, j] else 0.0
        for s in range(1, S):
            if allowed[s, j]:
                n_other[j] += 1.0
    m = np.empty(G)
    fr = np.empty(G)
    cl = np.empty(G)
    shared = segments.share.shape[0] > 0
    for i in range(leaves.shape[0]):
        node = leaves[i]
        states = tree.states[node]
        g = sums.g[node]
        h = sums.h[node]
        lo = segments.start[node]
        for p in range(lo, lo + segments.length[node]):
            t = segments.pos[p]
            w = segments.share[p] if shared else 1.0
            if covering[i]:
                for j in range(G):
                    n = n_first[j] if targets.is_start[t] else n_other[j]
                    if n > 0.0:
                        g[j] += w * label_residual(targets, t, j)
                        h[j] += w * n if mode == CELL_MEAN else w
                continue
            m[:] = 0.0
            if targets.is_start[t]:  # the start state's cells are all of the position's: label_residual
                if states[0]:
                    for j in range(G):
                        if allowed[0, j]:
                            g[j] += w * label_residual(targets, t, j)
                            m[j] += w
            else:
                _add_state_cells(targets, t, states, allowed, w, g, m, fr, cl)
            _add_divisor(h, m, w, mode)


@njit(cache=True, nogil=True, inline="always")
def _add_state_cells(targets, t, states, allowed, w, g, m, fr, cl):
    """Add w times crf.residual_slice's out[t, s, :] (t not a sequence's first position) for the previous states
    s in ``states`` into g, and w for each of their cells that ``allowed`` holds into m (fr, cl: scratch of K
    for crf.next_factors, whose docstring gives a cell). Forbidden cells hold 0 in E, so every label of a valid
    state's row is added. Inlined: called per position, a call would count references to every array of
    ``targets`` (see crf.py's note on its helpers)."""
    S, G = allowed.shape
    P = targets.P
    partial = targets.partial[t]
    y = targets.y[t]
    weight = targets.weight[t] * w
    next_factors(targets.beta, targets.scale, targets.cbeta, targets.cscale, t, partial, y, 0, 1.0, fr, cl)
    for s in range(1, S):
        if not states[s]:
            continue
        for j in range(G):
            if allowed[s, j]:
                m[j] += w
        r = P.group[t, s]
        if r < 0:
            continue
        row = P.start[t] + r
        a_s = targets.alpha[t - 1, s - 1]
        c_s = targets.calpha[t - 1, s - 1] if partial else 0.0
        for j in range(G):
            e = np.float64(P.values[row, j])
            g[j] += weight * (c_s * e * cl[j] - a_s * e * fr[j])
        if not partial and y >= 0 and targets.y[t - 1] == s - 1:
            g[y] += weight
