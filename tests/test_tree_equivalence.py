"""grow_tree against a brute-force replay of best-first growth.

grow_tree gets its sums incrementally (histogram subtraction, per-state sums of the smaller child, positions
partitioned in place). Here every split of a fitted tree is checked against gains recomputed from scratch
over the exact (position, state) examples of each leaf at the moment of the split:
- the expanded leaf is the one whose best split gains most (the lowest node id among ties);
- its split is that leaf's best: the best feature split (the lowest feature id among ties, and preferred to
  a tied state split), or else the best prefix of states sorted by mean residual;
- growth stops only when no leaf has a split gaining more than max(min_gain, 0);
- leaf values are G / (N + lam), counts N, segments hold exactly the leaf's positions, ascending.
Gains are compared with a relative tolerance: incremental sums differ from direct ones by rounding only.
Residuals with d > 1 components (a shared tree's projected residuals): a gain is the sum of the components'
gains (one weight N), states are ordered by the first component's mean, a leaf's value is its first
component's G / (N + lam).
"""
import math

import numpy as np
import pytest

from conftest import dense_csr as csr, gain, grow
from spacy_treecrf.engine.trees import FEATURE, LEAF, STATE

REL = 1e-9
TIE = 1e-12  # exact gains this close count as tied: the lower id must win


