"""Numeric columns (engine/numeric.py): bins, threshold splits against brute force, missing values under every
strategy, the prediction kernels on expanded rows, and the estimator's int / float semantics."""
import math

import numpy as np
import pytest

from conftest import gain, grow
from spacy_treecrf import TreeCRF
from spacy_treecrf.engine import numeric as num
from spacy_treecrf.engine.booster import PARTITION_ROWS
from spacy_treecrf.engine.missing import MissingRows
from spacy_treecrf.engine.trees import FEATURE, LEAF


def atom_rows(values, uppers, binary=None):
    """Rows of one numeric column (ids 0 .. len(uppers)) over ``values`` (NaN: no id), then the binary features of
    ``binary`` (T x B, ids after the column's): (indptr, indices, NumericIndex, number of atoms)."""
    n_bins = len(uppers) + 1
    bins = num.bins_of(values, uppers)
    B = 0 if binary is None else binary.shape[1]
    rows = [([int(b)] if b >= 0 else []) + ([n_bins + j for j in np.flatnonzero(binary[t])] if B else [])
            for t, b in enumerate(bins)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    indices = np.array([i for r in rows for i in r], dtype=np.int32)
    n_atoms = n_bins + B
    return indptr, indices, num.numeric_index(n_atoms, [0], [n_bins]), n_atoms


def regression(r):
    """D (T x 2) whose only valid cell per position is state 1 (no sequence starts, allowed_k = [F, T]): the
    grower then fits a plain regression tree to r."""
    T = len(r)
    D = np.zeros((T, 2))
    D[:, 1] = r
    return D, np.zeros(T, dtype=bool), np.array([False, True])


def best_by_brute_force(values, r, lam, directions=True):
    """The best split of a plain regression on one real column, over every threshold between two distinct
    values (exact) and, with ``directions``, both sides for the missing values (NaN): (gain, yes mask)."""
    known = ~np.isnan(values)
    distinct = np.unique(values[known])
    G, N = r.sum(), float(len(r))
    best = (0.0, None)
    for low in distinct[:-1]:
        small = known & (values <= low)
        for yes in ([small, known & ~small] if directions else [small]):
            g = gain(r[yes].sum(), float(yes.sum()), G, N, lam)
            if g > best[0] * (1 + 1e-10):
                best = (g, yes)
    present = known
    if 0 < present.sum() < len(r):
        g = gain(r[present].sum(), float(present.sum()), G, N, lam)
        if g > best[0] * (1 + 1e-10):
            best = (g, present)
    return best


def yes_mask(tree, node, values, uppers, n_atoms):
    """The positions a feature node's test passes, from the raw values (the test's meaning, not the kernels')."""
    f = int(tree["feature"][node])
    if f >= n_atoms:
        return values > uppers[f - n_atoms]
    b = f
    return values <= uppers[b] if b < len(uppers) else ~np.isnan(values)


def test_bins_exact_below_the_limit_and_quantiles_above():
    rng = np.random.default_rng(0)
    few = rng.choice([0.5, -3.0, 2.25, 7.0, 1e9], size=400)
    uppers = num.bin_uppers(np.concatenate([few, [np.nan]]))
    assert len(uppers) == 4  # one bin per distinct value
    assert np.array_equal(np.unique(num.bins_of(few, uppers)), np.arange(5))
    assert all(a < u < b for a, u, b in zip([-3.0, 0.5, 2.25, 7.0], uppers, [0.5, 2.25, 7.0, 1e9]))
    many = np.round(rng.normal(size=20000), 3)
    uppers = num.bin_uppers(many)
    assert len(uppers) + 1 <= num.MAX_BINS and np.all(np.diff(uppers) > 0)
    bins = num.bins_of(many, uppers)
    for v in np.unique(many)[:50]:  # equal values share a bin
        assert len(np.unique(bins[many == v])) == 1
    counts = np.bincount(bins)
    assert counts.max() < 3 * len(many) / num.MAX_BINS  # quantile bins: none much fuller than its share
    assert num.bins_of([np.nan, -np.inf, np.inf], uppers).tolist() == [-1, 0, len(uppers)]
    assert num.bin_uppers([1.0, np.inf, -np.inf]).tolist() == [-np.inf, 1.0]  # x <= -inf, x <= 1, the rest


@pytest.mark.parametrize("seed", range(6))
def test_threshold_split_and_leaf_values_against_brute_force(seed):
    """A column with few distinct values, some missing: the root split's gain is the best over every exact
    threshold and missing-value direction, its partition is that threshold's and its leaves are G / (N + lam)."""
    rng = np.random.default_rng(seed)
    T = 60
    values = rng.choice(rng.normal(size=12) * 3, size=T)
    values[rng.random(T) < 0.15] = np.nan
    r = np.where(np.isnan(values), rng.normal(1.5, 0.3, T), np.sin(np.nan_to_num(values)) + rng.normal(0, .2, T))
    lam = 0.5
    uppers = num.bin_uppers(values)
    indptr, indices, numeric, n_atoms = atom_rows(values, uppers)
    D, is_start, allowed = regression(r)
    tr = grow(indptr, indices, n_atoms, D, is_start, allowed, max_leaves=2, lam=lam, numeric=numeric)
    expected, expected_yes = best_by_brute_force(values, r, lam)
    assert tr["kind"][0] == FEATURE
    yes = yes_mask(tr, 0, values, uppers, n_atoms)
    got = gain(r[yes].sum(), float(yes.sum()), r.sum(), float(T), lam)
    assert got == pytest.approx(expected, rel=1e-9)
    a, b = tr["yes"][0], tr["no"][0]
    assert tr["value"][a] == pytest.approx(r[yes].sum() / (yes.sum() + lam))
    assert tr["value"][b] == pytest.approx(r[~yes].sum() / ((~yes).sum() + lam))
    assert tr["count"][a] == yes.sum() and tr["count"][b] == (~yes).sum()


def test_missing_values_choose_their_side():
    """Missing values whose residuals match the small values' go with them: the "x > u" test (its id past the
    atoms), missing on the no side with the small values; with the large values', the "x <= u" test."""
    values = np.array([0.0, 1.0, 2.0, 3.0, np.nan, np.nan] * 5)
    uppers = num.bin_uppers(values)
    indptr, indices, numeric, n_atoms = atom_rows(values, uppers)
    for missing_like, family in ((-1.0, "gt"), (1.0, "le")):
        r = np.where(values < 1.5, -1.0, 1.0)
        r[np.isnan(values)] = missing_like
        D, is_start, allowed = regression(r)
        tr = grow(indptr, indices, n_atoms, D, is_start, allowed, max_leaves=2, lam=0.0, numeric=numeric)
        f = int(tr["feature"][0])
        assert (f >= n_atoms) == (family == "gt")
        yes = yes_mask(tr, 0, values, uppers, n_atoms)
        assert np.array_equal(yes, r > 0 if family == "gt" else r < 0)
        assert tr["count"][tr["yes"][0]] + tr["count"][tr["no"][0]] == len(values)


def test_binned_thresholds_equal_exact_ones():
    """With at most 255 distinct values every tree's splits are the exact search's: a deeper tree over a binned
    column partitions the positions as the brute-force search over raw values would, split by split."""
    rng = np.random.default_rng(7)
    T = 300
    values = np.round(rng.uniform(-5, 5, T), 1)  # ~100 distinct values
    r = np.sign(np.sin(values)) + rng.normal(0, 0.1, T)
    uppers = num.bin_uppers(values)
    assert len(uppers) + 1 == len(np.unique(values))
    indptr, indices, numeric, n_atoms = atom_rows(values, uppers)
    D, is_start, allowed = regression(r)
    tr = grow(indptr, indices, n_atoms, D, is_start, allowed, max_leaves=6, lam=1.0, numeric=numeric)
    reach = {0: np.ones(T, dtype=bool)}
    for node in range(len(tr["kind"])):
        if tr["kind"][node] != FEATURE:
            continue
        here = reach[node]
        expected, _ = best_by_brute_force(values[here], r[here], 1.0)
        yes = yes_mask(tr, node, values, uppers, n_atoms) & here
        got = gain(r[yes].sum(), float(yes.sum()), r[here].sum(), float(here.sum()), 1.0)
        assert got == pytest.approx(expected, rel=1e-9), node
        reach[tr["yes"][node]], reach[tr["no"][node]] = yes, here & ~yes


def test_instance_weighting_judges_known_values_and_shares_the_missing():
    """Routed: the split is the best on the known values alone ("x <= u" only), and a missing position goes to
    both children with the known examples' shares."""
    rng = np.random.default_rng(3)
    T = 80
    values = rng.choice([0.0, 1.0, 2.0, 3.0, 4.0], size=T)
    values[::7] = np.nan
    r = np.where(values < 2.5, -1.0, 2.0) + rng.normal(0, 0.1, T)
    r[np.isnan(values)] = 5.0  # would pull a learned direction; routing ignores it for the choice
    uppers = num.bin_uppers(values)
    indptr, indices, numeric, n_atoms = atom_rows(values, uppers)
    gone = np.isnan(values)
    mr = MissingRows(np.concatenate([[0], np.cumsum(gone)]), np.zeros(gone.sum(), dtype=np.int32),
                     np.zeros(n_atoms, dtype=np.int32), 1)
    D, is_start, allowed = regression(r)
    tr = grow(indptr, indices, n_atoms, D, is_start, allowed, max_leaves=2, lam=0.0, numeric=numeric, missing=mr)
    known = ~gone
    expected, _ = best_by_brute_force(values[known], r[known], 0.0, directions=False)
    f = int(tr["feature"][0])
    assert f < n_atoms
    yes = yes_mask(tr, 0, values, uppers, n_atoms)
    assert gain(r[yes].sum(), float(yes.sum()), r[known].sum(), float(known.sum()), 0.0) == pytest.approx(expected)
    share = yes.sum() / known.sum()
    a, b = tr["yes"][0], tr["no"][0]
    assert tr["count"][a] == pytest.approx(yes.sum() + share * gone.sum())
    assert tr["count"][b] == pytest.approx((known & ~yes).sum() + (1 - share) * gone.sum())


def sequences(n, length, rng, missing=0.0):
    """Three hidden labels whose emissions are not monotone in x: near 0, near +-3, a wide mixture."""
    X, Y = [], []
    for _ in range(n):
        s = int(rng.integers(3))
        xs, ys = [], []
        for _ in range(length):
            if rng.random() < 0.1:
                s = int(rng.integers(3))
            v = [rng.normal(0, .5), rng.choice([-3, 3]) + rng.normal(0, .5), rng.normal(0, 4)][s]
            xs.append({"x": float("nan") if rng.random() < missing else float(v), "parity": bool(len(xs) % 2)})
            ys.append("ABC"[s])
        X.append(xs)
        Y.append(ys)
    return X, Y


@pytest.mark.parametrize("strategy", ["learned_direction", "instance_weighting", "surrogate", "imputation",
                                      "indicator"])
def test_every_strategy_predicts_missing_values_and_round_trips(strategy):
    rng = np.random.default_rng(11)
    X, Y = sequences(40, 30, rng, missing=0.1)
    Xt, Yt = sequences(20, 30, rng, missing=0.1)
    model = TreeCRF(n_rounds=8, max_leaves=6, missing=strategy, early_stopping=False).fit(X, Y)
    assert model.score(Xt, Yt) > 0.6  # the emissions tell the labels apart well above chance (1/3)
    copy = TreeCRF().from_bytes(model.to_bytes())
    assert copy.predict(Xt) == model.predict(Xt)
    with_none = [[{**p, "x": None} if isinstance(p["x"], float) and math.isnan(p["x"]) else p for p in s]
                 for s in Xt]
    assert model.predict(with_none) == model.predict(Xt)  # None and NaN both mean missing


def test_instance_weighting_prediction_averages_both_branches():
    """One stump: the potentials of a position missing x are the share-weighted mean of its two leaves'."""
    X = [[{"x": v} for v in [0.0, 1.0, 2.0, 3.0, float("nan")] * 4]]
    Y = [["a", "a", "b", "b", "a"] * 4]
    model = TreeCRF(n_rounds=1, max_leaves=2, missing="instance_weighting", shared_trees=False,
                    label_splits="fallback", early_stopping=False).fit(X, Y)
    phi = model.ensemble.potentials(*model._rows([[{"x": 0.0}, {"x": 3.0}, {"x": float("nan")}]])[:2],
                                    missing_rows=model._rows([[{"x": 0.0}, {"x": 3.0}, {"x": float("nan")}]])[3])
    nodes = model.ensemble.forest().nodes
    root = 0
    share = nodes.count[nodes.yes[root]] / (nodes.count[nodes.yes[root]] + nodes.count[nodes.no[root]])
    low_is_yes = model.features.names[nodes.feature[root]].startswith("x <=")
    low, high = (phi[0], phi[1])
    expected = share * (low if low_is_yes else high) + (1 - share) * (high if low_is_yes else low)
    assert np.allclose(phi[2][1:], expected[1:])


def brute_potentials(model, X):
    """phi (T x S x K) of every tree walked in Python on the raw values (the tests' meaning, not the kernels')."""
    feats = model.features
    n_atoms = len(feats.names)
    forest = model.ensemble.forest()
    nodes = forest.nodes
    K = len(model.classes_)
    pos = [p for s in X for p in s]
    phi = np.zeros((len(pos), K + 1, K))

    def passes(p, f):
        if f >= n_atoms:
            a = f - n_atoms
            c = next(c for c, b in enumerate(feats.numeric_base) if b <= a <= b + len(feats.uppers[c]))
            v = p.get(feats.numeric_keys[c])
            return v is not None and not math.isnan(v) and v > feats.uppers[c][a - feats.numeric_base[c]]
        for c, b in enumerate(feats.numeric_base):
            if b <= f <= b + len(feats.uppers[c]):
                v = p.get(feats.numeric_keys[c])
                if v is None or math.isnan(v):
                    return False
                return f - b == len(feats.uppers[c]) or v <= feats.uppers[c][f - b]
        name = feats.names[f]
        key, _, value = name.partition("=")
        return p.get(key) == value if _ else bool(p.get(name))

    for i, p in enumerate(pos):
        for j, k in enumerate(forest.labels):
            root = forest.roots[j]
            for s in range(K + 1):
                node = root
                while nodes.kind[node] != LEAF:
                    go = passes(p, nodes.feature[node]) if nodes.kind[node] == FEATURE else nodes.states[
                        root + nodes.yes[node], s]
                    node = root + (nodes.yes[node] if go else nodes.no[node])
                if nodes.states[node, s]:
                    phi[i, s, k] += nodes.value[node]
    return phi


@pytest.mark.parametrize("kernel", ["bitmask", "partition", "walk"])
def test_kernels_on_numeric_rows_equal_the_trees(kernel):
    rng = np.random.default_rng(5)
    X, Y = sequences(30, 30, rng, missing=0.15)
    X = [[{**p, "w": ["lo", "hi"][int(p["x"] > 1)]} for p in s] for s in X]
    model = TreeCRF(n_rounds=3, max_leaves=8, shared_trees=False, missing="learned_direction",
                    early_stopping=False).fit(X, Y)
    nodes = model.ensemble.forest().nodes
    n_atoms = len(model.features.names)
    assert (nodes.feature >= n_atoms).any() and ((nodes.feature >= 0) & (nodes.feature < n_atoms)).any()
    Xt, _ = sequences(4 if kernel != "partition" else PARTITION_ROWS // 20 + 1, 20, rng, missing=0.2)
    Xt = [[{**p, "w": "hi"} for p in s] for s in Xt]
    indptr, indices, _, missing_rows = model._rows(Xt)
    if kernel == "walk":
        from spacy_treecrf.engine.predict_walk import walk_potentials
        from spacy_treecrf.engine.trees import no_missing
        rows = model.ensemble.kernel_rows(indptr, indices)
        T = len(indptr) - 1
        phi = walk_potentials(np.arange(T, dtype=np.int64), rows, model.ensemble.forest(), no_missing(),
                              model.ensemble.n_states, model.ensemble.n_labels)
    else:
        phi = model.ensemble.potentials(indptr, indices)
    expected = brute_potentials(model, Xt)
    assert np.allclose(phi, expected, atol=1e-12)


def test_estimator_numbers_are_numeric_bools_flags_strings_categories():
    X = [[{"x": 0.23, "b": True, "s": "u"}, {"x": -5.0, "b": False, "s": "v"}, {"x": np.float32(2.5), "n": 3}]]
    feats = TreeCRF().features
    indptr, indices, _, _ = feats.rows(X, grow=True)
    names = [[feats.names[i] for i in indices[a:b]] for a, b in zip(indptr[:-1], indptr[1:])]
    assert feats.numeric_keys == ["x", "n"]
    assert names[0] != names[1]  # 0.23 and -5.0 are different values, not one "present" feature
    assert "b" in names[0] and "b" not in names[1] and "s=u" in names[0] and "s=v" in names[1]
    x_names = [n for n in names[2] if n.startswith("x ")]
    assert len(x_names) == 1 and len([n for n in names[2] if n.startswith("n ")]) == 1
    # at prediction a number of a key without a column is dropped, as an unknown name is
    indptr, indices, _, _ = feats.rows([[{"x": 0.23, "z": 1.0}]], grow=False)
    assert [feats.names[i] for i in indices] == [n for n in names[0] if n.startswith("x ")]


def test_continued_fit_keeps_the_old_trees_meaning():
    """New features appended after the numeric columns move the "x > u" ids: the old trees predict as before."""
    rng = np.random.default_rng(2)
    X, Y = sequences(30, 20, rng, missing=0.1)
    Xt, _ = sequences(5, 20, rng, missing=0.1)
    model = TreeCRF(n_rounds=3, max_leaves=8, missing="learned_direction", early_stopping=False,
                    warm_start=True).fit(X, Y)
    before = model.ensemble.potentials(*model._rows(Xt)[:2])
    n_trees = model.ensemble.n_trees
    X2 = [[{**p, "new": "yes" if i % 3 else "no"} for i, p in enumerate(s)] for s in X]
    model.set_params(n_rounds=4).fit(X2, Y)
    assert len(model.features.names) > len(TreeCRF().fit(X, Y).features.names)
    old = TreeCRF().from_bytes(model.to_bytes())
    old.ensemble.truncate(n_trees)
    assert np.allclose(old.ensemble.potentials(*old._rows(Xt)[:2]), before)


def test_readable_threshold_tests():
    rng = np.random.default_rng(4)
    X, Y = sequences(30, 20, rng, missing=0.1)
    model = TreeCRF(n_rounds=2, max_leaves=6, missing="learned_direction", early_stopping=False).fit(X, Y)
    text = " ".join(rule for _, rule, _, _ in model.rules(top=20))
    assert "x <= " in text or "x > " in text
    parts = model.explain(X[0][:3])[1].parts
    assert parts and sum(p.value for p in parts) == pytest.approx(model.explain(X[0][:3])[1].potential)


# ---- the component: numeric token attributes, vectors and doc.tensor ------------------------------------------

def numeric_nlp(config=None, vectors=True):
    """A blank pipeline whose vectors table gives each of a few words a 3-d vector: the label of a word is a
    region of its vector's first dimension (not monotone: the middle region is its own label), and the word's
    length and an extension ``_.score`` carry it too."""
    import spacy
    from spacy.tokens import Token
    from conftest import component_config
    if not Token.has_extension("score"):
        Token.set_extension("score", default=None)
    nlp = spacy.blank("en")
    if vectors:
        nlp.vocab.reset_vectors(width=3)
        for i, word in enumerate(WORDS):
            nlp.vocab.set_vector(word, np.array([POSITION[word], i % 2, -1.0], dtype=np.float32))
    features = {"@misc": "spacy_treecrf.window_features.v1", "window": 1, "word": False, "lower": False,
                "regexes": False, "prefix": 0, "suffix": 0, "shape": False, "flags": False,
                "label_dictionary": False, **(config or {})}
    crf = nlp.add_pipe("treecrf", config=component_config({"target": "tag", "max_leaves": 6, "n_threads": 1,
                                                           "features": features}))
    return nlp, crf


WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu", "hen", "owl"]
POSITION = {w: float(i) - 4.0 for i, w in enumerate(WORDS)}  # -4 .. 4


def numeric_examples(nlp, n, seed, scored=True):
    from spacy.tokens import Doc
    from spacy.training import Example
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        words = [str(w) for w in rng.choice(WORDS, size=rng.integers(2, 7))]
        tags = ["MID" if abs(POSITION[w]) < 1.5 else "EDGE" for w in words]
        doc = Doc(nlp.vocab, words=words)
        if scored:
            for token in doc:
                token._.score = POSITION[token.text] ** 2
        out.append(Example(doc, Doc(nlp.vocab, words=words, tags=tags)))
    return out


@pytest.mark.parametrize("config", [{"vectors": True}, {"numeric_attrs": ["_.score"]}])
def test_the_component_learns_thresholds_on_vectors_and_numeric_attrs(config):
    from conftest import train
    nlp, crf = numeric_nlp(config)
    examples = numeric_examples(nlp, 60, 0)
    train(nlp, examples, rounds=4)
    featurizer = crf.featurizer
    assert featurizer._num_sources == (["vector0", "vector1", "vector2"] if "vectors" in config else ["_.score"])
    test = numeric_examples(nlp, 30, 1)
    assert nlp.evaluate(test)["tag_acc"] == 1.0  # MID is a middle range: two thresholds, no single weight
    names = " ".join(rule for _, rule, _, _ in crf.rules(top=10))
    assert ("vector0[0]" in names) if "vectors" in config else ("_.score[0]" in names)
    doc = nlp(test[0].predicted.copy())
    explanation = crf.explain(doc)[0]
    assert sum(p.value for p in explanation.parts) == pytest.approx(explanation.potential)
    again, crf2 = numeric_nlp(config)
    crf2.from_bytes(crf.to_bytes())
    docs = [eg.predicted for eg in test]
    assert [t.tag_ for d in again.pipe([d.copy() for d in docs]) for t in d] == [
        t.tag_ for d in nlp.pipe([d.copy() for d in docs]) for t in d]


def test_numeric_rows_hold_each_source_at_each_offset():
    nlp, crf = numeric_nlp({"numeric_attrs": ["len"], "vectors": True})
    examples = numeric_examples(nlp, 20, 0, scored=False)
    crf.featurizer.initialize([eg.predicted for eg in examples])
    f = crf.featurizer
    doc = examples[0].predicted
    indptr, indices, _ = f([doc])
    base, end = f.numeric_columns()
    assert len(base) == 3 * 4 and end[-1] == f.n_features  # (offsets -1, 0, +1) x (len, vector0..2)
    for t in range(len(doc)):
        row = indices[indptr[t]:indptr[t + 1]]
        assert np.all(np.diff(row) > 0)
        inside = [t + o for o in (-1, 0, 1) if 0 <= t + o < len(doc)]
        bins = row[row >= base[0]]
        assert len(bins) == len(inside) * 4  # one bin per source at each offset inside the doc
        assert [f.feature_name(int(c)) for c in row[row < base[0]]] == [  # the rest: padding beyond the edges
            f"pad@{o:+d}" for o in (-1, 1) if not 0 <= t + o < len(doc)]
        assert all(f.feature_name(int(c)).startswith("num:") for c in bins)


def test_numeric_settings_are_checked_and_bad_values_named():
    from spacy_treecrf.features import WindowFeaturizer
    with pytest.raises(ValueError, match="numeric_attrs"):
        WindowFeaturizer(numeric_attrs=["no_such_attribute"])
    with pytest.raises(ValueError, match="numeric_attrs"):
        WindowFeaturizer(numeric_attrs="len")
    nlp, crf = numeric_nlp({"tensor": True}, vectors=False)
    examples = numeric_examples(nlp, 5, 0)
    with pytest.raises(ValueError, match="annotating_components"):
        crf.featurizer.initialize([eg.predicted for eg in examples])
    nlp, crf = numeric_nlp({"vectors": True}, vectors=False)
    with pytest.raises(ValueError, match="vectors table is empty"):
        crf.featurizer.initialize([eg.predicted for eg in examples])
    nlp, crf = numeric_nlp({"numeric_attrs": ["_.score"]})
    examples = numeric_examples(nlp, 5, 0)
    examples[2].predicted[1]._.score = "high"
    with pytest.raises(ValueError, match="'high', not a number"):
        crf.featurizer.initialize([eg.predicted for eg in examples])


def test_doc_tensor_columns_and_their_width_checked():
    nlp, crf = numeric_nlp({"tensor": True}, vectors=False)
    examples = numeric_examples(nlp, 30, 0)
    for eg in examples:
        eg.predicted.tensor = np.array([[POSITION[t.text], 1.0] for t in eg.predicted], dtype=np.float32)
    f = crf.featurizer
    f.initialize([eg.predicted for eg in examples])
    assert f._num_sources == ["tensor0", "tensor1"]
    odd = examples[0].predicted.copy()
    odd.tensor = np.zeros((len(odd), 5), dtype=np.float32)
    with pytest.raises(ValueError, match="width 2"):
        f([odd])
    bare = examples[1].predicted.copy()
    bare.tensor = np.zeros((0, 0), dtype=np.float32)
    indptr, indices, _ = f([bare])  # no tensor: no value, no bins (padding columns only)
    assert len(indices) > 0 and indices.max() < f.numeric_columns()[0][0]


def test_extend_moves_the_numeric_bins_after_new_columns():
    """A continued model's feature index grows: the numeric bins move after the new binary columns and the old
    rows, mapped, are the new rows' old part."""
    nlp, crf = numeric_nlp({"vectors": True, "word": True})
    first = numeric_examples(nlp, 10, 0)
    f = crf.featurizer
    f.initialize([eg.predicted for eg in first[:5]])
    docs = [eg.predicted for eg in first]
    old_indptr, old_indices, _ = f(docs)
    old_n = f.n_features
    moved = f.extend(docs)
    assert len(moved) == old_n and f.n_features > old_n
    new_indptr, new_indices, _ = f(docs)
    for t in range(len(old_indptr) - 1):
        old = set(moved[old_indices[old_indptr[t]:old_indptr[t + 1]]].tolist())
        assert old <= set(new_indices[new_indptr[t]:new_indptr[t + 1]].tolist())


def test_surrogates_route_a_missing_numeric_value():
    """Routed with surrogates: a position missing x follows the binary feature that agrees with the split on x
    where x is known, so its whole weight lands on that feature's side."""
    rng = np.random.default_rng(8)
    T = 60
    values = rng.choice([0.0, 1.0, 2.0, 3.0], size=T)
    flag = values >= 2.0  # the binary feature (id n_bins) agrees with "x > 1.5" everywhere
    gone = np.zeros(T, dtype=bool)
    gone[::6] = True
    values[gone] = np.nan
    r = np.where(flag, 1.0, -1.0)
    uppers = num.bin_uppers(values)
    indptr, indices, numeric, n_atoms = atom_rows(values, uppers, flag[:, None])
    n_bins = len(uppers) + 1
    fvar = np.full(n_atoms, -1, dtype=np.int32)
    fvar[:n_bins] = 0  # x's bins are variable 0; the flag belongs to none and is never missing
    mr = MissingRows(np.concatenate([[0], np.cumsum(gone)]), np.zeros(gone.sum(), dtype=np.int32), fvar, 1)
    D, is_start, allowed = regression(r)
    ok = np.ones(n_atoms, dtype=bool)
    ok[n_bins] = False  # the tree may not split on the flag itself: only use it as a surrogate
    tr = grow(indptr, indices, n_atoms, D, is_start, allowed, max_leaves=2, lam=0.0, numeric=numeric, missing=mr,
              n_surrogates=2, feature_ok=ok)
    assert tr["kind"][0] == FEATURE and tr["feature"][0] < n_bins
    assert tr["surr_feature"][0][0] == n_bins
    yes = yes_mask(tr, 0, values, uppers, n_atoms)  # "x <= 1.5": the flag's absent side
    assert not tr["surr_same"][0][0]
    a, b = tr["yes"][0], tr["no"][0]
    assert tr["count"][a] == (yes | (gone & ~flag)).sum() and tr["count"][b] == ((~yes & ~gone) | (gone & flag)).sum()


def test_a_resumed_component_keeps_its_threshold_tests(tmp_path):
    """resume_from with docs that bring new words: new binary columns go in, the numeric bins and the "x > u"
    tests (ids past all columns) move, and the old trees give the old potentials."""
    from spacy.tokens import Doc
    from spacy.training import Example
    from conftest import train
    nlp, crf = numeric_nlp({"vectors": True, "word": True})
    examples = numeric_examples(nlp, 60, 0, scored=False)
    rng = np.random.default_rng(5)
    for _ in range(20):  # words without a vector (missing values) tagged as the middle region
        words = [str(w) for w in rng.choice(["yak", "emu", "cat", "dog"], size=4)]
        tags = ["MID" if w in ("yak", "emu", "eel") else "EDGE" for w in words]
        examples.append(Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words, tags=tags)))
    train(nlp, examples, rounds=4)
    n_atoms = crf.n_features
    assert (crf.ensemble.forest().nodes.feature >= n_atoms).any()  # some "x > u" tests (the learned side)
    nlp.to_disk(tmp_path / "first")
    docs = [eg.predicted for eg in examples[:5]] + [Doc(nlp.vocab, words=["yak", "gnu", "emu"])]
    before = crf.ensemble.potentials(*crf._rows(docs)[:2])
    again, crf2 = numeric_nlp({"vectors": True, "word": True})
    new = [Example(Doc(again.vocab, words=["zebra", "ant"] * 3), Doc(again.vocab, words=["zebra", "ant"] * 3,
                                                                        tags=["MID", "EDGE"] * 3))]
    moved = [Example(Doc(again.vocab, words=[t.text for t in eg.predicted]),
                     Doc(again.vocab, words=[t.text for t in eg.reference], tags=[t.tag_ for t in eg.reference]))
             for eg in examples]
    again.config["initialize"]["components"]["treecrf"] = {"resume_from": str(tmp_path / "first")}
    again.initialize(lambda: moved + new)
    assert crf2.n_features > n_atoms
    docs2 = [Doc(again.vocab, words=[t.text for t in d]) for d in docs]
    after = crf2.ensemble.potentials(*crf2._rows(docs2)[:2])
    assert np.allclose(after, before)


def test_a_changed_numeric_extension_is_new_training_content():
    """The component keeps its training cache for examples with the same content; a numeric extension's values
    (and doc.tensor, when read) are part of that content."""
    nlp, crf = numeric_nlp({"numeric_attrs": ["_.score"]})
    examples = numeric_examples(nlp, 10, 0)
    from spacy_treecrf.round_feeder import extensions_read
    stored, computed, _ = extensions_read(crf.featurizer)
    assert "score" in stored + tuple(computed)
    before = crf._entries(examples[:1])[0][0]  # (content digest, example)
    examples[0].predicted[0]._.score = -1.0
    assert crf._entries(examples[:1])[0][0] != before
