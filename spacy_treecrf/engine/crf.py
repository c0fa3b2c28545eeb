"""Linear-chain CRF kernels over scaled potentials.

Layout shared by every kernel (positions of all sequences concatenated):
- ``E[t, s, k]`` (float32, T x S x K): exp(phi_t(s, k) - c[t]), where state s = 0 is "start" (valid only at a
  sequence's first position) and s = j + 1 means "previous label j". Forbidden transitions hold 0.
- ``c[t]`` (float64): the per-position log scale taken out of E so float32 never overflows.
- ``seq_starts`` (int64, n_seq + 1): offsets of the sequences.
- ``y`` (int32, T): gold label ids, -1 where unknown.

Kernels are serial and release the GIL: callers run them on chunks of whole sequences in Python threads, which
stays safe under fork (spaCy's n_process) and under concurrent callers, unlike numba's OpenMP layer.

Forward-backward works in probability space with per-position normalisers (``scale``), so it never
overflows whatever the length; log Z = sum(log scale) + sum(c). Alpha and beta are the scaled vectors, so
gamma_t(k) = alpha[t, k] * beta[t, k] and xi_t(j, k) = alpha[t-1, j] * E[t, j+1, k] * beta[t, k] / scale[t].
"""
import numpy as np
from numba import njit

NOGIL = dict(cache=True, nogil=True)


@njit(**NOGIL)
def _allowed(y, t, k, clamp):
    return (not clamp) or y[t] < 0 or y[t] == k


@njit(**NOGIL)
def forward_backward(E, c, seq_starts, y, clamp):
    """Scaled forward-backward. With ``clamp`` only gold labels are allowed where known (partial labels).

    Returns alpha, beta, scale (T x K, T x K, T) and log Z per sequence (-inf if no path is allowed).
    """
    T, S, K = E.shape
    n_seq = seq_starts.shape[0] - 1
    alpha = np.zeros((T, K))
    beta = np.zeros((T, K))
    scale = np.ones(T)
    logz = np.zeros(n_seq)
    for q in range(n_seq):
        a = seq_starts[q]
        b = seq_starts[q + 1]
        if b <= a:
            continue
        dead = False
        for t in range(a, b):
            total = 0.0
            for k in range(K):
                if not _allowed(y, t, k, clamp):
                    continue
                if t == a:
                    v = np.float64(E[t, 0, k])
                else:
                    v = 0.0
                    for j in range(K):
                        v += alpha[t - 1, j] * E[t, j + 1, k]
                alpha[t, k] = v
                total += v
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
            lz += np.log(scale[t]) + c[t]
        logz[q] = lz
        for k in range(K):
            beta[b - 1, k] = 1.0 if _allowed(y, b - 1, k, clamp) else 0.0
        for t in range(b - 2, a - 1, -1):
            for j in range(K):
                if not _allowed(y, t, j, clamp):
                    beta[t, j] = 0.0  # as at the last position: xi and gamma vanish on clamped-out labels
                    continue
                v = 0.0
                for k in range(K):
                    if _allowed(y, t + 1, k, clamp):
                        v += E[t + 1, j + 1, k] * beta[t + 1, k]
                beta[t, j] = v / scale[t + 1]
    return alpha, beta, scale, logz


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
def gold_log_score(E, c, seq_starts, y):
    """Unnormalised log score of each fully labelled sequence's gold path."""
    n_seq = seq_starts.shape[0] - 1
    out = np.zeros(n_seq)
    for q in range(n_seq):
        a = seq_starts[q]
        total = 0.0
        for t in range(a, seq_starts[q + 1]):
            s = 0 if t == a else y[t - 1] + 1
            total += np.log(np.float64(E[t, s, y[t]])) + c[t]
        out[q] = total
    return out


@njit(**NOGIL)
def residual_slice(E, seq_starts, y, partial, free, clamped, k0, out):
    """Functional gradient for the labels k0 .. k0 + G - 1 (out: T x S x G): out[t, s, g] = target_t(s, k) -
    xi_t(s, k) for k = k0 + g (Prop. 1 of the paper), from the free and clamped forward_backward results
    (alpha, beta, scale, log Z). A block of labels reads E[t, s, k0:k0 + G] contiguously.

    The target is the gold transition indicator, or for a partially labelled sequence (``partial[q]``) the
    expected pairwise marginal of the clamped pass: the gradient of the marginal likelihood of the labels
    that are known. Invalid (t, s) cells stay 0.
    """
    alpha, beta, scale = free[0], free[1], free[2]
    calpha, cbeta, cscale = clamped[0], clamped[1], clamped[2]
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
                    target = 0.0
                    if partial[q]:
                        if y[t] < 0 or y[t] == k:
                            target = calpha[t, k] * cbeta[t, k]
                    elif y[t] == k:
                        target = 1.0
                    out[t, 0, g] = target - alpha[t, k] * beta[t, k]
                continue
            for g in range(G):
                k = k0 + g
                fr[g] = beta[t, k] / scale[t]
                cl[g] = cbeta[t, k] / cscale[t] if partial[q] and (y[t] < 0 or y[t] == k) else 0.0
            for j in range(K):  # branch-free over the block, so that it vectorizes
                a_j = alpha[t - 1, j]
                if partial[q]:
                    c_j = calpha[t - 1, j]
                    for g in range(G):
                        e = np.float64(E[t, j + 1, k0 + g])
                        out[t, j + 1, g] = c_j * e * cl[g] - a_j * e * fr[g]
                else:
                    for g in range(G):
                        out[t, j + 1, g] = -(a_j * np.float64(E[t, j + 1, k0 + g]) * fr[g])
            g = y[t] - k0
            if not partial[q] and 0 <= g < G:
                out[t, y[t - 1] + 1, g] += 1.0
    return out


