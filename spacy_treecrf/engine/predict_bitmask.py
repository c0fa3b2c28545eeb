"""Prediction by bit masks (QuickScorer): each tree's leaves numbered left to right, and a row's leaf for every
previous state found by ANDing the masks of the tests it passes. Its cost per row does not depend on how many
rows come together, so it serves small batches (a single sentence); predict_partition.py serves large ones.
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .intrinsics import count_trailing_zeros
from .trees import FEATURE, LEAF, STATE


class BitmaskIndex(NamedTuple):
    """A Forest as bit masks (see bitmask_index): per tree and state its all-absent output (defaults); per
    tested feature f its entries feature_ptr[f]:feature_ptr[f + 1], each a tree (entry_tree) and the slots its
    presence removes (entry_mask); per tree and state the slots the state removes (state_mask); per tree the
    slots some state removes (state_sensitive); per tree and slot its leaf value (slot_value)."""
    defaults: np.ndarray
    feature_ptr: np.ndarray
    entry_tree: np.ndarray
    entry_mask: np.ndarray
    state_mask: np.ndarray
    state_sensitive: np.ndarray
    slot_value: np.ndarray


@njit(cache=True, nogil=True)
def _leaf_slots(kind, yes, no, states, roots):
    """Each tree's leaves numbered left to right, the no-branch (feature absent, state not in the yes-set) on the
    left, plus a "zero slot" first in the subtree of every state split that some state reaches in neither child
    (the walk drops such a state: it gets nothing from that tree). Returns (lo, hi, zero, n_slots): node n's
    subtree holds the slots lo[n]:hi[n] (its zero slot, if any, is lo[n] = zero[n]) and tree i has n_slots[i]."""
    n = kind.shape[0]
    S = states.shape[1]
    lo = np.zeros(n, dtype=np.int64)
    hi = np.zeros(n, dtype=np.int64)
    zero = np.full(n, -1, dtype=np.int64)
    n_trees = roots.shape[0] - 1
    n_slots = np.zeros(n_trees, dtype=np.int64)
    stack = np.empty(n + 1, dtype=np.int64)
    for i in range(n_trees):
        root = roots[i]
        top = 0
        stack[0] = root
        c = 0
        while top >= 0:  # preorder, no-branch first: slots come out left to right
            node = stack[top]
            top -= 1
            lo[node] = c
            if kind[node] == LEAF:
                c += 1
                continue
            if kind[node] == STATE:
                a = root + yes[node]
                b = root + no[node]
                for s in range(S):
                    if not states[a, s] and not states[b, s]:
                        zero[node] = c
                        c += 1
                        break
            stack[top + 1] = root + yes[node]
            stack[top + 2] = root + no[node]
            top += 2
        n_slots[i] = c
        for node in range(roots[i + 1] - 1, root - 1, -1):  # children follow their parent
            hi[node] = lo[node] + 1 if kind[node] == LEAF else hi[root + yes[node]]
    return lo, hi, zero, n_slots


@njit(cache=True, nogil=True)
def _clear_slots(mask, a, b):
    for j in range(a, b):
        mask[j >> 6] &= ~(np.uint64(1) << np.uint64(j & 63))


@njit(cache=True, nogil=True)
def _exit_slot(feature_mask, state_mask):
    """The lowest slot left in both masks: where the walk ends (every tree keeps at least one)."""
    for w in range(feature_mask.shape[0]):
        m = feature_mask[w] & state_mask[w]
        if m != 0:
            return w * 64 + count_trailing_zeros(m)
    return -1


@njit(cache=True, nogil=True)
def _bitmask_tables(nodes, roots, slots, n_words):
    """The tables of a BitmaskIndex but state_sensitive; slots: _leaf_slots' (lo, hi, zero)."""
    kind, feature, yes, states, value = nodes.kind, nodes.feature, nodes.yes, nodes.states, nodes.value
    lo, hi, zero = slots
    n_trees = roots.shape[0] - 1
    S = states.shape[1]
    full = ~np.uint64(0)
    state_mask = np.full((n_trees, S, n_words), full, dtype=np.uint64)
    slot_value = np.zeros((n_trees, 64 * n_words))
    is_split = kind == FEATURE
    tested = feature[is_split]
    n_tested = tested.max() + 1 if tested.shape[0] else 0
    feature_ptr = np.zeros(n_tested + 1, dtype=np.int64)
    feature_ptr[1:] = np.cumsum(np.bincount(tested, minlength=n_tested))
    fill = feature_ptr[:-1].copy()
    entry_tree = np.empty(tested.shape[0], dtype=np.int32)
    entry_mask = np.full((tested.shape[0], n_words), full, dtype=np.uint64)
    for i in range(n_trees):
        root = roots[i]
        for node in range(root, roots[i + 1]):
            if kind[node] == LEAF:
                slot_value[i, lo[node]] = value[node]
                continue
            a = root + yes[node]
            b = root + nodes.no[node]
            if kind[node] == FEATURE:  # present: the walk leaves the no-branch
                e = fill[feature[node]]
                fill[feature[node]] += 1
                entry_tree[e] = i
                _clear_slots(entry_mask[e], lo[b], hi[b])
                continue
            for s in range(S):
                if states[a, s]:  # the zero slot and the no-branch
                    _clear_slots(state_mask[i, s], lo[node], hi[b])
                elif states[b, s]:
                    if zero[node] >= 0:
                        _clear_slots(state_mask[i, s], zero[node], zero[node] + 1)
                else:  # dropped here: both branches go, the zero slot stays
                    _clear_slots(state_mask[i, s], lo[b], hi[a])
    defaults = np.zeros((n_trees, S))
    for i in range(n_trees):
        for s in range(S):
            defaults[i, s] = slot_value[i, _exit_slot(state_mask[i, s], state_mask[i, s])]
    return defaults, feature_ptr, entry_tree, entry_mask, state_mask, slot_value