def random_problem(seed, d=1):
    """A random growth problem; D is T x S, or T x S x d when d > 1."""
    rng = np.random.default_rng(seed)
    T = int(rng.integers(2, 120))
    F = int(rng.integers(1, 14))
    K = int(rng.integers(1, 5))
    S = K + 1
    X = rng.random((T, F)) < rng.choice([0.05, 0.2, 0.5])
    if F >= 2 and rng.random() < 0.4:  # duplicated columns: exact ties between features
        X[:, F // 2:] = X[:, :F - F // 2]
    lengths = rng.integers(1, 7, size=T)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    is_start = np.zeros(T, dtype=bool)
    is_start[starts[starts < T]] = True
    allowed = rng.random(S) >= 0.25
    allowed[rng.integers(S)] = True
    D = rng.normal(size=(T, S)) + 2.0 * X[:, :1] * rng.normal(size=(1, S)) + rng.normal(size=(1, S))
    if d > 1:
        D = np.stack([D] + [rng.normal(size=(T, S)) + 3.0 * X[:, -1:] * rng.normal(size=(1, S))
                            for _ in range(d - 1)], axis=2)
    if rng.random() < 0.5:
        positions = np.arange(T, dtype=np.int64)
    else:
        positions = np.sort(rng.choice(T, size=max(1, T // 2), replace=False)).astype(np.int64)
    params = dict(max_leaves=int(rng.integers(1, 24)), lam=float(rng.choice([0.0, 0.5, 4.0])),
                  min_leaf=float(rng.choice([0.0, 1.0, 3.0, 8.0])), min_gain=float(rng.choice([0.0, 0.0, 0.2])))
    return X, D, is_start, allowed, positions, params


def examples_by_node(tr, X, is_start, allowed, positions):
    """The valid (t, s) examples passing through each node of the fitted tree."""
    S = allowed.shape[0]
    out = {node: [] for node in range(len(tr["kind"]))}
    for t in positions:
        for s in range(S):
            if (s == 0) != bool(is_start[t]) or not allowed[s]:
                continue
            node = 0
            while True:
                out[node].append((int(t), s))
                kd = tr["kind"][node]
                if kd == LEAF:
                    break
                if kd == FEATURE:
                    node = tr["yes"][node] if X[t, tr["feature"][node]] else tr["no"][node]
                else:
                    node = tr["yes"][node] if tr["states"][tr["yes"][node], s] else tr["no"][node]
    return out


def allowed_split(nl, n, min_leaf):
    return nl >= min_leaf and n - nl >= min_leaf and nl > 0 and n - nl > 0


def cells(D, ex):
    """The residual vectors (one row of d components each) of the examples ex."""
    D3 = D if D.ndim == 3 else D[:, :, None]
    return np.array([D3[t, s] for t, s in ex]).reshape(len(ex), D3.shape[2])


def vsum(rows):
    """Exact per-component sums of residual vectors."""
    return np.array([math.fsum(rows[:, i]) for i in range(rows.shape[1])])


def vgain(gl, nl, g, n, lam):
    """The gain of a split of residual vectors: the sum of the components' gains (one weight N)."""
    return math.fsum(gain(a, nl, b, n, lam) for a, b in zip(gl, g))


def brute_feature_gains(ex, X, D, lam, min_leaf):
    """Exact gain of every feature's present/absent split of the examples (None where not allowed)."""
    g = vsum(cells(D, ex))
    n = len(ex)
    gains = []
    for f in range(X.shape[1]):
        present = [(t, s) for t, s in ex if X[t, f]]
        nl = len(present)
        gains.append(vgain(vsum(cells(D, present)), nl, g, n, lam) if allowed_split(nl, n, min_leaf) else None)
    return gains


def brute_state_split(ex, D, lam, min_leaf):
    """(gain, left states) of the best prefix of the states sorted by mean residual (first component), as the
    paper's rule."""
    g = vsum(cells(D, ex))
    n = len(ex)
    by_state = {}
    for t, s in ex:
        by_state.setdefault(s, []).append((t, s))
    states = sorted(by_state)
    if len(states) < 2:
        return 0.0, set()
    order = sorted(states, key=lambda s: vsum(cells(D, by_state[s]))[0] / len(by_state[s]))
    best, left = 0.0, set()
    for cut in range(1, len(order)):
        prefix = order[:cut]
        nl = sum(len(by_state[s]) for s in prefix)
        if not allowed_split(nl, n, min_leaf):
            continue
        gl = vsum(cells(D, [e for s in prefix for e in by_state[s]]))
        value = vgain(gl, nl, g, n, lam)
        if value > best:
            best, left = value, set(prefix)
    return best, left


def best_split(ex, X, D, lam, min_leaf):
    """(best gain, best feature gain, feature gains, state gain, state left set) of one leaf, exactly."""
    fgains = brute_feature_gains(ex, X, D, lam, min_leaf)
    fbest = max([v for v in fgains if v is not None and v > 0.0], default=0.0)
    sgain, sleft = brute_state_split(ex, D, lam, min_leaf)
    return max(fbest, sgain), fbest, fgains, sgain, sleft


def close(a, b):
    return abs(a - b) <= REL * max(abs(a), abs(b), 1e-12)


def check_tree(X, D, is_start, allowed, positions, params, tr):
    lam, min_leaf, min_gain = params["lam"], params["min_leaf"], params["min_gain"]
    kind, yes, no = tr["kind"], tr["yes"], tr["no"]
    n_nodes = len(kind)
    ex = examples_by_node(tr, X, is_start, allowed, positions)
    best_of = {node: best_split(ex[node], X, D, lam, min_leaf) for node in range(n_nodes)}
    n_splits = (n_nodes - 1) // 2
    split_at = {}  # the j-th split creates nodes 2j + 1 and 2j + 2
    for node in range(n_nodes):
        if kind[node] != LEAF:
            assert no[node] == yes[node] + 1 and yes[node] % 2 == 1
            split_at[(yes[node] - 1) // 2] = node
    assert sorted(split_at) == list(range(n_splits))
    for j in range(n_splits + 1):
        leaves = [v for v in range(min(2 * j + 1, n_nodes)) if kind[v] == LEAF or (yes[v] - 1) // 2 >= j]
        gains = {v: best_of[v][0] for v in leaves}
        top = max(gains.values())
        if j == n_splits:  # growth stopped: at max_leaves or with no worthwhile split left
            assert len(leaves) == params["max_leaves"] or top <= max(min_gain, 0.0) * (1 + REL) + 1e-12
            break
        node = split_at[j]
        assert close(gains[node], top), (j, node, gains)
        assert gains[node] > min_gain * (1 - REL) and gains[node] > 0.0
        # lowest node id among tied leaves
        assert not any(v < node and gains[v] >= top * (1 - TIE) for v in leaves)
        _, fbest, fgains, sgain, sleft = best_of[node]
        a, b = yes[node], no[node]
        if kind[node] == FEATURE:
            f = tr["feature"][node]
            assert fgains[f] is not None and close(fgains[f], fbest)
            assert not any(v is not None and g_ < f and v >= fbest * (1 - TIE) for g_, v in enumerate(fgains))
            assert fbest >= sgain * (1 - REL)
            assert {t for t, _ in ex[a]} == {t for t, s in ex[node] if X[t, f]}
        else:
            assert kind[node] == STATE
            assert close(sgain, gains[node]) and sgain > fbest * (1 + TIE)
            left = set(np.flatnonzero(tr["states"][a]).tolist())
            present = {s for _, s in ex[node]}
            assert left & present == sleft
        # the split's gain from its children's examples is the leaf's best gain
        g = vsum(cells(D, ex[node]))
        gl = vsum(cells(D, ex[a]))
        assert close(vgain(gl, len(ex[a]), g, len(ex[node]), lam), gains[node])
        assert len(ex[a]) + len(ex[b]) == len(ex[node])
    # values, counts and the leaves' segments
    parent = {c: p for p in range(n_nodes) if kind[p] != LEAF for c in (yes[p], no[p])}
    for node in range(n_nodes):
        G = vsum(cells(D, ex[node]))[0]
        N = len(ex[node])
        assert tr["count"][node] == N
        expected = G / (N + lam) if N + lam > 0 else 0.0
        assert tr["value"][node] == pytest.approx(expected, rel=1e-9, abs=1e-12)
        if kind[node] == LEAF:
            seg = tr["pbuf"][tr["pstart"][node]:tr["pstart"][node] + tr["plen"][node]]
            assert np.all(np.diff(seg) > 0)
            # the leaf's positions: those following its path's feature tests (state splits keep positions)
            path_positions = set(positions.tolist())
            v = node
            while v in parent:
                p = parent[v]
                if kind[p] == FEATURE:
                    present = v == yes[p]
                    path_positions = {t for t in path_positions if bool(X[t, tr["feature"][p]]) == present}
                v = p
            assert set(seg.tolist()) == path_positions
            assert {t for t, _ in ex[node]} <= path_positions


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("seed", range(40))
def test_grow_tree_matches_brute_force_best_first(seed, d):
    X, D, is_start, allowed, positions, params = random_problem(seed, d)
    indptr, indices = csr(X)
    settings = (params["max_leaves"], params["lam"], params["min_leaf"], params["min_gain"])
    tr = grow(indptr, indices, X.shape[1], D, is_start, allowed, positions, *settings)
    check_tree(X, D, is_start, allowed, positions, params, tr)
    # shuffled positions: the same tree
    shuffled = np.random.default_rng(seed).permutation(positions)
    third = grow(indptr, indices, X.shape[1], D, is_start, allowed, shuffled, *settings)
    # leaves that give their histograms up (all at once, or beyond a few entries' bytes) are scanned for both
    # children instead: the same tree
    scanned = [grow(indptr, indices, X.shape[1], D, is_start, allowed, positions, *settings, kept_bytes=budget)
               for budget in (0, 40 * (d + 2))]
    for other in [third] + scanned:
        for key in ("kind", "feature", "yes", "no", "states", "count", "pstart", "plen"):
            assert np.array_equal(tr[key], other[key]), key
        assert np.allclose(tr["value"], other["value"], rtol=1e-12, atol=0.0)
