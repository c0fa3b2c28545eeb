"""Shared trees (shared_trees=True): one tree a round for all labels, a vector of values in each leaf.

Checked against brute force on tiny problems (K <= 4 labels, sequences of up to 6 positions, transition masks,
unknown labels): the split directions, the projected residuals the tree is grown on, every leaf's value per
label over the cells that reach it, and the cached potentials after the round; with one label a shared tree is
that label's tree. Then everything around it: the prediction kernels, the losses, serialization, rules, the
component.
"""
import numpy as np
import pytest

from brute import dense, has_path, random_allowed, random_seq_starts
from conftest import component_config, dense_vectors, make_nlp, ner_examples, paper_crf, paper_params, train
from spacy_treecrf.engine import booster, crf, shared_fit
from spacy_treecrf.engine.histogram import StateSums, Valid, state_sums
from spacy_treecrf.engine.leaves import LeafSums, add_leaf_sums
from spacy_treecrf.engine.missing import MissingRows
from spacy_treecrf.engine.predict_partition import Cells, label_state_words, partition_index, partition_potentials
from spacy_treecrf.engine.predict_walk import walk_potentials
from spacy_treecrf.engine.project import principal_directions
from spacy_treecrf.engine.grow import grow_tree
from spacy_treecrf.engine.numeric import no_numeric
from spacy_treecrf.engine.trees import FEATURE, LEAF, GrowSettings, Rows, Target, empty_tree, no_missing

LEAF_MODES = ("mean", "position_mean", "newton")


def tiny_problem(seed, K=None, partial=True, p_forbid=0.3):
    """Random binary rows, labels that follow an allowed path (some unknown) and a random initial cache."""
    rng = np.random.default_rng(seed)
    K = K or int(rng.integers(2, 5))
    for _ in range(100):
        seq_starts = random_seq_starts(rng, int(rng.integers(1, 4)), 6)
        allowed = random_allowed(rng, K, p_forbid)
        if has_path(allowed, seq_starts):
            break
    T = int(seq_starts[-1])
    y = np.empty(T, dtype=np.int32)
    for a, b in zip(seq_starts[:-1], seq_starts[1:]):
        for t in range(a, b):  # a random allowed path (one exists from every reachable label onwards)
            row = allowed[0] if t == a else allowed[y[t - 1] + 1]
            choices = [k for k in np.flatnonzero(row) if t == b - 1 or allowed[k + 1].any()]
            y[t] = rng.choice(choices)
    if partial:
        y[rng.random(T) < 0.2] = -1
    F = int(rng.integers(2, 7))
    X = rng.random((T, F)) < 0.4
    indptr = np.concatenate([[0], np.cumsum(X.sum(axis=1))]).astype(np.int64)
    indices = np.nonzero(X)[1].astype(np.int32)
    phi = rng.normal(scale=1.0, size=(T, K + 1, K))
    P = booster.potentials_to_scaled(phi, allowed, seq_starts)
    return X, indptr, indices, y, seq_starts, allowed, P


def trainer(problem, **params):
    X, indptr, indices, y, seq_starts, allowed, P = problem
    return booster.Trainer(indptr, indices, X.shape[1], y, seq_starts, allowed,
                           paper_params(n_threads=1, **params), initial=crf.Potentials(*(a.copy() for a in P)))


def all_residuals(tr, passes):
    T, (S, K) = len(tr.y), tr.allowed.shape
    return tr.residuals(passes, 0, np.empty((T, S, K)))


def route(tree, X, t, s):
    """The leaf (position t, previous state s) reaches, by following the tree by hand."""
    node = 0
    while tree.kind[node] != LEAF:
        if tree.kind[node] == FEATURE:
            node = tree.yes[node] if X[t, tree.feature[node]] else tree.no[node]
        else:
            node = tree.yes[node] if tree.states[tree.yes[node], s] else tree.no[node]
    return node


def valid_cells(is_start, allowed_k):
    """The (t, s) cells label k may use: state 0 at a sequence start, an allowed previous label elsewhere."""
    return [(t, s) for t in range(len(is_start)) for s in range(len(allowed_k))
            if (s == 0) == bool(is_start[t]) and allowed_k[s]]


