"""Functional gradients of the boosting losses other than the CRF log-likelihood (that one is crf.residual_slice).

Every loss hands the tree learner the same thing: for label k, out[t, s] = -dL/dphi_t(s, k), the negative
gradient with respect to the potential F^k(s, x_t) of label k at position t from state s (s = 0: sequence start,
s = j + 1: previous label j). Arrays and scaling are those of crf.py (E = exp(phi - c), scaled alpha / beta).
g_t is the gold label, s_t the gold state (0 at a sequence start, g_{t-1} + 1 elsewhere). Kernels are serial
and release the GIL like crf.py's.

Pseudo-likelihood (Besag; the Dietterich & Ashenfelter slides).
    L = -sum_t log p_t(g_t),  p_t(k) = P(y_t = k | g_{t-1}, g_{t+1}, X)
                                     = exp(phi_t(s_t, k) + phi_{t+1}(k + 1, g_{t+1})) / sum_l (same with l)
    (no "next" factor at a sequence's last position). phi_t(s, k) enters two conditionals: position t's own
    (when s = s_t) and position t-1's as its "next" factor (when s = j + 1 and k = g_t). So
        -dL/dphi_t(s, k) = [s = s_t] (I(g_t = k) - p_t(k)) + [t not first, k = g_t] (I(g_{t-1} = j) - p_{t-1}(j)).
    The slides' pseudo-target y_tk - p_t(k) is the first term; the second is the exact gradient's other half
    (so a cell's residual lies in [-1, 2]). No forward-backward: the gradient pass costs O(T K), not O(T K^2).
    Unknown labels: position t's term is kept only when g_t and its neighbours g_{t-1}, g_{t+1} (where they
    exist) are known; other terms are dropped.

Hamming (Altun, Hofmann & Johnson 2002, Eq. 22-23).
    L = -sum_t log P(y_t = g_t | X) over the known labels. With xi_u(s, k) the pairwise marginal of cell (u, s, k)
    and xi_u^(t) the same conditioned on y_t = g_t,
        -dL/dphi_u(s, k) = sum_t (xi_u^(t)(s, k) - xi_u(s, k)) = A_u(s, k) - n xi_u(s, k),
        A_u(s, k) = sum_t w_t P(cell (u, s, k), y_t = g_t | X),  w_t = 1 / P(y_t = g_t | X),
    n the number of known labels of the sequence. A is one more forward and backward pass with accumulators
    (Kakade, Teh & Roweis 2002, the "second-order" pass the paper cites), O(T K^2) instead of one clamped pass
    per t: fa_u(k) = sum_{t <= u} w_t alpha_u(k; y_t = g_t) and fb_u(k) = sum_{t >= u} w_t beta_u(k; y_t = g_t),
        fa_u(k) = sum_j fa_{u-1}(j) E_u(j + 1, k) / scale_u + I(k = g_u) w_u alpha_u(k),
        fb_u(j) = sum_k E_{u+1}(j + 1, k) fb_{u+1}(k) / scale_{u+1} + I(j = g_u) w_u beta_u(j),
        A_u(j + 1, k) = (fa_{u-1}(j) beta_u(k) + alpha_{u-1}(j) fb_u(k)) E_u(j + 1, k) / scale_u,
        A_a(0, k) = alpha_a(k) fb_a(k) at a sequence start a.
    Unknown labels contribute no term (w_t = 0). Unlike the other losses' residuals, these are bounded by n, not 1.

Sequence rank loss (Altun et al., Eq. 8-12).
    L = sum_i sum_{Y != Y_i} exp(F(X_i, Y) - F(X_i, Y_i)) = sum_i (1 / P_i - 1),  P_i = P(Y_i | X_i); by Eq. 9-10
        -dL/dphi = (1 / P_i) (I(gold cell) - xi),
    the CRF residual of sequence i weighted by 1 / P_i. With partial labels P_i is the probability of the known
    labels and the CRF residual is the clamped one (crf.residual_slice). ``rank_weights`` scales every weight by
    one constant, 1 / max_j (1 / P_j - 1): the residuals then lie in [-1, 1] like the CRF loss's (the gold path
    passes through every cell it uses, so |I - xi| <= 1 - P_i), the tree learner's shrinkage keeps its meaning,
    and the step size, not the gradient's scale, decides how far a round moves. The step is the paper's
    minimisation of the loss after the step (Eq. 13) along the round's trees, done by the booster as a line
    search (see booster.Trainer), not through the convexity bound of Eq. 17-21, which needs the range of each
    weak learner's count over all sequences and is only exact for binary features.
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .crf import backward_step, forward_step, cell

NOGIL = dict(cache=True, nogil=True)
TINY = 1e-300  # floor of P(y_t = g_t | X) in the Hamming loss: an underflowed marginal must not divide by 0


class PseudoTerms(NamedTuple):
    """A pseudo-likelihood gradient pass's arrays (pseudo_conditionals): p_t(k) (T x K) and which positions keep
    their term (T)."""
    cond: np.ndarray
    kept: np.ndarray


class HammingTerms(NamedTuple):
    """A Hamming-loss gradient pass's arrays (hamming_pass): its accumulated vectors fa, fb (T x K) and the number
    of known labels per sequence (known)."""
    fa: np.ndarray
    fb: np.ndarray
    known: np.ndarray


class RankTerms(NamedTuple):
    """A rank-loss gradient pass's terms: each position's weight (its sequence's share of the loss, T) and the
    log of the loss (for the line search)."""
    weights: np.ndarray
    log_loss: float


@njit(**NOGIL)
def pseudo_conditionals(P, seq_starts, y):
    """p_t(k) of the pseudo-likelihood (T x K), which positions keep their term, and log PL per sequence."""
    T = P.group.shape[0]
    K = P.values.shape[1]
    n_seq = seq_starts.shape[0] - 1
    cond = np.zeros((T, K))
    kept = np.zeros(T, dtype=np.bool_)
    logpl = np.zeros(n_seq)
    for q in range(n_seq):
        a = seq_starts[q]
        b = seq_starts[q + 1]
        for t in range(a, b):
            if y[t] < 0 or (t > a and y[t - 1] < 0) or (t < b - 1 and y[t + 1] < 0):
                continue
            s = 0 if t == a else y[t - 1] + 1
            total = 0.0
            for k in range(K):
                v = cell(P, t, s, k)  # c[t] and c[t + 1] are common to every k: they cancel
                if t < b - 1:
                    v *= cell(P, t + 1, k + 1, y[t + 1])
                cond[t, k] = v
                total += v
            if total <= 0.0:  # no label fits between these gold neighbours: the term is undefined
                cond[t, :] = 0.0
                continue
            for k in range(K):
                cond[t, k] /= total
            kept[t] = True
            logpl[q] += np.log(cond[t, y[t]])
    return cond, kept, logpl


@njit(**NOGIL)
def pseudo_residual(seq_starts, y, cond, kept, k0, out):
    """-dL/dphi_t(s, k) of the pseudo-likelihood (module docstring) for k = k0 + g into out[t, s, g] (out: T x S
    x G); other cells 0."""
    n_seq = seq_starts.shape[0] - 1
    K = cond.shape[1]
    G = out.shape[2]
    out[:] = 0.0
    for q in range(n_seq):
        a = seq_starts[q]
        for t in range(a, seq_starts[q + 1]):
            for g in range(G):
                k = k0 + g
                if kept[t]:
                    s = 0 if t == a else y[t - 1] + 1
                    out[t, s, g] = (1.0 if y[t] == k else 0.0) - cond[t, k]
                if t > a and kept[t - 1] and y[t] == k:  # phi_t(., g_t) is position t-1's "next" factor
                    for j in range(K):
                        out[t, j + 1, g] += (1.0 if y[t - 1] == j else 0.0) - cond[t - 1, j]
    return out


@njit(**NOGIL)
def hamming_pass(seq_starts, y, P, alpha, beta, scale):
    """Accumulated vectors fa, fb (T x K) of the Hamming gradient, the number of known labels and
    sum_t log P(y_t = g_t | X) per sequence. alpha, beta, scale: the free forward-backward pass; the sums over
    previous (next) labels go through the groups like crf.forward_backward's."""
    T, S = P.group.shape
    K = P.values.shape[1]
    pool = np.empty(S)
    n_seq = seq_starts.shape[0] - 1
    fa = np.zeros((T, K))
    fb = np.zeros((T, K))
    known = np.zeros(n_seq)
    logp = np.zeros(n_seq)
    w = np.zeros(T)
    for q in range(n_seq):
        a = seq_starts[q]
        b = seq_starts[q + 1]
        for t in range(a, b):
            if y[t] >= 0:
                g = max(alpha[t, y[t]] * beta[t, y[t]], TINY)
                w[t] = 1.0 / g
                known[q] += 1.0
                logp[q] += np.log(g)
        for t in range(a, b):
            if t > a:
                forward_step(P, t, fa[t - 1], pool, fa[t])
                for k in range(K):
                    fa[t, k] /= scale[t]
            if y[t] >= 0:
                fa[t, y[t]] += w[t] * alpha[t, y[t]]
        for t in range(b - 1, a - 1, -1):
            if t < b - 1:
                backward_step(P, t + 1, fb[t + 1], pool, fb[t])
                for j in range(K):
                    fb[t, j] /= scale[t + 1]
            if y[t] >= 0:
                fb[t, y[t]] += w[t] * beta[t, y[t]]
    return fa, fb, known, logp


@njit(**NOGIL)
def hamming_residual(seq_starts, P, alpha, beta, scale, fa, fb, known, k0, out):
    """-dL/dphi_t(s, k) of the Hamming loss: A_t(s, k) - n xi_t(s, k) (module docstring), for k = k0 + g into
    out[t, s, g] (out: T x S x G)."""
    n_seq = seq_starts.shape[0] - 1
    K = alpha.shape[1]
    G = out.shape[2]
    out[:] = 0.0
    for q in range(n_seq):
        a = seq_starts[q]
        n = known[q]
        for t in range(a, seq_starts[q + 1]):
            if t == a:
                for g in range(G):
                    k = k0 + g
                    out[t, 0, g] = alpha[t, k] * (fb[t, k] - n * beta[t, k])
                continue
            for j in range(K):
                r = P.group[t, j + 1]
                if r < 0:
                    continue
                row = P.start[t] + r
                for g in range(G):
                    k = k0 + g
                    e = np.float64(P.values[row, k]) / scale[t]
                    out[t, j + 1, g] = e * (fa[t - 1, j] * beta[t, k] + alpha[t - 1, j] * (fb[t, k] - n * beta[t, k]))
    return out


def log_rank_terms(nll: np.ndarray) -> np.ndarray:
    """log(1 / P_i - 1) = log(expm1(-log P_i)) per sequence, computed without overflow (-inf where P_i = 1)."""
    nll = np.maximum(nll, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(nll > 30.0, nll + np.log1p(-np.exp(-nll)), np.log(np.expm1(np.minimum(nll, 30.0))))


def rank_weights(nll: np.ndarray) -> np.ndarray:
    """Per-sequence factor of the rank residual: (1 / P_i) / max_j (1 / P_j - 1), 0 if every P_j = 1."""
    terms = log_rank_terms(nll)
    top = terms.max() if len(terms) else -np.inf
    if not np.isfinite(top):
        return np.zeros(len(nll))
    return np.exp(np.maximum(nll, 0.0) - top)
