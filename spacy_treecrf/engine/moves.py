"""Moving grouped potentials (crf.Potentials) by trees: E[t, s, :] *= factor for the states s a leaf holds.

A move is a position, a set of states (a row of a state table: a leaf's states) and a factor row (one label's
factor, or a shared tree's vector of factors for every label). Where a move takes only part of a group's
states, the group splits in two: the states it takes get a copy of the row, moved; the others keep the old
row. Groups never merge again, so a position has as many groups as the distinct ways its trees' leaves divide
the previous states (with the transition mask's classes to start from), at most S.

Moves are applied a position at a time, in the order they were given for that position (so float32 products
come out the same whatever the threads), into new value rows: the groups of a position may grow, so the
values are copied once per application.
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .intrinsics import with_room


class Moves(NamedTuple):
    """Moves sorted by position: those of position t are ptr[t]:ptr[t + 1]; move i takes the states
    states[states_of[i]] (bool rows) and multiplies label[factor_of[i]]'s column by factor[factor_of[i], 0],
    or with label -1 every label k by factor[factor_of[i], k]."""
    ptr: np.ndarray
    states_of: np.ndarray
    factor_of: np.ndarray
    states: np.ndarray
    label: np.ndarray
    factor: np.ndarray


@njit(cache=True, nogil=True)
def sort_moves(T, position, states_of, factor_of, states, label, factor):
    """Moves from unsorted lists (position, states_of, factor_of per move): a stable counting sort by
    position, so each position keeps its moves in the order given."""
    ptr = np.zeros(T + 1, dtype=np.int64)
    for i in range(position.shape[0]):
        ptr[position[i] + 1] += 1
    for t in range(T):
        ptr[t + 1] += ptr[t]
    fill = ptr[:T].copy()
    s_of = np.empty(position.shape[0], dtype=np.int64)
    f_of = np.empty(position.shape[0], dtype=np.int64)
    for i in range(position.shape[0]):
        j = fill[position[i]]
        fill[position[i]] += 1
        s_of[j] = states_of[i]
        f_of[j] = factor_of[i]
    return Moves(ptr=ptr, states_of=s_of, factor_of=f_of, states=states, label=label, factor=factor)


@njit(cache=True, nogil=True)
def _covers(states, is_start_row):
    """Whether a state row holds every state valid at a position: state 0 at a sequence start, 1.. elsewhere."""
    if is_start_row:
        return states[0]
    for s in range(1, states.shape[0]):
        if not states[s]:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def _multiply(rows, r, k, factor, f):
    """Group row r times move factor row f: one label's column (k >= 0) or every label's. Inlined: called per
    move and row, a call would count references to both arrays (see crf.py's note on its helpers)."""
    if k >= 0:
        rows[r, k] *= factor[f, 0]
    else:
        for j in range(rows.shape[1]):
            rows[r, j] *= factor[f, j]


@njit(cache=True, nogil=True)
def apply_moves(P, a, b, moves):
    """The moves of positions a:b (b <= T) applied to P: returns (values, start) of those positions' new group
    rows (start from 0); P.group[a:b] is rewritten in place."""
    values, start, group = P.values, P.start, P.group
    S = group.shape[1]
    K = values.shape[1]
    states, label, factor = moves.states, moves.label, moves.factor
    covers_start = np.empty(states.shape[0], dtype=np.bool_)
    covers_other = np.empty(states.shape[0], dtype=np.bool_)
    for i in range(states.shape[0]):
        covers_start[i] = _covers(states[i], True)
        covers_other[i] = _covers(states[i], False)
    out = np.empty((max(16, 2 * (start[b] - start[a])), K), dtype=np.float32)
    out_start = np.zeros(b - a + 1, dtype=np.int64)
    rows = np.empty((S, K), dtype=np.float32)
    size = np.zeros(S, dtype=np.int64)
    count = np.zeros(S, dtype=np.int64)
    target = np.empty(S, dtype=np.int64)
    for t in range(a, b):
        n = start[t + 1] - start[t]
        rows[:n] = values[start[t]:start[t + 1]]
        if moves.ptr[t + 1] > moves.ptr[t]:
            at_start = group[t, 0] >= 0
            size[:n] = 0
            n_valid = 0
            for s in range(S):
                if group[t, s] >= 0:
                    size[group[t, s]] += 1
                    n_valid += 1
            for i in range(moves.ptr[t], moves.ptr[t + 1]):
                st = moves.states_of[i]
                f = moves.factor_of[i]
                k = label[f]
                if covers_start[st] if at_start else covers_other[st]:
                    for r in range(n):
                        _multiply(rows, r, k, factor, f)
                    continue
                if n == n_valid:  # a group per state: nothing left to split
                    for s in range(S):
                        if states[st, s] and group[t, s] >= 0:
                            _multiply(rows, group[t, s], k, factor, f)
                    continue
                for s in range(S):
                    r = group[t, s]
                    if r >= 0 and states[st, s]:
                        count[r] += 1
                n_before = n
                for r in range(n_before):
                    if count[r] == 0:
                        continue
                    if count[r] == size[r]:
                        target[r] = r
                    else:  # the move cuts group r: its states here get a copy of the row
                        target[r] = n
                        rows[n] = rows[r]
                        size[n] = count[r]
                        size[r] -= count[r]
                        n += 1
                    _multiply(rows, target[r], k, factor, f)
                for s in range(S):
                    r = group[t, s]
                    if r >= 0 and states[st, s]:
                        group[t, s] = target[r]
                count[:n_before] = 0
        i0 = out_start[t - a]
        if i0 + n > out.shape[0]:
            out = with_room(out, i0 + n)
        out[i0:i0 + n] = rows[:n]
        out_start[t - a + 1] = i0 + n
    return out[:out_start[b - a]], out_start
