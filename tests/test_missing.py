"""Missing input values (paper Sec. 6): instance weighting, surrogate splits, imputation and indicator features."""
import numpy as np
import pytest

from brute import dense
from conftest import as_tree, component_config, dense_vectors, grow, ids_csr as csr, paper_crf, paper_params, plain_featurizer
from spacy_treecrf.engine import booster as B, missing, serialize
from spacy_treecrf.engine.missing import MissingRows
from spacy_treecrf.engine.predict_walk import walk_potentials
from spacy_treecrf.engine.trees import FEATURE, LEAF, STATE, MissingIndex, Rows, Tree


def hand_ensemble(n_surrogates=0):
    """One tree over features f0, f1, f2 (variables 0, 1, 2) and 2 states:
    f0 ? (f1 ? 2.0 [count 2] : 0.0 [count 1]) : -1.0 [count 1]; surrogates of the root: not-f2, then f1."""
    ens = B.Ensemble(2, 1, n_surrogates)
    kind = np.array([FEATURE, FEATURE, LEAF, LEAF, LEAF], dtype=np.int8)
    feature = np.array([0, 1, -1, -1, -1], dtype=np.int32)
    yes = np.array([1, 3, -1, -1, -1], dtype=np.int32)
    no = np.array([2, 4, -1, -1, -1], dtype=np.int32)
    value = np.array([0.0, 0.0, -1.0, 2.0, 0.0])
    count = np.array([4.0, 3.0, 1.0, 2.0, 1.0])
    states = np.ones((5, 2), dtype=np.bool_)
    surr_f = np.full((5, n_surrogates), -1, dtype=np.int32)
    surr_same = np.zeros((5, n_surrogates), dtype=np.bool_)
    if n_surrogates:
        surr_f[0, :2] = [2, 1]
        surr_same[0, :2] = [False, True]
    ens.add(0, Tree(kind, feature, yes, no, value, count, states, surr_f, surr_same, np.zeros((5, 0))))
    return ens


FVAR = np.array([0, 1, 2], dtype=np.int32)


def predict(ens, present, gone):
    """The tree's value at each position (state 1) for present feature lists and missing variable lists."""
    indptr, indices = csr(present, len(present))
    mr = MissingRows(*csr(gone, len(gone)), FVAR, 3)
    return ens.potentials(indptr, indices, 1, mr)[:, 1, 0]


# ---- hand-built trees -------------------------------------------------------------------------------------------

def test_instance_weighting_averages_both_subtrees_by_their_training_shares():
    ens = hand_ensemble()
    out = predict(ens, [[0, 1], [], [1], [], [0]], [[], [], [0], [0, 1], [1]])
    sub_yes = (2 * 2.0 + 1 * 0.0) / 3  # the f1 subtree with f1 missing
    assert np.allclose(out, [2.0, -1.0, 0.75 * 2.0 + 0.25 * -1.0, 0.75 * sub_yes + 0.25 * -1.0, sub_yes])


def test_surrogates_are_followed_in_order_then_the_majority_branch():
    ens = hand_ensemble(n_surrogates=3)
    # f0 missing: f2 present -> no (opposite); f2 absent -> yes; f2 missing too: f1 decides (same direction);
    # everything missing: the majority (yes: 3 of 4), then f1 missing as well -> yes again by majority (2 of 3)
    out = predict(ens, [[2], [1], [1], [], []], [[0], [0], [0, 2], [0, 2], [0, 1, 2]])
    assert np.allclose(out, [-1.0, 2.0, 2.0, -1.0, 2.0])


