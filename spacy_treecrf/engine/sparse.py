"""Sparse binary rows: membership tests and the inverted (column) index the grower partitions with."""
from typing import NamedTuple

import numpy as np
from numba import njit
from ..errors import Errors


TOO_MANY_POSITIONS = Errors.E047  # a constant: the compiled index raises it


class ColumnIndex(NamedTuple):
    """Inverted index of CSR rows: the positions holding feature f are pos[ptr[f]:ptr[f + 1]], ascending."""
    ptr: np.ndarray
    pos: np.ndarray


@njit(cache=True, nogil=True)
def csc_index(indptr, indices, n_features):
    """The rows' ColumnIndex. It only depends on the rows: build it once per training set and pass it to every
    grow_tree."""
    T = indptr.shape[0] - 1
    if T >= 2 ** 31:
        raise ValueError(TOO_MANY_POSITIONS)
    col_ptr, col_pos = transpose(indptr, indices, n_features)
    return ColumnIndex(col_ptr, col_pos)


@njit(cache=True, nogil=True)
def transpose(indptr, cols, n_cols):
    """(col_ptr, col_pos): the rows' entries by column, rows ascending within each; entries with column -1 are
    left out."""
    T = indptr.shape[0] - 1
    col_ptr = np.zeros(n_cols + 1, dtype=np.int64)
    for p in range(indptr[T]):
        if cols[p] >= 0:
            col_ptr[cols[p] + 1] += 1
    for j in range(n_cols):
        col_ptr[j + 1] += col_ptr[j]
    fill = col_ptr[:n_cols].copy()
    col_pos = np.empty(col_ptr[n_cols], dtype=np.int32)
    for t in range(T):
        for p in range(indptr[t], indptr[t + 1]):
            j = cols[p]
            if j >= 0:
                col_pos[fill[j]] = t
                fill[j] += 1
    return col_ptr, col_pos


@njit(cache=True, nogil=True)
def has_feature(indptr, indices, t, f):
    return has_id_in(indptr, indices, t, f, f)


@njit(cache=True, nogil=True, inline="always")
def has_id_in(indptr, indices, t, lo, hi):
    """Whether row t (its ids ascending) holds an id in [lo, hi]: binary search for the first id >= lo."""
    p0 = indptr[t]
    p1 = indptr[t + 1]
    while p0 < p1:
        mid = (p0 + p1) // 2
        if indices[mid] < lo:
            p0 = mid + 1
        else:
            p1 = mid
    return p0 < indptr[t + 1] and indices[p0] <= hi


@njit(cache=True, nogil=True, inline="always")
def mark_row(present, mark, indptr, indices, t):
    """present[f] = mark for the features of row t (1 before a walk, 0 after it): a feature test is then one
    load from a byte array small enough to stay in cache."""
    for p in range(indptr[t], indptr[t + 1]):
        f = indices[p]
        if f < present.shape[0]:  # features no tree tests need no mark
            present[f] = mark


@njit(cache=True, nogil=True)
def pairs_to_rows(rows, ids, n_rows):
    """(row, id) pairs in any order -> CSR (indptr, ids) with each row's ids sorted and unique. A row holds a few
    ids (a token's attributes, a position's features), so a counting sort by row and an insertion sort
    within it beat sorting all pairs."""
    start = np.zeros(n_rows + 1, np.int64)
    for p in range(rows.shape[0]):
        start[rows[p] + 1] += 1
    for r in range(n_rows):
        start[r + 1] += start[r]
    fill = start[:-1].copy()
    out = np.empty(ids.shape[0], np.int32)
    for p in range(rows.shape[0]):
        out[fill[rows[p]]] = ids[p]
        fill[rows[p]] += 1
    return _sorted_unique_rows(out, start)


@njit(cache=True, nogil=True)
def segments_to_rows(ids, lengths):
    """Ids already in row order, ``lengths[r]`` of them for row r, negative ones meaning none (an item no column
    takes) -> CSR (indptr, ids), each row's ids sorted and unique: pairs_to_rows without the sort by row, for
    items read position by position (the estimator's dicts)."""
    start = np.zeros(lengths.shape[0] + 1, np.int64)
    out = np.empty(ids.shape[0], np.int32)
    w = 0
    i = 0
    for r in range(lengths.shape[0]):
        for _ in range(lengths[r]):
            if ids[i] >= 0:
                out[w] = ids[i]
                w += 1
            i += 1
        start[r + 1] = w
    return _sorted_unique_rows(out, start)