@pytest.mark.parametrize("leaf_values", LEAF_MODES)
@pytest.mark.parametrize("seed", range(15))
def test_shared_round_against_brute_force(seed, leaf_values):
    problem = tiny_problem(seed)
    X, indptr, indices, y, seq_starts, allowed, P0 = problem
    E0 = dense(P0)
    lam = [0.0, 1.0, 5.0][seed % 3]
    l1 = [0.0, 0.0, 0.2, 0.7][seed % 4]  # an L1 penalty shrinks every leaf's residual sums by l1 towards 0
    tr = trainer(problem, shared_trees=True, max_leaves=int(np.random.default_rng(seed).integers(2, 9)),
                 shrinkage=lam, leaf_values=leaf_values, min_samples_leaf=0.0, l1=l1)
    passes = tr.gradient_pass()
    D = all_residuals(tr, passes)
    T, S, K = D.shape
    # the directions: the top principal directions of the per-position residual sums
    R = D.sum(axis=1)
    W = principal_directions(R, shared_fit.SHARED_DIRECTIONS)
    cov = np.cov(R.T, bias=True) * T
    for i in range(W.shape[1]):
        assert np.isclose(W[:, i] @ cov @ W[:, i], np.linalg.eigvalsh(cov)[::-1][i], rtol=1e-8, atol=1e-10)
    fitted = tr._fit_shared(passes, tr.all_positions, None, booster.GrowSettings(
        tr.params.max_leaves, lam, 0.0, 0.0, False, 0), None)
    k, tree, segments, rest = fitted
    assert k == -1 and rest is None
    # every leaf's value for label k over the cells of label k that reach it, by hand
    is_start = tr.is_start
    for label in range(K):
        by_leaf = {}
        for t, s in valid_cells(is_start, allowed[:, label]):
            by_leaf.setdefault(route(tree, X, t, s), []).append((t, s))
        for node in np.flatnonzero(tree.kind == LEAF):
            cells = by_leaf.get(node, [])
            d = np.array([D[t, s, label] for t, s in cells])
            h = {"mean": len(cells), "position_mean": len({t for t, _ in cells}),
                 "newton": float(np.sum(np.abs(d) * (1 - np.abs(d))))}[leaf_values]
            g = np.sign(d.sum()) * max(abs(d.sum()) - l1, 0.0)
            want = np.clip(g / (h + lam), -1, 1) if h + lam > 0 else 0.0
            assert tree.vector[node, label] == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert not tree.vector[tree.kind != LEAF].any()
    # the segments hold each leaf's positions
    for node in np.flatnonzero(tree.kind == LEAF):
        seg = segments.pos[segments.start[node]:segments.start[node] + segments.length[node]]
        reach = {t for t in range(T) for s in range(S) if route(tree, X, t, s) == node and (
            (s == 0) == bool(is_start[t]))}
        assert reach <= set(seg.tolist())
    # the round moves the cache by exp(step * leaf vector) of the leaf each cell reaches
    ens = booster.Ensemble(S, K, shared=True)
    tr2 = trainer(problem, shared_trees=True, max_leaves=tr.params.max_leaves, shrinkage=lam,
                  leaf_values=leaf_values, min_samples_leaf=0.0, l1=l1)
    tr2.fit_round(ens)
    added = ens.forest().nodes
    vector = np.zeros((len(added.kind), K))
    found = dense_vectors(ens.forest())
    vector[:, :found.shape[1]] = found
    assert np.allclose(vector, tree.vector * (vector[tree.kind == LEAF].max() / tree.vector[tree.kind == LEAF].max()
                                              if tree.vector[tree.kind == LEAF].max() else 1.0))
    phi = np.zeros((T, S, K))
    for t in range(T):
        for s in range(S):
            phi[t, s] = vector[route(added, X, t, s)]
    moved = E0.astype(np.float64) * np.exp(phi)
    got = dense(tr2.P).astype(np.float64) * np.exp(tr2.P.c - tr.P.c)[:, None, None]
    valid = E0 > 0
    assert np.allclose(got[valid], moved[valid], rtol=1e-5)
    assert not got[~valid].any()


