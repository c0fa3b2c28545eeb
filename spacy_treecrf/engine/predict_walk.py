"""The tree walk: the leaves one position reaches in one tree, for every previous state at once, with the missing
value routing rule. It serves training-time evaluation (moves at positions a tree was not fitted on, dev sets)
and rows with missing values at prediction; rows without missing values are predicted by the block kernels
(predict_partition.py, predict_bitmask.py). Rows reach it expanded for the trees' numeric tests (numeric.expand),
so every feature test is a presence.
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .missing import is_missing, route, yes_share
from .intrinsics import with_room
from .numeric import NumericIndex
from .sparse import mark_row
from .trees import FEATURE, LEAF, routes_missing


class WalkScratch(NamedTuple):
    """A walk's stack of nodes still to visit, the states reaching each (masks) and their weights; the leaves
    it reached (leaf, relative to the root) and their weights (share); ``binary``: the NumericIndex of expanded
    rows (none: their tests are presences) for the routing rule."""
    stack: np.ndarray
    masks: np.ndarray
    weights: np.ndarray
    leaf: np.ndarray
    share: np.ndarray
    binary: NumericIndex


@njit(cache=True, nogil=True)
def _walk_scratch(max_depth, n_states, n_nodes):
    binary = NumericIndex(column=np.zeros(0, np.int32), base=np.zeros(0, np.int32), end=np.zeros(0, np.int32))
    return WalkScratch(stack=np.empty(max_depth + 1, dtype=np.int64),
                       masks=np.empty((max_depth + 1, n_states), dtype=np.bool_), weights=np.empty(max_depth + 1),
                       leaf=np.empty(n_nodes, dtype=np.int64), share=np.empty(n_nodes), binary=binary)


@njit(cache=True, nogil=True, inline="always")
def walk_leaves(t, present, tree, rows, missing, root, scratch):
    """The leaves position t reaches from the root, for every previous state at once: one walk that carries the
    set of states still reaching a node. Returns n: scratch.leaf[:n] (nodes from the root; a leaf's states are
    tree.states[root + leaf], as a child's states lie within its parent's) with weights scratch.share[:n]. A
    feature test reads ``present`` (position t's row marked 1, see sparse.mark_row); where the routing rule is
    on and the feature's variable is missing at t, the split's surrogates decide, else it follows both branches
    weighted by the split's yes share (trees without surrogate slots) or the majority branch."""
    stack = scratch.stack
    masks = scratch.masks
    weights = scratch.weights
    kind = tree.kind
    routing = routes_missing(missing)
    proportional = tree.surr_feature.shape[1] == 0
    n = 0
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
            scratch.leaf[n] = node - root
            scratch.share[n] = weights[top]
            n += 1
            top -= 1
        elif kd == FEATURE:
            f = tree.feature[node]
            if routing and is_missing(missing, t, f):
                d = route(rows, scratch.binary, missing, t, f, tree.surr_feature[node], tree.surr_same[node])
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
            else:  # this test and the known ones after it, the node in a register (no stack traffic)
                node = a if present[f] else b
                while kind[node] == FEATURE:
                    f = tree.feature[node]
                    if routing and is_missing(missing, t, f):
                        break
                    node = root + (tree.yes[node] if present[f] else tree.no[node])
                stack[top] = node
        else:
            new_top = _split_states(stack, masks, top, a, b, tree.states)
            if new_top > top:
                weights[new_top] = weights[top]
            top = new_top
    return n


@njit(cache=True, nogil=True, inline="always")
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
def walk_moves(positions, rows, tree, missing, max_depth):
    """The leaves one tree sends the given positions to (those it was not fitted on, or a dev set's), for the
    moves of moves.py: per leaf reached, (position, leaf node, weight: 1 unless the routing rule split the
    position between branches)."""
    S = tree.states.shape[1]
    present = _present_marks(tree)
    scratch = _walk_scratch(max_depth, S, tree.kind.shape[0])
    cap = positions.shape[0] + 16
    position = np.empty(cap, dtype=np.int64)
    leaf = np.empty(cap, dtype=np.int64)
    weight = np.empty(cap)
    m = 0
    for i in range(positions.shape[0]):
        t = positions[i]
        mark_row(present, 1, rows.indptr, rows.indices, t)
        n = walk_leaves(t, present, tree, rows, missing, 0, scratch)
        mark_row(present, 0, rows.indptr, rows.indices, t)
        if m + n > cap:
            cap = max(m + n, 2 * cap)
            position = with_room(position, cap)
            leaf = with_room(leaf, cap)
            weight = with_room(weight, cap)
        for j in range(n):
            position[m] = t
            leaf[m] = scratch.leaf[j]
            weight[m] = scratch.share[j]
            m += 1
    return position[:m], leaf[:m], weight[:m]


class ForestWalk(NamedTuple):
    """The leaves one position reaches in every tree of a Forest (forest_leaves): tree[i], leaf[i] (a node of
    the Forest) and weight[i] (1 unless the routing rule split the position between branches); a leaf's
    previous states are forest.nodes.states[leaf]. Room for every node of the forest."""
    tree: np.ndarray
    leaf: np.ndarray
    weight: np.ndarray


@njit(cache=True, nogil=True)
def _forest_scratch(forest, n_states):
    max_depth = 0
    n_nodes = 0
    for i in range(forest.depths.shape[0]):
        max_depth = max(max_depth, forest.depths[i])
        n_nodes = max(n_nodes, forest.roots[i + 1] - forest.roots[i])
    scratch = _walk_scratch(max_depth, n_states, n_nodes)
    n_all = forest.nodes.kind.shape[0]
    return scratch, ForestWalk(tree=np.empty(n_all, dtype=np.int64), leaf=np.empty(n_all, dtype=np.int64),
                               weight=np.empty(n_all))


@njit(cache=True, nogil=True, inline="always")
def _walk_forest(t, present, rows, forest, missing, scratch, out):
    """Every tree of the Forest walked at position t (its row marked in ``present``); returns n: out[:n]."""
    nodes = forest.nodes
    m = 0
    for j in range(forest.roots.shape[0] - 1):
        root = forest.roots[j]
        for h in range(walk_leaves(t, present, nodes, rows, missing, root, scratch)):
            out.tree[m] = j
            out.leaf[m] = root + scratch.leaf[h]
            out.weight[m] = scratch.share[h]
            m += 1
    return m


@njit(cache=True, nogil=True)
def forest_leaves(at, rows, forest, missing, n_states):
    """The leaves the positions ``at`` reach in every tree (for explanations: walk_potentials leaf by leaf):
    (ptr, ForestWalk), position at[i]'s leaves being ForestWalk entries ptr[i]:ptr[i + 1]."""
    scratch, out = _forest_scratch(forest, n_states)
    present = _present_marks(forest.nodes)
    ptr = np.zeros(at.shape[0] + 1, dtype=np.int64)
    tree = np.empty(16, dtype=np.int64)
    leaf = np.empty(16, dtype=np.int64)
    weight = np.empty(16)
    for i in range(at.shape[0]):
        mark_row(present, 1, rows.indptr, rows.indices, at[i])
        m = _walk_forest(at[i], present, rows, forest, missing, scratch, out)
        mark_row(present, 0, rows.indptr, rows.indices, at[i])
        a = ptr[i]
        tree = with_room(tree, a + m)
        leaf = with_room(leaf, a + m)
        weight = with_room(weight, a + m)
        tree[a:a + m] = out.tree[:m]
        leaf[a:a + m] = out.leaf[:m]
        weight[a:a + m] = out.weight[:m]
        ptr[i + 1] = a + m
    n = ptr[at.shape[0]]
    return ptr, ForestWalk(tree=tree[:n].copy(), leaf=leaf[:n].copy(), weight=weight[:n].copy())


@njit(cache=True, nogil=True)
def walk_potentials(at, rows, forest, missing, n_states, n_labels):
    """phi (len(at) x S x K): every tree of the Forest walked at the positions ``at`` (those with missing
    values, at prediction)."""
    nodes = forest.nodes
    phi = np.zeros((at.shape[0], n_states, n_labels))
    scratch, out = _forest_scratch(forest, n_states)
    present = _present_marks(nodes)
    vectors = forest.vectors
    for i in range(at.shape[0]):
        t = at[i]
        mark_row(present, 1, rows.indptr, rows.indices, t)
        for h in range(_walk_forest(t, present, rows, forest, missing, scratch, out)):
            node = out.leaf[h]
            k = forest.labels[out.tree[h]]
            w = out.weight[h]
            for s in range(n_states):
                if nodes.states[node, s]:
                    if k < 0:
                        for p in range(vectors.ptr[node], vectors.ptr[node + 1]):
                            phi[i, s, vectors.label[p]] += w * vectors.value[p]
                    else:
                        phi[i, s, k] += w * nodes.value[node]
        mark_row(present, 0, rows.indptr, rows.indices, t)
    return phi
