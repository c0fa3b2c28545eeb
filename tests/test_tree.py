"""Regression-tree kernels: split choice, leaf values, best-first growth and tree evaluation."""
import itertools

import numpy as np
import pytest

from brute import dense, ungrouped
from conftest import as_tree, dense_csr as csr, gain, grow, start_mask
from spacy_treecrf.engine import booster
from spacy_treecrf.engine.grow import _best_leaf, _queue_leaf, influential_positions, new_growth
from spacy_treecrf.engine.leaves import CELL_MEAN, NEWTON, POSITION_MEAN, leaf_values
from spacy_treecrf.engine.predict_bitmask import bitmask_index, bitmask_potentials
from spacy_treecrf.engine import predict_partition
from spacy_treecrf.engine.predict_partition import Cells, label_state_words, partition_index
from spacy_treecrf.engine.sparse import csc_index
from spacy_treecrf.engine.numeric import no_numeric
from spacy_treecrf.engine.trees import (FEATURE, LEAF, STATE, TIE, Forest, GrowSettings, Rows, Target, no_missing,
                                        sparse_vectors, tie_slack, tree_depth)


# ---------------------------------------------------------------- helpers


def moved(E0, is_start, add):
    """Dense E0 moved through the grouped cache by the moves ``add(MoveList)`` collects, dense again (invalid
    states 0: state 0 away from ``is_start``, the others at it)."""
    moves = booster.MoveList()
    add(moves)
    P = moves.apply(ungrouped(E0, np.zeros(len(E0)), is_start))
    return dense(P)


def valid_cells(is_start, S):
    """T x S x 1: the structurally valid states."""
    return np.where(np.asarray(is_start, bool)[:, None], np.arange(S) == 0, np.arange(S) > 0)[:, :, None]


def valid_examples(is_start, allowed_k, positions):
    """(t, s) pairs of the training examples: state 0 at a start, allowed states > 0 elsewhere."""
    S = allowed_k.shape[0]
    out = []
    for t in positions:
        for s in range(S):
            if (s == 0) == bool(is_start[t]) and allowed_k[s]:
                out.append((int(t), s))
    return out


def fit(X, D, is_start, allowed_k, positions=None, max_leaves=4, lam=0.0, min_leaf=1.0, min_gain=0.0,
        feature_ok=None, states_last=False):
    indptr, indices = csr(X)
    return grow(indptr, indices, X.shape[1], D, is_start, allowed_k, positions, max_leaves, lam, min_leaf, min_gain,
                feature_ok, states_last)


def segments(tr):
    from spacy_treecrf.engine.grow import Segments
    return Segments(tr["pbuf"], tr["pstart"], tr["plen"])


def route(tr, X, t, s):
    """Leaf reached by example (x_t, s), walking the tree node by node."""
    node = 0
    while tr["kind"][node] != LEAF:
        if tr["kind"][node] == FEATURE:
            node = tr["yes"][node] if X[t, tr["feature"][node]] else tr["no"][node]
        else:
            assert tr["kind"][node] == STATE
            node = tr["yes"][node] if tr["states"][tr["yes"][node], s] else tr["no"][node]
    return node


def depth(tr):
    def rec(node):
        if tr["kind"][node] == LEAF:
            return 0
        return 1 + max(rec(tr["yes"][node]), rec(tr["no"][node]))
    return rec(0)


def test_tree_depth_is_the_longest_root_to_leaf_path():
    """trees.tree_depth (a level at a time) against the recursion above, on grown trees of several shapes (the
    prediction kernels size their stacks by it) and on a lone leaf."""
    rng = np.random.default_rng(11)
    T, S = 300, 3
    for max_leaves in (2, 3, 8, 40):
        X = rng.random((T, 12)) < 0.3
        D = rng.normal(size=(T, S))
        tr = fit(X, D, start_mask(np.array([0, 100, 200, T]), T), np.ones(S, dtype=bool), max_leaves=max_leaves)
        assert tree_depth(tr["yes"], tr["no"]) == depth(tr) > 0
    assert tree_depth(np.array([-1], np.int32), np.array([-1], np.int32)) == 0


def split_gain(tr, node, lam):
    """Gain of the split made at ``node``, from its children's values and counts."""
    a, b = tr["yes"][node], tr["no"][node]
    ga = tr["value"][a] * (tr["count"][a] + lam)
    gb = tr["value"][b] * (tr["count"][b] + lam)
    return gain(ga, tr["count"][a], ga + gb, tr["count"][a] + tr["count"][b], lam)


def brute_best_gains(X, D, examples, lam, min_leaf):
    """(best feature-split gain, best state-subset gain) over ALL features and ALL subsets of states."""
    if not examples:
        return 0.0, 0.0
    t = np.array([e[0] for e in examples])
    s = np.array([e[1] for e in examples])
    d = D[t, s]
    g, n = d.sum(), float(len(d))

    def best(masks):
        top = 0.0
        for m in masks:
            nl = float(m.sum())
            if nl >= min_leaf and n - nl >= min_leaf:
                top = max(top, gain(d[m].sum(), nl, g, n, lam))
        return top

    present = sorted(set(s.tolist()))
    subsets = (np.isin(s, sub) for r in range(1, len(present)) for sub in itertools.combinations(present, r))
    return best(X[t, f] for f in range(X.shape[1])), best(subsets)


