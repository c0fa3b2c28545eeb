"""Numeric columns: real values binned once per column, and threshold tests the trees learn on them.

A numeric column c owns the consecutive row ids base[c] .. end[c] - 1 (its *bins*): bin b holds the values in
(upper[b - 1], upper[b]] (``bin_uppers``; the last bin is unbounded above), and a position's row holds the id of
its value's bin, or none of the column's ids where the value is missing. Ids of the rows are *atoms*; what a tree
node tests is a *test* id, and every test is "the row holds an atom in [lo, hi]" (``test_range``):

- a binary atom f tests itself;
- a bin atom a = base[c] + b tests "x <= upper[b]": [base[c], a];
- n_atoms + a (a virtual id past every atom) tests "x > upper[b]": [a + 1, end[c] - 1].

A missing value holds no atom, so it fails both and goes to the no branch; choosing between the two families is
choosing its side ("x <= u" sends it with the large values, "x > u" with the small ones): XGBoost's and LightGBM's
learned default direction, with no extra field in the tree. (The routing strategies of missing.py handle missing
values instead when the column's variable is listed missing; then only "x <= u" is used.)

The grower tests atom rows directly (a test's positions are a range of the column index; ``passes`` for one
position), and so does the partition kernel (a block's bins gathered into a byte per row and column). The walk
and the bit-mask kernel take binary rows: rows reaching them are first ``expand``-ed against the tests of the
trees at hand (``tested``), each bin atom becoming the ids of the tests it passes. That keeps their feature test
one byte or bit, at one id per numeric test a position passes (benchmarks/results/numeric_speed.md).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .sparse import has_feature, has_id_in
from .trees import Rows

MAX_BINS = 255  # LightGBM's and XGBoost's hist default: a bin id fits a byte


class NumericIndex(NamedTuple):
    """The atoms' numeric columns: column (int32 per atom: its column, -1 for a binary atom; empty: no numeric
    columns at all) and per column its first atom (base) and one past its last (end), both int32."""
    column: np.ndarray
    base: np.ndarray
    end: np.ndarray


def no_numeric() -> NumericIndex:
    return NumericIndex(column=np.zeros(0, np.int32), base=np.zeros(0, np.int32), end=np.zeros(0, np.int32))


def numeric_index(n_atoms: int, base, end) -> NumericIndex:
    """The NumericIndex of n_atoms atoms whose numeric columns own the ids base[c]:end[c] (none: no_numeric())."""
    base = np.asarray(base, dtype=np.int32)
    end = np.asarray(end, dtype=np.int32)
    if len(base) == 0:
        return no_numeric()
    column = np.full(n_atoms, -1, dtype=np.int32)
    for c, (lo, hi) in enumerate(zip(base.tolist(), end.tolist())):
        column[lo:hi] = c
    return NumericIndex(column=column, base=base, end=end)


def with_numeric_columns(numeric: NumericIndex, n_atoms: int, bases, ends) -> NumericIndex:
    """``numeric``'s columns among ``n_atoms`` atoms, and after them numeric columns owning the atoms
    bases[c]:ends[c] (past the old atoms; the others binary)."""
    column = np.full(n_atoms, -1, dtype=np.int32)
    column[:len(numeric.column)] = numeric.column
    first = len(numeric.base)
    for c, (lo, hi) in enumerate(zip(bases, ends)):
        column[lo:hi] = first + c
    return NumericIndex(column=column, base=np.concatenate([numeric.base, np.asarray(bases, np.int32)]).astype(np.int32),
                        end=np.concatenate([numeric.end, np.asarray(ends, np.int32)]).astype(np.int32))


def bin_uppers(values, max_bins: int = MAX_BINS) -> np.ndarray:
    """A column's bin upper bounds (float64, ascending, one fewer than its bins) from its training values (NaN:
    missing, left out). With at most max_bins distinct values every value has a bin of its own, cut halfway
    between neighbours, so every threshold a split could use between two values is available (exact); with more,
    the cuts follow max_bins quantiles of the values (LightGBM's and XGBoost's hist), equal values always in one
    bin, each cut halfway between the two distinct values it separates."""
    v = np.asarray(values, dtype=np.float64)
    distinct, counts = np.unique(v[~np.isnan(v)], return_counts=True)
    if len(distinct) <= max_bins:
        last = np.arange(len(distinct) - 1)  # the last distinct value of each bin but the unbounded one
    else:
        cum = np.cumsum(counts)
        targets = cum[-1] * np.arange(1, max_bins) / max_bins
        last = np.unique(np.searchsorted(cum, targets, side="left"))
        last = last[last < len(distinct) - 1]
    low, high = distinct[last], distinct[last + 1]
    with np.errstate(invalid="ignore", over="ignore"):
        middle = low + (high - low) / 2
    return np.where((middle >= low) & (middle < high), middle, low)  # rounding and infinities: the low value


def bins_of(values, uppers) -> np.ndarray:
    """Each value's bin under ``uppers`` (int64; -1 for NaN, which holds no atom)."""
    v = np.asarray(values, dtype=np.float64)
    return np.where(np.isnan(v), -1, np.searchsorted(uppers, v, side="left"))


