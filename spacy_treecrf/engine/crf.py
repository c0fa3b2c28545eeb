"""Linear-chain CRF kernels over scaled potentials, grouped by previous state.

Layout shared by every kernel (positions of all sequences concatenated), the Potentials tuple:
- E[t, s, k] = exp(phi_t(s, k) - c[t]) for state s (0 = "start", valid only at a sequence's first position;
  j + 1 = "previous label j") is stored once per *group* of states that share their whole row: position t's
  groups are the rows ``values[start[t]:start[t + 1]]`` (float32, G x K), state s reads row
  ``start[t] + group[t, s]`` (``group``: int32, T x S), and ``group[t, s] = -1`` marks a state that is not
  valid at t (its cells are 0). Forbidden transitions hold 0 in their rows.
  Why: a state's row differs from another's only where some tree split on the previous state at t (or the
  transition mask tells them apart), so positions have a few groups, not S. The cache then costs O(T G K)
  instead of O(T S K), and forward, backward and Viterbi cost O(S + G K) per position instead of O(S K): they
  first pool the previous states of each group (sum or max), then combine the pools with the group rows.
- ``c[t]`` (float64): the per-position log scale taken out of E so float32 never overflows.
- ``seq_starts`` (int64, n_seq + 1): offsets of the sequences.
- ``y`` (int32, T): gold label ids, -1 where unknown.

Kernels are serial and release the GIL: callers run them on chunks of whole sequences in Python threads, which
stays safe under fork (spaCy's n_process) and under concurrent callers, unlike numba's OpenMP layer.

Forward-backward works in probability space with per-position normalisers (``scale``), so it never
overflows whatever the length; log Z = sum(log scale) + sum(c). Alpha and beta are the scaled vectors, so
gamma_t(k) = alpha[t, k] * beta[t, k] and xi_t(j, k) = alpha[t-1, j] * E[t, j+1, k] * beta[t, k] / scale[t].
"""
from typing import List, NamedTuple, Optional, Tuple

import numpy as np
from numba import njit

NOGIL = dict(cache=True, nogil=True)


class Potentials(NamedTuple):
    """Scaled potentials grouped by previous state (module docstring): E[t, s, k] = values[start[t] +
    group[t, s], k], 0 where group[t, s] < 0; c the per-position log scale."""
    values: np.ndarray
    start: np.ndarray
    group: np.ndarray
    c: np.ndarray


# The per-position helpers below are inlined where they are called (numba's IR inlining, inline="always"): a
# call binds P's arrays and numba counts references to each with atomic operations, per position and step. On
# the hyphenation training set (297,818 positions) forward_backward took 100-115 ns a position on one thread
# with the calls, 61 inlined (the same results).
@njit(**NOGIL, inline="always")
def cell(P, t, s, k):
    """E[t, s, k] as float64."""
    g = P.group[t, s]
    return np.float64(P.values[P.start[t] + g, k]) if g >= 0 else 0.0


def part(P: Potentials, a: int, b: int) -> Potentials:
    """Positions a:b of P (views, group rows renumbered from 0)."""
    return Potentials(values=P.values[P.start[a]:P.start[b]], start=P.start[a:b + 1] - P.start[a], group=P.group[a:b],
                      c=P.c[a:b])


def join_rows(values: list, starts: list):
    """(values, start) of consecutive position ranges' group rows, end to end (each start from 0)."""
    offsets = np.cumsum([0] + [st[-1] for st in starts[:-1]])
    start = np.concatenate([starts[0][:1]] + [st[1:] + o for st, o in zip(starts, offsets)]).astype(np.int64)
    return np.concatenate(values), start


def join(parts: List[Potentials]) -> Potentials:
    """Potentials of consecutive position ranges, end to end."""
    if len(parts) == 1:
        return parts[0]
    values, start = join_rows([p.values for p in parts], [p.start for p in parts])
    return Potentials(values=values, start=start, group=np.concatenate([p.group for p in parts]),
                      c=np.concatenate([p.c for p in parts]))


