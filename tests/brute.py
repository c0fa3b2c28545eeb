"""Brute-force references for tiny linear-chain CRFs: enumerate every label path of every sequence.

Potentials use the kernels' layout: phi[t, s, k] is the log potential of label k at position t coming from
state s (s = 0 is the start state of a sequence's first position, s = j + 1 means previous label j); -inf marks
a forbidden transition. Everything here is plain numpy / itertools, deliberately naive.
"""
import itertools

import numpy as np

from spacy_treecrf.engine import crf


def logsumexp(values):
    """log(sum(exp(values))) of a 1-d array; -inf for an empty array or all -inf."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return -np.inf
    top = values.max()
    if top == -np.inf:
        return -np.inf
    return top + np.log(np.exp(values - top).sum())


def enumerate_paths(n, K):
    """All K**n label paths of a length-n sequence, as an int array (K**n x n)."""
    return np.array(list(itertools.product(range(K), repeat=n)), dtype=np.int64).reshape(-1, n)


def path_states(paths):
    """State of each position of a path (or of each row of a path array): 0 first, previous label + 1 after."""
    paths = np.asarray(paths)
    first = np.zeros(paths.shape[:-1] + (min(paths.shape[-1], 1),), dtype=np.int64)
    return np.concatenate([first, paths[..., :-1] + 1], axis=-1)


def path_log_score(phi, a, path):
    """Unnormalised log score of ``path`` for the sequence starting at position ``a``."""
    path = np.asarray(path)
    t = a + np.arange(len(path))
    return float(phi[t, path_states(path), path].sum())


def all_path_scores(phi, a, b):
    """(paths, log scores) of every path of the sequence occupying positions a..b-1."""
    paths = enumerate_paths(b - a, phi.shape[2])
    t = a + np.arange(b - a)
    scores = phi[t[None, :], path_states(paths), paths].sum(axis=1)
    return paths, scores


def consistent(paths, y_seq):
    """Mask of paths agreeing with the known labels of ``y_seq`` (-1 = unknown)."""
    known = np.asarray(y_seq) >= 0
    return np.all((paths == np.asarray(y_seq)) | ~known, axis=1)


def path_indicators(path, S, K):
    """Indicator array (n x S x K) of the (position, state, label) cells used by ``path``."""
    n = len(path)
    ind = np.zeros((n, S, K))
    ind[np.arange(n), path_states(path), path] = 1.0
    return ind


def seq_log_z(phi, a, b, y=None):
    """log of the summed path scores of one sequence, restricted to paths consistent with ``y`` if given."""
    paths, scores = all_path_scores(phi, a, b)
    if y is not None:
        scores = scores[consistent(paths, y[a:b])]
    return logsumexp(scores)


def seq_expectations(phi, a, b, y=None):
    """Expected cell indicators (n x S x K) under the path distribution (optionally clamped to ``y``).

    Slice [i, s, k] is the probability that the sequence's position a + i has label k and state s, i.e.
    the label marginal at the first position and the pairwise marginal xi elsewhere.
    """
    S, K = phi.shape[1], phi.shape[2]
    paths, scores = all_path_scores(phi, a, b)
    if y is not None:
        keep = consistent(paths, y[a:b])
        paths, scores = paths[keep], scores[keep]
    probs = np.exp(scores - logsumexp(scores))
    out = np.zeros((b - a, S, K))
    i = np.broadcast_to(np.arange(b - a), paths.shape)
    np.add.at(out, (i, path_states(paths), paths), probs[:, None])
    return out


def best_path(phi, a, b):
    """(argmax path, its score, second best score) of one sequence."""
    paths, scores = all_path_scores(phi, a, b)
    order = np.argsort(-scores, kind="stable")
    second = scores[order[1]] if len(order) > 1 else -np.inf
    return paths[order[0]], scores[order[0]], second


# ---------------------------------------------------------------- random tiny problems


def random_seq_starts(rng, n_seq, max_len, min_len=1):
    lengths = rng.integers(min_len, max_len + 1, size=n_seq)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def random_allowed(rng, K, p_forbid):
    """Random (K+1) x K transition mask; row 0 = allowed first labels."""
    return rng.random((K + 1, K)) >= p_forbid


def has_path(allowed, seq_starts):
    """Every non-empty sequence admits at least one path under ``allowed``."""
    K = allowed.shape[1]
    for a, b in zip(seq_starts[:-1], seq_starts[1:]):
        if b <= a:
            continue
        reach = allowed[0].copy()
        for _ in range(b - a - 1):
            reach = np.array([np.any(reach & allowed[1:, k]) for k in range(K)])
        if not reach.any():
            return False
    return True


def start_positions(seq_starts, T):
    """is_start[t]: position t is the first position of a (non-empty) sequence."""
    is_start = np.zeros(T, dtype=bool)
    is_start[seq_starts[:-1][seq_starts[:-1] < seq_starts[1:]]] = True
    return is_start


def structurally_valid(seq_starts, T, S):
    """valid[t, s] (T x S): state 0 exactly at a sequence's first position, states > 0 everywhere else."""
    is_start = start_positions(seq_starts, T)
    valid = np.zeros((T, S), dtype=bool)
    valid[is_start, 0] = True
    valid[~is_start, 1:] = True
    return valid


