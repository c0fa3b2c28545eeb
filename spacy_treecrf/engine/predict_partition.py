"""Prediction by partition: one tree at a time over a block of rows at once, the way the grower partitions
positions. A node's rows are split by its test, so a row costs nothing at the tests on the absent side of its
path. Its cost per row falls with the rows that come together, so it serves large batches;
predict_bitmask.py serves small ones. It reads numeric columns' bins from the atom rows themselves (a threshold
test is a range of a column's bins, numeric.py): a block's bins are gathered once into a byte per row and column,
so a threshold node costs what a frequent binary feature's does, one test per item.

Speed note (as in histogram.py): no helper that takes arrays is called per node, row or item, and no array
is replaced inside such a loop; numba counts references to every array a call binds, and to an array a loop may
replace wherever its paths meet, with atomic operations. On NETtalk's 100 shared trees the calls were a quarter
of the kernel's samples, and buffers that with_room might replace inside the loops another 7%. Per-node work
is written in _partition_block's loop, leaf vectors are added in batches (_add_vectors), and buffers get their
room before a loop: from a bound (items, item lists, the split log), or a kernel stops at the row that would
need more and its caller grows the buffer and calls again (_replay_splits). _grouped_rows' output is the
exception (see there).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .crf import Potentials, scaled_potentials
from .intrinsics import count_trailing_zeros, with_room
from .numeric import NumericIndex, is_numeric_test, no_numeric, test_range
from .sparse import transpose
from .trees import FEATURE, LEAF, STATE, Rows

DENSE_SHARE = 8  # a shared tree's leaf holding at least 1 / DENSE_SHARE of the labels is also kept dense
GROUPS = 4  # the groups of previous states per row that shared trees' buffers start with room for (a few)


class PartitionIndex(NamedTuple):
    """A Forest's tables for partition_potentials: the tested features numbered 0.. as columns (column_of[f], -1
    for a feature no tree tests; column[n] the column node n tests); per node its chain (the node where the walk
    entered the run of no-branches it lies on: the root or a yes-child), its state set as 64-bit words
    (state_words), the leaf its chain ends in (chain_leaf: a shared tree's vector is that leaf's, see
    trees.LeafVectors) and that leaf's value (chain_value, per-label trees).

    A shared tree's leaf whose vector holds at least 1 / DENSE_SHARE of the labels is also kept dense: its row in
    ``dense`` (labels 0 .. the largest any vector holds, float32) is dense_of[leaf], -1 for the others. Adding a
    dense row is a vector loop, about DENSE_SHARE times cheaper per label than the sparse entries' scattered adds,
    and these leaves are the ones most rows reach (on NETtalk phoneme+stress, 3% of the leaves hold 70% of the
    entries). The table takes at most DENSE_SHARE x 4 bytes per sparse entry.

    A node with a threshold test has column -1 and its numeric column in num_column (else -1), passing where the
    row's bin there lies in [bin_lo, bin_hi] (per node, uint8 like the bins; ``numeric``: the rows' atoms'
    NumericIndex)."""
    column_of: np.ndarray
    column: np.ndarray
    chain: np.ndarray
    state_words: np.ndarray
    chain_value: np.ndarray
    chain_leaf: np.ndarray
    dense_of: np.ndarray
    dense: np.ndarray
    num_column: np.ndarray
    bin_lo: np.ndarray
    bin_hi: np.ndarray
    numeric: NumericIndex


NO_BIN = 255  # a row's byte for a numeric column where it holds none of its bins (bins are 0 .. MAX_BINS - 1)


class Cells(NamedTuple):
    """Which cells (t, s, k) to compute: s in start_states[k] at rows with is_start, s in other_states[k] at the
    others (per label, states as 64-bit words); the rest are 0. mask_class[s]: the state's transition-mask class
    (crf.mask_classes): states of different classes never share a group of potentials."""
    is_start: np.ndarray
    start_states: np.ndarray
    other_states: np.ndarray
    mask_class: np.ndarray


def partition_index(forest, dense_share: int = None, numeric: NumericIndex = None) -> PartitionIndex:
    """The Forest's PartitionIndex; its dense leaves hold at least 1 / dense_share of the labels (default
    DENSE_SHARE; 0: none); ``numeric``: the atoms' NumericIndex (None: binary rows)."""
    nodes = forest.nodes
    kind, feature, states = nodes.kind, nodes.feature, nodes.states
    numeric = no_numeric() if numeric is None else numeric
    num_column, bin_lo, bin_hi = _threshold_nodes(numeric, kind, feature)
    is_split = (kind == FEATURE) & (num_column < 0)
    tested = np.unique(feature[is_split])
    column_of = np.full(int(tested[-1]) + 1 if len(tested) else 0, -1, dtype=np.int32)
    column_of[tested] = np.arange(len(tested), dtype=np.int32)
    column = np.where(is_split, column_of[np.where(is_split, feature, 0)] if len(tested) else -1, -1).astype(np.int32)
    chain, words, chain_leaf = _partition_index(nodes, forest.roots, max(1, (states.shape[1] + 63) // 64))
    dense_of, dense = dense_leaves(forest.vectors, DENSE_SHARE if dense_share is None else dense_share)
    return PartitionIndex(column_of=column_of, column=column, chain=chain, state_words=words,
                          chain_value=nodes.value[chain_leaf], chain_leaf=chain_leaf, dense_of=dense_of, dense=dense,
                          num_column=num_column, bin_lo=bin_lo, bin_hi=bin_hi, numeric=numeric)


@njit(cache=True, nogil=True)
def _threshold_nodes(numeric, kind, feature):
    """Per node: the numeric column of its threshold test (-1: none) and the range of that column's bins that
    passes it (PartitionIndex)."""
    n = kind.shape[0]
    num_column = np.full(n, -1, dtype=np.int32)
    bin_lo = np.zeros(n, dtype=np.uint8)
    bin_hi = np.zeros(n, dtype=np.uint8)
    for node in range(n):
        f = feature[node]
        if kind[node] == FEATURE and is_numeric_test(numeric, f):
            lo, hi = test_range(numeric, f)
            c = numeric.column[lo]
            num_column[node] = c
            bin_lo[node] = lo - numeric.base[c]
            bin_hi[node] = hi - numeric.base[c]
    return num_column, bin_lo, bin_hi


@njit(cache=True, nogil=True)
def _row_bins(indptr, indices, numeric):
    """Each row's bin of every numeric column (columns x rows, uint8; NO_BIN where it holds none)."""
    T = indptr.shape[0] - 1
    column = numeric.column
    bins = np.full((numeric.base.shape[0], T), NO_BIN, dtype=np.uint8)
    if column.shape[0] == 0:  # binary rows: no pass over them
        return bins
    for t in range(T):
        for p in range(indptr[t], indptr[t + 1]):
            a = indices[p]
            if a < column.shape[0] and column[a] >= 0:
                bins[column[a], t] = a - numeric.base[column[a]]
    return bins


def dense_leaves(vectors, share: int):
    """(dense_of, dense) of PartitionIndex from a Forest's LeafVectors: the leaves with at least 1 / share of the
    labels."""
    n_entries = np.diff(vectors.ptr)
    width = int(vectors.label.max()) + 1 if len(vectors.label) else 0
    leaves = np.flatnonzero((n_entries * share >= max(width, 1)) & (n_entries > 0))
    dense_of = np.full(len(n_entries), -1, dtype=np.int64)
    dense_of[leaves] = np.arange(len(leaves))
    dense = np.zeros((len(leaves), width), dtype=np.float32)
    row = np.repeat(dense_of, n_entries)
    kept = row >= 0
    dense[row[kept], vectors.label[kept]] = vectors.value[kept]
    return dense_of, dense


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
    chain_leaf = np.arange(n, dtype=np.int64)  # the leaf at the end of the node's run of no-branches
    for i in range(roots.shape[0] - 1):
        root = roots[i]
        for node in range(root, roots[i + 1]):  # children follow their parent
            if kind[node] != LEAF:
                chain[root + no[node]] = chain[node]
        for node in range(roots[i + 1] - 1, root - 1, -1):
            if kind[node] != LEAF:
                chain_leaf[node] = chain_leaf[root + no[node]]
    return chain, words, chain_leaf


def label_state_words(cells):
    """(S x K) booleans -> per label k, its states s with cells[s, k] as 64-bit words (K x ceil(S / 64))."""
    S, K = cells.shape
    words = np.zeros((K, max(1, (S + 63) // 64)), dtype=np.uint64)
    for s in range(S):
        words[:, s // 64] |= np.where(cells[s], np.uint64(1) << np.uint64(s % 64), np.uint64(0))
    return words


def block_rows(n_labels: int, n_states: int, shared: bool = False) -> int:
    """Rows per call of _partition_block: every tree's nodes are visited once per block; 16384 rows, fewer
    where the block's accumulator (K x (S + 1) x rows floats; shared trees: K x (1 + the groups) floats per
    row, of 4 bytes) would pass 64 MB (at least 1024)."""
    per_row = (1 + GROUPS) * n_labels // 2 if shared else n_labels * (n_states + 1)
    return int(min(16384, max(1024, 8_000_000 // per_row)))


@njit(cache=True, nogil=True)
def partition_potentials(rows, forest, index, cells, allowed, block_rows, scaled):
    """phi (T x S x K) = sum of every tree, evaluated one tree at a time over ``block_rows`` rows at once, the
    way the grower partitions positions: a node's rows are split by its test, so a row costs nothing at the tests
    on the absent side of its path (see _partition_block).

    Only the Cells asked for are computed; the rest are 0. Rows may hold feature ids no tree tests.
    Returns (phi, P): with ``scaled``, phi is empty and P is crf.scaled_potentials of phi under ``allowed`` (S x
    K), made block by block (no T x S x K float64 array); without, P is empty. Shared trees' sums come grouped
    by previous state (GroupSums), so their P is made from the groups, never from S x K cells per row."""
    indptr = rows.indptr
    is_start, start_states, other_states, mask_class = cells
    T = indptr.shape[0] - 1
    S = allowed.shape[0]
    K = start_states.shape[0]
    shared = forest.labels.shape[0] > 0 and forest.labels[0] < 0
    phi = np.zeros((0 if scaled else T, S, K))
    # np.int64(0), not 0: numba would compile each kernel called with it once more for the literal 0
    max_depth = np.int64(0)
    for i in range(forest.depths.shape[0]):
        max_depth = max(max_depth, forest.depths[i])
    block = max(1, block_rows)
    n = min(T, block)
    # per label: a row per state, then the part they all share; rows an odd number of cache lines apart, or the
    # 99 rows a position's cells read fall into one cache set when n is a multiple of 512 (16384 is)
    n_acc = 0 if shared else n
    acc = np.empty((0 if shared else K, S + 1, 8 * ((n_acc + 7) // 8 | 1)))[:, :, :n_acc]
    part = np.zeros((n if scaled and not shared else 0, S, K))
    n_sums = n if shared else 0
    n_words = max(1, (S + 63) // 64)
    # (np.empty: every cell is written before it is read; untouched pages cost nothing)
    sums = GroupSums(base=np.empty((n_sums, K), dtype=np.float32), count=np.empty(n_sums, dtype=np.int64),
                     off=np.empty(n_sums, dtype=np.int64))
    pool = np.empty((GROUPS * n_sums + 1, K), dtype=np.float32)
    pool_mask = np.empty((GROUPS * n_sums + 1, n_words), dtype=np.uint64)
    gid = np.empty(S, dtype=np.int64)
    values = np.empty((GROUPS * T if scaled else 0, K), dtype=np.float32)
    start = np.zeros(T + 1, dtype=np.int64)
    group = np.full((T if scaled else 0, S), -1, dtype=np.int32)
    c = np.zeros(T if scaled else 0)
    for r0 in range(0, T, block):
        r1 = min(T, r0 + block)
        chunk = Rows(indptr[r0:r1 + 1] - indptr[r0], rows.indices[indptr[r0]:indptr[r1]])
        acc[:] = 0.0
        m = r1 - r0
        sums.base[:m] = 0.0
        pool, pool_mask = _partition_block(acc, GroupSums(base=sums.base[:m], count=sums.count[:m], off=sums.off[:m]),
                                           pool, pool_mask, chunk, forest, index,
                                           Cells(is_start=is_start[r0:r1], start_states=start_states,
                                                 other_states=other_states, mask_class=mask_class),
                                           max_depth)
        if shared and scaled:
            values = _grouped_rows(sums, pool, pool_mask, r0, r1, is_start, allowed, mask_class, values, start,
                                   group, c)
            continue
        out = part[:m] if scaled else phi[r0:r1]
        for t in range(m):
            states = start_states if is_start[r0 + t] else other_states
            if shared:
                _state_groups(pool_mask, sums.off[t], sums.count[t], gid)
            for k in range(K):
                for s in range(S):
                    if (states[k, s >> 6] >> np.uint64(s & 63)) & np.uint64(1):
                        out[t, s, k] = (sums.base[t, k] + pool[sums.off[t] + gid[s], k] if shared
                                        else acc[k, s, t] + acc[k, S, t])
        if scaled:
            P = scaled_potentials(out, allowed, is_start[r0:r1])
            values = with_room(values, start[r0] + P.values.shape[0])
            values[start[r0]:start[r0] + P.values.shape[0]] = P.values
            start[r0 + 1:r1 + 1] = start[r0] + P.start[1:]
            group[r0:r1] = P.group
            c[r0:r1] = P.c
    return phi, Potentials(values=values[:start[T]], start=start, group=group, c=c)


@njit(cache=True, nogil=True, inline="always")
def _state_groups(pool_mask, off, count, gid):
    """gid[s]: the group (0 .. count - 1) whose state mask in pool_mask[off:] holds state s, -1 for none."""
    gid[:] = -1
    for r in range(count):
        for w in range(pool_mask.shape[1]):
            bits = pool_mask[off + r, w]
            while bits != 0:
                gid[64 * w + count_trailing_zeros(bits)] = r
                bits &= bits - np.uint64(1)


@njit(cache=True, nogil=True)
def _grouped_rows(sums, pool, pool_mask, r0, r1, is_start, allowed, mask_class, values, start, group, c):
    """Rows r0:r1 of a shared forest's Potentials from the block's GroupSums: a state's group is its sums group
    split by its transition-mask class; E = exp(base + group sums - c) on the allowed cells, c the largest
    there. A state in no group (allowed before no label) has none. Returns ``values`` (reallocated when it
    grows)."""
    S, K = allowed.shape
    rep = np.empty(S, dtype=np.int64)  # a final group's first state
    gid = np.empty(S, dtype=np.int64)
    for t in range(r1 - r0):
        row = r0 + t
        _state_groups(pool_mask, sums.off[t], sums.count[t], gid)
        s0, s1 = (0, 1) if is_start[row] else (1, S)
        n = 0
        for s in range(s0, s1):
            g = gid[s]
            if g < 0:
                continue
            found = -1
            for r in range(n):
                u = rep[r]
                if gid[u] == g and mask_class[u] == mask_class[s]:
                    found = r
                    break
            if found < 0:
                found = n
                rep[n] = s
                n += 1
            group[row, s] = found
        top = -np.inf
        for r in range(n):
            u = rep[r]
            o = sums.off[t] + gid[u]
            for k in range(K):
                if allowed[u, k]:
                    top = max(top, sums.base[t, k] + pool[o, k])
        if not np.isfinite(top):
            top = 0.0
        c[row] = top
        first = start[row]
        start[row + 1] = first + n
        if first + n > values.shape[0]:  # (the one buffer grown inside a row loop: its LLVM IR has one
            # reference count pair per row, next to the microseconds of a row's other work)
            values = with_room(values, first + n)
        shift = np.float32(top)  # (exp in float32, as the sums are: 1.7 times faster than in float64)
        for r in range(n):
            u = rep[r]
            o = sums.off[t] + gid[u]
            for k in range(K):
                values[first + r, k] = np.exp(sums.base[t, k] + pool[o, k] - shift) if allowed[u, k] else 0.0
    return values


@njit(cache=True, nogil=True)
def _tested_columns(indptr, indices, column_of, n_cols):
    """csc_index of the rows restricted to the tested features, by column (see partition_index)."""
    n_map = column_of.shape[0]
    cols = np.empty(indptr[indptr.shape[0] - 1], dtype=np.int32)
    for p in range(cols.shape[0]):
        cols[p] = column_of[indices[p]] if indices[p] < n_map else -1
    return transpose(indptr, cols, n_cols)


@njit(cache=True, nogil=True, inline="always")
def _credit(acc, k, t, word, bits, delta):
    """acc[k, s, t] += delta for the states s in ``bits``, the 64-bit word ``word`` of a state set. Inlined
    (numba's IR inlining) where it is called, per item: a call would count references to acc, which the header's
    speed note keeps out of per-item work."""
    while bits != 0:
        acc[k, 64 * word + count_trailing_zeros(bits), t] += delta
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


class GroupSums(NamedTuple):
    """Shared trees' sums over a block of rows, grouped by previous state: row t's count[t] groups are slots
    off[t] .. off[t] + count[t] - 1 of a pool, each with its states as 64-bit words (pool_mask) and their sums but
    base[t] (pool). Sums are float32, as decoding's potentials are: the settle pass streams them once per tree,
    and half the bytes made it 1.4 times faster on NETtalk phoneme+stress."""
    base: np.ndarray
    count: np.ndarray
    off: np.ndarray


class SplitLog(NamedTuple):
    """The state splits of a block's rows, logged tree by tree (_settle_shared) and replayed row by row once the
    trees are done (_replay_splits): event e is one tree's split of row row[e], its items ptr[e] .. ptr[e + 1] - 1,
    each the leaf it ended in (leaf) and its states as 64-bit words (mask). Replaying row by row keeps a row's
    groups in cache while its splits refine them: applied tree by tree, each split reached a row's groups far
    from the last one's, and the splits took a third of the tagging time on NETtalk phoneme+stress."""
    row: np.ndarray
    ptr: np.ndarray
    leaf: np.ndarray
    mask: np.ndarray


@njit(cache=True, nogil=True)
def _settle_shared(base, item, mask, n_items, index, vectors, log, n_events, at, leaves):
    """Credit a shared tree once it is done: a row whose item stayed WHOLE (no state split reached it) adds its
    leaf's vector (sparse: trees.LeafVectors) to base, all in one _add_vectors call (``at`` and ``leaves``: room
    for a leaf per row); a row a state split reached logs its items whose leaves have a vector (an empty vector
    is no move: its states count as dropped) as an event of the SplitLog. Returns the log and its number of
    events. The log gets room for a tree's events (one per row) and items (n_items) before the row loop, not
    inside it (see the header's speed note)."""
    chain_leaf = index.chain_leaf
    vptr = vectors.ptr
    n_words = mask.shape[1]
    n_rows = base.shape[0]
    n_logged = log.ptr[n_events]
    if n_events + n_rows + 2 > log.row.shape[0] or n_logged + n_items > log.leaf.shape[0]:
        log = SplitLog(row=with_room(log.row, n_events + n_rows + 2), ptr=with_room(log.ptr, n_events + n_rows + 2),
                       leaf=with_room(log.leaf, n_logged + n_items), mask=with_room(log.mask, n_logged + n_items))
    n_whole = 0
    for t in range(n_rows):
        if item[t, WHOLE]:
            if item[t, AT] >= 0:
                at[n_whole] = t
                leaves[n_whole] = chain_leaf[item[t, AT]]
                n_whole += 1
            continue
        first = log.ptr[n_events]
        n = first
        j = t
        while j >= 0:
            if item[j, AT] >= 0:
                leaf = chain_leaf[item[j, AT]]
                if vptr[leaf + 1] > vptr[leaf]:
                    log.leaf[n] = leaf
                    for w in range(n_words):
                        log.mask[n, w] = mask[j, w]
                    n += 1
            j = item[j, NXT]
        if n > first:
            log.row[n_events] = t
            n_events += 1
            log.ptr[n_events] = n
    _add_vectors(base, at, leaves, n_whole, index.dense_of, index.dense, vectors)
    return log, n_events


@njit(cache=True, nogil=True)
def _replay_splits(sums, pool, pool_mask, log, n_events, index, vectors, cells, t0):
    """The block's GroupSums from its SplitLog, rows t0 on: each row starts with one group of every state a
    shared tree's items carry (sums 0) and replays its splits in tree order. A split refines each group by the
    items its states ended in, on state masks (a few words per group and item, not a loop over states): the
    group's slot keeps its first item's states, new slots copy the old sums for the others' states and for
    states in no item (dropped at a state split: they get nothing), and each item's states add its leaf's
    vector. A row's groups are the pool's last slots while it replays, so they grow in place: at most S of
    them (their state sets are disjoint and not empty). Returns the first row not done: a row starts only with
    room for S slots in the pool, and the caller grows it and calls again (the pool is not replaced here, as
    replacing it inside the row loop would cost reference counts on every row: see the header's speed note)."""
    base, count, off = sums
    n_words = pool_mask.shape[1]
    S = cells.mask_class.shape[0]
    any_start = _any_label(cells.start_states)
    any_other = _any_label(cells.other_states)
    m = base.shape[0]
    first_event = np.zeros(m + 1, dtype=np.int64)  # events by row, in tree order (a counting sort)
    for e in range(n_events):
        first_event[log.row[e] + 1] += 1
    for t in range(m):
        first_event[t + 1] += first_event[t]
    order = np.empty(n_events, dtype=np.int64)
    fill = first_event[:m].copy()
    for e in range(n_events):
        order[fill[log.row[e]]] = e
        fill[log.row[e]] += 1
    first = np.empty(n_words, dtype=np.uint64)  # a group's states in its first item, and in no item so far
    rest = np.empty(n_words, dtype=np.uint64)
    log_mask, log_leaf = log.mask, log.leaf
    K = pool.shape[1]
    # an event's vector adds (slot, leaf), made in one _add_vectors call once the event's groups are refined:
    # a slot is only copied from before its own add, so deferring the adds changes no sum; one add per slot
    add_at = np.empty(S, dtype=np.int64)
    add_leaf = np.empty(S, dtype=np.int64)
    top = off[t0 - 1] + count[t0 - 1] if t0 > 0 else 0
    for t in range(t0, m):
        o = top
        if o + S > pool.shape[0]:
            return t
        for k in range(K):
            pool[o, k] = 0.0
        for w in range(n_words):
            pool_mask[o, w] = any_start[0, w] if cells.is_start[t] else any_other[0, w]
        n = 1
        for q in range(first_event[t], first_event[t + 1]):
            e = order[q]
            i0, i1 = log.ptr[e], log.ptr[e + 1]
            n_adds = 0
            n_old = n
            for g in range(n_old):
                first_item = -1
                for w in range(n_words):
                    rest[w] = pool_mask[o + g, w]
                for i in range(i0, i1):
                    meets = False  # the group's states and the item's share one
                    for w in range(n_words):
                        meets = meets or (pool_mask[o + g, w] & log_mask[i, w]) != 0
                    if not meets:
                        continue
                    if first_item < 0:
                        first_item = i
                        for w in range(n_words):
                            first[w] = pool_mask[o + g, w] & log_mask[i, w]
                    else:  # a new slot: the group's sums, for its states in the item
                        for k in range(K):
                            pool[o + n, k] = pool[o + g, k]
                        for w in range(n_words):
                            pool_mask[o + n, w] = pool_mask[o + g, w] & log_mask[i, w]
                        add_at[n_adds] = o + n
                        add_leaf[n_adds] = log_leaf[i]
                        n_adds += 1
                        n += 1
                    for w in range(n_words):
                        rest[w] &= ~log_mask[i, w]
                if first_item < 0:
                    continue  # every state of the group dropped: it keeps its sums
                left = False
                for w in range(n_words):
                    left = left or rest[w] != 0
                if left:  # a new slot: the group's sums, for its states in no item
                    for k in range(K):
                        pool[o + n, k] = pool[o + g, k]
                    for w in range(n_words):
                        pool_mask[o + n, w] = pool_mask[o + g, w] & rest[w]
                    n += 1
                for w in range(n_words):
                    pool_mask[o + g, w] = first[w]
                add_at[n_adds] = o + g
                add_leaf[n_adds] = log_leaf[first_item]
                n_adds += 1
            _add_vectors(pool, add_at, add_leaf, n_adds, index.dense_of, index.dense, vectors)
        off[t] = o
        count[t] = n
        top = o + n
    return m


@njit(cache=True, nogil=True, inline="always")
def _add_vectors(sums, at, leaves, n, dense_of, dense, vectors):
    """sums[at[j]] += the vector of leaf leaves[j] for j < n: its dense row if it has one (see PartitionIndex),
    else its entries. One call a batch: a call per row paid numba's reference counts on each array it was given
    (atomic increments and decrements, a quarter of the kernel's samples on NETtalk). Inlined (numba's IR
    inlining) into its callers, which still call it once per tree or split event."""
    ptr, label, value = vectors.ptr, vectors.label, vectors.value
    width = dense.shape[1]
    for j in range(n):
        i = at[j]
        leaf = leaves[j]
        row = dense_of[leaf]
        if row >= 0:
            for k in range(width):
                sums[i, k] += dense[row, k]
        else:
            for p in range(ptr[leaf], ptr[leaf + 1]):
                sums[i, label[p]] += value[p]


@njit(cache=True, nogil=True)
def _partition_block(acc, sums, pool, pool_mask, rows, forest, index, cells, max_depth):
    """acc[k, s, t] += the per-label trees of label k at row t and state s (acc[k, S, t]: the part of every
    state); the shared trees (label -1) go to the GroupSums ``sums``, ``pool`` and ``pool_mask`` instead
    (returned, as they may grow): their items carry the states of any label and are credited once per row and
    tree, when the tree is done (_settle_shared): crediting each move of a row cost more.

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
    column_of, column, chain, state_words, chain_value = index[:5]
    is_start, start_states, other_states, _ = cells
    T = indptr.shape[0] - 1
    S = acc.shape[1] - 1
    n_words = state_words.shape[1]
    n_cols = np.int64(0)  # not 0: see partition_potentials
    for j in column_of:
        n_cols = max(n_cols, j + 1)
    col_ptr, col_pos = _tested_columns(indptr, indices, column_of, n_cols)
    num_column, bin_lo, bin_hi = index.num_column, index.bin_lo, index.bin_hi
    row_bins = _row_bins(indptr, indices, index.numeric)
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
    # for this label (WHOLE: credited on acc[k, S]); its states as words in ``mask``. A tree leaves a row at most S
    # items (a state split parts a live item's states in two non-empty sets), so T x S records (T without state
    # nodes) never grow: a buffer that may be replaced inside the node loop costs reference counts on every node
    # (see the header's speed note). Untouched pages cost nothing.
    has_state_nodes = False
    for node in range(kind.shape[0]):  # (shared trees meet one in their first tree)
        if kind[node] == STATE:
            has_state_nodes = True
            break
    cap = T * (S if has_state_nodes else 1) + 16
    item = np.empty((cap, 4), dtype=np.int32)
    mask = np.empty((cap, n_words), dtype=np.uint64)
    for t in range(T):
        item[t, POS] = t
        item[t, NXT] = -1
        item[t, WHOLE] = 1
    touched = np.empty(T, dtype=np.int32)  # the rows whose item a state split changed (NXT, WHOLE): reset them
    n_touched = 0
    # the item lists of the nodes on the stack, nested: a list holds at most one item per row (a row has one item
    # per chain), and a yes-child's list lies after its parent's, so max_depth + 1 lists of T fit
    buf = np.empty(T * (max_depth + 1) + 16, dtype=np.int32)
    st_node = np.empty(max_depth + 2, dtype=np.int64)
    st_lo = np.empty(max_depth + 2, dtype=np.int64)
    st_hi = np.empty(max_depth + 2, dtype=np.int64)
    st_live = np.empty(max_depth + 2, dtype=np.int64)
    base = np.zeros(acc.shape[0])  # per label: the trees' root chain values, credited to every row at the end
    any_start = _any_label(start_states)
    any_other = _any_label(other_states)
    n_log = T // 4 + 16 if sums.off.shape[0] else 0  # (no rows for a per-label forest)
    log = SplitLog(row=np.empty(n_log, dtype=np.int32), ptr=np.zeros(n_log, dtype=np.int64),
                   leaf=np.empty(n_log, dtype=np.int64), mask=np.empty((n_log, n_words), dtype=np.uint64))
    n_events = np.int64(0)  # not 0: see partition_potentials
    whole_at = np.empty(T if sums.off.shape[0] else 0, dtype=np.int64)  # _settle_shared's scratch
    whole_leaf = np.empty(T if sums.off.shape[0] else 0, dtype=np.int64)
    for i in range(roots.shape[0] - 1):
        root = roots[i]
        k = labels[i]
        if k >= 0:
            base[k] += chain_value[root]
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
            d0 = chain_value[a] - chain_value[c] if k >= 0 else 0.0  # a per-label tree's move
            end = hi  # the free part of buf starts after this node's list
            y = end
            kept = lo
            if kd == FEATURE:
                f = column[node]
                nc = num_column[node]
                bm = bitmap_of[f] if nc < 0 else -1
                scan = nc >= 0 or (bm >= 0 and hi - lo < col_ptr[f + 1] - col_ptr[f])
                if scan:  # test the node's live items (AT == c): a frequent feature's bitmap, or a threshold on
                    # their bins; those passing go to buf[y:], the others are kept at buf[lo:]
                    b_lo, b_hi = bin_lo[node], bin_hi[node]
                    for q in range(lo, hi):
                        it = buf[q]
                        if item[it, AT] != c:
                            continue
                        t = item[it, POS]
                        if bm >= 0:
                            passed = (bitmaps[bm, t >> 6] >> np.uint64(t & 63)) & np.uint64(1) != 0
                        else:
                            passed = b_lo <= row_bins[nc, t] <= b_hi
                        if passed:
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
                for q in range(end, y):  # the items buf[end:y] go to the yes-child; a per-label tree credits
                    # them the move d0 (acc[k, S] for an item holding all its row's states)
                    it = buf[q]
                    item[it, AT] = a
                    if k < 0:
                        continue
                    t = item[it, POS]
                    if item[it, WHOLE]:
                        acc[k, S, t] += d0
                    else:
                        for w in range(n_words):
                            _credit(acc, k, t, w, mask[it, w], d0)
            else:
                for q in range(lo, hi):
                    it = buf[q]
                    if item[it, AT] != c:
                        continue
                    t = item[it, POS]
                    if item[it, WHOLE]:  # (only a row's own item is WHOLE) its states, before it loses some
                        row_start = is_start[t]
                        for w in range(n_words):
                            mask[it, w] = tree_start[0, w] if row_start else tree_other[0, w]
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
                            _credit(acc, k, t, w, m & ~(ma | mb), -chain_value[c])  # states no child takes
                        any_a = any_a or ma != 0
                        any_b = any_b or mb != 0
                    if any_a and any_b:  # a new item takes the yes-states
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
        if k < 0:
            log, n_events = _settle_shared(sums.base, item, mask, n_items, index, forest.vectors, log, n_events,
                                           whole_at, whole_leaf)
    for k in range(acc.shape[0]):
        for t in range(T):
            acc[k, S, t] += base[k]
    done = 0
    while done < sums.off.shape[0]:  # room for the next row's groups (at most S), then as many rows as fit
        top = sums.off[done - 1] + sums.count[done - 1] if done > 0 else 0
        pool = with_room(pool, top + S)
        pool_mask = with_room(pool_mask, top + S)
        done = _replay_splits(sums, pool, pool_mask, log, n_events, index, forest.vectors, cells, done)
    return pool, pool_mask