def interleave(P: Potentials, Q: Potentials, from_q: np.ndarray) -> Potentials:
    """The Potentials of positions that are, in order, P's where ``from_q`` (bool, per position of the result) is
    false and Q's where it is true."""
    counts = np.empty(len(from_q), dtype=np.int64)
    counts[~from_q], counts[from_q] = np.diff(P.start), np.diff(Q.start)
    start = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    of_q = np.repeat(from_q, counts)  # each row of the result: Q's or P's, in order (no joined copy of both)
    values = np.empty((start[-1], P.values.shape[1]), dtype=P.values.dtype)
    values[~of_q], values[of_q] = P.values, Q.values
    group = np.empty((len(from_q), P.group.shape[1]), dtype=np.int32)
    c = np.empty(len(from_q))
    group[~from_q], group[from_q] = P.group, Q.group
    c[~from_q], c[from_q] = P.c, Q.c
    return Potentials(values=values, start=start, group=group, c=c)


@njit(**NOGIL)
def product(P, Q):
    """The Potentials of the cell-wise product of two Potentials of the same positions (E_P * E_Q: a stacked
    model's first stage and its own trees, whose raw potentials add), without a T x S x K array. A state's group
    is its pair of groups (pairs come in order of their first state); each position's products are taken in
    float64 and divided by their largest, which goes into c (c_P + c_Q + its log), so float32 loses nothing the
    two factors held. A cell one factor lost to float32 (over ~103 nats below its position's best there) stays 0,
    where the raw sum might have kept it."""
    T, S = P.group.shape
    K = P.values.shape[1]
    group = np.full((T, S), -1, dtype=np.int32)
    start = np.zeros(T + 1, dtype=np.int64)
    pair_of = np.full((S, S), -1, dtype=np.int64)  # (P's group, Q's group) -> the pair's group at t
    first = np.empty((T, S), dtype=np.int32)  # each pair's first state
    for t in range(T):  # the groups first, then their rows
        n = 0
        for s in range(S):
            gp, gq = P.group[t, s], Q.group[t, s]
            if gp < 0 or gq < 0:
                continue
            if pair_of[gp, gq] < 0:
                pair_of[gp, gq] = n
                first[t, n] = s
                n += 1
            group[t, s] = pair_of[gp, gq]
        for r in range(n):
            pair_of[P.group[t, first[t, r]], Q.group[t, first[t, r]]] = -1
        start[t + 1] = start[t] + n
    values = np.zeros((start[T], K), dtype=np.float32)
    c = P.c + Q.c
    rows = np.empty((S, K))  # a position's products, float64
    for t in range(T):
        n, top = start[t + 1] - start[t], 0.0
        for r in range(n):
            a, b = P.start[t] + P.group[t, first[t, r]], Q.start[t] + Q.group[t, first[t, r]]
            for k in range(K):
                rows[r, k] = np.float64(P.values[a, k]) * np.float64(Q.values[b, k])
                top = max(top, rows[r, k])
        scale = 1.0 / top if top > 0.0 else 1.0
        for r in range(n):
            for k in range(K):
                values[start[t] + r, k] = rows[r, k] * scale
        if top > 0.0:
            c[t] += np.log(top)
    return Potentials(values=values, start=start, group=group, c=c)


@njit(**NOGIL, inline="always")
def _allowed(y, t, k, clamp):
    return (not clamp) or y[t] < 0 or y[t] == k


@njit(**NOGIL, inline="always")
def _pool_sums(P, t, prev, pool):
    """pool[r] = sum of prev[j] over the labels j whose state j + 1 is in group r at t; returns the groups."""
    n = P.start[t + 1] - P.start[t]
    pool[:n] = 0.0
    for j in range(prev.shape[0]):
        r = P.group[t, j + 1]
        if r >= 0:
            pool[r] += prev[j]
    return n


@njit(**NOGIL, inline="always")
def forward_step(P, t, prev, pool, out):
    """out[k] = sum_j prev[j] E[t, j + 1, k], through the groups: O(S + G K)."""
    n = _pool_sums(P, t, prev, pool)
    base = P.start[t]
    out[:] = 0.0
    for r in range(n):
        w = pool[r]
        if w != 0.0:
            for k in range(out.shape[0]):
                out[k] += w * np.float64(P.values[base + r, k])


