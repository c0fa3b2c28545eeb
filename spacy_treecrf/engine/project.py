"""The residual projection a shared tree's splits are chosen on (Sketch Boost's reduced gradient).

A shared tree fits every label at once, so its split gain is the sum over labels of each label's gain (GBDT-MO).
Scanning K residuals per cell would make every histogram K times wider; instead the residual vectors
D[t, s, :] (K values) are projected on the d directions in which the positions' residuals vary most, the top
principal directions of r[t, k] = sum_s D[t, s, k]. With d = K the projection is a rotation and the gain is
exactly the sum over labels; with d < K it keeps the part of the residuals a split can separate best. The leaf
values come from each label's own residuals afterwards (leaves.leaf_values).

For the CRF loss (and the rank loss, a weight per position) the projection need not be a T x S x d array:
a cell's residual is target - alpha[t - 1, s] E_t(g(s), k) beta[t, k] / scale[t], so projecting costs one
d-vector per group of previous states that share a row of potentials (low_rank_rows; trees.LowRank says how
the grower reads it).
"""
import numpy as np
from numba import njit

from .crf import next_factors, start_target


def principal_directions(R: np.ndarray, d: int) -> np.ndarray:
    """W (K x d): the d orthonormal directions maximising the variance of R @ W over R's rows (the top
    eigenvectors of R's centred covariance, largest first), each signed so that its first entry of at least half
    the largest magnitude is positive (not the largest itself: the CRF's residuals sum to 0 over the labels, so
    with two labels both entries are +-0.707, and rounding, which differs between one process and a cluster's
    sums, would pick the sign and with it the order of a state split's children). One column: W = [[1]], so a
    shared tree of one label is that label's tree."""
    return directions_from_moments(R.T @ R, R.sum(axis=0), len(R), d)


def directions_from_moments(gram: np.ndarray, total: np.ndarray, n: int, d: int) -> np.ndarray:
    """principal_directions from R's moments: gram = R^T R (K x K), total = R's column sums, n = its rows (sums
    over parts of R add up, so shards of positions each give theirs)."""
    K = gram.shape[0]
    d = min(d, K)
    if K == 1:
        return np.ones((1, 1))
    mean = total / n if n else np.zeros(K)
    cov = gram - n * np.outer(mean, mean)
    W = np.linalg.eigh(cov)[1][:, ::-1][:, :d].copy()
    for i in range(d):
        size = np.abs(W[:, i])
        if W[np.argmax(size >= 0.5 * size.max()), i] < 0:
            W[:, i] = -W[:, i]
    return W


@njit(cache=True, nogil=True)
def low_rank_rows(P, seq_starts, y, partial, free, clamped, W, weight, low_free, low_clamped):
    """trees.LowRank's rows (one per group row of P, d values each) of the CRF loss's functional gradient
    projected on W (K x d), from the free and clamped forward_backward results (alpha, beta, scale) as
    crf.residual_slice reads them, each position's times weight[t]. At a sequence start the row of state 0 is
    the cell's whole projected residual; elsewhere a row is sum_k E[row, k] beta[t, k] / scale[t] W[k] (free)
    and the same with the clamped pass where the sequence is partially labelled (clamped, else untouched): the
    grower scales them by the cells' forward values."""
    alpha, beta, scale = free[0], free[1], free[2]
    calpha, cbeta, cscale = clamped[0], clamped[1], clamped[2]
    values, start, group = P.values, P.start, P.group
    K, d = W.shape
    fr = np.empty(K)
    cl = np.empty(K)
    for q in range(seq_starts.shape[0] - 1):
        a = seq_starts[q]
        for t in range(a, seq_starts[q + 1]):
            w = weight[t]
            low_free[start[t]:start[t + 1]] = 0.0
            if partial[q]:
                low_clamped[start[t]:start[t + 1]] = 0.0
            if t == a:
                if group[t, 0] < 0:
                    continue
                r = start[t] + group[t, 0]
                for k in range(K):
                    v = w * (start_target(partial[q], y[t], k, calpha[t, k] * cbeta[t, k]) - alpha[t, k] * beta[t, k])
                    for i in range(d):
                        low_free[r, i] += v * W[k, i]
                continue
            next_factors(beta, scale, cbeta, cscale, t, partial[q], y[t], 0, w, fr, cl)
            for r in range(start[t], start[t + 1]):
                for k in range(K):
                    e = np.float64(values[r, k])
                    if e == 0.0:
                        continue
                    f = e * fr[k]
                    for i in range(d):
                        low_free[r, i] += f * W[k, i]
                    if partial[q]:
                        c = e * cl[k]
                        for i in range(d):
                            low_clamped[r, i] += c * W[k, i]