def random_problem(rng, T=None, K=None, F=None, density=0.3, p_forbid=0.25):
    T = int(rng.integers(20, 120)) if T is None else T
    K = int(rng.integers(1, 5)) if K is None else K
    F = int(rng.integers(1, 12)) if F is None else F
    S = K + 1
    X = rng.random((T, F)) < density
    lengths = rng.integers(1, 9, size=T)
    seq_starts = np.concatenate([[0], np.cumsum(lengths)])
    seq_starts = np.concatenate([seq_starts[seq_starts < T], [T]]).astype(np.int64)
    is_start = start_mask(seq_starts, T)
    allowed_k = rng.random(S) >= p_forbid
    allowed_k[rng.integers(S)] = True
    # residuals with some structure in features and states, plus noise
    D = (rng.normal(size=(T, S)) + 1.5 * X[:, :1] * rng.normal(size=(1, S)) + rng.normal(size=(1, S)))
    return X, D, is_start, allowed_k


def check_structure(tr, S, max_leaves):
    kind, yes, no, states = tr["kind"], tr["yes"], tr["no"], tr["states"]
    n_nodes = kind.shape[0]
    n_leaves = int((kind == LEAF).sum())
    assert 1 <= n_leaves <= max_leaves
    assert n_nodes == 2 * n_leaves - 1
    assert np.all(states[0])
    children = []
    for node in range(n_nodes):
        if kind[node] == LEAF:
            assert yes[node] == -1 and no[node] == -1
            continue
        a, b = yes[node], no[node]
        assert node < a < n_nodes and node < b < n_nodes
        children += [a, b]
        if kind[node] == FEATURE:
            assert 0 <= tr["feature"][node] and np.array_equal(states[a], states[node])
            assert np.array_equal(states[b], states[node])
            # positions are partitioned between the children
            seg = lambda v: set(tr["pbuf"][tr["pstart"][v]:tr["pstart"][v] + tr["plen"][v]].tolist())
            assert seg(a).isdisjoint(seg(b)) and seg(a) | seg(b) == seg(node)
        else:
            assert kind[node] == STATE
            assert not np.any(states[a] & states[b])
            assert np.array_equal(states[a] | states[b], states[node])
            assert states[a].any() and states[b].any()
    assert sorted(children) == list(range(1, n_nodes))  # a tree: every non-root node has one parent


# ---------------------------------------------------------------- hand-built problems


def test_hand_computed_tree():
    # one sequence of 4 positions, one label (S = 2: start and "previous label 0")
    X = np.array([[0], [0], [1], [1]], dtype=bool)
    D = np.zeros((4, 2))
    D[0, 0], D[1, 1], D[2, 1], D[3, 1] = 1.0, 1.0, -2.0, -4.0
    D[0, 1] = D[1, 0] = D[2, 0] = D[3, 0] = 100.0  # invalid examples: must be ignored
    is_start = np.array([1, 0, 0, 0], dtype=bool)
    tr = fit(X, D, is_start, np.array([True, True]), max_leaves=2, lam=1.0)
    # root: G = -4, N = 4; feature split gain 36/3 + 4/3 - 16/5 beats state split 1/2 + 25/4 - 16/5
    assert list(tr["kind"]) == [FEATURE, LEAF, LEAF]
    assert tr["feature"][0] == 0
    assert tr["value"][0] == pytest.approx(-4 / 5)
    assert tr["value"][1] == pytest.approx(-6 / 3) and tr["count"][1] == 2
    assert tr["value"][2] == pytest.approx(2 / 3) and tr["count"][2] == 2
    # lam = 0, room for 3 leaves: the feature leaf has one state and one feature (no split possible) and the
    # other leaf's only split, {start} vs {previous 0}, separates D = 1 from D = 1 (zero gain): 2 leaves
    tr3 = fit(X, D, is_start, np.array([True, True]), max_leaves=3, lam=0.0)
    assert int((tr3["kind"] == LEAF).sum()) == 2


def test_single_informative_feature_is_chosen_first():
    rng = np.random.default_rng(0)
    for trial in range(5):
        T, F, K = 300, 25, 3
        X = rng.random((T, F)) < 0.4
        informative = int(rng.integers(F))
        D = np.where(X[:, informative:informative + 1], 1.0, -1.0) + 0.2 * rng.normal(size=(T, K + 1))
        is_start = start_mask(np.arange(0, T + 1, 6), T)
        tr = fit(X, D, is_start, np.ones(K + 1, dtype=bool), max_leaves=2, lam=0.5)
        assert tr["kind"][0] == FEATURE and tr["feature"][0] == informative
        assert tr["value"][tr["yes"][0]] > 0.8 and tr["value"][tr["no"][0]] < -0.8


