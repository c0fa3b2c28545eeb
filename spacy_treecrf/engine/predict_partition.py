"""Prediction by partition: one tree at a time over a block of rows at once, the way the grower partitions
positions. A node's rows are split by its test, so a row costs nothing at the tests on the absent side of its
path. Its cost per row falls with the rows that come together, so it serves large batches;
predict_bitmask.py serves small ones.
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .intrinsics import count_trailing_zeros, with_room
from .sparse import transpose
from .trees import FEATURE, LEAF, Rows


class PartitionIndex(NamedTuple):
    """A Forest's tables for partition_potentials: the tested features numbered 0.. as columns (column_of[f], -1
    for a feature no tree tests; column[n] the column node n tests); per node its chain (the node where the walk
    entered the run of no-branches it lies on: the root or a yes-child), its state set as 64-bit words
    (state_words) and the value of the leaf its chain ends in (chain_value, nodes x W: W = 1 for per-label trees,
    K for shared trees, whose leaves hold a value per label)."""
    column_of: np.ndarray
    column: np.ndarray
    chain: np.ndarray
    state_words: np.ndarray
    chain_value: np.ndarray


class Cells(NamedTuple):
    """Which cells (t, s, k) to compute: s in start_states[k] at rows with is_start, s in other_states[k] at the
    others (per label, states as 64-bit words); the rest are 0."""
    is_start: np.ndarray
    start_states: np.ndarray
    other_states: np.ndarray


def partition_index(forest) -> PartitionIndex:
    """The Forest's PartitionIndex."""
    nodes = forest.nodes
    kind, feature, states = nodes.kind, nodes.feature, nodes.states
    is_split = kind == FEATURE
    tested = np.unique(feature[is_split])
    column_of = np.full(int(tested[-1]) + 1 if len(tested) else 0, -1, dtype=np.int32)
    column_of[tested] = np.arange(len(tested), dtype=np.int32)
    column = np.where(is_split, column_of[np.where(is_split, feature, 0)] if len(tested) else -1, -1).astype(np.int32)
    chain, words, chain_value = _partition_index(nodes, forest.roots, max(1, (states.shape[1] + 63) // 64))
    return PartitionIndex(column_of, column, chain, words, chain_value)


@njit(cache=True, nogil=True)
def _partition_index(nodes, roots, n_words):
    kind, no, states = nodes.kind, nodes.no, nodes.states
    n, S = states.shape
    chain = np.arange(n, dtype=np.int32)
    words = np.zeros((n, n_words), dtype=np.uint64)
    for node in range(n):
        for s in range(S):
            if states[node, s]:
                words[node, s >> 6] |= np.uint64(1) << np.uint64(s & 63)
    # the value of the leaf at the end of the node's run of no-branches
    chain_value = nodes.vector.copy() if nodes.vector.shape[1] > 0 else nodes.value.copy().reshape((n, 1))
    for i in range(roots.shape[0] - 1):
        root = roots[i]
        for node in range(root, roots[i + 1]):  # children follow their parent
            if kind[node] != LEAF:
                chain[root + no[node]] = chain[node]
        for node in range(roots[i + 1] - 1, root - 1, -1):
            if kind[node] != LEAF:
                chain_value[node, :] = chain_value[root + no[node]]
    return chain, words, chain_value


def label_state_words(cells):
    """(S x K) booleans -> per label k, its states s with cells[s, k] as 64-bit words (K x ceil(S / 64))."""
    S, K = cells.shape
    words = np.zeros((K, max(1, (S + 63) // 64)), dtype=np.uint64)
    for s in range(S):
        words[:, s // 64] |= np.where(cells[s], np.uint64(1) << np.uint64(s % 64), np.uint64(0))
    return words


def block_rows(n_labels: int, n_states: int) -> int:
    """Rows per call of _partition_block: every tree's nodes are visited once per block; 16384 rows, fewer
    where the block's accumulator (K x (S + 1) x rows floats) would pass 64 MB (at least 1024)."""
    return int(min(16384, max(1024, 8_000_000 // (n_labels * (n_states + 1)))))


@njit(cache=True, nogil=True)
def partition_potentials(rows, forest, index, cells, n_states, block_rows, scaled):
    """phi (T x S x K) = sum of every tree, evaluated one tree at a time over ``block_rows`` rows at once, the
    way the grower partitions positions: a node's rows are split by its test, so a row costs nothing at the tests
    on the absent side of its path (see _partition_block).

    Only the Cells asked for are computed; the rest are 0. Rows may hold feature ids no tree tests.
    Returns (phi, E, c): with ``scaled``, phi is empty and (E, c) are crf.scaled_potentials of phi over those
    cells, made block by block (no T x S x K float64 array); without, E and c are empty."""
    indptr = rows.indptr
    is_start, start_states, other_states = cells
    T = indptr.shape[0] - 1
    S = n_states
    n_labels = start_states.shape[0]
    phi = np.zeros((0 if scaled else T, S, n_labels))
    E = np.zeros((T if scaled else 0, S, n_labels), dtype=np.float32)
    c = np.zeros(T if scaled else 0)
    max_depth = 0
    for i in range(forest.depths.shape[0]):
        max_depth = max(max_depth, forest.depths[i])
    block = max(1, block_rows)
    n = min(T, block)
    # per label: a row per state, then the part they all share; rows an odd number of cache lines apart, or the
    # 99 rows a position's cells read fall into one cache set when n is a multiple of 512 (16384 is)
    acc = np.empty((n_labels, S + 1, 8 * ((n + 7) // 8 | 1)))[:, :, :n]
    for r0 in range(0, T, block):
        r1 = min(T, r0 + block)
        chunk = Rows(indptr[r0:r1 + 1] - indptr[r0], rows.indices[indptr[r0]:indptr[r1]])
        acc[:] = 0.0
        _partition_block(acc, chunk, forest, index, Cells(is_start[r0:r1], start_states, other_states),
                         max_depth)
        for t in range(r1 - r0):
            states = start_states if is_start[r0 + t] else other_states
            top = -np.inf
            for k in range(n_labels):
                for s in range(S):
                    if (states[k, s >> 6] >> np.uint64(s & 63)) & np.uint64(1):
                        v = acc[k, s, t] + acc[k, S, t]
                        if scaled:
                            acc[k, s, t] = v
                            top = max(top, v)
                        else:
                            phi[r0 + t, s, k] = v
            if scaled:
                if not np.isfinite(top):
                    top = 0.0
                c[r0 + t] = top
                for k in range(n_labels):
                    for s in range(S):
                        if (states[k, s >> 6] >> np.uint64(s & 63)) & np.uint64(1):
                            E[r0 + t, s, k] = np.exp(acc[k, s, t] - top)
    return phi, E, c


@njit(cache=True, nogil=True)
def _tested_columns(indptr, indices, column_of, n_cols):
    """csc_index of the rows restricted to the tested features, by column (see partition_index)."""
    n_map = column_of.shape[0]
    cols = np.empty(indptr[indptr.shape[0] - 1], dtype=np.int32)
    for p in range(cols.shape[0]):
        cols[p] = column_of[indices[p]] if indices[p] < n_map else -1
    return transpose(indptr, cols, n_cols)


@njit(cache=True, nogil=True)
def _credit(acc, k, t, word, bits, delta):
    """acc[k, s, t] += delta for the states s in ``bits``, the 64-bit word ``word`` of a state set."""
    while bits != 0:
        acc[k, 64 * word + count_trailing_zeros(bits), t] += delta
        bits &= bits - np.uint64(1)


@njit(cache=True, nogil=True)
def _credit_vector(acc, t, word, bits, delta):
    """A shared tree's _credit: acc[k, s, t] += delta[k] for every label k."""
    while bits != 0:
        s = 64 * word + count_trailing_zeros(bits)
        for k in range(delta.shape[0]):
            acc[k, s, t] += delta[k]
        bits &= bits - np.uint64(1)


@njit(cache=True, nogil=True)
def _any_label(words):
    """The states of any label (K x words -> 1 x words): a shared tree's items hold them all."""
    out = np.zeros((1, words.shape[1]), dtype=np.uint64)
    for k in range(words.shape[0]):
        for w in range(words.shape[1]):
            out[0, w] |= words[k, w]
    return out


AT, POS, NXT, WHOLE = 0, 1, 2, 3  # the fields of _partition_block's item records


@njit(cache=True, nogil=True)
def _partition_block(acc, rows, forest, index, cells, max_depth):
    """acc[k, s, t] += the trees of label k at row t and state s (acc[k, S, t]: the part of every state). A shared
    tree (label -1) credits every label at once with its leaves' vectors; its items carry the states of any label.

    An item is a row with the previous states that reach a node together; AT is its current chain (see
    partition_index). Entering a chain credits the item with the value of the leaf the chain ends in, so a
    leaf costs nothing: only the moves do (the new chain's value minus the old one's). A feature split moves
    the items that have the feature to the yes-child, found from whichever is shorter: the feature's posting
    list or the node's item list (then tested on a bitmap of the feature). The rest stay where they are: a
    node's list is its chain's and keeps stale entries of items that left. A state split moves states: an
    item whose states go both ways leaves a new item with the yes-states."""
    indptr, indices = rows.indptr, rows.indices
    kind, yes, no = forest.nodes.kind, forest.nodes.yes, forest.nodes.no
    roots, labels = forest.roots, forest.labels
    column_of, column, chain, state_words, chain_value = index
    is_start, start_states, other_states = cells
    T = indptr.shape[0] - 1
    S = acc.shape[1] - 1
    n_words = state_words.shape[1]
    n_cols = 0
    for j in column_of:
        n_cols = max(n_cols, j + 1)
    col_ptr, col_pos = _tested_columns(indptr, indices, column_of, n_cols)
    bitmap_of = np.full(n_cols, -1, dtype=np.int64)  # frequent columns get a bit per row
    n_bitmaps = 0
    for f in range(n_cols):
        if (col_ptr[f + 1] - col_ptr[f]) * 64 >= T and T > 0:
            bitmap_of[f] = n_bitmaps
            n_bitmaps += 1
    bitmaps = np.zeros((n_bitmaps, (T + 63) >> 6), dtype=np.uint64)
    for f in range(n_cols):
        if bitmap_of[f] >= 0:
            for p in range(col_ptr[f], col_ptr[f + 1]):
                t = col_pos[p]
                bitmaps[bitmap_of[f], t >> 6] |= np.uint64(1) << np.uint64(t & 63)
    # items, one record each (an item's fields share a cache line): its chain (AT, -1: no state left), row (POS),
    # the row's next item (NXT; a row's first item is the row itself) and whether it holds all the row's states
    # for this label (WHOLE: credited on acc[k, S]); its states as words in ``mask``
    cap = 2 * T + 16
    item = np.empty((cap, 4), dtype=np.int32)
    mask = np.empty((cap, n_words), dtype=np.uint64)
    for t in range(T):
        item[t, POS] = t
        item[t, NXT] = -1
        item[t, WHOLE] = 1
    touched = np.empty(T, dtype=np.int32)  # the rows whose item a state split changed (NXT, WHOLE): reset them
    n_touched = 0
    buf = np.empty(4 * T + 16, dtype=np.int32)  # the item lists of the nodes on the stack, nested
    st_node = np.empty(max_depth + 2, dtype=np.int64)
    st_lo = np.empty(max_depth + 2, dtype=np.int64)
    st_hi = np.empty(max_depth + 2, dtype=np.int64)
    st_live = np.empty(max_depth + 2, dtype=np.int64)
    base = np.zeros(acc.shape[0])  # per label: the trees' root chain values, credited to every row at the end
    width = chain_value.shape[1]
    delta = np.empty(width)
    gone = np.empty(width)  # minus the chain's value: for states no child of a state split takes
    any_start = _any_label(start_states)
    any_other = _any_label(other_states)
    for i in range(roots.shape[0] - 1):
        root = roots[i]
        k = labels[i]
        k0 = k if k >= 0 else 0  # a tree's values go to labels k0:k0 + width
        for j in range(width):
            base[k0 + j] += chain_value[root, j]
        tree_start = start_states[k:k + 1] if k >= 0 else any_start
        tree_other = other_states[k:k + 1] if k >= 0 else any_other
        for q in range(n_touched):
            item[touched[q], NXT] = -1
            item[touched[q], WHOLE] = 1
        n_touched = 0
        live_start = False
        live_other = False
        for w in range(n_words):
            live_start = live_start or tree_start[0, w] != 0
            live_other = live_other or tree_other[0, w] != 0
        n_live = 0
        for t in range(T):  # a WHOLE item's states are its row's (mask is set when a state split first needs it)
            if live_start if is_start[t] else live_other:
                item[t, AT] = root
                buf[n_live] = t
                n_live += 1
            else:
                item[t, AT] = -1
        n_items = T
        top = 0
        st_node[0], st_lo[0], st_hi[0], st_live[0] = root, 0, n_live, n_live
        while top >= 0:
            node, lo, hi, live = st_node[top], st_lo[top], st_hi[top], st_live[top]
            top -= 1
            kd = kind[node]
            if live == 0 or kd == LEAF:
                continue
            c = chain[node]
            a = root + yes[node]
            b = root + no[node]
            for j in range(width):
                delta[j] = chain_value[a, j] - chain_value[c, j]
                gone[j] = -chain_value[c, j]
            d0 = delta[0]  # a per-label tree's one value
            end = hi  # the free part of buf starts after this node's list
            if end + hi - lo > buf.shape[0]:
                buf = with_room(buf, end + hi - lo)
            y = end
            kept = lo
            if kd == FEATURE:
                f = column[node]
                bm = bitmap_of[f]
                scan = bm >= 0 and hi - lo < col_ptr[f + 1] - col_ptr[f]
                if scan:  # test the node's items
                    for q in range(lo, hi):
                        it = buf[q]
                        if item[it, AT] != c:
                            continue
                        t = item[it, POS]
                        if (bitmaps[bm, t >> 6] >> np.uint64(t & 63)) & np.uint64(1):
                            buf[y] = it
                            y += 1
                        else:
                            buf[kept] = it
                            kept += 1
                    hi = kept
                    live_no = kept - lo
                else:  # visit the feature's rows
                    for p in range(col_ptr[f], col_ptr[f + 1]):
                        it = col_pos[p]
                        while it >= 0:
                            if item[it, AT] == c:
                                buf[y] = it
                                y += 1
                            it = item[it, NXT]
                    live_no = live - (y - end)
                for q in range(end, y):
                    it = buf[q]
                    item[it, AT] = a
                    t = item[it, POS]
                    if item[it, WHOLE]:
                        if k >= 0:
                            acc[k, S, t] += d0
                        else:
                            for j in range(width):
                                acc[j, S, t] += delta[j]
                    else:
                        for w in range(n_words):
                            if k >= 0:
                                _credit(acc, k, t, w, mask[it, w], d0)
                            else:
                                _credit_vector(acc, t, w, mask[it, w], delta)
            else:
                for q in range(lo, hi):
                    it = buf[q]
                    if item[it, AT] != c:
                        continue
                    t = item[it, POS]
                    if item[it, WHOLE]:  # (only a row's own item is WHOLE) its states, before it loses some
                        states = tree_start if is_start[t] else tree_other
                        for w in range(n_words):
                            mask[it, w] = states[0, w]
                        touched[n_touched] = it
                        n_touched += 1
                    any_a = False
                    any_b = False
                    for w in range(n_words):
                        m = mask[it, w]
                        ma = m & state_words[a, w]
                        mb = m & state_words[b, w] & ~ma
                        if k >= 0:
                            _credit(acc, k, t, w, ma, d0)
                            _credit(acc, k, t, w, m & ~(ma | mb), -chain_value[c, 0])  # states no child takes
                        else:
                            _credit_vector(acc, t, w, ma, delta)
                            _credit_vector(acc, t, w, m & ~(ma | mb), gone)
                        any_a = any_a or ma != 0
                        any_b = any_b or mb != 0
                    if any_a and any_b:  # a new item takes the yes-states
                        if n_items == item.shape[0]:
                            item = with_room(item, n_items + 1)
                            mask = with_room(mask, n_items + 1)
                        j = n_items
                        n_items += 1
                        item[j, POS] = t
                        item[j, WHOLE] = 0
                        item[j, AT] = a
                        item[j, NXT] = item[it, NXT]
                        item[it, NXT] = j
                        for w in range(n_words):
                            mask[j, w] = mask[it, w] & state_words[a, w]
                            mask[it, w] &= state_words[b, w] & ~state_words[a, w]
                        item[it, WHOLE] = 0
                        buf[y] = j
                        y += 1
                        buf[kept] = it
                        kept += 1
                        continue
                    for w in range(n_words):  # the item goes one way, losing the states no child takes
                        mask[it, w] &= state_words[a, w] if any_a else state_words[b, w] & ~state_words[a, w]
                    item[it, WHOLE] = 0
                    if any_a:
                        item[it, AT] = a
                        buf[y] = it
                        y += 1
                    elif any_b:
                        buf[kept] = it
                        kept += 1
                    else:
                        item[it, AT] = -1
                hi = kept
                live_no = kept - lo
            # the no-branch continues this chain on the list left here; the yes-branch's list is above it
            top += 1
            st_node[top], st_lo[top], st_hi[top], st_live[top] = b, lo, hi, live_no
            top += 1
            st_node[top], st_lo[top], st_hi[top], st_live[top] = a, end, y, y - end
    for k in range(acc.shape[0]):
        for t in range(T):
            acc[k, S, t] += base[k]