@njit(**NOGIL)
def viterbi(E, seq_starts):
    """Most probable label sequence per sequence (forbidden cells are 0 in E). Path scores are products of E,
    renormalised at each position: a log per cell cost several times the rest of decoding. A sequence whose
    products all vanish (every path left is forbidden or more than ~700 nats below the best at some position) is
    decoded again in log space, where only forbidden paths are lost."""
    T, S, K = E.shape
    best = np.zeros(T, dtype=np.int32)
    for q in range(seq_starts.shape[0] - 1):
        a = seq_starts[q]
        b = seq_starts[q + 1]
        if b > a:
            back = np.zeros((b - a, K), dtype=np.int32)
            if not _viterbi_pass(E, a, b, back, best, False):
                _viterbi_pass(E, a, b, back, best, True)
    return best


@njit(**NOGIL)
def _viterbi_pass(E, a, b, back, best, logs):
    """Viterbi over positions a:b into best[a:b]: in log space with ``logs``, else with products renormalised
    per position; then False (best untouched) if at some position every product is 0."""
    K = E.shape[2]
    prev = np.empty(K)
    cur = np.empty(K)
    for k in range(K):
        cur[k] = np.log(np.float64(E[a, 0, k])) if logs else np.float64(E[a, 0, k])
    for t in range(a + 1, b):
        prev, cur = cur, prev
        norm = 0.0
        for k in range(K):
            top = -np.inf
            arg = 0
            for j in range(K):
                w = np.float64(E[t, j + 1, k])
                v = prev[j] + np.log(w) if logs else prev[j] * w
                if v > top:
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


@njit(**NOGIL)
def nbest(E, c, seq_starts, log_z, n):
    """The n most probable label sequences of every sequence (k-best Viterbi; forbidden cells are 0 in E): paths
    (sequences x n x their length's room, -1 padded: positions seq_starts[q]:seq_starts[q + 1] of sequence q are
    paths[q, r, :length]) and log P(path | X) (sequences x n, -inf where fewer than n paths are allowed), best
    first; among equal scores the lower previous label, then the lower rank, wins. ``log_z``: log Z per sequence
    (forward_backward's fourth result). Each position keeps, per label, the n best partial paths that end there."""
    n_seq = seq_starts.shape[0] - 1
    K = E.shape[2]
    longest = 0
    for q in range(n_seq):
        longest = max(longest, seq_starts[q + 1] - seq_starts[q])
    paths = np.full((n_seq, n, longest), -1, dtype=np.int32)
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
            offset += c[t]
        for k in range(K):
            e = np.float64(E[a, 0, k])
            if e > 0.0:
                score[0, k, 0] = np.log(e)
        for i in range(1, L):
            t = a + i
            for k in range(K):
                m = 0
                for j in range(K):
                    e = np.float64(E[t, j + 1, k])
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
                paths[q, rank, i] = k
                if i > 0:
                    k, r = back[i, k, r] // n, back[i, k, r] % n
    return paths, logp


@njit(**NOGIL)
def rescale(E, c):
    """Divide each position's potentials by their maximum so float32 neither overflows nor underflows."""
    T, S, K = E.shape
    for t in range(T):
        top = 0.0
        for s in range(S):
            for k in range(K):
                if E[t, s, k] > top:
                    top = E[t, s, k]
        if top > 0.0 and top != 1.0:
            inv = 1.0 / top
            for s in range(S):
                for k in range(K):
                    E[t, s, k] = E[t, s, k] * inv
            c[t] += np.log(top)


@njit(**NOGIL)
def scaled_potentials(phi, allowed, is_start):
    """(E, c) from raw potentials phi (T x S x K, float64) in one pass, without T x S x K temporaries: c[t] the
    largest phi over position t's valid cells (0 if none is finite), E = exp(phi - c) there and 0 elsewhere. Valid:
    state 0 at a sequence's first position, states j + 1 elsewhere, each as ``allowed`` (S x K) permits."""
    T, S, K = phi.shape
    E = np.zeros((T, S, K), dtype=np.float32)
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
        for s in range(s0, s1):
            for k in range(K):
                if allowed[s, k]:
                    E[t, s, k] = np.exp(phi[t, s, k] - top)
    return E, c


def start_mask(seq_starts, T):
    """is_start[t]: position t opens a sequence (only the start state is valid there)."""
    is_start = np.zeros(T, dtype=np.bool_)
    is_start[seq_starts[:-1][seq_starts[:-1] < seq_starts[1:]]] = True
    return is_start


def initial_potentials(T, allowed, seq_starts):
    """E for an empty model: 1 where a transition is structurally valid and allowed, else 0."""
    S, K = allowed.shape
    E = np.zeros((T, S, K), dtype=np.float32)
    is_start = start_mask(seq_starts, T)
    E[is_start, 0, :] = allowed[0]
    E[~is_start, 1:, :] = allowed[1:]
    return E, np.zeros(T)


@njit(**NOGIL)
def span_probs(E, alpha, beta, scale, seq_ends, starts, ends, first, inside):
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
            p *= E[t, prev + 1, inside[i]] / scale[t]
            prev = inside[i]
        if b < seq_ends[i]:
            tail = 0.0
            for k in range(K):
                if k != inside[i]:
                    tail += E[b, prev + 1, k] * beta[b, k]
            p *= tail / scale[b]
        else:
            p *= beta[b - 1, prev]
        out[i] = p
    return out