@njit(cache=True, nogil=True)
def is_numeric_test(numeric, f):
    n = numeric.column.shape[0]
    return n > 0 and (f >= n or numeric.column[f] >= 0)


def is_test(numeric: NumericIndex, n_atoms: int, feature) -> np.ndarray:
    """Per id of ``feature``, whether a tree may test it: an atom, or past the n_atoms atoms a bin's "x > u"."""
    feature = np.asarray(feature, dtype=np.int64)
    atom = (feature >= 0) & (feature < n_atoms)
    above = feature - n_atoms
    inside = (above >= 0) & (above < len(numeric.column))
    bin_above = np.zeros(len(feature), dtype=bool)
    bin_above[inside] = numeric.column[above[inside]] >= 0
    return atom | bin_above


@njit(cache=True, nogil=True)
def test_range(numeric, f):
    """(lo, hi): test f passes where the row holds an atom in [lo, hi] (see the module's header)."""
    n = numeric.column.shape[0]
    if n == 0:
        return f, f
    if f >= n:
        a = f - n
        return a + 1, numeric.end[numeric.column[a]] - 1
    c = numeric.column[f]
    if c < 0:
        return f, f
    return numeric.base[c], f


@njit(cache=True, nogil=True)
def passes(rows, numeric, t, f):
    """Whether position t's atom row passes test f (a binary feature's presence or a threshold test)."""
    lo, hi = test_range(numeric, f)
    if lo == hi:
        return has_feature(rows.indptr, rows.indices, t, lo)
    return has_id_in(rows.indptr, rows.indices, t, lo, hi)


class TestTable(NamedTuple):
    """The numeric tests some trees make, per column c: the "x <= u" tests (their atom ids) le[le_ptr[c]:le_ptr[c +
    1]] and the "x > u" tests (virtual ids) gt[gt_ptr[c]:gt_ptr[c + 1]], each ascending (int64 ptr, int32 ids)."""
    le_ptr: np.ndarray
    le: np.ndarray
    gt_ptr: np.ndarray
    gt: np.ndarray


def tested(numeric: NumericIndex, features) -> TestTable:
    """The TestTable of the tests in ``features`` (tree nodes' feature ids; binary ones and -1 are ignored)."""
    n = len(numeric.column)
    C = len(numeric.base)
    f = np.unique(np.asarray(features, dtype=np.int64))
    f = f[f >= 0]
    if n == 0:
        f = f[:0]
    le = f[(f < n)]
    le = le[numeric.column[le] >= 0]
    gt = f[f >= n]
    tables = []
    for ids, atoms in ((le, le), (gt, gt - n)):
        ptr = np.zeros(C + 1, dtype=np.int64)
        np.cumsum(np.bincount(numeric.column[atoms], minlength=C) if len(atoms) else np.zeros(C, np.int64),
                  out=ptr[1:])
        tables += [ptr, ids.astype(np.int32)]
    return TestTable(*tables)


@njit(cache=True, nogil=True)
def _expand_row(rows, numeric, table, t, out, w):
    """Row t's ids for the kernels into out from w (None written when out is empty: counting); returns the new w.
    Binary atoms are kept; a bin atom a of column c gives its column's "x <= u" tests with id >= a in its place
    and its "x > u" tests with atom below a after every atom (their ids lie past all atoms, ascending by column)."""
    n = numeric.column.shape[0]
    write = out.shape[0] > 0
    p0 = rows.indptr[t]
    p1 = rows.indptr[t + 1]
    for p in range(p0, p1):
        a = rows.indices[p]
        c = numeric.column[a] if a < n else -1
        if c < 0:
            if write:
                out[w] = a
            w += 1
            continue
        for q in range(table.le_ptr[c], table.le_ptr[c + 1]):
            if table.le[q] >= a:
                if write:
                    out[w] = table.le[q]
                w += 1
    for p in range(p0, p1):
        a = rows.indices[p]
        c = numeric.column[a] if a < n else -1
        if c < 0:
            continue
        for q in range(table.gt_ptr[c], table.gt_ptr[c + 1]):
            if table.gt[q] - n >= a:
                break
            if write:
                out[w] = table.gt[q]
            w += 1
    return w


@njit(cache=True, nogil=True)
def _expand(rows, numeric, table):
    T = rows.indptr.shape[0] - 1
    indptr = np.zeros(T + 1, dtype=np.int64)
    none = np.empty(0, dtype=np.int32)
    for t in range(T):
        indptr[t + 1] = _expand_row(rows, numeric, table, t, none, indptr[t])
    indices = np.empty(indptr[T], dtype=np.int32)
    for t in range(T):
        _expand_row(rows, numeric, table, t, indices, indptr[t])
    return indptr, indices


def expand(rows: Rows, numeric: NumericIndex, table: TestTable) -> Rows:
    """The binary rows the prediction kernels take for atom rows under the tests of ``table`` (the rows
    themselves when there are no numeric columns)."""
    if len(numeric.column) == 0:
        return rows
    return Rows(*_expand(rows, numeric, table))