@njit(cache=True, nogil=True)
def _sorted_unique_rows(out, start):
    """CSR of the rows out[start[r]:start[r + 1]], each sorted (insertion sort: a row holds a few ids) and its
    repeats dropped, compacted in place."""
    n_rows = start.shape[0] - 1
    indptr = np.zeros(n_rows + 1, np.int64)
    w = 0
    for r in range(n_rows):
        s = start[r]
        for i in range(s + 1, start[r + 1]):
            v = out[i]
            j = i - 1
            while j >= s and out[j] > v:
                out[j + 1] = out[j]
                j -= 1
            out[j + 1] = v
        last = -1
        for i in range(s, start[r + 1]):
            if out[i] != last:
                last = out[i]
                out[w] = last
                w += 1
        indptr[r + 1] = w
    return indptr, out[:w].copy()


def take_rows(indptr, indices, rows):
    """CSR (indptr, indices) of the given rows (int64 ids), in that order."""
    lengths = indptr[rows + 1] - indptr[rows]
    out = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    items = np.arange(out[-1], dtype=np.int64) + np.repeat(indptr[rows] - out[:-1], lengths)
    return out, indices[items]


@njit(cache=True, nogil=True)
def with_label_columns(indptr, indices, labels, seq_starts, base, n_labels, window, bins, n_bins):
    """CSR rows with the columns of neighbouring labels appended: for each position t and offset d in [-window,
    window] whose position t + d lies in t's sequence (``seq_starts``), the column base + (d + window) * n_labels +
    labels[t + d] (``labels``: a label id per position, int32); then, where ``bins`` (positions x labels, int32;
    0 rows: none) is given, per label k the column past those of bin bins[t, k] of label k's numeric column
    (``n_bins`` each). ``base`` is past every column of the rows, so each row stays sorted. Stacked sequential
    learning's second stage reads the first stage's labels (and marginals) through these."""
    T = indptr.shape[0] - 1
    per_label = bins.shape[0] > 0
    marginal_base = base + (2 * window + 1) * n_labels
    out_ptr = np.zeros(T + 1, np.int64)
    for q in range(seq_starts.shape[0] - 1):
        a, b = seq_starts[q], seq_starts[q + 1]
        for t in range(a, b):
            out_ptr[t + 1] = indptr[t + 1] - indptr[t] + min(b - 1, t + window) - max(a, t - window) + 1
            if per_label:
                out_ptr[t + 1] += n_labels
    for t in range(T):
        out_ptr[t + 1] += out_ptr[t]
    out = np.empty(out_ptr[T], np.int32)
    for q in range(seq_starts.shape[0] - 1):
        a, b = seq_starts[q], seq_starts[q + 1]
        for t in range(a, b):
            w = out_ptr[t]
            for i in range(indptr[t], indptr[t + 1]):
                out[w] = indices[i]
                w += 1
            for u in range(max(a, t - window), min(b - 1, t + window) + 1):
                out[w] = base + (u - t + window) * n_labels + labels[u]
                w += 1
            if per_label:
                for k in range(n_labels):
                    out[w] = marginal_base + k * n_bins + bins[t, k]
                    w += 1
    return out_ptr, out


@njit(cache=True, nogil=True)
def window_rows(a_indptr, a_ids, doc_starts, window, colmap, padcol):
    """Windowed CSR rows: for every token t of each sequence (``doc_starts``) and window slot j (offset
    j - window), the columns colmap[atom, j] of token t + j - window's atoms (a_indptr / a_ids, CSR), or padcol[j]
    where that position lies outside the sequence; a column -1 is dropped (unknown at prediction). Each row comes
    out sorted when the columns grow with (j, atom) and each token's atoms are sorted, as the engine reads rows."""
    W = 2 * window + 1
    T = a_indptr.shape[0] - 1
    out = np.empty(W * (a_ids.shape[0] + T), np.int32)
    indptr = np.zeros(T + 1, np.int64)
    w = 0
    for d in range(doc_starts.shape[0] - 1):
        s = doc_starts[d]
        e = doc_starts[d + 1]
        for t in range(s, e):
            for j in range(W):
                n = t + j - window
                if n < s or n >= e:
                    c = padcol[j]
                    if c >= 0:
                        out[w] = c
                        w += 1
                else:
                    for p in range(a_indptr[n], a_indptr[n + 1]):
                        c = colmap[a_ids[p], j]
                        if c >= 0:
                            out[w] = c
                            w += 1
            indptr[t + 1] = w
    return indptr, out[:w]  # (a view: copying the rows cost as much as making them; the bound is ~1.2 x)