def bitmask_index(forest) -> BitmaskIndex:
    """The Forest as bit masks for bitmask_potentials (QuickScorer, Lucchese et al. 2015, for binary sparse rows
    and previous-state splits).

    A tree's walk ends at the lowest slot (see _leaf_slots) that no test on the way removes: a present feature
    removes its node's no-branch (entry_mask; the entries of feature f are feature_ptr[f]:feature_ptr[f + 1]),
    a state removes what its state splits send it away from (state_mask, per tree and state). A row with none
    of a tree's features gets the tree's default (its all-absent output, per state).
    state_sensitive marks, per tree, the slots some state removes: where the features alone end the walk at
    any other slot, every state ends there too."""
    nodes = forest.nodes
    lo, hi, zero, n_slots = _leaf_slots(nodes.kind, nodes.yes, nodes.no, nodes.states, forest.roots)
    n_words = max(1, (int(n_slots.max()) + 63) // 64) if len(n_slots) else 1
    defaults, feature_ptr, entry_tree, entry_mask, state_mask, slot_value = _bitmask_tables(
        nodes, forest.roots, (lo, hi, zero), n_words)
    state_sensitive = np.bitwise_or.reduce(~state_mask, axis=1) if len(state_mask) else state_mask[:, 0]
    return BitmaskIndex(defaults=defaults, feature_ptr=feature_ptr, entry_tree=entry_tree, entry_mask=entry_mask,
                        state_mask=state_mask, state_sensitive=state_sensitive, slot_value=slot_value)


@njit(cache=True, nogil=True)
def bitmask_potentials(rows, n_labels, labels, index):
    """phi (T x S x K) = sum of every tree: at each position only the trees testing one of its features move
    from their default, and a tree's leaf for every state comes from ANDing bit masks, not from walking it.
    Where the features alone end a tree's walk at a slot no state removes, one lookup serves every state.

    Rows may hold feature ids no tree tests."""
    indptr, indices = rows.indptr, rows.indices
    defaults, feature_ptr, entry_tree = index.defaults, index.feature_ptr, index.entry_tree
    entry_mask = index.entry_mask
    state_mask, state_sensitive, slot_value = index.state_mask, index.state_sensitive, index.slot_value
    T = indptr.shape[0] - 1
    n_trees, S, n_words = state_mask.shape
    n_tested = feature_ptr.shape[0] - 1
    phi = np.empty((T, S, n_labels))
    same = np.empty(n_labels)  # per label: the trees' values that are the same for every state
    stamp = np.zeros(n_trees, dtype=np.int64)
    feature_mask = np.empty((n_trees, n_words), dtype=np.uint64)
    for t in range(T):
        same[:] = 0.0
        phi[t] = 0.0
        feature_mask[:] = ~np.uint64(0)
        for p in range(indptr[t], indptr[t + 1]):
            f = indices[p]
            if f >= n_tested:
                continue
            for e in range(feature_ptr[f], feature_ptr[f + 1]):  # no branch on a tree's first entry: unpredictable
                i = entry_tree[e]
                stamp[i] = t + 1
                for w in range(n_words):
                    feature_mask[i, w] &= entry_mask[e, w]
        for i in range(n_trees):  # a row of words typically touches nearly every tree: visit them all in order
            k = labels[i]
            if stamp[i] != t + 1:
                for s in range(S):
                    phi[t, s, k] += defaults[i, s]
                continue
            slot = _exit_slot(feature_mask[i], feature_mask[i])
            if (state_sensitive[i, slot >> 6] >> np.uint64(slot & 63)) & np.uint64(1) == 0:
                same[k] += slot_value[i, slot]
                continue
            for s in range(S):
                phi[t, s, k] += slot_value[i, _exit_slot(feature_mask[i], state_mask[i, s])]
        for s in range(S):
            for k in range(n_labels):
                phi[t, s, k] += same[k]
    return phi

