"""The tree walk: one position's potentials from one tree, for every previous state at once, with the missing
value routing rule. It serves training-time evaluation (positions a tree was not fitted on, dev sets) and rows
with missing values at prediction; rows without missing values are predicted by the block kernels
(predict_partition.py, predict_bitmask.py).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .missing import is_missing, route, yes_share
from .sparse import mark_row
from .trees import FEATURE, LEAF, routes_missing


class WalkScratch(NamedTuple):
    """A walk's stack of nodes still to visit, the states reaching each (masks) and their weights."""
    stack: np.ndarray
    masks: np.ndarray
    weights: np.ndarray


@njit(cache=True, nogil=True)
def walk_tree(out, t, present, tree, rows, missing, root, scratch):
    """out[s] += tree(x_t, s) for all s: one walk from the root that carries the set of states still reaching a
    node. out is S x 1 for a per-label tree, S x K for a shared one (its leaves' vectors). A feature test reads ``present`` (position t's row marked 1, see sparse.mark_row); where the routing
    rule is on and the feature's variable is missing at t, the split's surrogates decide, else it follows both
    branches weighted by the split's yes share (trees without surrogate slots) or the majority branch."""
    stack = scratch.stack
    masks = scratch.masks
    weights = scratch.weights
    kind = tree.kind
    routing = routes_missing(missing)
    proportional = tree.surr_feature.shape[1] == 0
    top = 0
    stack[0] = root
    masks[0, :] = True
    weights[0] = 1.0
    while top >= 0:
        node = stack[top]
        kd = kind[node]
        a = root + tree.yes[node]
        b = root + tree.no[node]
        if kd == LEAF:
            w = weights[top]
            shared = tree.vector.shape[1] > 0
            v = tree.value[node] * w
            for s in range(out.shape[0]):
                if masks[top, s]:
                    if shared:
                        for k in range(out.shape[1]):
                            out[s, k] += tree.vector[node, k] * w
                    else:
                        out[s, 0] += v
            top -= 1
        elif kd == FEATURE:
            f = tree.feature[node]
            if routing and is_missing(missing, t, f):
                d = route(rows, missing, t, f, tree.surr_feature[node], tree.surr_same[node])
                if d < 0:
                    share = yes_share(tree.count, a, b)
                    if proportional:
                        masks[top + 1, :] = masks[top]
                        weights[top + 1] = weights[top] * share
                        weights[top] *= 1.0 - share
                        stack[top] = b
                        top += 1
                        stack[top] = a
                        continue
                    d = 1 if share > 0.5 else 0
                stack[top] = a if d == 1 else b
            else:
                stack[top] = a if present[f] else b
        else:
            new_top = _split_states(stack, masks, top, a, b, tree.states)
            if new_top > top:
                weights[new_top] = weights[top]
            top = new_top


@njit(cache=True, nogil=True)
def _split_states(stack, masks, top, a, b, states):
    """A walk's state split at stack entry top into children a (yes) and b (no): the no-branch replaces the
    entry, the yes-branch goes on top of it; a branch no state reaches is dropped. Returns the new top."""
    any_a = False
    any_b = False
    for s in range(masks.shape[1]):
        m = masks[top, s]
        ma = m and states[a, s]
        mb = m and states[b, s]
        masks[top + 1, s] = ma
        masks[top, s] = mb
        any_a = any_a or ma
        any_b = any_b or mb
    if any_b:
        stack[top] = b
        if any_a:
            top += 1
            stack[top] = a
    elif any_a:
        masks[top, :] = masks[top + 1]
        stack[top] = a
    else:
        top -= 1
    return top


@njit(cache=True, nogil=True)
def _present_marks(tree):
    """A byte per feature the tree tests (see sparse.mark_row)."""
    return np.zeros(tree.feature.max() + 1 if tree.feature.shape[0] else 1, dtype=np.uint8)


@njit(cache=True, nogil=True)
def multiply_tree(E, positions, rows, tree, missing, k, scale_by, max_depth):
    """E[t, s, k] *= exp(scale_by * tree(x_t, s)) at the given positions (those a tree was not fitted on); a
    shared tree (k = -1) multiplies E[t, s, :] by its leaves' vectors."""
    S = E.shape[1]
    present = _present_marks(tree)
    scratch = WalkScratch(np.empty(max_depth + 1, dtype=np.int64), np.empty((max_depth + 1, S), dtype=np.bool_),
                          np.empty(max_depth + 1))
    width = tree.vector.shape[1] if k < 0 else 1
    row = np.empty((S, width))
    for i in range(positions.shape[0]):
        t = positions[i]
        mark_row(present, 1, rows.indptr, rows.indices, t)
        row[:] = 0.0
        walk_tree(row, t, present, tree, rows, missing, 0, scratch)
        mark_row(present, 0, rows.indptr, rows.indices, t)
        for s in range(S):
            for j in range(width):
                E[t, s, k if k >= 0 else j] *= np.float32(np.exp(scale_by * row[s, j]))


@njit(cache=True, nogil=True)
def walk_potentials(at, rows, forest, missing, n_states, n_labels):
    """phi (len(at) x S x K): every tree of the Forest walked at the positions ``at`` (those with missing
    values, at prediction)."""
    nodes = forest.nodes
    max_depth = 0
    for i in range(forest.depths.shape[0]):
        max_depth = max(max_depth, forest.depths[i])
    phi = np.zeros((at.shape[0], n_states, n_labels))
    scratch = WalkScratch(np.empty(max_depth + 1, dtype=np.int64),
                          np.empty((max_depth + 1, n_states), dtype=np.bool_), np.empty(max_depth + 1))
    present = _present_marks(nodes)
    row = np.empty((n_states, nodes.vector.shape[1] or 1))
    for i in range(at.shape[0]):
        t = at[i]
        mark_row(present, 1, rows.indptr, rows.indices, t)
        for j in range(forest.roots.shape[0] - 1):
            row[:] = 0.0
            walk_tree(row, t, present, nodes, rows, missing, forest.roots[j], scratch)
            k = forest.labels[j]
            if k >= 0:
                phi[i, :, k] += row[:, 0]
            else:
                phi[i] += row
        mark_row(present, 0, rows.indptr, rows.indices, t)
    return phi