def test_previous_state_split_when_residuals_depend_on_state():
    rng = np.random.default_rng(1)
    T, F, K = 200, 10, 4
    X = rng.random((T, F)) < 0.5
    mu = np.array([0.1, 2.0, -1.0, 2.0, -1.0])  # state means: {2, 4} low, {1, 3} high
    D = mu[None, :] + 0.1 * rng.normal(size=(T, K + 1))
    is_start = start_mask(np.array([0, T]), T)
    tr = fit(X, D, is_start, np.ones(K + 1, dtype=bool), max_leaves=2, lam=0.0)
    assert tr["kind"][0] == STATE
    left = set(np.flatnonzero(tr["states"][tr["yes"][0]]).tolist())
    assert left - {0} == {2, 4}  # the low-mean states go left; the lone start state may go either way
    right = set(np.flatnonzero(tr["states"][tr["no"][0]]).tolist())
    assert right - {0} == {1, 3}
    assert tr["value"][tr["yes"][0]] == pytest.approx(-1.0, abs=0.1)
    assert tr["value"][tr["no"][0]] == pytest.approx(2.0, abs=0.1)


def test_forbidden_states_are_not_examples():
    """Residuals on disallowed transitions (allowed_k False) never enter sums, counts or splits."""
    rng = np.random.default_rng(2)
    T, K = 60, 3
    X = rng.random((T, 4)) < 0.5
    D = 0.01 * rng.normal(size=(T, K + 1))
    D[:, 2] = 50.0  # huge residuals on a forbidden previous state
    is_start = start_mask(np.array([0, 30, T]), T)
    allowed_k = np.array([True, True, False, True])
    tr = fit(X, D, is_start, allowed_k, max_leaves=2, lam=0.0)
    assert tr["count"][0] == len(valid_examples(is_start, allowed_k, range(T)))
    assert abs(tr["value"][0]) < 0.05


def test_min_gain_stops_growth():
    rng = np.random.default_rng(3)
    X, D, is_start, allowed_k = random_problem(rng)
    tr = fit(X, D, is_start, allowed_k, max_leaves=8, lam=1.0, min_gain=1e9)
    assert list(tr["kind"]) == [LEAF]
    ex = valid_examples(is_start, allowed_k, range(X.shape[0]))
    G = sum(D[t, s] for t, s in ex)
    assert tr["count"][0] == len(ex)
    assert tr["value"][0] == pytest.approx(G / (len(ex) + 1.0))


# ---------------------------------------------------------------- random problems