@njit(**NOGIL, inline="always")
def backward_step(P, t, nxt, pool, out):
    """out[j] = sum_k E[t, j + 1, k] nxt[k] for every label j, through the groups: O(G K + S)."""
    base = P.start[t]
    n = P.start[t + 1] - base
    for r in range(n):
        v = 0.0
        for k in range(nxt.shape[0]):
            v += np.float64(P.values[base + r, k]) * nxt[k]
        pool[r] = v
    for j in range(out.shape[0]):
        r = P.group[t, j + 1]
        out[j] = pool[r] if r >= 0 else 0.0


class ForwardBackward(NamedTuple):
    """forward_backward's results: alpha and beta (T x K, float64), scale (T) and log Z per sequence."""
    alpha: np.ndarray
    beta: np.ndarray
    scale: np.ndarray
    logz: np.ndarray


def cells(fb: ForwardBackward, a: int = 0, b: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(alpha, beta, scale) of positions a:b (all by default): the per-position part of a ForwardBackward, as the
    residual kernels take it."""
    return fb.alpha[a:b], fb.beta[a:b], fb.scale[a:b]


@njit(**NOGIL)
def forward_backward(P, seq_starts, y, clamp):
    """Scaled forward-backward. With ``clamp`` only gold labels are allowed where known (partial labels).

    Returns a ForwardBackward: alpha, beta (T x K), scale (T) and log Z per sequence (-inf if no path is
    allowed).
    """
    T = P.group.shape[0]
    K = P.values.shape[1]
    n_seq = seq_starts.shape[0] - 1
    out = ForwardBackward(alpha=np.zeros((T, K)), beta=np.zeros((T, K)), scale=np.ones(T), logz=np.zeros(n_seq))
    forward_backward_into(P, seq_starts, y, clamp, np.ones(n_seq, dtype=np.bool_), out)
    return out


@njit(**NOGIL)
def forward_backward_into(P, seq_starts, y, clamp, todo, out):
    """forward_backward of the sequences q with todo[q], written into ``out`` (a ForwardBackward: alpha and beta
    0, scale 1 and log Z 0 on entry); the other sequences' entries are left as they are."""
    S = P.group.shape[1]
    K = P.values.shape[1]
    alpha, beta, scale, logz = out.alpha, out.beta, out.scale, out.logz
    pool = np.empty(S)
    for q in range(seq_starts.shape[0] - 1):
        a = seq_starts[q]
        b = seq_starts[q + 1]
        if b <= a or not todo[q]:
            continue
        dead = False
        for t in range(a, b):
            if t == a:
                for k in range(K):
                    alpha[t, k] = cell(P, t, 0, k)
            else:
                forward_step(P, t, alpha[t - 1], pool, alpha[t])
            total = 0.0
            for k in range(K):
                if not _allowed(y, t, k, clamp):
                    alpha[t, k] = 0.0
                total += alpha[t, k]
            if total <= 0.0 or not np.isfinite(total):
                dead = True
                break
            scale[t] = total
            for k in range(K):
                alpha[t, k] /= total
        if dead:
            logz[q] = -np.inf
            continue
        lz = 0.0
        for t in range(a, b):
            lz += np.log(scale[t]) + P.c[t]
        logz[q] = lz
        for k in range(K):
            beta[b - 1, k] = 1.0 if _allowed(y, b - 1, k, clamp) else 0.0
        for t in range(b - 2, a - 1, -1):  # beta[t + 1] is 0 on clamped-out labels already
            backward_step(P, t + 1, beta[t + 1], pool, beta[t])
            for j in range(K):
                beta[t, j] = beta[t, j] / scale[t + 1] if _allowed(y, t, j, clamp) else 0.0


@njit(**NOGIL)
def marginals(alpha, beta):
    """Per-position label marginals gamma_t(k)."""
    T, K = alpha.shape
    gamma = np.empty((T, K))
    for t in range(T):
        for k in range(K):
            gamma[t, k] = alpha[t, k] * beta[t, k]
    return gamma


@njit(**NOGIL)
def gold_log_score(P, seq_starts, y):
    """Unnormalised log score of each fully labelled sequence's gold path."""
    n_seq = seq_starts.shape[0] - 1
    out = np.zeros(n_seq)
    for q in range(n_seq):
        a = seq_starts[q]
        total = 0.0
        for t in range(a, seq_starts[q + 1]):
            s = 0 if t == a else y[t - 1] + 1
            total += np.log(cell(P, t, s, y[t])) + P.c[t]
        out[q] = total
    return out


@njit(**NOGIL, inline="always")
def next_factors(beta, scale, cbeta, cscale, t, clamp, label, k0, w, fr, cl):
    """The factors of the residual's cells at position t (not a sequence's first) that depend on the label k =
    k0 + g only, times w: fr[g] = w beta[t, k] / scale[t] from the free pass, and cl[g] = w cbeta[t, k] /
    cscale[t] from the clamped pass where it counts (``clamp``: a partially labelled sequence; the known label
    ``label``, -1 if unknown, allows k), else 0. A cell (t, s, k) is then the gold transition indicator (fully
    labelled sequences) plus c_s E[t, s, k] cl[g] - a_s E[t, s, k] fr[g], a_s and c_s the free and clamped
    alpha[t - 1, s - 1]: residual_slice, leaves.py's leaf sums and project.py's projected rows read them."""
    for g in range(fr.shape[0]):
        k = k0 + g
        fr[g] = w * beta[t, k] / scale[t]
        cl[g] = w * cbeta[t, k] / cscale[t] if clamp and (label < 0 or label == k) else 0.0


@njit(**NOGIL)
def start_target(partial: bool, label: int, k: int, clamped_marginal: float) -> float:
    """The target of label k at a sequence's first position, whose label is ``label`` (-1: unknown): 1 or 0, or
    in a partially labelled sequence the clamped pass's marginal there (0 where the label is another one)."""
    if partial:
        return clamped_marginal if label < 0 or label == k else 0.0
    return 1.0 if label == k else 0.0


class LabelTargets(NamedTuple):
    """What the CRF loss's functional gradient reads at a single position (label_residual, leaves.py): the
    Potentials P, the gold label ids y (T, -1: unknown), is_start and ``partial`` (T bools: the position starts
    its sequence / its sequence is partially labelled), the free and clamped scaled forward-backward results
    (alpha, beta: T x K, scale: T; calpha, cbeta, cscale) and a weight per position (the rank loss's sequence
    weight, else 1)."""
    P: Potentials
    y: np.ndarray
    is_start: np.ndarray
    partial: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    scale: np.ndarray
    calpha: np.ndarray
    cbeta: np.ndarray
    cscale: np.ndarray
    weight: np.ndarray


@njit(cache=True, nogil=True, inline="always")
def label_residual(m, t, k):
    """sum over s of residual_slice's out[t, s, k], the functional gradient summed over position t's previous
    states, in O(1): the pairwise marginals xi_t(j, k) sum over j to gamma_t(k) = alpha[t, k] beta[t, k] (the
    forward recursion), and the clamped pass's to its own gamma, so this is the label's target (1 for the gold
    label, or the clamped marginal of a label the known ones allow) minus gamma_t(k), times the weight. A shared
    tree's directions and the values of its leaves that hold every previous state come from these T x K sums;
    the T x S x K residuals behind them would cost S times more to make and to read."""
    if m.partial[t]:
        target = m.calpha[t, k] * m.cbeta[t, k] if m.y[t] < 0 or m.y[t] == k else 0.0
    else:
        target = 1.0 if m.y[t] == k else 0.0
    return m.weight[t] * (target - m.alpha[t, k] * m.beta[t, k])


@njit(**NOGIL)
def label_residual_rows(m, positions, out):
    """out[i, k] = label_residual(m, positions[i], k) (out: len(positions) x K)."""
    for i in range(positions.shape[0]):
        for k in range(out.shape[1]):
            out[i, k] = label_residual(m, positions[i], k)
    return out


@njit(**NOGIL)
def residual_slice(P, seq_starts, y, partial, free, clamped, k0, out):
    """Functional gradient for the labels k0 .. k0 + G - 1 (out: T x S x G): out[t, s, g] = target_t(s, k) -
    xi_t(s, k) for k = k0 + g (Prop. 1 of the paper), from the free and clamped forward_backward results
    (alpha, beta, scale, log Z). A block of labels reads a group row's k0:k0 + G contiguously.

    The target is the gold transition indicator, or for a partially labelled sequence (``partial[q]``) the
    expected pairwise marginal of the clamped pass: the gradient of the marginal likelihood of the labels
    that are known. Invalid (t, s) cells stay 0.
    """
    alpha, beta, scale = free[0], free[1], free[2]
    calpha, cbeta, cscale = clamped[0], clamped[1], clamped[2]
    values, start, group = P.values, P.start, P.group
    n_seq = seq_starts.shape[0] - 1
    K = alpha.shape[1]
    G = out.shape[2]
    out[:] = 0.0
    fr = np.empty(G)
    cl = np.empty(G)
    for q in range(n_seq):
        a = seq_starts[q]
        b = seq_starts[q + 1]
        for t in range(a, b):
            if t == a:
                for g in range(G):
                    k = k0 + g
                    out[t, 0, g] = start_target(partial[q], y[t], k, calpha[t, k] * cbeta[t, k]) - (
                        alpha[t, k] * beta[t, k])
                continue
            next_factors(beta, scale, cbeta, cscale, t, partial[q], y[t], k0, 1.0, fr, cl)
            for j in range(K):  # branch-free over the block, so that it vectorizes
                r = group[t, j + 1]
                if r < 0:
                    continue
                row = start[t] + r
                a_j = alpha[t - 1, j]
                if partial[q]:
                    c_j = calpha[t - 1, j]
                    for g in range(G):
                        e = np.float64(values[row, k0 + g])
                        out[t, j + 1, g] = c_j * e * cl[g] - a_j * e * fr[g]
                else:
                    for g in range(G):
                        out[t, j + 1, g] = -(a_j * np.float64(values[row, k0 + g]) * fr[g])
            g = y[t] - k0
            if not partial[q] and 0 <= g < G:
                out[t, y[t - 1] + 1, g] += 1.0
    return out


@njit(**NOGIL)
def viterbi(P, seq_starts):
    """Most probable label sequence per sequence (forbidden cells are 0 in E). Path scores are products of E,
    renormalised at each position: a log per cell cost several times the rest of decoding. A sequence whose
    products all vanish (every path left is forbidden or more than ~700 nats below the best at some position) is
    decoded again in log space, where only forbidden paths are lost."""
    T = P.group.shape[0]
    K = P.values.shape[1]
    best = np.zeros(T, dtype=np.int32)
    for q in range(seq_starts.shape[0] - 1):
        a = seq_starts[q]
        b = seq_starts[q + 1]
        if b > a:
            back = np.zeros((b - a, K), dtype=np.int32)
            if not _viterbi_pass(P, a, b, back, best, False):
                _viterbi_pass(P, a, b, back, best, True)
    return best


@njit(**NOGIL)
def _viterbi_pass(P, a, b, back, best, logs):
    """Viterbi over positions a:b into best[a:b]: in log space with ``logs``, else with products renormalised
    per position; then False (best untouched) if at some position every product is 0. A group's best previous
    label is found once (the lowest among equal scores); across groups the lowest label wins ties too, as in a
    scan over all previous labels."""
    K = P.values.shape[1]
    S = P.group.shape[1]
    prev = np.empty(K)
    cur = np.empty(K)
    pool = np.empty(S)
    arg_of = np.empty(S, dtype=np.int32)
    for k in range(K):
        e = cell(P, a, 0, k)
        cur[k] = np.log(e) if logs else e
    for t in range(a + 1, b):
        prev, cur = cur, prev
        base = P.start[t]
        n = P.start[t + 1] - base
        arg_of[:n] = -1
        for j in range(K):
            r = P.group[t, j + 1]
            if r >= 0 and (arg_of[r] < 0 or prev[j] > pool[r]):
                pool[r] = prev[j]
                arg_of[r] = j
        norm = 0.0
        for k in range(K):
            top = -np.inf
            arg = 0
            for r in range(n):
                j = arg_of[r]
                if j < 0:
                    continue
                w = np.float64(P.values[base + r, k])
                v = pool[r] + np.log(w) if logs else pool[r] * w
                if v > top or (v == top and j < arg):
                    top = v
                    arg = j
            cur[k] = top
            back[t - a, k] = arg
            norm = max(norm, top)
        if not logs:
            if norm == 0.0:
                return False
            for k in range(K):
                cur[k] /= norm
    last = 0
    for k in range(1, K):
        if cur[k] > cur[last]:
            last = k
    best[b - 1] = last
    for i in range(b - a - 1, 0, -1):
        last = back[i, last]
        best[a + i - 1] = last
    return True


MAX_NBEST = 1000  # the most paths nbest keeps: k-best Viterbi holds n partial paths per position and label


@njit(**NOGIL)
def nbest(P, seq_starts, log_z, n):
    """The n most probable label sequences of every sequence (k-best Viterbi; forbidden cells are 0 in E): paths
    (n x positions, -1 where a sequence has fewer than n paths: sequence q's path of rank r is paths[r,
    seq_starts[q]:seq_starts[q + 1]], so the memory follows the positions, not the longest sequence times the
    sequences) and log P(path | X) (sequences x n, -inf where fewer than n paths are allowed), best first; among
    equal scores the lower previous label, then the lower rank, wins. ``log_z``: log Z per sequence
    (forward_backward's fourth result). Each position keeps, per label, the n best partial paths that end there."""
    n_seq = seq_starts.shape[0] - 1
    K = P.values.shape[1]
    paths = np.full((n, seq_starts[n_seq]), -1, dtype=np.int32)
    logp = np.full((n_seq, n), -np.inf)
    cand_score = np.empty(K * n)
    cand_prev = np.empty(K * n, dtype=np.int64)
    for q in range(n_seq):
        a = seq_starts[q]
        b = seq_starts[q + 1]
        L = b - a
        if L == 0:
            logp[q, 0] = 0.0  # the empty path, certain
            continue
        score = np.full((L, K, n), -np.inf)
        back = np.zeros((L, K, n), dtype=np.int64)  # previous label * n + its rank
        offset = 0.0
        for t in range(a, b):
            offset += P.c[t]
        for k in range(K):
            e = cell(P, a, 0, k)
            if e > 0.0:
                score[0, k, 0] = np.log(e)
        for i in range(1, L):
            t = a + i
            for k in range(K):
                m = 0
                for j in range(K):
                    e = cell(P, t, j + 1, k)
                    if e <= 0.0:
                        continue
                    w = np.log(e)
                    for r in range(n):
                        if score[i - 1, j, r] == -np.inf:
                            break
                        cand_score[m] = score[i - 1, j, r] + w
                        cand_prev[m] = j * n + r
                        m += 1
                order = np.argsort(-cand_score[:m], kind="mergesort")  # stable: lower (j, r) first on ties
                for r in range(min(n, m)):
                    score[i, k, r] = cand_score[order[r]]
                    back[i, k, r] = cand_prev[order[r]]
        m = 0
        for k in range(K):
            for r in range(n):
                if score[L - 1, k, r] > -np.inf:
                    cand_score[m] = score[L - 1, k, r]
                    cand_prev[m] = k * n + r
                    m += 1
        order = np.argsort(-cand_score[:m], kind="mergesort")
        for rank in range(min(n, m)):
            logp[q, rank] = cand_score[order[rank]] + offset - log_z[q]
            k, r = cand_prev[order[rank]] // n, cand_prev[order[rank]] % n
            for i in range(L - 1, -1, -1):
                paths[rank, a + i] = k
                if i > 0:
                    k, r = back[i, k, r] // n, back[i, k, r] % n
    return paths, logp


@njit(**NOGIL)
def rescale(P):
    """Divide each position's potentials by their maximum so float32 neither overflows nor underflows."""
    values, start, c = P.values, P.start, P.c
    for t in range(c.shape[0]):
        top = 0.0
        for row in range(start[t], start[t + 1]):
            for k in range(values.shape[1]):
                if values[row, k] > top:
                    top = values[row, k]
        if top > 0.0 and top != 1.0:
            inv = 1.0 / top
            for row in range(start[t], start[t + 1]):
                for k in range(values.shape[1]):
                    values[row, k] = values[row, k] * inv
            c[t] += np.log(top)


@njit(**NOGIL)
def _same_row(phi, t, s, u, allowed):
    for k in range(phi.shape[2]):
        if allowed[s, k] != allowed[u, k] or (allowed[s, k] and phi[t, s, k] != phi[t, u, k]):
            return False
    return True


@njit(**NOGIL)
def scaled_potentials(phi, allowed, is_start):
    """Potentials from raw potentials phi (T x S x K, float64): c[t] the largest phi over position t's valid
    cells (0 if none is finite), E = exp(phi - c) there and 0 elsewhere, states with equal rows in one group.
    Valid: state 0 at a sequence's first position, states j + 1 elsewhere, each as ``allowed`` (S x K) permits."""
    T, S, K = phi.shape
    group = np.full((T, S), -1, dtype=np.int32)
    start = np.zeros(T + 1, dtype=np.int64)
    first = np.empty((T, S), dtype=np.int32)  # each group's first state
    for t in range(T):  # the groups first, then their rows: no T x S x K temporary
        s0, s1 = (0, 1) if is_start[t] else (1, S)
        n = 0
        for s in range(s0, s1):
            found = -1
            for r in range(n):  # rows that differ mostly differ in their first cells: a short compare
                if _same_row(phi, t, s, first[t, r], allowed):
                    found = r
                    break
            if found < 0:
                found = n
                first[t, n] = s
                n += 1
            group[t, s] = found
        start[t + 1] = start[t] + n
    values = np.zeros((start[T], K), dtype=np.float32)
    c = np.zeros(T)
    for t in range(T):
        s0, s1 = (0, 1) if is_start[t] else (1, S)
        top = -np.inf
        for s in range(s0, s1):
            for k in range(K):
                if allowed[s, k] and phi[t, s, k] > top:
                    top = phi[t, s, k]
        if not np.isfinite(top):
            top = 0.0
        c[t] = top
        for r in range(start[t + 1] - start[t]):
            s = first[t, r]
            for k in range(K):
                if allowed[s, k]:
                    values[start[t] + r, k] = np.exp(phi[t, s, k] - top)
    return Potentials(values=values, start=start, group=group, c=c)


@njit(**NOGIL)
def agreeing_labels(permitted, seq_starts, allowed):
    """Known labels against the transition mask: ``permitted`` (T x K bool) holds the labels each position may
    take (all where nothing is known there, one where its label is known, all but some where only some are ruled
    out). Returns ``alive`` (T x K bool): the labels that lie on at least one path of their sequence that the mask
    allows and that takes a permitted label everywhere, and per sequence the first position at which no such path
    can arrive (-1 where one exists: then every position has an alive label).
    Why both directions: a label can be permitted and reachable from the start yet lead nowhere (I-X before a known
    B-Y is fine, I-X at the end of a sequence before nothing is too, but a known I-X after it is not), and decoding
    restricted to the alive labels scales each position's potentials over cells that some agreeing path uses, so
    a path the known labels force is never lost to float32 underflow next to a path they rule out."""
    T, K = permitted.shape
    alive = np.zeros((T, K), dtype=np.bool_)
    n_seq = seq_starts.shape[0] - 1
    dead = np.full(n_seq, -1, dtype=np.int64)
    for q in range(n_seq):
        a = seq_starts[q]
        b = seq_starts[q + 1]
        for t in range(a, b):  # forward: reachable from the start through permitted labels
            found = False
            for k in range(K):
                ok = False
                if permitted[t, k]:
                    if t == a:
                        ok = allowed[0, k]
                    else:
                        for j in range(K):
                            if alive[t - 1, j] and allowed[j + 1, k]:
                                ok = True
                                break
                alive[t, k] = ok
                found = found or ok
            if not found:
                dead[q] = t - a
                break
        if dead[q] >= 0:
            alive[a:b] = False
            continue
        for t in range(b - 2, a - 1, -1):  # backward: some alive label can follow
            for j in range(K):
                if alive[t, j]:
                    ok = False
                    for k in range(K):
                        if alive[t + 1, k] and allowed[j + 1, k]:
                            ok = True
                            break
                    alive[t, j] = ok
    return alive, dead


@njit(**NOGIL)
def clamp_potentials(phi, alive, is_start):
    """Raw potentials phi (T x S x K, float64) restricted in place to the cells agreeing paths use: -inf (a cell
    scaled_potentials makes 0) for a label that is not ``alive`` (agreeing_labels) at its position, and for a
    previous state whose label is not alive at the position before. Decoding the result is decoding conditional on
    the known labels: Viterbi's best agreeing path, forward-backward's marginals given them and log Z over the
    agreeing paths alone."""
    T, S, K = phi.shape
    for t in range(T):
        for s in range(S):
            dead_state = s > 0 and (is_start[t] or not alive[t - 1, s - 1])
            for k in range(K):
                if dead_state or not alive[t, k]:
                    phi[t, s, k] = -np.inf


def start_mask(seq_starts, T):
    """is_start[t]: position t opens a sequence (only the start state is valid there)."""
    is_start = np.zeros(T, dtype=np.bool_)
    is_start[seq_starts[:-1][seq_starts[:-1] < seq_starts[1:]]] = True
    return is_start


def mask_classes(allowed):
    """The distinct rows of a transition mask (as np.unique orders them) and each row's class: states of one
    class may share a group of potentials, states of two never do."""
    rows, inverse = np.unique(np.asarray(allowed, dtype=bool), axis=0, return_inverse=True)
    return rows, np.asarray(inverse, dtype=np.int64).ravel()


def initial_potentials(T, allowed, seq_starts) -> Potentials:
    """E for an empty model: 1 where a transition is structurally valid and allowed, else 0; the previous labels
    with the same allowed row share a group (one group without a transition mask)."""
    S, K = allowed.shape
    is_start = start_mask(seq_starts, T)
    rows, inverse = mask_classes(allowed[1:])
    counts = np.where(is_start, 1, len(rows))
    start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    values = np.empty((int(start[-1]), K), dtype=np.float32)
    group = np.full((T, S), -1, dtype=np.int32)
    values[start[:-1][is_start]] = allowed[0]
    group[is_start, 0] = 0
    others = start[:-1][~is_start]
    values[(others[:, None] + np.arange(len(rows))).ravel()] = np.tile(rows, (len(others), 1))
    group[~is_start, 1:] = inverse.astype(np.int32)
    return Potentials(values=values, start=start, group=group, c=np.zeros(T))


@njit(**NOGIL)
def span_probs(P, alpha, beta, scale, seq_ends, starts, ends, first, inside):
    """P(y[a:b] = first, inside, ..., inside and y[b] != inside | X) for each span [a, b) of one sequence batch.

    The probability that the CRF labels exactly this span (a BIO span is closed by any label but its I-).
    ``seq_ends[i]`` is the end of the sequence holding span i; alpha/beta/scale are from forward_backward.
    """
    K = alpha.shape[1]
    out = np.empty(starts.shape[0])
    for i in range(starts.shape[0]):
        a = starts[i]
        b = ends[i]
        p = alpha[a, first[i]]
        prev = first[i]
        for t in range(a + 1, b):
            p *= cell(P, t, prev + 1, inside[i]) / scale[t]
            prev = inside[i]
        if b < seq_ends[i]:
            tail = 0.0
            for k in range(K):
                if k != inside[i]:
                    tail += cell(P, b, prev + 1, k) * beta[b, k]
            p *= tail / scale[b]
        else:
            p *= beta[b - 1, prev]
        out[i] = p
    return out