def test_no_missing_values_walk_as_the_block_kernels_predict():
    """Rows without missing variables: the walk with the routing rule on gives the block kernels' potentials."""
    ens = hand_ensemble(n_surrogates=2)
    present = [[0, 1], [], [1], [0, 2]]
    indptr, indices = csr(present, 4)
    plain = ens.potentials(indptr, indices, 1)
    at = np.arange(4, dtype=np.int64)
    walked = walk_potentials(at, Rows(indptr, indices), ens.forest(),
                             MissingIndex(np.zeros(5, np.int64), np.zeros(0, np.int32), FVAR, 3), 2, 1)
    assert np.array_equal(plain, walked)


# ---- fitting ----------------------------------------------------------------------------------------------------

def random_problem(seed, T=300, F=24, S=4, rate=0.0, group=3):
    rng = np.random.default_rng(seed)
    X = rng.random((T, F)) < 0.25
    fvar = (np.arange(F) // group).astype(np.int32)
    n_vars = int(fvar.max()) + 1
    gone = rng.random((T, n_vars)) < rate
    X &= ~gone[:, fvar]  # a missing variable has no present feature
    indptr, indices = csr([np.flatnonzero(r).tolist() for r in X], T)
    mr = MissingRows(*csr([np.flatnonzero(r).tolist() for r in gone], T), fvar, n_vars)
    D = rng.normal(size=(T, S)) + 2.0 * X[:, [0]] - 1.5 * X[:, [4]]
    is_start = np.zeros(T, dtype=bool)
    is_start[::6] = True
    return X, gone, indptr, indices, mr, D, is_start, np.ones(S, dtype=bool)


def fit_missing(indptr, indices, F, D, is_start, allowed, mr, n_surrogates, max_leaves=8, lam=1.0, feature_ok=None):
    """The Tree grown with the routing rule on (its fields in Tree order)."""
    tr = grow(indptr, indices, F, D, is_start, allowed, None, max_leaves, lam, 1.0, 0.0, feature_ok, False, mr,
              n_surrogates)
    return as_tree(tr)


@pytest.mark.parametrize("seed,colsample", [(0, 1.0), (1, 1.0), (2, 1.0), (3, 0.5), (4, 0.5)])
def test_without_missing_values_the_routing_rule_changes_no_tree(seed, colsample):
    """Also with column subsampling: both ways of growing honour the same feature mask."""
    X, _, indptr, indices, mr, D, is_start, allowed = random_problem(seed)
    feature_ok = None if colsample == 1.0 else np.random.default_rng(seed).random(X.shape[1]) < colsample
    ref = as_tree(grow(indptr, indices, X.shape[1], D, is_start, allowed, None, 8, 1.0, 1.0, 0.0, feature_ok))
    got = fit_missing(indptr, indices, X.shape[1], D, is_start, allowed, mr, 0, feature_ok=feature_ok)
    for a, b in zip(ref[:7], got[:7]):
        assert np.allclose(a, b)


def reference_value(arrays, X, gone, fvar, t, s, proportional):
    """The tree at (x_t, s), recursively: a missing split variable follows the surrogates, then both branches
    averaged by count shares (proportional) or the larger branch."""
    kind, feature, yes, no, value, count, states, surr_f, surr_same, _ = arrays

    def walk(node):
        if kind[node] == LEAF:
            return value[node]
        if kind[node] == STATE:
            return walk(yes[node] if states[yes[node], s] else no[node])
        f = feature[node]
        if not gone[t, fvar[f]]:
            return walk(yes[node] if X[t, f] else no[node])
        for g, same in zip(surr_f[node], surr_same[node]):
            if g < 0:
                break
            if not gone[t, fvar[g]]:
                return walk(yes[node] if X[t, g] == same else no[node])
        share = count[yes[node]] / (count[yes[node]] + count[no[node]])
        if proportional:
            return share * walk(yes[node]) + (1 - share) * walk(no[node])
        return walk(yes[node] if share > 0.5 else no[node])

    return walk(0)


@pytest.mark.parametrize("n_surrogates", [0, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_fitted_trees_evaluate_as_the_recursive_reference(seed, n_surrogates):
    X, gone, indptr, indices, mr, D, is_start, allowed = random_problem(seed, rate=0.3)
    arrays = fit_missing(indptr, indices, X.shape[1], D, is_start, allowed, mr, n_surrogates)
    assert (arrays.kind == FEATURE).sum() >= 3
    ens = B.Ensemble(D.shape[1], 1, n_surrogates)
    ens.add(0, arrays)
    phi = ens.potentials(indptr, indices, 1, mr)
    for t in range(0, len(D), 7):
        for s in range(1, D.shape[1]):
            assert phi[t, s, 0] == pytest.approx(reference_value(arrays, X, gone, mr.feature_var, t, s,
                                                                 n_surrogates == 0))


def test_instance_weighting_splits_on_known_examples_and_shares_the_missing_ones():
    """A missing example's weight is divided by the share of the known ones: the children's counts add up to the
    parent's and keep the known examples' ratio."""
    X, gone, indptr, indices, mr, D, is_start, allowed = random_problem(3, rate=0.3)
    kind, feature, yes, no, value, count = fit_missing(indptr, indices, X.shape[1], D, is_start, allowed, mr, 0)[:6]
    root_f = feature[0]
    assert kind[0] == FEATURE
    known = ~gone[:, mr.feature_var[root_f]]
    units = np.where(is_start, 1, D.shape[1] - 1)
    share = (units * (known & X[:, root_f])).sum() / (units * known).sum()
    assert count[yes[0]] + count[no[0]] == pytest.approx(count[0])
    assert count[yes[0]] / count[0] == pytest.approx(share)


def test_the_surrogate_chosen_is_the_feature_agreeing_most_with_the_split():
    rng = np.random.default_rng(5)
    T = 400
    f0 = rng.random(T) < 0.5
    f1 = f0 ^ (rng.random(T) < 0.15)       # agrees 85%
    f2 = ~f0 ^ (rng.random(T) < 0.05)      # agrees 95%, in the opposite direction
    f3 = rng.random(T) < 0.5               # unrelated
    X = np.stack([f0, f1, f2, f3], axis=1)
    fvar = np.arange(4, dtype=np.int32)
    gone = np.zeros((T, 4), dtype=bool)
    gone[rng.random(T) < 0.1, 0] = True
    X &= ~gone[:, fvar]
    indptr, indices = csr([np.flatnonzero(r).tolist() for r in X], T)
    mr = MissingRows(*csr([np.flatnonzero(r).tolist() for r in gone], T), fvar, 4)
    D = np.where(X[:, [0]], 1.0, -1.0) + 0.1 * rng.normal(size=(T, 2))
    arrays = fit_missing(indptr, indices, 4, D, np.zeros(T, dtype=bool), np.ones(2, dtype=bool), mr, 3,
                         max_leaves=2)
    feature, surr_f, surr_same = arrays.feature, arrays.surr_feature, arrays.surr_same
    assert feature[0] == 0
    assert list(surr_f[0, :2]) == [2, 1] and list(surr_same[0, :2]) == [False, True]


# ---- training ---------------------------------------------------------------------------------------------------

def toy(n, rate, seed):
    """Words decide the label ('x' copies the previous one); the next word is a redundant view of the sequence.
    Each word is missing (None, at both places that show it) with probability ``rate``."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        words = list(rng.choice(list("abcx"), size=rng.integers(2, 8)))
        gone = rng.random(len(words)) < rate
        labels, prev = [], "A"
        for w in words:
            prev = {"a": "A", "b": "B", "c": "C"}.get(w, prev)
            labels.append(prev)
        X.append([{"w": None if gone[i] else w,
                   "next": "#" if i + 1 == len(words) else (None if gone[i + 1] else words[i + 1])}
                  for i, w in enumerate(words)])
        y.append(labels)
    return X, y


@pytest.mark.parametrize("strategy, shared", [(s, False) for s in missing.STRATEGIES] + [
    (s, True) for s in missing.ENGINE_STRATEGIES])
def test_every_strategy_learns_with_missing_words_and_survives_serialization(strategy, shared):
    X, y = toy(150, 0.2, 0)
    Xt, yt = toy(100, 0.2, 1)
    model = paper_crf(n_rounds=8, max_leaves=8, missing=strategy, n_threads=1, decode="marginal",
                    shared_trees=shared).fit(X, y)
    assert model.score(Xt, yt) > 0.8
    again = paper_crf().from_bytes(model.to_bytes())
    assert again.params.missing == strategy
    assert again.predict_marginals(Xt) == model.predict_marginals(Xt)


def test_without_missing_values_every_strategy_predicts_alike():
    X, y = toy(80, 0.0, 0)
    Xt, _ = toy(60, 0.3, 1)
    Xt = [[{k: v if v is not None else "a" for k, v in p.items()} for p in seq] for seq in Xt]
    preds = [paper_crf(n_rounds=4, max_leaves=6, missing=m, n_threads=1).fit(X, y).predict_marginals(Xt)
             for m in missing.STRATEGIES]
    for other in preds[1:]:
        assert other == preds[0]


@pytest.mark.parametrize("strategy, loss, shared, leaves", [
    ("instance_weighting", "crf", False, {}), ("surrogate", "crf", False, {}), ("instance_weighting", "rank", False, {}),
    ("instance_weighting", "crf", True, {}), ("surrogate", "crf", True, {}), ("instance_weighting", "rank", True, {}),
    ("instance_weighting", "crf", False, {"leaf_values": "position_mean", "l1": 0.1}),
    ("surrogate", "crf", False, {"leaf_values": "newton"}),
    ("instance_weighting", "crf", True, {"leaf_values": "position_mean", "l1": 0.1})])
def test_cached_training_potentials_equal_a_fresh_evaluation(strategy, loss, shared, leaves):
    """Also under the rank loss, whose line search moves the cache several times a round, with shared trees,
    whose leaf vectors come from the walks' cells, and with leaf values other than the grower's mean (from the
    walks' cells, per-label trees too)."""
    X, y = toy(80, 0.3, 2)
    model = paper_crf(n_rounds=0, missing=strategy).fit(X, y)
    indptr, indices, starts, mr = model._rows(X)
    assert mr.any
    trainer = B.Trainer(indptr, indices, len(model.features.names), model.crf_.label_ids(y), starts, model.allowed,
                        paper_params(max_leaves=6, n_threads=1, missing=strategy, loss=loss, shared_trees=shared,
                                     **leaves),
                        missing_rows=mr)
    ens = B.Ensemble(4, 3, missing.N_SURROGATES if strategy == "surrogate" else 0, shared=shared)
    for _ in range(3):
        trainer.fit_round(ens)
    P = B.potentials_to_scaled(ens.potentials(indptr, indices, 1, mr), model.allowed, starts)
    E = dense(P)
    cached = np.log(np.maximum(dense(trainer.P), 1e-30)) + trainer.P.c[:, None, None]
    fresh = np.log(np.maximum(E, 1e-30)) + P.c[:, None, None]
    assert np.allclose(cached[E > 0], fresh[E > 0], atol=1e-4)


def test_imputation_stands_in_the_most_common_training_value():
    X = [[{"w": "a"}, {"w": "a"}, {"w": "b"}, {"w": None}], [{"w": "b"}, {"w": "a"}]]
    y = [["A", "A", "B", "A"], ["B", "A"]]
    model = paper_crf(n_rounds=3, max_leaves=4, missing="imputation").fit(X, y)
    assert model.features.names[model.features.impute[model.features.var_ids["w"]]] == "w=a"
    assert model.predict_marginals([[{"w": None}]]) == model.predict_marginals([[{"w": "a"}]])


def test_indicator_features_mark_the_missing_variable():
    X = [[{"w": "a"}, {"w": None}, {"w": "b"}], [{"w": None}, {"w": "a"}]]
    y = [["A", "M", "B"], ["M", "A"]]
    model = paper_crf(n_rounds=5, max_leaves=4, missing="indicator").fit(X, y)
    assert "w missing" in model.features.ids
    assert model.predict([[{"w": None}, {"w": "a"}]]) == [["M", "A"]]


# ---- validation -------------------------------------------------------------------------------------------------

def test_bad_strategy_is_refused_by_name():
    with pytest.raises(ValueError, match="'missing'.*'guess'"):
        paper_crf(missing="guess")


def test_corrupt_surrogates_and_tables_are_refused():
    X, y = toy(40, 0.2, 0)
    model = paper_crf(n_rounds=2, max_leaves=4, missing="surrogate").fit(X, y)
    msg = serialize.loads("model", model.to_bytes())
    bad = dict(msg, ensemble=dict(msg["ensemble"], surr_feature=np.full_like(msg["ensemble"]["surr_feature"], 10 ** 6)))
    with pytest.raises(ValueError, match="surrogate"):
        paper_crf().from_bytes(serialize.dumps("model", bad))
    bad = dict(msg, features=dict(msg["features"], impute=np.full_like(msg["features"]["impute"], 10 ** 6)))
    with pytest.raises(ValueError, match="impute"):
        paper_crf().from_bytes(serialize.dumps("model", bad))
    bad = dict(msg, fill=np.full_like(msg["fill"], 10 ** 6))
    with pytest.raises(ValueError, match="E112"):
        paper_crf().from_bytes(serialize.dumps("model", bad))


def test_version_1_models_still_load():
    """A file written before missing values existed: no surrogates, no tables, no 'missing' setting."""
    X, y = toy(40, 0.0, 0)
    model = paper_crf(n_rounds=2, max_leaves=4).fit(X, y)
    new = serialize.loads("model", model.to_bytes())
    msg = {**new["settings"], "params": new["params"], "classes": new["labels"], "features": new["features"]["names"],
           "allowed": new["allowed"], "ensemble": new["ensemble"], "best_round": new["rounds"]}  # version 1's layout
    del msg["params"]["missing"]
    import srsly
    old = srsly.msgpack_dumps({"format": "spacy_treecrf", "kind": "TreeCRF", "version": 1,
                               "payload": serialize._encode(msg)})
    again = paper_crf().from_bytes(old)
    assert again.params.missing == "instance_weighting"
    assert again.predict(X) == model.predict(X)


def test_imputation_counts_only_positions_where_the_variable_has_a_value():
    """A key left out of a position (a window offset outside the word) is no vote for 'no value'."""
    X = [[{"w": "a", "x": True}, {"w": "b"}, {"w": None}], [{"w": "a"}, {"x": False}, {"x": False}]]
    y = [["A", "B", "A"], ["A", "B", "B"]]
    model = paper_crf(n_rounds=1, max_leaves=2, missing="imputation").fit(X, y)
    f = model.features
    assert f.names[f.impute[f.var_ids["w"]]] == "w=a"
    assert f.impute[f.var_ids["x"]] == -1  # False twice, True once


# ---- the featurizer and the spaCy component ---------------------------------------------------------------------

def window_featurizer(**options):
    base = dict(window=1, prefix=1, suffix=0, regexes=False, shape=False, flags=False, doc_context=False)
    return plain_featurizer(**{**base, **options})


def missing_names(featurizer, docs):
    indptr, indices, known = featurizer.missing_rows(docs)
    # the featurizer's own call finds the same from its single pass over the docs
    *_, (indptr2, indices2, known2) = featurizer(docs, with_missing=True)
    assert indptr.tolist() == indptr2.tolist() and indices.tolist() == indices2.tolist()
    assert known.tolist() == known2.tolist()
    names = featurizer.variable_names()
    return [sorted(names[v] for v in indices[a:b]) for a, b in zip(indptr[:-1], indptr[1:])]


def test_a_missing_token_makes_every_variable_it_feeds_missing_at_every_offset():
    import spacy
    from spacy.tokens import Doc
    vocab = spacy.blank("en").vocab
    text_hook = window_featurizer(missing_text="?")
    text_hook.initialize([Doc(vocab, words=["a", "b", "c"])])
    doc = Doc(vocab, words=["a", "?", "b", "c"])
    fams = ["w=", "lw=", "p1="]
    assert missing_names(text_hook, [doc]) == [sorted(f + "@+1" for f in fams), sorted(f + "@0" for f in fams),
                                                sorted(f + "@-1" for f in fams), []]
    marked = Doc(vocab, words=["a", "x", "b", "c"])
    marked[1]._.treecrf_missing = True
    extension = window_featurizer()
    extension.initialize([Doc(vocab, words=["a", "b", "c"])])
    assert missing_names(extension, [marked]) == missing_names(text_hook, [doc])
    assert extension([marked])[1].tolist() == text_hook([doc])[1].tolist()  # no tests of its own either


def test_an_unset_attribute_is_missing_but_an_unset_extension_is_not():
    import spacy
    from spacy.tokens import Doc
    vocab = spacy.blank("en").vocab
    f = window_featurizer(attrs=["tag_"], word=False, lower=False, prefix=0)
    f.initialize([Doc(vocab, words=["a", "b"], tags=["X", "Y"])])
    doc = Doc(vocab, words=["a", "b", "c"], tags=["X", "", "Y"])
    assert missing_names(f, [doc]) == [["a:tag_=@+1"], ["a:tag_=@0"], ["a:tag_=@-1"]]
    names = f.variable_names()
    cols = f.feature_names()
    for col, var in enumerate(f.feature_variables()):
        assert (var < 0) == cols[col].startswith("pad@")
        if var >= 0:
            assert names[var] == cols[col].split("=")[0] + "=@" + cols[col].split("@")[-1]


def tagged_examples(nlp, n, rate, seed):
    from spacy.tokens import Doc
    from spacy.training import Example
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        words = [str(w) for w in rng.choice(list("abcx"), size=rng.integers(2, 8))]
        labels, prev = [], "A"
        for w in words:
            prev = {"a": "A", "b": "B", "c": "C"}.get(w, prev)
            labels.append(prev)
        predicted = Doc(nlp.vocab, words=words)
        for token, gone in zip(predicted, rng.random(len(words)) < rate):
            token._.treecrf_missing = bool(gone)
        out.append(Example(predicted, Doc(nlp.vocab, words=words, tags=labels)))
    return out


@pytest.mark.parametrize("strategy", missing.STRATEGIES)
def test_the_component_trains_and_reloads_with_every_strategy(strategy):
    import spacy
    nlp = spacy.blank("en")
    features = {"@misc": "spacy_treecrf.window_features.v1", "window": 1, "prefix": 0, "suffix": 0}
    crf = nlp.add_pipe("treecrf", config=component_config({"target": "tag", "missing": strategy, "n_threads": 1,
                                                           "max_leaves": 8, "features": features}))
    train = tagged_examples(nlp, 120, 0.2, 0)
    test = tagged_examples(nlp, 60, 0.2, 1)
    nlp.initialize(lambda: train)
    for _ in range(6):
        crf.update(train)
        crf.finish_update()
    scores = nlp.evaluate(test)
    assert scores["tag_acc"] > 0.75
    nlp2 = spacy.blank("en")
    crf2 = nlp2.add_pipe("treecrf", config=component_config({"target": "tag", "features": features}))
    if strategy == "instance_weighting":
        crf2.from_bytes(crf.to_bytes())
    else:  # the strategy is part of the trees: it replaces the default one, with a warning
        with pytest.warns(UserWarning, match="W002"):
            crf2.from_bytes(crf.to_bytes())
    assert crf2.params.missing == strategy
    docs = [eg.predicted for eg in test[:10]]
    assert np.array_equal(crf.predict(docs)["gamma"], crf2.predict(docs)["gamma"])


def test_a_saved_featurizer_whose_atoms_fit_no_test_family_is_refused():
    """Every column must map to a variable: an atom of no configured family is a corrupt state."""
    import spacy
    from spacy.tokens import Doc
    f = window_featurizer()
    f.initialize([Doc(spacy.blank("en").vocab, words=["a", "b"])])
    state = f.to_dict()
    state["atoms"][0] = "33=a"
    with pytest.raises(ValueError, match="'33=a' belongs to no test family"):
        window_featurizer().from_dict(state)


@pytest.mark.parametrize("shared", [False, True])
def test_leaf_values_other_than_the_mean_apply_with_missing_inputs(shared):
    """position_mean and l1 give other leaves than the grower's mean with values missing too (they come from the
    walks' weighted cells), and each round still raises the training likelihood."""
    X, y = toy(80, 0.3, 2)
    models = {mode: paper_crf(n_rounds=4, max_leaves=6, shared_trees=shared, leaf_values=mode, l1=l1).fit(X, y)
              for mode, l1 in (("mean", 0.0), ("position_mean", 0.1))}
    values = {mode: dense_vectors(m.ensemble.forest()) if shared else m.ensemble.arrays()["value"]
              for mode, m in models.items()}
    assert not np.array_equal(values["mean"], values["position_mean"])
    losses = [h["train_loss_before"] for h in models["position_mean"].history_]
    assert all(b < a for a, b in zip(losses, losses[1:]))


def test_picked_sequences_are_the_parts_sequences_in_the_order_picked():
    """Against lists of rows: sequences of two training sets (rows, labels, missing variables; empty sequences
    and rows among them) picked in any order, some twice, some not at all."""
    rng = np.random.default_rng(0)

    def training_set(n_seqs):
        lengths = rng.integers(0, 4, size=n_seqs)
        T = int(lengths.sum())
        rows = [sorted(rng.choice(9, size=rng.integers(0, 4), replace=False).tolist()) for _ in range(T)]
        gone = [sorted(rng.choice(3, size=rng.integers(0, 2), replace=False).tolist()) for _ in range(T)]
        y = rng.integers(-1, 3, size=T).astype(np.int32)
        starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return B.TrainingSet(*csr(rows, T), y, starts, MissingRows(*csr(gone, T), FVAR, 3)), rows, gone

    parts = [training_set(5), training_set(4)]
    seqs = []  # per sequence of the parts in order: its (rows, labels, missing) lists
    for part, rows, gone in parts:
        for a, b in zip(part.seq_starts[:-1], part.seq_starts[1:]):
            seqs.append((rows[a:b], part.y[a:b].tolist(), gone[a:b]))
    pick = [8, 0, 3, 3, 6, 1]
    got = B.picked_sequences([part for part, _, _ in parts], pick)
    rows = [row for q in pick for row in seqs[q][0]]
    assert np.array_equal(got.indptr, csr(rows, len(rows))[0]) and np.array_equal(got.indices, csr(rows, len(rows))[1])
    assert got.y.tolist() == [label for q in pick for label in seqs[q][1]]
    assert got.seq_starts.tolist() == np.cumsum([0] + [len(seqs[q][0]) for q in pick]).tolist()
    gone = [row for q in pick for row in seqs[q][2]]
    assert got.missing_rows.indptr.tolist() == csr(gone, len(gone))[0].tolist()
    assert got.missing_rows.indices.tolist() == csr(gone, len(gone))[1].tolist()
    assert got.missing_rows.n_vars == 3 and np.array_equal(got.missing_rows.feature_var, FVAR)