def potentials_from_phi(phi, seq_starts, allowed):
    """Kernel inputs (crf.Potentials, grouped by crf.scaled_potentials) for log potentials ``phi`` (T x S x K)
    under the mask ``allowed``.

    Cells that are structurally invalid (state 0 away from a sequence start, states > 0 at a start) and
    forbidden transitions hold 0.
    Returns the Potentials and the effective phi = log(E) + c (so float32 rounding does not blur comparisons),
    with -inf on every invalid or forbidden cell.
    """
    T = phi.shape[0]
    P = crf.scaled_potentials(np.ascontiguousarray(phi, dtype=np.float64), np.ascontiguousarray(allowed, bool),
                              start_positions(seq_starts, T))
    with np.errstate(divide="ignore"):
        phi_eff = np.log(dense(P).astype(np.float64)) + P.c[:, None, None]
    return P, phi_eff


def dense(P):
    """E (T x S x K, float32) of grouped Potentials: E[t, s] = the row of s's group at t, 0 for invalid states."""
    T, S = P.group.shape
    rows = P.start[:-1, None] + np.maximum(P.group, 0)
    return np.where((P.group >= 0)[:, :, None], P.values[rows] if len(P.values) else 0.0,
                    np.float32(0.0)).astype(np.float32)


def ungrouped(E, c, is_start):
    """Potentials of a dense E (T x S x K) with every structurally valid state (state 0 where ``is_start``, the
    others elsewhere) in a group of its own, whatever its row: what the kernels compute must not depend on how
    states are grouped."""
    T, S, K = E.shape
    valid = np.zeros((T, S), dtype=bool)
    valid[:, 0] = is_start
    valid[:, 1:] = ~np.asarray(is_start, dtype=bool)[:, None]
    group = np.where(valid, np.cumsum(valid, axis=1) - 1, -1).astype(np.int32)
    start = np.concatenate([[0], np.cumsum(valid.sum(axis=1))]).astype(np.int64)
    return crf.Potentials(np.ascontiguousarray(E[valid], dtype=np.float32).reshape(-1, K), start, group,
                          np.asarray(c, dtype=np.float64).copy())


def random_crf(rng, K=None, n_seq=None, max_len=6, p_forbid=0.0, scale=2.0, min_len=1, p_same=0.4):
    """A random tiny CRF whose every sequence has at least one allowed path. At each position a state's row of
    potentials repeats an earlier state's with probability ``p_same`` (so states share groups: crf.py).

    Returns dict(P, E (dense, for references), c, phi, seq_starts, allowed, K).
    """
    K = int(rng.integers(1, 5)) if K is None else K
    n_seq = int(rng.integers(1, 4)) if n_seq is None else n_seq
    seq_starts = random_seq_starts(rng, n_seq, max_len, min_len)
    while True:
        allowed = random_allowed(rng, K, p_forbid)
        if has_path(allowed, seq_starts):
            break
    T = int(seq_starts[-1])
    phi = rng.normal(scale=scale, size=(T, K + 1, K)) + rng.normal(scale=3.0, size=(T, 1, 1))
    for t in range(T):
        for s in range(2, K + 1):
            if rng.random() < p_same:
                phi[t, s] = phi[t, int(rng.integers(1, s))]
    P, phi_eff = potentials_from_phi(phi, seq_starts, allowed)
    return dict(P=P, E=dense(P), c=P.c, phi=phi_eff, seq_starts=seq_starts, allowed=allowed, K=K)


def random_valid_labels(rng, phi, seq_starts, p_unknown=0.0):
    """Gold labels: a random allowed path per sequence, then each label hidden (-1) with p_unknown."""
    y = np.full(phi.shape[0], -1, dtype=np.int32)
    for a, b in zip(seq_starts[:-1], seq_starts[1:]):
        if b <= a:
            continue
        paths, scores = all_path_scores(phi, a, b)
        ok = np.flatnonzero(np.isfinite(scores))
        y[a:b] = paths[rng.choice(ok)]
    y[rng.random(len(y)) < p_unknown] = -1
    return y