@pytest.mark.parametrize("seed", range(10))
def test_projected_residuals_are_the_residuals_along_the_directions(seed):
    """The grower's target: D[t, s, :] @ W, made chunk by chunk, whatever the chunk size."""
    problem = tiny_problem(seed)
    tr = trainer(problem, shared_trees=True)
    passes = tr.gradient_pass()
    D = all_residuals(tr, passes)
    W = principal_directions(D.sum(axis=1), shared_fit.SHARED_DIRECTIONS)
    seen = {}

    def keep(a, chunk):
        seen[a] = chunk.copy()
    old = booster.RESIDUAL_BLOCK_BYTES
    try:
        booster.RESIDUAL_BLOCK_BYTES = 1  # one sequence a chunk
        tr._over_residuals(passes, keep)
    finally:
        booster.RESIDUAL_BLOCK_BYTES = old
    assert len(seen) == len(tr.seq_starts) - 1
    joined = np.concatenate([seen[a] for a in sorted(seen)])
    assert np.array_equal(joined, D)
    assert np.allclose(joined @ W, D @ W)


@pytest.mark.parametrize("loss,leaf_values", [("crf", "position_mean"), ("crf", "mean"), ("rank", "position_mean")])
@pytest.mark.parametrize("seed", range(10))
def test_label_residuals_are_the_residuals_summed_over_previous_states(seed, loss, leaf_values):
    """What a shared tree's directions and the sums of its leaves that hold every previous state read instead of
    the T x S x K residuals: their sum over the previous states, made from the label marginals (partial labels,
    transition masks, the rank loss's weights); and the moments and leaf sums made from them."""
    problem = tiny_problem(seed)
    tr = trainer(problem, shared_trees=True, loss=loss, leaf_values=leaf_values, max_leaves=6, min_samples_leaf=0.0)
    passes = tr.gradient_pass()
    D = all_residuals(tr, passes)
    R = D.sum(axis=1)
    T, S, K = D.shape
    targets = tr._label_targets(passes)
    got = crf.label_residual_rows(targets, tr.all_positions, np.empty((T, K)))
    assert np.allclose(got, R, rtol=1e-9, atol=1e-12)
    positions = np.sort(np.random.default_rng(seed).choice(T, max(1, T // 2), replace=False))
    gram, total, n = tr.position_moments(passes, positions)
    assert n == len(positions)
    assert np.allclose(gram, R[positions].T @ R[positions], atol=1e-12)
    assert np.allclose(total, R[positions].sum(axis=0), atol=1e-12)
    # leaf sums (leaves below a split on the previous label cell by cell, the others from R): those of D
    _, tree, segments, _ = tr._fit_shared(passes, tr.all_positions, None, booster.GrowSettings(
        6, 1.0, 0.0, 0.0, False, 0), None)
    sums = tr.leaf_sums(passes, tree, segments)
    want = LeafSums(np.zeros_like(sums.g), np.zeros_like(sums.h))
    add_leaf_sums(D, 0, tr.is_start, tr.allowed, tree, segments, booster.LEAF_VALUES[leaf_values], want)
    assert np.allclose(sums.g, want.g, atol=1e-12) and np.array_equal(sums.h, want.h)


@pytest.mark.parametrize("loss", ["crf", "rank"])
@pytest.mark.parametrize("seed", range(10))
def test_low_rank_residuals_are_the_projected_residuals(seed, loss):
    """What the grower reads of a LowRank, cell by cell, is D[t, s, :] @ W (partial labels, transition masks,
    the rank loss's weights)."""
    problem = tiny_problem(seed)
    tr = trainer(problem, shared_trees=True, loss=loss)
    passes = tr.gradient_pass()
    D = all_residuals(tr, passes)
    W = principal_directions(D.sum(axis=1), shared_fit.SHARED_DIRECTIONS)
    low = tr._low_rank(passes, W)
    T, S = D.shape[:2]
    every = Valid(1.0, np.arange(1, S), S - 1)
    allowed_any = tr.allowed.any(axis=1)
    positions = np.arange(T, dtype=np.int64)
    for t in range(T):  # one position's per-state sums are its cells
        cells = StateSums(np.zeros((S, W.shape[1])), np.zeros(S))
        state_sums(Target(np.zeros((T, S, 0)), tr.is_start, allowed_any, low), positions, t, t + 1, every,
                   np.empty(0), cells)
        assert np.allclose(cells.r, D[t] @ W, atol=1e-10), t
    # the grower's scans read it as they read the array: the same tree
    settings = GrowSettings(6, 1.0, 0.0, 0.0, False, 0)
    trees = [grow_tree(tr.rows, tr.column_index, target, positions, settings, tr.all_features, no_missing(),
                       no_numeric()).tree
             for target in (Target(D @ W, tr.is_start, allowed_any),
                            Target(np.zeros((T, S, 0)), tr.is_start, allowed_any, low))]
    for name in ("kind", "feature", "yes", "no", "states"):
        assert np.array_equal(getattr(trees[0], name), getattr(trees[1], name)), name
    assert np.allclose(trees[0].count, trees[1].count)


@pytest.mark.parametrize("seed", range(3))
def test_large_projections_are_float32_and_grow_the_same_trees(seed, monkeypatch):
    """Projected residuals as an array (losses without a LowRank) beyond PROJECTED_BYTES are kept as float32: the
    same splits and nearly the same leaves as float64."""
    small, *_ = random_shared_forest(seed, loss="hamming")
    grown = {}
    real = booster.Trainer._shared_target

    def spy(self, passes, positions):
        target = real(self, passes, positions)
        grown[target.D.dtype] = True
        return target
    monkeypatch.setattr(booster.Trainer, "_shared_target", spy)
    monkeypatch.setattr(shared_fit, "PROJECTED_BYTES", 0)
    large, *_ = random_shared_forest(seed, loss="hamming")
    assert list(grown) == [np.float32]
    a, b = small.forest(), large.forest()
    for name in ("kind", "feature", "yes", "no", "states"):
        assert np.array_equal(getattr(a.nodes, name), getattr(b.nodes, name)), name
    assert np.allclose(dense_vectors(a), dense_vectors(b), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("shared", [False, True])
def test_l1_soft_thresholds_leaf_sums_and_makes_leaf_vectors_sparse(shared):
    """The same trees with and without an L1 penalty: each leaf's residual sum G is shrunk by l1 towards 0 (to
    exactly 0 within l1): for a per-label tree, whose leaf value is G / (N + lam), exactly that; a shared
    ensemble's values keep their sign, shrink, and it stores only the labels left."""
    problem = tiny_problem(3, K=4)
    lam, l1 = 1.0, 0.4
    fits = {}
    for penalty in (0.0, l1):
        tr = trainer(problem, shared_trees=shared, max_leaves=6, shrinkage=lam, min_samples_leaf=0.0, l1=penalty,
                     leaf_values="mean")
        ens = booster.Ensemble(5, 4, shared=shared)
        tr.fit_round(ens)
        fits[penalty] = ens.forest()
    plain, sparse = fits[0.0], fits[l1]
    for name in ("kind", "feature", "yes", "no", "states", "count"):
        assert np.array_equal(getattr(plain.nodes, name), getattr(sparse.nodes, name)), name
    leaves = plain.nodes.kind == LEAF
    if shared:
        v0, v1 = (np.pad(dense_vectors(f), ((0, 0), (0, 4 - dense_vectors(f).shape[1]))) for f in (plain, sparse))
        assert len(sparse.vectors.label) < len(plain.vectors.label)
    else:
        v0, v1 = plain.nodes.value[:, None], sparse.nodes.value[:, None]
        G = v0[:, 0] * (plain.nodes.count + lam)
        unclipped = leaves & (np.abs(v0[:, 0]) < 1.0)
        want = np.sign(G) * np.maximum(np.abs(G) - l1, 0.0) / (plain.nodes.count + lam)
        assert np.allclose(v1[unclipped, 0], want[unclipped], rtol=1e-9, atol=1e-12)
    assert np.all(np.abs(v1[leaves]) <= np.abs(v0[leaves]) + 1e-12) and np.all(v1 * v0 >= 0.0)
    assert (v1[leaves] == 0.0).sum() > (v0[leaves] == 0.0).sum()


@pytest.mark.parametrize("seed", range(8))
def test_one_label_shared_tree_is_the_per_label_tree(seed):
    problem = tiny_problem(seed, K=1, partial=seed % 2 == 0, p_forbid=0.0)
    trees = {}
    for shared in (False, True):
        tr = trainer(problem, shared_trees=shared, max_leaves=6, shrinkage=1.0, min_samples_leaf=0.0)
        ens = booster.Ensemble(2, 1, shared=shared)
        for _ in range(3):
            tr.fit_round(ens)
        trees[shared] = ens.forest()
    per_label, shared = trees[False], trees[True]
    assert_same_one_label_forests(per_label, shared, ("kind", "feature", "yes", "no", "states", "count"))
    assert np.array_equal(per_label.labels, np.zeros(3)) and np.array_equal(shared.labels, -np.ones(3))


def assert_same_one_label_forests(per_label, shared, fields):
    """One label's per-label and shared forests: the same nodes (``fields``), the same leaf values."""
    for name in fields:
        assert np.array_equal(getattr(per_label.nodes, name), getattr(shared.nodes, name)), name
    leaves = per_label.nodes.kind == LEAF
    vector = np.zeros((len(leaves), 1))
    found = dense_vectors(shared)
    vector[:, :found.shape[1]] = found
    assert np.allclose(vector[leaves, 0], per_label.nodes.value[leaves], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_one_label_shared_tree_routes_missing_values_as_the_per_label_tree(seed):
    """The routing rule in a shared tree: with one label, the per-label tree, leaf values included (a shared
    tree's come from the walks' weighted cells, a per-label tree's from the grower's weighted sums)."""
    X, indptr, indices, y, seq_starts, allowed, P = tiny_problem(seed, K=1, partial=seed % 2 == 0, p_forbid=0.0)
    rng = np.random.default_rng(seed)
    T, F = X.shape
    fvar = (np.arange(F) // 2).astype(np.int32)
    gone = rng.random((T, int(fvar.max()) + 1)) < 0.3
    X = X & ~gone[:, fvar]
    indptr = np.concatenate([[0], np.cumsum(X.sum(axis=1))]).astype(np.int64)
    indices = np.nonzero(X)[1].astype(np.int32)
    gone_ptr = np.concatenate([[0], np.cumsum(gone.sum(axis=1))]).astype(np.int64)
    mr = MissingRows(gone_ptr, np.nonzero(gone)[1].astype(np.int32), fvar, gone.shape[1])
    trees = {}
    for shared in (False, True):
        tr = booster.Trainer(indptr, indices, F, y, seq_starts, allowed, paper_params(
            n_threads=1, shared_trees=shared, max_leaves=6, shrinkage=1.0, min_samples_leaf=0.0),
            initial=crf.Potentials(*(a.copy() for a in P)), missing_rows=mr)
        ens = booster.Ensemble(2, 1, shared=shared)
        for _ in range(3):
            tr.fit_round(ens)
        trees[shared] = (ens.forest(), dense(tr.P))
    (per_label, P_label), (shared, P_shared) = trees[False], trees[True]
    assert_same_one_label_forests(per_label, shared, ("kind", "feature", "yes", "no", "states"))
    assert np.allclose(P_label, P_shared, rtol=1e-5)


def random_shared_forest(seed, K=3, F=6, n_trees=4, loss="crf"):
    """Shared trees fitted on a random problem (so with feature and state splits), and its rows."""
    rng = np.random.default_rng(seed)
    T = 60
    X = rng.random((T, F)) < 0.3
    indptr = np.concatenate([[0], np.cumsum(X.sum(axis=1))]).astype(np.int64)
    indices = np.nonzero(X)[1].astype(np.int32)
    seq_starts = np.arange(0, T + 1, 5, dtype=np.int64)
    y = (X[:, 0] * 1 + X[:, 1] * 2 + rng.integers(0, 2, T)).astype(np.int32) % K
    y[1::5] = (y[0::5] + 1) % K  # the previous label matters: state splits
    allowed = np.ones((K + 1, K), dtype=bool)
    tr = booster.Trainer(indptr, indices, F, y, seq_starts, allowed, paper_params(
        n_threads=1, shared_trees=True, max_leaves=8, shrinkage=0.5, leaf_values="position_mean",
        l1=0.5 * (seed % 2), loss=loss))  # sparse leaf vectors for odd seeds
    ens = booster.Ensemble(K + 1, K, shared=True)
    for _ in range(n_trees):
        tr.fit_round(ens)
    return ens, X, indptr, indices, seq_starts, allowed


# K = 5: rows with more groups than the GROUPS slots a block's pool starts with per row, so the replay of state
# splits stops for room and resumes (block 7)
@pytest.mark.parametrize("seed,K", [(seed, 3) for seed in range(6)] + [(seed, 5) for seed in range(3)])
def test_prediction_kernels_agree_on_shared_trees(seed, K):
    ens, X, indptr, indices, seq_starts, allowed = random_shared_forest(seed, K=K)
    forest = ens.forest()
    assert (forest.nodes.kind == 2).any() and (forest.nodes.kind == 1).any()
    T, S, K = len(indptr) - 1, ens.n_states, ens.n_labels
    expected = np.zeros((T, S, K))
    vector = np.zeros((len(forest.nodes.kind), K))
    found = dense_vectors(forest)
    vector[:, :found.shape[1]] = found
    for i in range(len(forest.labels)):
        a, b = forest.roots[i], forest.roots[i + 1]
        tree = forest.nodes._replace(**{name: getattr(forest.nodes, name)[a:b] for name in forest.nodes._fields})
        for t in range(T):
            for s in range(S):
                expected[t, s] += vector[a:b][route(tree, X, t, s)]
    walked = walk_potentials(np.arange(T, dtype=np.int64), Rows(indptr, indices), forest, no_missing(), S, K)
    assert np.allclose(walked, expected)
    everything = np.ones((S, K), dtype=bool)
    words = label_state_words(everything)
    for block, dense_share in ((7, 0), (64, None), (64, 1000)):  # leaves kept dense: none, some, all
        cells = Cells(np.zeros(T, dtype=np.bool_), words, words, np.zeros(S, np.int64))
        index = partition_index(forest, dense_share)
        assert (index.dense_of >= 0).any() == (dense_share != 0)
        phi, _ = partition_potentials(Rows(indptr, indices), forest, index, cells, everything, block, False)
        assert np.allclose(phi, expected)
    assert np.allclose(ens.potentials(indptr, indices), expected)  # the kernel the ensemble picks
    P = ens.scaled_potentials(indptr, indices, allowed, seq_starts)
    P2 = booster.potentials_to_scaled(expected, allowed, seq_starts)
    assert np.allclose(dense(P), dense(P2), rtol=1e-5) and np.allclose(P.c, P2.c)
    # decoding's Potentials come from the groups, block by block, also under a transition mask: the cells of
    # the dense potentials, no more groups than distinct rows of them
    rng = np.random.default_rng(seed)
    masked = rng.random((S, K)) < 0.7
    masked[:, 0] = True
    is_start = crf.start_mask(seq_starts, T)
    start_words = label_state_words(np.where(np.arange(S)[:, None] == 0, masked, False))
    other_words = label_state_words(np.where(np.arange(S)[:, None] > 0, masked, False))
    for block in (3, 7, 64):
        cells = Cells(is_start, start_words, other_words, crf.mask_classes(masked)[1])
        _, P = partition_potentials(Rows(indptr, indices), forest, partition_index(forest), cells, masked, block,
                                    True)
        P2 = booster.potentials_to_scaled(expected, masked, seq_starts)
        assert np.allclose(dense(P), dense(P2), rtol=1e-5, atol=1e-7) and np.allclose(P.c, P2.c)
        assert np.array_equal(P.group >= 0, P2.group >= 0)
        assert np.all(np.diff(P.start) <= np.diff(P2.start))


def toy_data(n=80, seed=0):
    """Words decide the label, except 'x', whose label copies the previous one (a state split's job)."""
    rng = np.random.default_rng(seed)
    vocab = {"a": "A", "b": "B", "c": "C", "d": "D"}
    X, y = [], []
    for _ in range(n):
        words = list(rng.choice(["a", "b", "c", "d", "x"], size=rng.integers(1, 8)))
        labels, prev = [], "A"
        for w in words:
            prev = vocab.get(w, prev)
            labels.append(prev)
        X.append([{"w": w} for w in words])
        y.append(labels)
    return X, y


@pytest.mark.parametrize("settings", [dict(), dict(loss="pseudo_likelihood"), dict(loss="hamming"),
                                      dict(loss="rank"), dict(leaf_values="newton"), dict(subsample=0.7),
                                      dict(colsample=0.8, trim=0.01), dict(label_splits="fallback"),
                                      dict(missing="imputation")])
def test_estimator_learns_with_shared_trees(settings):
    X, y = toy_data()
    Xt, yt = toy_data(40, seed=1)
    model = paper_crf(n_rounds=15, max_leaves=12, shared_trees=True, **settings).fit(X, y)
    assert model.ensemble.n_trees == 15 and model.ensemble.shared
    assert model.score(Xt, yt) >= 0.95
    again = paper_crf().from_bytes(model.to_bytes())
    assert again.params.shared_trees and again.predict(Xt) == model.predict(Xt)
    for got, want in zip(again.predict_marginals(Xt)[0], model.predict_marginals(Xt)[0]):
        assert got == pytest.approx(want)
    label, text, value, support = model.rules(top=3)[0]
    assert label.split(" ")[0] in model.classes_ and value != 0.0


def test_shared_trees_with_partial_labels_masks_and_early_stopping():
    def without_a_to_d(X, y):  # the transition A -> D is forbidden
        keep = [i for i, labels in enumerate(y) if ("A", "D") not in zip(labels, labels[1:])]
        return [X[i] for i in keep], [y[i] for i in keep]
    X, y = without_a_to_d(*toy_data(150))
    y = [[None if i == 1 else label for i, label in enumerate(labels)] for labels in y]
    Xd, yd = without_a_to_d(*toy_data(50, seed=2))
    labels = "ABCD"
    allowed = [(None, b) for b in labels] + [(a, b) for a in labels for b in labels if (a, b) != ("A", "D")]
    model = paper_crf(n_rounds=30, patience=3, max_leaves=12, shared_trees=True, decode="viterbi",
                    allowed_transitions=allowed).fit(X, y, Xd, yd)
    assert not model.allowed[1 + model.classes_.index("A"), model.classes_.index("D")]
    predicted = model.predict(Xd)
    assert all(("A", "D") not in zip(p, p[1:]) for p in predicted)
    assert model.ensemble.n_trees == model.best_round_ <= len(model.history_)
    assert model.score(Xd, yd) >= 0.9
    paths = model.predict_nbest(Xd[:3], 2)
    assert [p[0][0] for p in paths] == model.predict(Xd[:3])


def test_shared_trees_refuse_mixed_ensembles():
    ens = booster.Ensemble(3, 2, shared=True)
    tree = empty_tree(3, 0)
    with pytest.raises(ValueError, match="does not belong in an ensemble with shared=True"):
        ens.add(0, tree)
    with pytest.raises(ValueError, match="shared_trees"):
        paper_crf(shared_trees="yes")


def test_model_files_check_leaf_vectors():
    from spacy_treecrf.engine import serialize
    X, y = toy_data(30)
    model = paper_crf(n_rounds=3, max_leaves=6, shared_trees=True).fit(X, y)
    arrays = model.ensemble.arrays()
    K = len(model.classes_)
    n = len(arrays["kind"])
    ptr, label, value = arrays["vector_ptr"], arrays["vector_label"], arrays["vector_value"]
    assert ptr.shape == (n + 1,) and len(label) == len(value) == ptr[-1]
    loaded = serialize.load_ensemble(arrays, K, len(model.features.names))
    assert all(np.array_equal(a, b) for a, b in zip(loaded.vectors, model.ensemble.vectors))
    inner = int(np.flatnonzero(arrays["kind"] != LEAF)[0])
    on_inner = {"vector_ptr": ptr + (np.arange(n + 1) > inner), "vector_label": np.insert(label, ptr[inner], 0),
                "vector_value": np.insert(value, ptr[inner], 0.5)}  # a pair on an inner node
    for broken in (on_inner, {"vector_label": np.where(np.arange(len(label)) == 0, K, label).astype(np.int32)},
                   {"vector_value": np.full_like(value, np.nan)}, {"vector_ptr": ptr[:-1]},
                   {"vector_ptr": np.where(np.arange(n + 1) == n, ptr[-1] + 1, ptr)},
                   {"labels": np.zeros_like(arrays["labels"])}):
        with pytest.raises(ValueError):
            serialize.load_ensemble({**arrays, **broken}, K, len(model.features.names))
    # a version 3 file's dense leaf vectors still load, as the same sparse vectors
    old = {name: a for name, a in arrays.items() if not name.startswith("vector_")}
    old["vector"] = dense_vectors(model.ensemble.forest())
    old["vector"] = np.pad(old["vector"], ((0, 0), (0, K - old["vector"].shape[1])))
    again = serialize.load_ensemble(old, K, len(model.features.names))
    assert all(np.array_equal(a, b) for a, b in zip(again.vectors, model.ensemble.vectors))
    with pytest.raises(ValueError):
        serialize.load_ensemble({**old, "vector": old["vector"][:, :-1]}, K, len(model.features.names))
    per_label = paper_crf(n_rounds=2, max_leaves=6).fit(X, y)
    assert not any(name.startswith("vector") for name in per_label.ensemble.arrays())  # per-label files: old layout
    state = model.to_bytes()
    settings_swapped = state.replace(b"shared_trees\xc3", b"shared_trees\xc2")
    assert settings_swapped != state
    with pytest.raises(ValueError, match="shared_trees=False but its ensemble holds shared trees"):
        paper_crf().from_bytes(settings_swapped)


def test_component_trains_and_round_trips_with_shared_trees():
    nlp, crf = make_nlp(shared_trees=True)
    examples = ner_examples(nlp)
    train(nlp, examples, rounds=6)
    assert crf.ensemble.shared and crf.ensemble.n_trees == 6
    docs = [nlp(eg.reference.text) for eg in examples]
    assert sum(len(doc.ents) for doc in docs) > 0
    nlp2, crf2 = make_nlp()  # configured per-label: the file's trees decide
    nlp2.get_pipe("treecrf").from_bytes(crf.to_bytes())
    assert crf2.ensemble.shared and crf2.params.shared_trees
    assert [[(e.text, e.label_) for e in nlp2(doc.text).ents] for doc in docs] == [
        [(e.text, e.label_) for e in doc.ents] for doc in docs]
    assert component_config({"shared_trees": True})["booster"]["shared_trees"] is True


def test_shared_trees_are_the_same_with_one_or_two_threads_and_any_chunking(monkeypatch):
    """Leaf sums are added chunk by chunk in position order, whatever thread finishes first."""
    X, y = toy_data(120)
    models = []
    for threads, block in ((1, booster.RESIDUAL_BLOCK_BYTES), (2, 2000), (2, 2000), (1, 2000)):
        monkeypatch.setattr(booster, "RESIDUAL_BLOCK_BYTES", block)
        arrays = paper_crf(n_rounds=4, max_leaves=10, shared_trees=True, n_threads=threads,
                         subsample=0.8).fit(X, y).ensemble.arrays()
        models.append(arrays)
    for other in models[2:]:  # the same chunks: the same trees to the last bit, with one or two threads
        assert all(np.array_equal(models[1][name], other[name]) for name in models[1])
    assert all(np.allclose(models[0][name], models[1][name]) for name in models[0])  # other chunks: rounding


@pytest.mark.parametrize("shared", [True, False])
def test_a_model_without_trees_gives_the_empty_models_potentials_whatever_the_batch(shared):
    """Before the first round (spaCy evaluates then) decoding's Potentials are the empty model's, for a batch of
    any size, under a transition mask: the cells the kernels' route would give for all-zero potentials."""
    rng = np.random.default_rng(0)
    K = 4
    S = K + 1
    allowed = random_allowed(rng, K, 0.3)
    seq_starts = np.concatenate([[0], np.cumsum(rng.integers(1, 9, size=150))]).astype(np.int64)
    T = int(seq_starts[-1])
    assert T >= booster.PARTITION_ROWS
    indptr = np.arange(T + 1, dtype=np.int64)
    indices = rng.integers(0, 6, size=T).astype(np.int32)
    ens = booster.Ensemble(S, K, shared=shared)
    P = ens.scaled_potentials(indptr, indices, allowed, seq_starts)
    zeros = booster.potentials_to_scaled(np.zeros((T, S, K)), allowed, seq_starts)
    assert np.array_equal(dense(P), dense(zeros)) and np.array_equal(P.c, zeros.c)
    assert np.array_equal(P.group >= 0, zeros.group >= 0)
