"""Moving the grouped training cache (moves.py, booster.MoveList) against dense float32 products."""
import numpy as np
import pytest

from brute import dense, ungrouped
from conftest import as_tree, dense_csr as csr, grow
from spacy_treecrf.engine import booster, crf, moves
from spacy_treecrf.engine.grow import Segments
from spacy_treecrf.engine.trees import LEAF, STATE, Rows


def random_round(seed):
    """Sequences, rows and a few fitted trees (per-label trees, or shared trees with a value per label)."""
    rng = np.random.default_rng(seed)
    T, F, K = int(rng.integers(3, 90)), int(rng.integers(1, 8)), int(rng.integers(1, 5))
    S = K + 1
    X = rng.random((T, F)) < 0.3
    lengths = rng.integers(1, 6, size=T)
    seq_starts = np.unique(np.concatenate([[0], np.cumsum(lengths), [T]]).clip(0, T)).astype(np.int64)
    is_start = crf.start_mask(seq_starts, T)
    shared = bool(rng.random() < 0.5)
    trees = []
    for i in range(int(rng.integers(1, 6))):
        D = rng.normal(size=(T, S)) + 2.0 * X[:, [i % F]] * rng.normal(size=(1, S)) + rng.normal(size=(1, S))
        positions = np.sort(rng.choice(T, size=int(rng.integers(1, T + 1)), replace=False)).astype(np.int64)
        indptr, indices = csr(X)
        fitted = grow(indptr, indices, F, D, is_start, np.ones(S, bool), positions, int(rng.integers(1, 10)), 0.5,
                      1.0, 0.0)
        tree = as_tree(fitted)
        k = -1 if shared else int(rng.integers(K))
        if shared:
            tree = tree._replace(vector=np.where((tree.kind == LEAF)[:, None], rng.uniform(-1, 1, size=(
                len(tree.kind), K)), 0.0))
        trees.append((k, tree, Segments(fitted["pbuf"], fitted["pstart"], fitted["plen"]), positions))
    return rng, X, seq_starts, is_start, trees, K


def dense_reference(E0, is_start, trees, scale):
    """E0 times exp(scale * leaf value) over every leaf's segment cells, tree after tree, in float32."""
    E = E0.copy()
    T, S, K = E.shape
    valid = np.where(is_start[:, None], np.arange(S) == 0, np.arange(S) > 0)
    for k, tree, seg, _ in trees:
        for leaf in np.flatnonzero(tree.kind == LEAF):
            values = tree.vector[leaf] if k < 0 else np.array([tree.value[leaf]])
            factor = np.exp(scale * values).astype(np.float32)
            for t in seg.pos[seg.start[leaf]:seg.start[leaf] + seg.length[leaf]]:
                states = tree.states[leaf] & valid[t]
                if k < 0:
                    E[t, states, :] *= factor
                else:
                    E[t, states, k] *= factor[0]
    return E


@pytest.mark.parametrize("seed", range(30))
def test_moves_are_the_dense_products_whatever_the_chunks(seed):
    """One MoveList for a round's trees, applied over any chunks of positions, gives exactly the float32
    products of moving a dense cache leaf by leaf, tree after tree; states of a group share their row."""
    rng, X, seq_starts, is_start, trees, K = random_round(seed)
    T, S = len(X), K + 1
    E0 = (rng.uniform(0.5, 2.0, size=(T, S, K)) * (rng.random((T, S, K)) < 0.9)).astype(np.float32)
    E0 *= np.where(is_start[:, None], np.arange(S) == 0, np.arange(S) > 0)[:, :, None]
    expected = dense_reference(E0, is_start, trees, 0.7)
    collected = booster.MoveList()
    for k, tree, seg, _ in trees:
        collected.add_leaves(k, tree, seg, 0.7)
    P = ungrouped(E0, np.zeros(T), is_start)
    whole = dense(collected.apply(crf.Potentials(*(a.copy() for a in P))))
    assert np.array_equal(whole, expected)
    cuts = np.unique(np.concatenate([[0, T], rng.integers(0, T + 1, size=3)]))
    sorted_moves = collected.sorted(T)
    chunked = crf.Potentials(*(a.copy() for a in P))
    values, start = [], [np.zeros(1, dtype=np.int64)]
    for a, b in zip(cuts[:-1], cuts[1:]):
        v, st = moves.apply_moves(chunked, int(a), int(b), sorted_moves)
        values.append(v)
        start.append(st[1:] + start[-1][-1])
    chunked = crf.Potentials(np.concatenate(values), np.concatenate(start), chunked.group, chunked.c)
    assert np.array_equal(dense(chunked), expected)
    for t in range(T):  # the states of a group share their row
        for s in np.flatnonzero(chunked.group[t] >= 0):
            assert np.array_equal(expected[t, s], chunked.values[chunked.start[t] + chunked.group[t, s]])


@pytest.mark.parametrize("seed", range(30))
def test_groups_split_only_where_leaves_cut_them(seed):
    """From the empty model's cache (one group per position without a transition mask), a position's groups
    after a round are the distinct leaves its states reach; a move that takes every state splits nothing. Walks
    (positions a tree was not fitted on) give the same cache as leaf segments."""
    rng, X, seq_starts, is_start, trees, K = random_round(seed)
    T, S = len(X), K + 1
    allowed = np.ones((S, K), dtype=bool)
    P0 = crf.initial_potentials(T, allowed, seq_starts)
    assert np.all(np.diff(P0.start) == 1)
    by_leaves, by_walk = booster.MoveList(), booster.MoveList()
    indptr, indices = csr(X)
    for k, tree, seg, positions in trees:
        by_leaves.add_leaves(k, tree, seg, 1.0)
    by_walk.add_walks([(k, tree, positions) for k, tree, _, positions in trees], Rows(indptr, indices), None, 1.0,
                      threads=2)
    P = by_leaves.apply(crf.Potentials(*(a.copy() for a in P0)))
    P_walk = by_walk.apply(crf.Potentials(*(a.copy() for a in P0)))
    assert np.array_equal(dense(P), dense(P_walk))
    E = dense(P)
    for t in range(T):
        valid = np.flatnonzero(P.group[t] >= 0)
        assert list(valid) == ([0] if is_start[t] else list(range(1, S)))
        # the states' leaves, tree by tree, as a signature: equal signatures, one group
        signature = {}
        for s in valid:
            key = tuple(_leaf_of(tree, seg, t, s) for _, tree, seg, _ in trees)
            signature.setdefault(key, set()).add(int(P.group[t, s]))
        assert all(len(groups) == 1 for groups in signature.values())
        assert len(set().union(*signature.values())) == len(signature) == P.start[t + 1] - P.start[t]
        for s in valid:
            assert np.array_equal(E[t, s], P.values[P.start[t] + P.group[t, s]])
    if not any((tree.kind == STATE).any() for _, tree, _, _ in trees):
        assert np.all(np.diff(P.start) == 1)


def _leaf_of(tree, seg, t, s):
    """The leaf whose segment holds position t and whose states hold s (-1: none)."""
    for leaf in np.flatnonzero(tree.kind == LEAF):
        if tree.states[leaf, s] and t in seg.pos[seg.start[leaf]:seg.start[leaf] + seg.length[leaf]]:
            return int(leaf)
    return -1