@pytest.mark.parametrize("seed", range(30))
def test_leaf_values_counts_and_segments(seed):
    rng = np.random.default_rng(seed)
    X, D, is_start, allowed_k = random_problem(rng)
    T, S = D.shape
    lam = [0.0, 0.5, 3.0][seed % 3]
    min_leaf = [1.0, 4.0, 15.0][(seed // 3) % 3]
    max_leaves = int(rng.integers(1, 12))
    positions = np.arange(T) if seed % 2 else np.sort(rng.choice(T, size=T // 2, replace=False))
    tr = fit(X, D, is_start, allowed_k, positions, max_leaves=max_leaves, lam=lam, min_leaf=min_leaf)
    check_structure(tr, S, max_leaves)
    leaves = np.flatnonzero(tr["kind"] == LEAF)
    # every (position, state) cell, valid or not, lands in exactly one leaf's segment x state set
    cells = {leaf: set() for leaf in leaves}
    for t in positions:
        for s in range(S):
            cells[route(tr, X, t, s)].add((int(t), s))
    for leaf in leaves:
        seg = tr["pbuf"][tr["pstart"][leaf]:tr["pstart"][leaf] + tr["plen"][leaf]]
        assert len(set(seg.tolist())) == len(seg)
        got = {(int(t), s) for t in seg for s in np.flatnonzero(tr["states"][leaf])}
        assert got == cells[leaf]
        # leaf value = G / (N + lam) over the valid examples routed to the leaf
        ex = [(t, s) for t, s in valid_examples(is_start, allowed_k, positions) if (t, s) in cells[leaf]]
        G = sum(D[t, s] for t, s in ex)
        assert tr["count"][leaf] == len(ex)
        expected = G / (len(ex) + lam) if len(ex) + lam > 0 else 0.0
        assert tr["value"][leaf] == pytest.approx(expected, rel=1e-9, abs=1e-12)
        if len(leaves) > 1:
            assert tr["count"][leaf] >= min_leaf  # min_samples_leaf
    # every internal node's count is the sum of its children's
    for node in np.flatnonzero(tr["kind"] != LEAF):
        assert tr["count"][node] == tr["count"][tr["yes"][node]] + tr["count"][tr["no"][node]]
        assert split_gain(tr, node, lam) > 0.0


@pytest.mark.parametrize("mode", [CELL_MEAN, POSITION_MEAN, NEWTON])
@pytest.mark.parametrize("seed", range(12))
def test_leaf_values_over_the_cells_routed_to_each_leaf(seed, mode):
    """sum(D) / (lam + h) over the valid examples each leaf receives, clipped to [-1, 1]: h = sum(|D| (1 - |D|))
    (newton), the number of positions among them (position_mean) or of cells (the mean; then the grower's own
    leaf values)."""
    rng = np.random.default_rng(seed)
    X, D, is_start, allowed_k = random_problem(rng)
    D = np.clip(D, -1.0, 1.0)  # residuals of the CRF loss lie in [-1, 1]
    lam = [0.0, 0.5, 3.0][seed % 3]
    positions = np.arange(len(D)) if seed % 2 else np.sort(rng.choice(len(D), size=len(D) // 2, replace=False))
    tr = fit(X, D, is_start, allowed_k, positions, max_leaves=int(rng.integers(1, 12)), lam=lam)
    got = leaf_values(np.ascontiguousarray(D)[:, :, None], is_start, np.asarray(allowed_k)[:, None], as_tree(tr),
                      segments(tr), lam, mode)[:, 0]
    examples = valid_examples(is_start, allowed_k, positions)
    for node in range(len(tr["kind"])):
        if tr["kind"][node] != LEAF:
            assert got[node] == 0.0
            continue
        cells = [(t, s) for t, s in examples if route(tr, X, t, s) == node]
        d = np.array([D[t, s] for t, s in cells])
        curvature = {NEWTON: np.sum(np.abs(d) * (1.0 - np.abs(d))), POSITION_MEAN: len({t for t, _ in cells}),
                     CELL_MEAN: len(cells)}[mode]
        h = lam + curvature
        expected = np.clip(d.sum() / h, -1.0, 1.0) if h > 0 else 0.0
        assert got[node] == pytest.approx(expected, rel=1e-9, abs=1e-12)
        if mode == CELL_MEAN and h > 0:
            assert got[node] == pytest.approx(tr["value"][node], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_max_leaves_reached_and_never_exceeded(seed):
    rng = np.random.default_rng(100 + seed)
    X, D, is_start, allowed_k = random_problem(rng, T=150, K=3, F=8, p_forbid=0.0)
    for max_leaves in (1, 2, 3, 5, 8, 13):
        tr = fit(X, D, is_start, allowed_k, max_leaves=max_leaves, lam=0.0)
        check_structure(tr, D.shape[1], max_leaves)
        # with lam = 0 and continuous residuals every leaf with two examples has a positive-gain split
        assert int((tr["kind"] == LEAF).sum()) == max_leaves


@pytest.mark.parametrize("seed", range(12))
def test_min_samples_leaf(seed):
    rng = np.random.default_rng(200 + seed)
    X, D, is_start, allowed_k = random_problem(rng, T=100)
    for min_leaf in (2.0, 7.0, 30.0, 80.0):
        tr = fit(X, D, is_start, allowed_k, max_leaves=16, lam=0.1, min_leaf=min_leaf)
        leaves = tr["kind"] == LEAF
        if leaves.sum() > 1:
            assert np.all(tr["count"][leaves] >= min_leaf)
        n = len(valid_examples(is_start, allowed_k, range(X.shape[0])))
        assert leaves.sum() <= max(1, n // min_leaf)


@pytest.mark.parametrize("seed", range(10))
def test_column_subsampling_equals_dropping_the_columns(seed):
    """A tree allowed only some features is the tree grown on the data without the others (ids mapped back)."""
    rng = np.random.default_rng(900 + seed)
    X, D, is_start, allowed_k = random_problem(rng, T=120, K=3, F=10)
    feature_ok = rng.random(X.shape[1]) < 0.5
    feature_ok[int(rng.integers(X.shape[1]))] = True
    kept = np.flatnonzero(feature_ok)
    masked = fit(X, D, is_start, allowed_k, max_leaves=8, lam=1.0, feature_ok=feature_ok)
    dropped = fit(X[:, kept], D, is_start, allowed_k, max_leaves=8, lam=1.0)
    splits = dropped["kind"] == FEATURE
    assert np.array_equal(masked["kind"], dropped["kind"])
    assert np.array_equal(masked["feature"][splits], kept[dropped["feature"][splits]])
    assert np.allclose(masked["value"], dropped["value"])
    assert feature_ok[masked["feature"][masked["kind"] == FEATURE]].all()


@pytest.mark.parametrize("seed", range(25))
def test_split_gain_is_brute_force_optimum(seed):
    """lam = 0: sorting states by mean residual finds the best subset, so the root split is optimal."""
    rng = np.random.default_rng(300 + seed)
    X, D, is_start, allowed_k = random_problem(rng, T=int(rng.integers(4, 14)), F=int(rng.integers(1, 6)),
                                               K=int(rng.integers(1, 5)), density=0.5)
    ex = valid_examples(is_start, allowed_k, range(X.shape[0]))
    tr = fit(X, D, is_start, allowed_k, max_leaves=2, lam=0.0, min_leaf=1.0)
    best_f, best_s = brute_best_gains(X, D, ex, 0.0, 1.0)
    if tr["kind"][0] == LEAF:
        assert max(best_f, best_s) <= 1e-12
        return
    got = split_gain(tr, 0, 0.0)
    assert got == pytest.approx(max(best_f, best_s), rel=1e-9)
    if tr["kind"][0] == FEATURE:
        assert got == pytest.approx(best_f, rel=1e-9)
    else:
        assert got == pytest.approx(best_s, rel=1e-9) and best_s > best_f


@pytest.mark.parametrize("seed", range(12))
def test_split_gain_with_shrinkage_and_min_leaf_is_bounded_by_brute_force(seed):
    """lam > 0 or min_leaf > 1: the best feature split is still exact; the state split is a good prefix."""
    rng = np.random.default_rng(400 + seed)
    X, D, is_start, allowed_k = random_problem(rng, T=int(rng.integers(5, 20)), F=int(rng.integers(1, 6)),
                                               K=int(rng.integers(2, 5)), density=0.5)
    lam, min_leaf = [(1.0, 1.0), (0.0, 3.0), (2.0, 4.0)][seed % 3]
    ex = valid_examples(is_start, allowed_k, range(X.shape[0]))
    tr = fit(X, D, is_start, allowed_k, max_leaves=2, lam=lam, min_leaf=min_leaf)
    best_f, best_s = brute_best_gains(X, D, ex, lam, min_leaf)
    got = split_gain(tr, 0, lam) if tr["kind"][0] != LEAF else 0.0
    assert got <= max(best_f, best_s) + 1e-9
    assert got >= best_f - 1e-9


@pytest.mark.parametrize("seed", range(10))
def test_best_first_expands_the_leaf_with_the_largest_gain(seed):
    rng = np.random.default_rng(500 + seed)
    X, D, is_start, allowed_k = random_problem(rng, T=40, K=3, F=5)
    positions = range(X.shape[0])
    prev = fit(X, D, is_start, allowed_k, max_leaves=1, lam=0.0)
    for m in range(2, 8):
        tr = fit(X, D, is_start, allowed_k, max_leaves=m, lam=0.0)
        n_prev = prev["kind"].shape[0]
        if tr["kind"].shape[0] == n_prev:
            break  # no split left with positive gain
        # the smaller tree is a prefix of the bigger one: one former leaf got expanded
        for key in ("value", "count", "states"):
            assert np.array_equal(tr[key][:n_prev], prev[key])
        changed = np.flatnonzero(tr["kind"][:n_prev] != prev["kind"])
        assert len(changed) == 1 and prev["kind"][changed[0]] == LEAF
        expanded = changed[0]
        # ... and it is the leaf whose best split (brute force over features and state subsets) gains most
        leaf_gains = {}
        for leaf in np.flatnonzero(prev["kind"] == LEAF):
            ex = [(t, s) for t, s in valid_examples(is_start, allowed_k, positions)
                  if route(prev, X, t, s) == leaf]
            leaf_gains[leaf] = max(brute_best_gains(X, D, ex, 0.0, 1.0))
        assert split_gain(tr, expanded, 0.0) == pytest.approx(max(leaf_gains.values()), rel=1e-9)
        assert leaf_gains[expanded] == pytest.approx(max(leaf_gains.values()), rel=1e-9)
        prev = tr


def _scan_best_leaf(kind, yes, gain, count, n_nodes, min_gain):
    """The leaf-choice rule by a scan of every node: the largest gain, the lowest node id among near-ties."""
    live = [v for v in range(n_nodes) if kind[v] == LEAF and yes[v] < 0 and gain[v] > min_gain and gain[v] > 0]
    if not live:
        return -1
    top = max(gain[v] for v in live)
    top_n = count[min(v for v in live if gain[v] == top)]
    return min(v for v in live if gain[v] >= top * (1 - TIE) - tie_slack(top_n + count[v]))


@pytest.mark.parametrize("seed", range(4))
def test_leaf_queue_picks_the_leaf_a_scan_of_every_node_picks(seed):
    """grow._best_leaf's heap against the scan: gains drawn from a few values (exact ties) nudged by less than
    the tie slack (near-ties), leaves split since they were queued, candidates recorded anew and a queue that
    fills up and is rebuilt (room for 61 entries; at most 31 nodes, as a tree of 31 leaves has that many
    leaves)."""
    rng = np.random.default_rng(900 + seed)
    max_nodes = 31
    settings = GrowSettings(31, 1.0, 1.0, 0.0, False, 0)
    growth = new_growth(settings, 3, 1, np.ones(4, dtype=np.bool_), no_numeric(), no_missing(),
                        np.ones(3, dtype=np.bool_))
    tree, cand = growth.nodes.tree, growth.nodes.cand
    tree.count[:max_nodes] = rng.integers(1, 50, max_nodes)
    tree.count[0] = 200.0
    n_nodes, picks, rebuilds = 1, 0, 0
    for _ in range(400):
        if rng.random() < 0.2 and n_nodes < max_nodes:
            node = n_nodes
            n_nodes += 1
        else:
            node = int(rng.integers(n_nodes))
            if tree.kind[node] != LEAF:
                continue
        base = float(rng.choice([1.0, 2.0, 2.0 + 1e-13, 3.0]))
        cand.gain[node] = base * (1 + float(rng.choice([0.0, 1e-12, -1e-12])))
        size = growth.queue.size[0]
        _queue_leaf(growth, node)
        rebuilds += growth.queue.size[0] <= size
        if rng.random() < 0.15:
            best = _best_leaf(growth.nodes, growth.queue)
            assert best == _scan_best_leaf(tree.kind, tree.yes, cand.gain, tree.count, n_nodes, 0.0)
            if best >= 0:
                tree.kind[best] = FEATURE  # expanded: no longer a leaf
                picks += 1
    assert picks > 10 and rebuilds > 0
    best = _best_leaf(growth.nodes, growth.queue)
    assert best == _scan_best_leaf(tree.kind, tree.yes, cand.gain, tree.count, n_nodes, 0.0)


def test_states_last_splits_on_a_state_only_where_no_feature_split_gains():
    """label_splits "fallback": residuals driven by the previous state with a weaker feature effect; the paper's
    rule splits the root on the state, states_last on the feature, and a state split still comes where the
    positions left have no feature to split on."""
    rng = np.random.default_rng(5)
    T, S = 400, 3
    X = np.zeros((T, 2), dtype=bool)
    X[: T // 2, 0] = True  # feature 0 on the first half; feature 1 nowhere
    D = np.zeros((T, S))
    D[:, 1] = 1.0  # previous state 1 pushes up everywhere...
    D[:, 2] = -1.0
    D[: T // 2] += 0.3  # ...the feature a little
    D += rng.normal(scale=0.01, size=D.shape)
    is_start = np.zeros(T, dtype=bool)
    allowed = np.ones(S, dtype=bool)
    best = fit(X, D, is_start, allowed, max_leaves=3)
    assert best["kind"][0] == STATE
    last = fit(X, D, is_start, allowed, max_leaves=3, states_last=True)
    assert last["kind"][0] == FEATURE and last["feature"][0] == 0
    assert STATE in last["kind"][1:]  # each half has no feature left: the states split it
    assert (STATE == last["kind"]).sum() <= 2

# ---------------------------------------------------------------- evaluation


def concat_trees(trees):
    keys = ("kind", "feature", "yes", "no", "states", "value")
    out = {key: np.concatenate([tr[key] for tr in trees]) for key in keys}
    out["roots"] = np.concatenate([[0], np.cumsum([tr["kind"].shape[0] for tr in trees])]).astype(np.int64)
    return out


def as_forest(ens, labels):
    """The Forest of concat_trees' arrays."""
    depths = np.array([depth(dict(kind=ens["kind"][a:b], yes=ens["yes"][a:b], no=ens["no"][a:b]))
                       for a, b in zip(ens["roots"][:-1], ens["roots"][1:])], dtype=np.int32)
    return Forest(as_tree(ens), ens["roots"], np.asarray(labels, dtype=np.int32), depths,
                  sparse_vectors(np.zeros((len(ens["kind"]), 0))))


@pytest.mark.parametrize("seed", range(12))
def test_ensemble_potentials_match_apply_leaves_and_routing(seed):
    rng = np.random.default_rng(600 + seed)
    K = int(rng.integers(1, 4))
    X, _, is_start, _ = random_problem(rng, K=K)
    T, S = X.shape[0], K + 1
    indptr, indices = csr(X)
    lr = float(rng.uniform(0.1, 1.0))
    E0 = rng.uniform(0.5, 2.0, size=(T, S, K)).astype(np.float32)
    trees, labels = [], []
    for i in range(4):
        k = int(rng.integers(K))
        D = rng.normal(size=(T, S)) + 2.0 * X[:, [i % X.shape[1]]] * rng.normal(size=(1, S))
        allowed_k = rng.random(S) >= 0.2
        tr = fit(X, D, is_start, allowed_k, max_leaves=int(rng.integers(1, 9)), lam=0.5, min_leaf=2.0,
                 min_gain=1e9 if i == 3 else 0.0)  # the last tree is a lone leaf
        trees.append(tr)
        labels.append(k)
    E = moved(E0, is_start, lambda moves: [moves.add_leaves(k, as_tree(tr), segments(tr), lr)
                                          for tr, k in zip(trees, labels)])
    valid = valid_cells(is_start, S) & np.ones(K, bool)
    ens = concat_trees(trees)
    labels = np.array(labels, dtype=np.int64)
    phi = partition_potentials(ens, labels, indptr, indices, K, S)
    assert phi.shape == (T, S, K)
    ref = walked_potentials(trees, labels, X, S, K)
    assert np.allclose(phi, ref, rtol=1e-12, atol=1e-12)
    # the cached potentials updated leaf by leaf agree with evaluating the trees everywhere
    assert np.allclose(np.log(E[valid].astype(np.float64) / E0[valid]), lr * phi[valid], rtol=1e-5, atol=1e-5)
    assert np.all(E[~valid] == 0.0)
    assert np.any(np.abs(phi) > 1e-3)


def random_tree(rng, n_leaves, F, S):
    """Node arrays of an arbitrary tree (children after their parent, yes / no relative to the root) whose state
    splits may send a state to neither child, as trees fitted under a transition mask do."""
    kind, feature, yes, no, value, states = [], [], [], [], [], []

    def grow(n, reach):
        node = len(kind)
        for column in (kind, feature, yes, no, value):
            column.append(0)
        states.append(reach)
        if n == 1:
            kind[node], feature[node], yes[node], no[node], value[node] = LEAF, -1, -1, -1, rng.normal()
            return node
        n_yes = int(rng.integers(1, n))
        split_states = rng.random() < 0.3 and reach.sum() >= 2
        if split_states:
            side = rng.integers(0, 3, size=S)  # 0: yes, 1: no, 2: neither
            yes_reach, no_reach = reach & (side == 0), reach & (side == 1)
            kind[node], feature[node] = STATE, -1
        else:
            yes_reach = no_reach = reach
            kind[node], feature[node] = FEATURE, int(rng.integers(F))
        yes[node] = grow(n_yes, yes_reach)
        no[node] = grow(n - n_yes, no_reach)
        return node

    grow(n_leaves, np.ones(S, dtype=bool))
    return dict(kind=np.array(kind, dtype=np.int8), feature=np.array(feature, dtype=np.int32),
                yes=np.array(yes, dtype=np.int32), no=np.array(no, dtype=np.int32),
                value=np.array(value, dtype=np.float64), states=np.array(states, dtype=np.bool_))


def walk_with_drops(tr, X, t, s, node=0):
    """tree(x_t, s) as the walk defines it: a state that a split sends to neither child gets nothing."""
    if tr["kind"][node] == LEAF:
        return tr["value"][node]
    if tr["kind"][node] == FEATURE:
        return walk_with_drops(tr, X, t, s, tr["yes"][node] if X[t, tr["feature"][node]] else tr["no"][node])
    for child in (tr["yes"][node], tr["no"][node]):
        if tr["states"][child, s]:
            return walk_with_drops(tr, X, t, s, child)
    return 0.0


def partition_potentials(ens, labels, indptr, indices, K, S, is_start=None, start_states=None, other_states=None,
                         block_rows=4096):
    """tree.partition_potentials of concatenated trees; every cell unless the valid states are given."""
    T = len(indptr) - 1
    every = label_state_words(np.ones((S, K), dtype=bool))
    forest = as_forest(ens, labels)
    cells = Cells(np.zeros(T, dtype=bool) if is_start is None else is_start,
                  every if start_states is None else label_state_words(start_states),
                  every if other_states is None else label_state_words(other_states), np.zeros(S, np.int64))
    phi, P = predict_partition.partition_potentials(Rows(indptr, indices), forest, partition_index(forest), cells,
                                                    np.ones((S, K), dtype=bool), block_rows, False)
    assert P.values.shape[0] == 0 and P.c.shape[0] == 0
    return phi


def walked_potentials(trees, labels, X, S, K):
    ref = np.zeros((X.shape[0], S, K))
    for tr, k in zip(trees, labels):
        for t in range(X.shape[0]):
            for s in range(S):
                ref[t, s, k] += walk_with_drops(tr, X, t, s)
    return ref


@pytest.mark.parametrize("seed", range(8))
def test_partition_potentials_on_large_trees_with_dropped_states(seed):
    """Trees of up to 200 leaves whose state splits drop states; rows that touch no tree, rows that touch every
    tree and rows between, columns no tree tests; more than 64 states (several words per state set) on some
    seeds; rows of a feature found both from its posting list and by testing the node's rows on a bitmap."""
    rng = np.random.default_rng(800 + seed)
    F, K = 12, 3
    S = 70 if seed % 4 == 3 else K + 1
    X = rng.random((int(rng.integers(60, 300)), F + 3)) < rng.uniform(0.05, 0.6)
    X[:3] = False
    X[3:6] = True
    X[6:9] = False
    X[6:9, int(rng.integers(F))] = True
    trees = [random_tree(rng, int(rng.integers(1, 200)), F, S) for _ in range(5)]
    labels = rng.integers(K, size=len(trees)).astype(np.int64)
    ens = concat_trees(trees)
    indptr, indices = csr(X)
    phi = partition_potentials(ens, labels, indptr, indices, K, S)
    ref = walked_potentials(trees, labels, X, S, K)
    assert np.allclose(phi, ref, rtol=1e-12, atol=1e-12)
    # only the valid cells: per label, one state set at sequence starts and another elsewhere
    is_start = rng.random(X.shape[0]) < 0.2
    start_states, other_states = rng.random((S, K)) < 0.3, rng.random((S, K)) < 0.7
    phi = partition_potentials(ens, labels, indptr, indices, K, S, is_start, start_states, other_states,
                               block_rows=int(rng.integers(1, 80)))  # several blocks
    valid = np.where(is_start[:, None, None], start_states[None], other_states[None])
    assert np.allclose(phi, np.where(valid, ref, 0.0), rtol=1e-12, atol=1e-12)
    # the walk of training's moves agrees on the same trees
    T = X.shape[0]
    valid = valid_cells(is_start, S)[:, :, 0]
    for tr, k in zip(trees, labels):
        E = moved(np.ones((T, S, K), dtype=np.float32), is_start, lambda moves: moves.add_walks(
            [(int(k), as_tree(tr), np.arange(T))], Rows(indptr, indices), None, 1.0))
        one = np.array([[walk_with_drops(tr, X, t, s) for s in range(S)] for t in range(T)])
        assert np.allclose(np.log(E[:, :, k][valid].astype(np.float64)), one[valid], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_bitmask_potentials_on_large_trees_with_dropped_states(seed):
    """The kernel for a few rows: trees of up to 200 leaves (several 64-bit words of slots), states dropped at
    state splits, rows that touch no tree, every tree and between."""
    rng = np.random.default_rng(900 + seed)
    F, K = 12, 3
    S = K + 1
    X = rng.random((60, F + 3)) < 0.3
    X[:3] = False
    X[3:6] = True
    trees = [random_tree(rng, int(rng.integers(1, 200)), F, S) for _ in range(5)]
    labels = rng.integers(K, size=len(trees)).astype(np.int64)
    ens = concat_trees(trees)
    indptr, indices = csr(X)
    phi = bitmask_potentials(Rows(indptr, indices), K, labels, bitmask_index(as_forest(ens, labels)))
    assert np.allclose(phi, walked_potentials(trees, labels, X, S, K), rtol=1e-12, atol=1e-12)


def test_ensemble_potentials_agree_for_few_and_many_rows():
    """Ensemble.potentials takes the bit masks below PARTITION_ROWS rows and the partition from there: the same
    cells, the forbidden ones 0 either way."""
    from spacy_treecrf.engine import booster
    rng = np.random.default_rng(77)
    F, K = 12, 3
    S = K + 1
    T = booster.PARTITION_ROWS + 100
    X = rng.random((T, F)) < 0.3
    trees = [random_tree(rng, int(rng.integers(1, 150)), F, S) for _ in range(6)]
    ens = booster.Ensemble(S, K)
    for i, tr in enumerate(trees):
        ens.add(i % K, as_tree(tr))
    indptr, indices = csr(X)
    allowed = rng.random((S, K)) < 0.7
    seq_starts = np.array([0, 5, 300, T], dtype=np.int64)
    many = ens.potentials(indptr, indices, valid=(allowed, seq_starts))
    few = ens.potentials(indptr[:301], indices[:indptr[300]], valid=(allowed, seq_starts[:3]))
    assert np.allclose(many[:300], few[:300], rtol=1e-12, atol=1e-12)
    # decoding's Potentials straight from the partition kernel, block by block: those of the potentials
    P = ens.scaled_potentials(indptr, indices, allowed, seq_starts)
    P_ref = booster.potentials_to_scaled(many, allowed, seq_starts)
    for got, ref in zip(P, P_ref):
        assert np.array_equal(got, ref)
    P = ens.scaled_potentials(indptr[:301], indices[:indptr[300]], allowed, seq_starts[:3])  # bit masks: the same
    # sums in another order
    E, E_ref = dense(P), dense(P_ref)
    assert np.allclose(E, E_ref[:300], rtol=1e-6, atol=1e-7) and np.allclose(P.c, P_ref.c[:300], rtol=1e-12,
                                                                              atol=1e-12)
    ref = walked_potentials(trees, np.arange(len(trees)) % K, X, S, K)
    is_start = np.isin(np.arange(T), seq_starts[:-1])
    cells = np.where(is_start[:, None, None], np.arange(S)[None, :, None] == 0, np.arange(S)[None, :, None] > 0)
    assert np.allclose(many, np.where(cells & allowed[None], ref, 0.0), rtol=1e-12, atol=1e-12)

@pytest.mark.parametrize("seed", range(8))
def test_walked_moves_match_leaf_moves(seed):
    """Moving the cache by walking a tree (positions it was not fitted on, dev sets) multiplies the same factors
    into the same cells as moving it over the tree's leaf segments; a walk at some positions touches only
    those, and a per-label tree only its label."""
    rng = np.random.default_rng(700 + seed)
    K = 3
    X, D, is_start, allowed_k = random_problem(rng, K=K)
    T, S = D.shape
    indptr, indices = csr(X)
    fitted = fit(X, D, is_start, allowed_k, max_leaves=int(rng.integers(1, 10)), lam=0.3)
    tr = as_tree(fitted)
    E0 = rng.uniform(0.5, 2.0, size=(T, S, K)).astype(np.float32)
    E0 *= valid_cells(is_start, S)
    k = int(rng.integers(K))
    by_leaves = moved(E0, is_start, lambda moves: moves.add_leaves(k, tr, segments(fitted), 0.7))
    by_walk = moved(E0, is_start, lambda moves: moves.add_walks([(k, tr, np.arange(T))], Rows(indptr, indices), None,
                                                                 0.7))
    assert np.array_equal(by_walk, by_leaves)
    some = np.sort(rng.choice(T, size=T // 3, replace=False)).astype(np.int64)
    part = moved(E0, is_start, lambda moves: moves.add_walks([(k, tr, some)], Rows(indptr, indices), None, 0.7))
    assert np.array_equal(part[some], by_leaves[some])
    rest = np.setdiff1d(np.arange(T), some)
    assert np.array_equal(part[rest], E0[rest])
    others = [j for j in range(K) if j != k]
    assert np.array_equal(by_leaves[:, :, others], E0[:, :, others])


@pytest.mark.parametrize("seed", range(6))
def test_inverted_index(seed):
    rng = np.random.default_rng(800 + seed)
    X = rng.random((int(rng.integers(1, 60)), int(rng.integers(1, 12)))) < 0.3
    indptr, indices = csr(X)
    col_ptr, col_pos = csc_index(indptr, indices, X.shape[1])
    assert col_ptr[0] == 0 and col_ptr[-1] == X.sum()
    for f in range(X.shape[1]):
        assert list(col_pos[col_ptr[f]:col_ptr[f + 1]]) == list(np.flatnonzero(X[:, f]))


def test_influential_positions_keep_those_with_a_large_residual():
    rng = np.random.default_rng(5)
    D = rng.normal(scale=0.05, size=(40, 4, 2))  # T x S x d
    D[7] = 0.0
    positions = np.sort(rng.choice(40, 25, replace=False)).astype(np.int64)
    target = Target(D, np.zeros(40, dtype=np.bool_), np.ones(4, dtype=np.bool_))
    for trim in (0.01, 0.05, 0.1):
        expected = positions[np.abs(D[positions]).max(axis=(1, 2)) >= trim]
        assert np.array_equal(influential_positions(target, positions, trim), expected)
    # nothing reaches the threshold: every position stays (a tree needs positions to fit)
    assert np.array_equal(influential_positions(target, positions, 10.0), positions)
