"""grow_tree_threads: a tree grown over two shards of the positions, on two threads or one, against grow_tree on
the same inputs (the same splits, leaves and values up to the order of the additions), and a failing thread."""
import numpy as np
import pytest

from spacy_treecrf import TreeCRF
from spacy_treecrf.engine import booster, grow, shared_fit
from spacy_treecrf.engine.grow import grow_tree, grow_tree_threads
from spacy_treecrf.engine.numeric import no_numeric
from spacy_treecrf.engine.sparse import csc_index
from spacy_treecrf.engine.trees import GrowSettings, Rows, Target, no_missing


def problem(seed, T=6000, F=300, S=5, d=2, per_row=6):
    """Rows of per_row Zipf-distributed features, residuals over S states and d directions that depend on two
    features and on the previous state, sequences of 12 positions."""
    rng = np.random.default_rng(seed)
    rows = [np.unique(rng.zipf(1.3, size=per_row) % F).astype(np.int32) for _ in range(T)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    indices = np.concatenate(rows)
    D = rng.normal(size=(T, S, d)) * 0.1
    has = np.zeros((T, F), dtype=bool)
    has[np.repeat(np.arange(T), np.diff(indptr)), indices] = True
    D[has[:, 1], :, 0] += 0.6
    D[has[:, 2], 2, 1] -= 0.8
    is_start = np.zeros(T, dtype=bool)
    is_start[::12] = True
    allowed = np.ones(S, dtype=bool)
    return Rows(indptr, indices), csc_index(indptr, indices, F), Target(D, is_start, allowed), F


def leaf_positions(grown, node):
    seg = grown.segments
    return np.sort(seg.pos[seg.start[node]:seg.start[node] + seg.length[node]])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("subsample", [False, True], ids=["all", "subsample"])
def test_two_shards_grow_the_tree_of_one(seed, subsample):
    rows, index, target, F = problem(seed)
    T = len(target.is_start)
    rng = np.random.default_rng(seed + 10)
    positions = (np.sort(rng.choice(T, T // 2, replace=False)) if subsample else np.arange(T)).astype(np.int64)
    settings = GrowSettings(40, 2.0, 3.0, 0.0, False, 0)
    ok = np.ones(F, dtype=bool)
    one = grow_tree(rows, index, target, positions, settings, ok, no_missing(), no_numeric())
    two = grow_tree_threads(rows, index, target, positions, settings, ok, no_numeric(), 2)
    solo = grow_tree_threads(rows, index, target, positions, settings, ok, no_numeric(), 1)
    assert len(one.tree.kind) > 40  # it did grow: splits on features and on the previous state
    assert (one.tree.kind == 2).any() and (one.tree.kind == 1).any()
    for name in ("kind", "feature", "yes", "no", "states"):
        np.testing.assert_array_equal(getattr(two.tree, name), getattr(one.tree, name))
        np.testing.assert_array_equal(getattr(solo.tree, name), getattr(one.tree, name))
    np.testing.assert_allclose(two.tree.value, one.tree.value, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(two.tree.count, one.tree.count, rtol=1e-12)
    # whichever thread ran a shard's part, the arithmetic is the same: equal to the last bit
    np.testing.assert_array_equal(solo.tree.value, two.tree.value)
    for node in np.flatnonzero(one.tree.kind == 0):
        expected = leaf_positions(one, node)
        np.testing.assert_array_equal(leaf_positions(two, node), expected)
        np.testing.assert_array_equal(leaf_positions(solo, node), expected)
        seg = two.segments  # a leaf's segment is ascending, as the booster's bisection needs
        part = seg.pos[seg.start[node]:seg.start[node] + seg.length[node]]
        assert np.all(np.diff(part) > 0)


def test_a_failing_helper_stops_the_driver(monkeypatch):
    rows, index, target, F = problem(0)

    def failing(landing, mail):
        raise MemoryError("helper out of memory")
    monkeypatch.setattr(grow, "grow_helper", failing)
    with pytest.raises(MemoryError, match="helper out of memory"):
        grow_tree_threads(rows, index, target, np.arange(len(target.is_start), dtype=np.int64),
                          GrowSettings(40, 2.0, 3.0, 0.0, False, 0), np.ones(F, dtype=bool), no_numeric(), 2)


def test_estimator_fits_the_same_model_on_one_thread_and_two(monkeypatch):
    """Above GROW_THREADS_POSITIONS a fit grows its shared trees over two shards; the model is the same with one
    thread or two (the thread count is a setting, not a part of the model)."""
    monkeypatch.setattr(shared_fit, "GROW_THREADS_POSITIONS", 1000)
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)]
    X = [[words[i] for i in rng.integers(0, 30, 15)] for _ in range(200)]
    y = [["A" if int(w[1:]) % 3 == 0 else "B" if int(w[1:]) % 3 == 1 and j % 2 else "C" for j, w in enumerate(x)]
         for x in X]
    fits = [TreeCRF(n_rounds=4, early_stopping=False, window=1, n_threads=n).fit(X, y) for n in (1, 2)]
    arrays = [fit.ensemble.arrays() for fit in fits]
    for name in arrays[0]:
        np.testing.assert_array_equal(arrays[0][name], arrays[1][name])
    assert fits[0].predict(X[:20]) == fits[1].predict(X[:20])
    assert np.mean([a == b for p, t in zip(fits[0].predict(X), y) for a, b in zip(p, t)]) > 0.9
