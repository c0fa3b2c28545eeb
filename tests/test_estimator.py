"""The public estimator: fitting, decoding, partial labels, masks, serialization and determinism."""
import re

import numpy as np
import pytest

from brute import dense
from conftest import paper_crf, paper_params
from spacy_treecrf import TreeCRF
from spacy_treecrf import estimator
from spacy_treecrf.engine.transitions import bio_allowed


def toy_data(n=60, seed=0):
    """Words whose identity decides the label, except 'x' whose label copies the previous one."""
    rng = np.random.default_rng(seed)
    vocab = {"a": "A", "b": "B", "c": "C"}
    X, y = [], []
    for _ in range(n):
        words = list(rng.choice(["a", "b", "c", "x"], size=rng.integers(1, 8)))
        labels, prev = [], "A"
        for w in words:
            prev = vocab.get(w, prev)
            labels.append(prev)
        X.append([{"w": w, "bias": 1} for w in words])
        y.append(labels)
    return X, y


def test_auto_shrinkage_follows_the_training_positions(monkeypatch):
    from spacy_treecrf.engine import booster, settings
    assert [booster.resolved_shrinkage("auto", n) for n in (1, 15000, 30000, 150000, 10 ** 7)] == [10.0, 10.0, 5.0,
                                                                                                   1.0, 1.0]
    assert booster.resolved_shrinkage(3, 10 ** 7) == 3.0 and TreeCRF().shrinkage == "auto"
    X, y = toy_data()

    def leaf_values(shrinkage):
        model = paper_crf(n_rounds=3, max_leaves=8, shrinkage=shrinkage, early_stopping=False).fit(X, y)
        return model.ensemble.nodes.value
    assert np.array_equal(leaf_values("auto"), leaf_values(10.0))  # a few hundred positions: lambda 10
    monkeypatch.setattr(settings, "AUTO_SHRINKAGE_POSITIONS", 7 * sum(map(len, y)))  # lambda 7 on this data
    assert np.array_equal(leaf_values("auto"), leaf_values(7.0))
    assert not np.array_equal(leaf_values(7.0), leaf_values(10.0))


def test_auto_max_leaves_follows_the_training_positions(monkeypatch):
    from spacy_treecrf.engine import booster, settings
    assert [booster.resolved_max_leaves("auto", n) for n in (1, 50_000, 100_000, 150_000, 10 ** 7)] == [
        1000, 1000, 2000, 3000, 3000]
    assert booster.resolved_max_leaves(7, 10 ** 7) == 7 and TreeCRF().max_leaves == "auto"
    for bad, want in (("big", 'an integer or "auto"'), (1.5, 'an integer or "auto"'), (1, "an integer in [2,")):
        with pytest.raises(ValueError, match=re.escape(want)):
            TreeCRF(max_leaves=bad).fit(*toy_data(5))
    X, y = toy_data()
    T = sum(map(len, y))

    def trees(max_leaves):
        model = paper_crf(n_rounds=3, max_leaves=max_leaves, early_stopping=False).fit(X, y)
        return model.ensemble.nodes
    monkeypatch.setattr(settings, "AUTO_LEAVES_RANGE", (2, 6))
    monkeypatch.setattr(settings, "AUTO_LEAF_POSITIONS", T // 4)  # 4 leaves on this data
    assert all(np.array_equal(a, b) for a, b in zip(trees("auto"), trees(4)))
    monkeypatch.setattr(settings, "AUTO_LEAF_POSITIONS", 1)  # T leaves, cut to the range's 6
    assert all(np.array_equal(a, b) for a, b in zip(trees("auto"), trees(6)))
    assert not np.array_equal(trees(4).kind, trees(6).kind)


def test_fit_predict_learns_transitions_through_previous_label_splits():
    X, y = toy_data()
    model = paper_crf(n_rounds=15, max_leaves=8, shrinkage=1.0).fit(X, y)
    Xt, yt = toy_data(40, seed=1)
    assert model.score(Xt, yt) == 1.0
    assert model.classes_ == ["A", "B", "C"]


def test_marginals_sum_to_one_and_agree_with_marginal_decoding():
    X, y = toy_data()
    model = paper_crf(n_rounds=5, max_leaves=8, decode="marginal").fit(X, y)
    margs = model.predict_marginals(X[:10])
    pred = model.predict(X[:10])
    for seq_m, seq_p in zip(margs, pred):
        for m, p in zip(seq_m, seq_p):
            assert abs(sum(m.values()) - 1) < 1e-6
            assert max(m, key=m.get) == p


def test_iterable_positions_and_string_values_are_features():
    X = [[["w=a"], ["w=b"]], [["w=b"], ["w=a"]]]
    Xd = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "a"}]]
    y = [["A", "B"], ["B", "A"]]
    a = paper_crf(n_rounds=3, max_leaves=4).fit(X, y)
    b = paper_crf(n_rounds=3, max_leaves=4).fit(Xd, y)
    assert a.predict(X) == b.predict(Xd) == y


def test_bio_mask_is_honoured_by_viterbi_even_against_the_evidence():
    """'i' is always I-X in training (always after B-X: IOB1 gold is refused), yet never opens a sequence or
    follows O in a prediction."""
    X = [[{"w": "b"}, {"w": "i"}], [{"w": "o"}], [{"w": "b"}, {"w": "i"}, {"w": "i"}]] * 5
    y = [["B-X", "I-X"], ["O"], ["B-X", "I-X", "I-X"]] * 5
    model = paper_crf(n_rounds=5, max_leaves=4, allowed_transitions="bio").fit(X, y)
    for seq in model.predict([[{"w": "i"}], [{"w": "o"}, {"w": "i"}]]):
        for prev, cur in zip([None] + seq[:-1], seq):
            if cur.startswith("I-"):
                assert prev in ("B-X", "I-X")


def test_bio_allowed_mask():
    mask = bio_allowed(["B-PER", "I-PER", "O"])
    assert not mask[0, 1]  # no I- at the start
    assert mask[1, 1] and mask[2, 1] and not mask[3, 1]  # I-PER after B-PER / I-PER, not after O


def test_unknown_labels_are_summed_over_not_taken_as_a_label():
    X, y = toy_data()
    partial = [[None if i % 3 == 0 else lab for i, lab in enumerate(seq)] for seq in y]
    partial.append([None, None])
    X = X + [[{"w": "a"}, {"w": "b"}]]
    model = paper_crf(n_rounds=15, max_leaves=8, shrinkage=1.0).fit(X, partial)
    Xt, yt = toy_data(40, seed=1)
    assert model.score(Xt, yt) >= 0.95
    assert None not in model.classes_


def test_dev_data_keeps_the_best_round_and_records_history():
    X, y = toy_data()
    Xd, yd = toy_data(30, seed=2)
    model = paper_crf(n_rounds=12, max_leaves=8, patience=3).fit(X, y, Xd, yd)
    assert 1 <= model.best_round_ <= len(model.history_) <= 12
    accs = [h["dev_accuracy"] for h in model.history_]
    assert accs[model.best_round_ - 1] == max(accs)
    assert model.ensemble.n_trees == model.best_round_ * 3
    assert model.score(Xd, yd) == pytest.approx(max(accs))


def test_patience_none_stops_30_rounds_after_the_best_on_small_validation_data_else_10(monkeypatch):
    """A validation set of fewer than SMALL_DEV positions is noisy from round to round: fit waits 30 rounds for a
    better one, else 10."""
    from spacy_treecrf import model as model_layer
    X, y = toy_data()
    Xd, yd = toy_data(30, seed=2)
    model = paper_crf(n_rounds=80, max_leaves=8, shrinkage=1.0).fit(X, y, Xd, yd)
    assert len(model.history_) == model.best_round_ + 30 < 80
    monkeypatch.setattr(model_layer, "SMALL_DEV", sum(map(len, yd)))  # the same data counts as large
    model = paper_crf(n_rounds=80, max_leaves=8, shrinkage=1.0).fit(X, y, Xd, yd)
    assert len(model.history_) == model.best_round_ + 10 < 80


def test_early_stopping_holds_out_a_fraction_of_the_sequences_and_trains_on_the_rest():
    """early_stopping=True without dev data: the same model as fitting the other sequences with the held-out ones
    as dev data; the hold-out is validation_fraction of the sequences, drawn with random_state."""
    X, y = toy_data(60)
    for i, seq in enumerate(X):
        for position in seq:
            position["seq"] = i  # so that which sequences a model was trained on shows in its features
    settings = {"n_rounds": 30, "max_leaves": 8, "patience": 2, "random_state": 3, "validation_fraction": 0.2}
    model = paper_crf(early_stopping=True, **settings).fit(X, y)
    Xa, ya, Xv, yv = estimator.held_out(paper_crf(early_stopping=True, **settings), X, y)
    assert len(Xv) == 12 and len(Xa) == 48
    assert sorted(p["seq"] for p in (seq[0] for seq in Xa + Xv)) == list(range(60))
    explicit = paper_crf(early_stopping=False, **settings).fit(Xa, ya, Xv, yv)
    assert model.history_ and all("dev_accuracy" in h for h in model.history_)
    assert [h["dev_accuracy"] for h in model.history_] == [h["dev_accuracy"] for h in explicit.history_]
    assert model.best_round_ == explicit.best_round_ and model.features.names == explicit.features.names
    for key, value in model.ensemble.arrays().items():
        np.testing.assert_array_equal(value, explicit.ensemble.arrays()[key], err_msg=key)
    assert not any(name == f"seq={p['seq']}" for seq in Xv for p in seq for name in model.features.names)


def test_early_stopping_auto_holds_out_sequences_only_where_they_hold_a_thousand_positions():
    X, y = toy_data(60)
    small = paper_crf(n_rounds=3, max_leaves=4).fit(X, y)
    assert len(small.history_) == 3 and "dev_accuracy" not in small.history_[0]
    rng = np.random.default_rng(0)
    for n, held_out in ((100, True), (94, False)):  # 10 or 9 validation sequences of 100 positions
        words = rng.choice(["a", "b"], size=(n, 100))
        big = paper_crf(n_rounds=3, max_leaves=4).fit([[{"w": w} for w in row] for row in words],
                                                    [[w.upper() for w in row] for row in words])
        assert ("dev_accuracy" in big.history_[0]) == held_out


@pytest.mark.parametrize("settings,code", [({"early_stopping": "yes"}, "E172"), ({"early_stopping": 1}, "E172"),
                                           ({"validation_fraction": 0.0}, "E173"),
                                           ({"validation_fraction": 1.0}, "E173"),
                                           ({"validation_fraction": True}, "E173")])
def test_early_stopping_settings_are_checked(settings, code):
    with pytest.raises(ValueError, match=code):
        paper_crf(**settings)


def test_early_stopping_on_a_single_sequence_is_a_clear_error_and_round_trips():
    with pytest.raises(ValueError, match="E174.*2 sequences"):
        paper_crf(early_stopping=True).fit([[{"w": "a"}]], [["A"]])
    X, y = toy_data()
    model = paper_crf(n_rounds=2, max_leaves=4, early_stopping=True, validation_fraction=0.25).fit(X, y)
    loaded = paper_crf().from_bytes(model.to_bytes())
    assert (loaded.early_stopping, loaded.validation_fraction) == (True, 0.25)


def test_round_trip_bytes_gives_identical_predictions_and_bytes():
    X, y = toy_data()
    model = paper_crf(n_rounds=4, max_leaves=8, decode="marginal").fit(X, y)
    data = model.to_bytes()
    loaded = paper_crf().from_bytes(data)
    assert loaded.predict(X) == model.predict(X)
    assert loaded.to_bytes() == data


@pytest.mark.parametrize("mangle", [lambda b: b[: len(b) // 2], lambda b: b"garbage", lambda b: b[:-1]])
def test_corrupt_bytes_raise_value_error(mangle):
    X, y = toy_data()
    data = paper_crf(n_rounds=2, max_leaves=4).fit(X, y).to_bytes()
    with pytest.raises(ValueError):
        paper_crf().from_bytes(mangle(data))


@pytest.mark.parametrize("sampling", [dict(subsample=0.5), dict(colsample=0.5)])
def test_same_seed_same_bytes_and_sampling_seed_matters(sampling):
    X, y = toy_data(200)
    kw = dict(n_rounds=4, max_leaves=8, n_threads=2, **sampling)
    a = paper_crf(random_state=1, **kw).fit(X, y).to_bytes()
    b = paper_crf(random_state=1, **kw).fit(X, y).to_bytes()
    c = paper_crf(random_state=2, **kw).fit(X, y).to_bytes()
    assert a == b
    assert a != c


def test_feature_rows_fast_path_gives_the_general_paths_rows():
    """At prediction, dicts of string keys and string or bool values are looked up item by item in the table of
    known names (a loaded index builds it from its names); any other position sends the whole input down the
    general path. The rows are the same either way."""
    from spacy_treecrf.estimator import FeatureIndex

    train = [[{"w": "a", "p": "x"}, {"w": "b", "cap": True}, {"w=1": "c", "w": "1=c"}, {1: "d", "1": "d"}],
             [["bare"]]]
    fast = [[{"w": "a", "p": "x"}, {"w": "b", "p": "y"}, {"w": "1=c"}, {"1": "d"}, {"w": "b", "cap": True},
             {"w": "a", "cap": False}, {"w": "zz", "new": True}, {"bare": True}, {}], [{"p": "x"}, {"cap": 1}]]
    general = [[{"w=1": "c"}], [{1: "d"}], [{"w": "a", "p": None}], [{"w": ["a"], "p": "x"}], [["w=a", "p=x"]],
               [{"cap": 2}]]
    index = FeatureIndex()
    index.rows(train, grow=True)
    loaded = FeatureIndex(index.names, index.variables, index.feature_var)
    assert loaded._known_rows(fast) is not None
    assert all(loaded._known_rows([seq]) is None for seq in general)
    mixed = loaded.rows(fast + general, grow=False)  # one general position: all of it takes the general path
    quick = loaded.rows(fast, grow=False)
    n = len(quick[0])
    assert np.array_equal(quick[0], mixed[0][:n]) and np.array_equal(quick[1], mixed[1][:quick[0][-1]])
    assert np.array_equal(quick[2], mixed[2][:len(fast) + 1])
    assert not quick[3].any and np.array_equal(quick[3].indptr, np.zeros(n, dtype=np.int64))

    def names(rows):
        indptr, indices = rows[0], rows[1]
        return [[index.names[j] for j in indices[indptr[t]:indptr[t + 1]]] for t in range(len(indptr) - 1)]

    assert names(quick) == [["w=a", "p=x"], ["w=b"], ["w=1=c"], ["1=d"], ["w=b", "cap"], ["w=a"], [], ["bare"],
                            [], ["p=x"], ["cap"]]
    assert names(mixed)[n - 1:] == [["w=1=c"], ["1=d"], ["w=a"], ["p=x"], ["w=a", "p=x"], ["cap"]]
    assert mixed[3].any and mixed[3].rows().tolist() == [n + 1]  # the missing 'p'


def test_feature_rows_fast_path_keeps_each_threads_missed_items_apart():
    """The fast path logs the items its table misses per calling thread: threads reading inputs at once, one
    with only unknown strings (dropped) and one with an unknown flag's number (the general path's), each get the
    rows a lone call gives."""
    from concurrent.futures import ThreadPoolExecutor
    from spacy_treecrf.estimator import FeatureIndex

    index = FeatureIndex()
    index.rows([[{"w": "a", "cap": True}, {"w": "b"}]], grow=True)
    unknown = [[{"w": f"u{i}", "p": f"v{i}"} for i in range(300)]]
    general = [[{"w": f"u{i}"} for i in range(300)] + [{"cap": 2}]]
    alone = [index._known_rows(unknown), index._known_rows(general)]
    assert alone[0] is not None and alone[1] is None
    with ThreadPoolExecutor(2) as pool:
        for _ in range(50):
            both = list(pool.map(index._known_rows, [unknown, general]))
            assert both[1] is None and all(np.array_equal(a, b) for a, b in zip(both[0][:3], alone[0][:3]))


def grown_as_the_general_path(*fits):
    """A FeatureIndex grown on each of ``fits`` in turn, after checking that the fast path gave what the general
    path's loop gives, item by item: the same names, variables and ids, rows and per-variable known counts."""
    from spacy_treecrf.estimator import FeatureIndex

    fast, general = FeatureIndex(), FeatureIndex()
    general._grown_rows = lambda X: None  # the general path's loop, item by item
    for X in fits:
        quick, slow = fast.rows(X, grow=True), general.rows(X, grow=True)
        assert (fast.names, fast.variables, fast.feature_var) == (general.names, general.variables,
                                                                  general.feature_var)
        for a, b in zip(quick[:3], slow[:3]):
            assert np.array_equal(a, b)
        assert not quick[3].any and np.array_equal(quick[3].known, slow[3].known)
    return fast


def test_growing_fast_path_gives_the_general_paths_index_and_rows():
    """While growing, dicts of string keys without '=' and string or bool values take _grown_rows: the same names,
    variables and ids in the same order as the general path, the same rows and the same per-variable counts of
    known values (a False value counts, though it gives no feature), on a first fit and on a second one that
    meets known and new names."""
    from spacy_treecrf.estimator import FeatureIndex

    first = [[{"cap": False, "w": "a"}, {"w": "b", "cap": True, "p": np.str_("x")}, {}, {"w": "a", "cap": False}],
             [], [{"p": "x", "q": "y"}, {"w": "a"}]]
    second = [[{"w": "c", "r": False}, {"p": "x", "cap": True}], [{"r": True, "w": "a", "s": "z"}]]
    fast = grown_as_the_general_path(first, second)
    assert fast.variables == ["cap", "w", "p", "q", "r", "s"]
    assert fast.rows(second, grow=True)[3].known.tolist() == [1, 2, 1, 0, 2, 1]  # cap w p q r s
    for general_only in ([[{"w=1": "c"}]], [[{1: "d"}]], [[{"w": 1.5}]], [[{"w": None}]], [[["w=a"]]]):
        assert FeatureIndex()._grown_rows(general_only) is None


def test_a_key_whose_numbers_are_0_or_1_is_a_flag_and_takes_the_fast_paths():
    """sklearn-crfsuite's way of saying "present" ("bias": 1.0, {"-1=a": 1}) is a present / absent test, not a
    numeric column: the feature 'key' where the value is 1, none where it is 0, as True and False give them; a key
    with another number is a numeric column. Growing and predicting take the fast paths, with the general path's
    names, variables, ids, rows and known counts, keys with '=' included."""
    from spacy_treecrf.estimator import FeatureIndex

    first = [[{"bias": 1.0, "w": "a", "-1=x": 1, "cap": True}, {"bias": 1.0, "w": "b", "-1=a": 1, "cap": 1}],
             [{"bias": 1, "w": "a", "cap": False, "n": 0}, {"bias": 1.0, "+1=z": True, "cap": 0, "n": 1}]]
    second = [[{"bias": 1.0, "w": "c", "-1=y": 1, "new": 0}, {"cap": True, "flag": 1.0, "w": "a"}]]
    fast = grown_as_the_general_path(first, second)
    assert fast.numeric_keys == [] and {"bias", "-1=x", "-1=a", "cap", "n", "+1=z", "flag", "new"} <= set(fast.names)
    assert fast._grown_rows(first) is not None
    X = [[{"bias": 1.0, "-1=x": 1, "cap": 0, "n": 1.0, "w": "zz", "-1=q": 1}, {"+1=z": True, "cap": False, "new": 1}]]
    quick = fast._known_rows(X)
    assert quick is not None
    slow = fast.rows(X + [[["bias"]]], grow=False)
    n = len(quick[0])
    assert np.array_equal(quick[0], slow[0][:n]) and np.array_equal(quick[1], slow[1][:quick[0][-1]])
    names = [[fast.names[j] for j in quick[1][a:b]] for a, b in zip(quick[0][:-1], quick[0][1:])]
    assert [sorted(row) for row in names] == [["-1=x", "bias", "n"], ["+1=z", "new"]]
    assert fast._known_rows([[{"cap": 2.5}]]) is None  # a known flag's other number is the flag: rows() reads it
    assert fast._known_rows([[{"-1=x": float("nan")}]]) is None  # missing
    numeric = FeatureIndex()
    numeric.rows([[{"x": 0.5, "bias": 1.0}, {"x": 2.0, "bias": 1.0}]], grow=True)
    assert numeric.numeric_keys == ["x"] and "bias" in numeric.ids
    quick = numeric._known_rows([[{"x": 1.0, "bias": 1.0}, {"x": 3.0, "bias": 0.0}]])
    assert [sorted(numeric.names[j] for j in quick[1][a:b]) for a, b in zip(quick[0][:-1], quick[0][1:])] == [
        ["bias", "x <= 1.25"], ["x present"]]


def test_feature_rows_fast_path_reads_numbers_into_their_columns():
    """A model with numeric columns: its numbers take the fast path into their bins (1 among them, though it
    hashes as True), exactly as the general path reads them; NaN (missing) takes the general path."""
    from spacy_treecrf.estimator import FeatureIndex

    index = FeatureIndex()
    index.rows([[{"x": v, "cap": v > 1, "w": "a"} for v in (0.5, 1.0, 2.0, 3.5, -1.0)]], grow=True)
    assert index.numeric_keys == ["x"]
    X = [[{"x": 1, "cap": True}, {"x": 2.7, "w": "a"}, {"x": np.float32(-3.0)}, {"x": 9, "cap": False}]]
    quick = index._known_rows(X)
    assert quick is not None
    general = index.rows(X + [[["w=a"]]], grow=False)  # a list of names sends all of it down the general path
    n = len(quick[0])
    assert np.array_equal(quick[0], general[0][:n]) and np.array_equal(quick[1], general[1][:quick[0][-1]])
    assert [[index.names[j] for j in quick[1][a:b]] for a, b in zip(quick[0][:-1], quick[0][1:])] == [
        ["cap", "x <= 1.5"], ["w=a", "x <= 2.75"], ["x <= -0.25"], ["x present"]]
    assert index._known_rows([[{"x": float("nan")}]]) is None


@pytest.mark.parametrize("leaf_values", ["mean", "newton", "position_mean"])
def test_subsampling_and_trimming_keep_cached_potentials_exact(leaf_values):
    """Positions a tree was not fitted on still get its values, so the cache equals a fresh evaluation."""
    from spacy_treecrf.engine import booster as B

    X, y = toy_data(80)
    model = paper_crf(n_rounds=0).fit(X, y)
    indptr, indices, starts, _ = model.features.rows(X, grow=False)
    params = paper_params(max_leaves=6, subsample=0.6, trim=0.05, leaf_values=leaf_values)
    trainer = B.Trainer(indptr, indices, len(model.features.names), model.crf_.label_ids(y), starts, model.allowed,
                        params)
    ens = B.Ensemble(4, 3)
    for _ in range(4):
        trainer.fit_round(ens)
    P = B.potentials_to_scaled(ens.potentials(indptr, indices), model.allowed, starts)
    E = dense(P)
    cached = np.log(np.maximum(dense(trainer.P), 1e-30)) + trainer.P.c[:, None, None]
    fresh = np.log(np.maximum(E, 1e-30)) + P.c[:, None, None]
    assert np.allclose(cached[E > 0], fresh[E > 0], atol=1e-4)


@pytest.mark.parametrize("threads,loss", [(1, "crf"), (2, "crf"), (2, "rank")])
def test_fit_round_runs_beside_once_its_trees_are_added_and_raises_its_error(threads, loss):
    """What runs beside a round's last step (the estimator's validation scores) sees the round's trees, leaves the
    round's result as without it, and its error is the round's."""
    from spacy_treecrf.engine import booster as B

    X, y = toy_data(80)
    model = paper_crf(n_rounds=0).fit(X, y)
    indptr, indices, starts, _ = model.features.rows(X, grow=False)

    def trainer():
        return B.Trainer(indptr, indices, len(model.features.names), model.crf_.label_ids(y), starts, model.allowed,
                         paper_params(max_leaves=6, n_threads=threads, loss=loss))
    plain, seen = (trainer(), B.Ensemble(4, 3)), (trainer(), B.Ensemble(4, 3))
    trees_seen = []
    for _ in range(3):
        plain[0].fit_round(plain[1])
        seen[0].fit_round(seen[1], beside=lambda threads: trees_seen.append(seen[1].n_trees))
    assert trees_seen == [3, 6, 9]
    assert np.array_equal(dense(plain[0].P), dense(seen[0].P))
    assert np.array_equal(plain[1].forest().nodes.value, seen[1].forest().nodes.value)

    def fails(threads):
        raise RuntimeError("scoring failed")
    with pytest.raises(RuntimeError, match="scoring failed"):
        seen[0].fit_round(seen[1], beside=fails)


@pytest.mark.parametrize("setting", [dict(max_leaves=1), dict(shrinkage=-1), dict(learning_rate=0),
                                     dict(subsample=0), dict(colsample=0), dict(colsample=1.5),
                                     dict(decode="beam"), dict(trim=1.5), dict(leaf_values="line_search"),
                                     dict(leaf_values="newton", loss="hamming")])
def test_invalid_settings_name_the_setting(setting):
    name = next(iter(setting))  # the first key is the setting the message must name
    with pytest.raises(ValueError, match=name):
        paper_crf(**setting)


def test_rules_are_readable_conjunctions():
    X, y = toy_data()
    model = paper_crf(n_rounds=3, max_leaves=8).fit(X, y)
    rules = model.rules(top=5)
    assert len(rules) == 5
    label, text, value, support = rules[0]
    assert label in model.classes_ and support > 0 and isinstance(text, str)


def test_rules_of_a_model_whose_leaves_are_all_small_say_why_there_are_none():
    """The README's three-token example: every leaf holds fewer than min_support (5) examples."""
    model = TreeCRF(allowed_transitions="bio").fit([[{"w": "John"}, {"w": "lives"}, {"w": "here"}]],
                                                     [["B-PER", "O", "O"]])
    with pytest.warns(UserWarning, match=r"W009.*min_support=5 examples \(the largest holds [1-4]\)"):
        assert model.rules(top=5) == []
    rules = model.rules(top=5, min_support=0)
    assert rules and all(label in model.classes_ for label, _, _, _ in rules)


@pytest.mark.parametrize("leaf_values", ["newton", "position_mean"])
def test_step_leaf_values_learn_the_training_data(leaf_values):
    X, y = toy_data(100)
    mean = paper_crf(n_rounds=5, max_leaves=8).fit(X, y)
    stepped = paper_crf(n_rounds=5, max_leaves=8, leaf_values=leaf_values).fit(X, y)
    assert stepped.to_bytes() != mean.to_bytes()
    assert stepped.score(X, y) >= 0.9
    assert paper_crf().from_bytes(stepped.to_bytes()).params.leaf_values == leaf_values


def test_scikit_learn_clone_keeps_every_setting_and_set_params_checks_them():
    sklearn_base = pytest.importorskip("sklearn.base", reason="scikit-learn is in the test extra only")
    model = paper_crf(max_leaves=7, shrinkage=3.0, n_rounds=5, allowed_transitions="bio")
    copy = sklearn_base.clone(model)
    assert copy is not model and copy.get_params() == model.get_params()
    assert (copy.max_leaves, copy.shrinkage, copy.n_rounds, copy.params.max_leaves) == (7, 3.0, 5, 7)
    assert copy.set_params(max_leaves=9, loss="hamming") is copy and copy.params.loss == "hamming"
    with pytest.raises(ValueError, match="max_leaves"):
        copy.set_params(max_leaves=1)
    assert copy.max_leaves == 9  # a refused setting changes nothing
    with pytest.raises(ValueError, match="max_leavs"):
        copy.set_params(max_leavs=3)
    with pytest.raises(TypeError, match="max_leavs"):
        paper_crf(max_leavs=3)
    assert repr(TreeCRF(max_leaves=7)) == "TreeCRF(max_leaves=7)"


def test_grid_search_over_max_leaves_runs_on_sequences():
    model_selection = pytest.importorskip("sklearn.model_selection", reason="scikit-learn is in the test extra only")
    rng = np.random.default_rng(0)
    X, y = [], []
    for _ in range(40):
        words = rng.choice(list("abcx"), size=int(rng.integers(2, 7)))
        X.append([{"w": str(w)} for w in words])
        y.append(["A" if w in "ax" else "B" for w in words])
    search = model_selection.GridSearchCV(paper_crf(n_rounds=3, n_threads=1), {"max_leaves": [2, 6]}, cv=2)
    search.fit(X, y)
    assert search.best_params_["max_leaves"] in (2, 6)
    assert set(search.cv_results_["param_max_leaves"]) == {2, 6}
    assert search.best_estimator_.max_leaves == search.best_params_["max_leaves"]
    assert search.score(X, y) > 0.9


def test_labels_keep_their_type_through_save_and_load_and_ambiguous_ones_are_refused():
    X = [[{"w": "a"}, {"w": "b"}, {"w": "c"}]] * 4
    model = paper_crf(n_rounds=3, max_leaves=3).fit(X, [[1, 2, 10]] * 4)
    assert model.predict(X[:1]) == [[1, 2, 10]]
    again = paper_crf().from_bytes(model.to_bytes())
    assert again.classes_ == [1, 10, 2] and again.predict(X[:1]) == [[1, 2, 10]]
    for labels in ([1, "1", 1], [1, 1.0, 2], [True, "a", "b"]):
        with pytest.raises(ValueError, match=r"E1(49|50)"):
            paper_crf(n_rounds=1).fit(X[:1], [labels])


def test_dev_labels_never_seen_in_training_count_as_errors():
    X, y = toy_data(40, 0)
    model = paper_crf(n_rounds=2, max_leaves=4).fit(X, y, X[:5], [["NEW"] * len(seq) for seq in X[:5]])
    assert all(entry["dev_accuracy"] == 0.0 for entry in model.history_)


@pytest.mark.parametrize("call, match", [
    (lambda X, y: paper_crf(n_rounds=1).fit(X, y, X[:2], y[:1]), "X_dev has 2 sequences but y_dev has 1"),
    (lambda X, y: paper_crf(n_rounds=1).fit(X, y, X[:2], None), "X_dev and y_dev go together"),
    (lambda X, y: paper_crf(n_rounds=1).fit(X, y, X[:1], [y[0][:-1]]), "sequence 0 of X_dev"),
    (lambda X, y: paper_crf(max_leaves="10"), "'max_leaves' must be an integer"),
    (lambda X, y: paper_crf(shrinkage=float("nan")), "'shrinkage' must be a finite number"),
    (lambda X, y: paper_crf(n_threads=10 ** 6), r"'n_threads' must be in \[0, 256\]"),
    (lambda X, y: paper_crf(max_leaves=10 ** 9), r"'max_leaves' must be an integer in \[2, 100000\]"),
    (lambda X, y: paper_crf(n_rounds=2.5), "'n_rounds' must be an integer"),
])
def test_bad_arguments_are_value_errors_naming_the_argument(call, match):
    X, y = toy_data(6, 0)
    with pytest.raises(ValueError, match=match):
        call(X, y)


def test_a_refused_fit_leaves_a_fitted_model_as_it_was():
    X, y = toy_data(20, 0)
    model = paper_crf(n_rounds=2, max_leaves=4).fit(X, y)
    before = model.to_bytes()
    with pytest.raises(ValueError):
        model.fit(X, y[:-1])
    with pytest.raises(ValueError):
        model.fit(X[:2], [[1.5] * len(X[0]), y[1]])
    assert model.to_bytes() == before


@pytest.mark.parametrize("transitions, y, match", [
    ("bio", [["I-PER", "O"]], r"E156.*'I-PER' at sequence 0, position 0 of y follows the start"),
    ([(None, "A"), ("A", "B")], [["A", "A"]], r"E156.*'A' at sequence 0, position 1 of y follows 'A'"),
])
def test_gold_labels_the_transition_constraints_forbid_are_refused_before_training(transitions, y, match):
    """IOB1 tags (I-X opening an entity) under BIO constraints used to train with an infinite loss every round
    and predict nothing but O."""
    X = [[{"w": "a"}, {"w": "b"}]] * 3
    with pytest.raises(ValueError, match=match):
        paper_crf(n_rounds=2, allowed_transitions=transitions).fit(X, y * 3)


def test_a_gold_sequence_without_any_allowed_path_stops_training_with_a_clear_error():
    """A -> (unknown) -> A where nothing leads back to A: no single transition is forbidden, but no path exists."""
    X = [[{"w": "a"}, {"w": "b"}, {"w": "c"}]] * 3
    with pytest.raises(ValueError, match="E158.*not finite"):
        paper_crf(n_rounds=2, allowed_transitions=[(None, "A"), ("A", "B"), ("B", "B")]).fit(X, [["A", None, "A"]] * 3)


def test_predict_nbest_lists_distinct_allowed_sequences_with_their_probabilities():
    X, y = toy_data(40, 0)
    model = paper_crf(n_rounds=4, max_leaves=4).fit(X, y)  # (constraints: the kernel's brute-force test)
    Xt, _ = toy_data(5, 1)
    nbest = model.predict_nbest(Xt, n=4)
    viterbi = model.predict(Xt)
    for seq, options, best in zip(Xt, nbest, viterbi):
        assert options[0][0] == best
        probs = [p for _, p in options]
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-9
        assert len({tuple(labels) for labels, _ in options}) == len(options)
        assert all(len(labels) == len(seq) for labels, _ in options)
    # a single-position sequence: all its labels, whose probabilities are its marginals
    single = model.predict_nbest([Xt[0][:1]], n=10)[0]
    marginals = model.predict_marginals([Xt[0][:1]])[0][0]
    assert {labels[0]: p for labels, p in single} == pytest.approx(marginals)
    with pytest.raises(ValueError, match="E165"):
        model.predict_nbest(Xt, n=0)


def test_python_crfsuite_nested_values_read_as_their_flat_names():
    """A dict value's items go under 'key:inner' and a list, tuple or set of strings gives the flags 'key:string',
    as python-crfsuite reads them: the same model as from the flat dicts."""
    X, y = toy_data(40, 1)
    nested = [[{"tok": {"w": p["w"], "n": {"bias": p["bias"]}}, "tags": [p["w"], "any"], "set": {p["w"] * 2},
                "pair": (p["w"],)} for p in seq] for seq in X]
    flat = [[{"tok:w": p["w"], "tok:n:bias": p["bias"], f"tags:{p['w']}": True, "tags:any": True,
              f"set:{p['w'] * 2}": True, f"pair:{p['w']}": True} for p in seq] for seq in X]
    a = paper_crf(n_rounds=3, max_leaves=6, early_stopping=False).fit(nested, y)
    b = paper_crf(n_rounds=3, max_leaves=6, early_stopping=False).fit(flat, y)
    assert "tags:x" in a.features.names and "tok:w=x" in a.features.names
    assert a.to_bytes() == b.to_bytes()
    assert a.predict_marginals(nested) == b.predict_marginals(flat)


@pytest.mark.parametrize("value, match", [
    (object(), r"the value <object object at \w+> is a object"),
    (["a", 1], "the value 1 inside its collection is a int"),
    ({"inner": [None]}, "the value None inside its collection is a NoneType"),
    (b"a", "the value b'a' is a bytes"),
])
def test_values_of_other_types_are_refused_naming_the_position(value, match):
    X, y = toy_data(6, 0)
    model = paper_crf(n_rounds=1, max_leaves=4, early_stopping=False).fit(X, y)
    before = model.to_bytes()
    X[2][1 % len(X[2])]["w"] = value
    where = rf"\[E201\] Sequence 2, position {1 % len(X[2])}, key 'w\S*': "
    with pytest.raises(TypeError, match=where + match):
        model.fit(X, y)
    assert model.to_bytes() == before  # a refused fit leaves the model as it was
    with pytest.raises(TypeError, match=where + match):
        model.predict(X)


def test_sequences_may_come_from_any_iterable_but_not_from_a_string():
    X, y = toy_data(20, 0)
    a = paper_crf(n_rounds=2, max_leaves=4, early_stopping=False).fit(X, y)
    b = paper_crf(n_rounds=2, max_leaves=4, early_stopping=False).fit((iter(s) for s in X), (tuple(ys) for ys in y))
    assert a.to_bytes() == b.to_bytes()
    assert b.predict(s for s in X) == a.predict(X) and a.score(iter(X), iter(y)) == a.score(X, y)
    with pytest.raises(TypeError, match=r"\[E202\] X is a str"):
        a.predict("abc")
    with pytest.raises(TypeError, match=r"\[E202\] X's sequence 1 is a str"):
        a.predict([X[0], "abc"])
    with pytest.raises(TypeError, match=r"\[E202\] y's sequence 0 is a str"):
        paper_crf(n_rounds=1).fit([[{"w": "a"}, {"w": "b"}]], ["AB"])
    with pytest.raises(ValueError, match=r"\[E054\] score: X has 20 sequences but y has 19"):
        a.score(X, y[:-1])
    with pytest.raises(ValueError, match=r"\[E059\] score: sequence 0 of X has"):
        a.score(X, [ys + ["A"] for ys in y])


BAD_INPUTS = {  # each a coded error naming the problem, not a raw TypeError / ValueError / AttributeError
    "a position that is a number": (lambda: TreeCRF(n_rounds=1).fit([[1, 2]], [["A", "B"]]),
                                    r"E213.*sequence 0, position 0 is of type int"),
    "a transition that is no pair": (lambda: TreeCRF(n_rounds=1, allowed_transitions=[("A",)]).fit(
        [[{"w": "a"}, {"w": "b"}]], [["A", "B"]]), r"E214.*the item \('A',\)"),
    "transitions that are a number": (lambda: TreeCRF(n_rounds=1, allowed_transitions=5).fit(
        [[{"w": "a"}, {"w": "b"}]], [["A", "B"]]), r"E214.*of type int"),
    "int labels with bio": (lambda: TreeCRF(n_rounds=1, allowed_transitions="bio").fit(
        [[{"w": "a"}, {"w": "b"}]], [[1, 2]]), r"E215.*got 1 \(int\)"),
    "BIOES labels with bio": (lambda: TreeCRF(n_rounds=1, allowed_transitions="bio").fit(
        [[{"w": "a"}, {"w": "b"}]], [["S-X", "O"]]), r"E215.*'S-X'"),
    "a dict among a position's names": (lambda: TreeCRF(n_rounds=1).fit([[{"w": "a"}, [{"w": "b"}]]], [["A", "B"]]),
                                        r"E218.*sequence 0, position 1.*holding a dict"),
    "a negative seed": (lambda: TreeCRF(random_state=-1).fit([[{"w": "a"}]], [["A"]]), r"E015.*random_state"),
    "a label a model file cannot hold": (lambda: TreeCRF(n_rounds=1, early_stopping=False).fit(
        [[{"w": "a"}, {"w": "b"}]], [["\ud800", "B"]]), r"E212.*label"),
    "a feature a model file cannot hold": (lambda: TreeCRF(n_rounds=1, early_stopping=False).fit(
        [[{"w": "a\udcff"}, {"w": "b"}]], [["A", "B"]]), r"E212.*feature name"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_inputs_get_a_coded_error_before_anything_is_trained(case):
    call, match = BAD_INPUTS[case]
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def untimed(history):
    return [{key: value for key, value in entry.items() if key != "seconds"} for entry in history]


def noisy_hmm(rng, n_seq: int, length: int = 40):
    """Sequences of a 3-label HMM (stay 0.6) whose label shows in its observation only 60% of the time, as
    window features x[-1..1]: labels noisy enough that small trees beat the default ones."""
    X, y = [], []
    for _ in range(n_seq):
        labels = [int(rng.integers(3))]
        for _ in range(length - 1):
            labels.append(labels[-1] if rng.random() < 0.6 else int(rng.integers(3)))
        obs = [k * 4 + int(rng.integers(4)) if rng.random() < 0.6 else int(rng.integers(12)) for k in labels]
        X.append([[f"x[{d}]={obs[t + d] if 0 <= t + d < length else 'pad'}" for d in (-1, 0, 1)]
                  for t in range(length)])
        y.append([str(k) for k in labels])
    return X, y


def profile_fit(name, decode: str, n_labels: int = 3) -> TreeCRF:
    """The plain fit (small_trees=False) with a small_trees profile's settings and round budget for n_labels
    labels (None: the estimator's own)."""
    from spacy_treecrf.estimator import SMALL_TREES, round_budget
    if not name:
        return TreeCRF(decode=decode, small_trees=False)
    profile = SMALL_TREES[name]
    return TreeCRF(decode=decode, small_trees=False, n_rounds=round_budget(profile, 100, n_labels),
                   **profile.settings)


@pytest.mark.parametrize("decode", ["viterbi", "marginal"])
def test_small_trees_keeps_whichever_fit_scores_better_on_validation(monkeypatch, decode):
    """small_trees: with validation data a fresh small fit makes each of its decoding's fits (SMALL_TREE_FITS:
    under marginal decoding the paper's per-label trees first, in place of the estimator's own) and keeps the
    model with the best validation accuracy (ties: the earlier); the kept model is the one the plain fit with those
    settings makes, and its file holds its settings. False, a large training set under "auto", another loss, or a
    continued fit: the first fit only."""
    from spacy_treecrf import estimator
    from spacy_treecrf.estimator import SMALL_TREE_FITS, SMALL_TREES, best_validation

    rng = np.random.default_rng(3)
    X, y = noisy_hmm(rng, 60)
    X_dev, y_dev = noisy_hmm(rng, 30)
    fits = {name: profile_fit(name, decode).fit(X, y, X_dev, y_dev) for name in SMALL_TREE_FITS[decode]}
    scores = {name: best_validation(fit.history_) for name, fit in fits.items()}
    best = max(scores, key=lambda name: (scores[name], -list(scores).index(name)))
    first = SMALL_TREE_FITS[decode][0]
    assert best is not None and best != first  # (the data is noisy enough for smaller trees)
    chosen = TreeCRF(decode=decode).fit(X, y, X_dev, y_dev)
    assert chosen.small_trees_ == best and chosen.predict(X_dev) == fits[best].predict(X_dev)
    assert untimed(chosen.history_) == untimed(fits[best].history_)
    loaded = TreeCRF().from_bytes(chosen.to_bytes())
    assert loaded.predict(X_dev) == chosen.predict(X_dev) and loaded.small_trees_ is None
    assert loaded.max_leaves == SMALL_TREES[best].settings["max_leaves"]
    assert loaded.n_rounds == fits[best].n_rounds
    assert TreeCRF().from_bytes(loaded.to_bytes()).n_rounds == loaded.n_rounds
    plain = profile_fit(None, decode).fit(X, y, X_dev, y_dev)
    for own_settings_only in (TreeCRF(decode=decode, loss="hamming"), TreeCRF(decode=decode, small_trees=False)):
        assert own_settings_only.fit(X, y, X_dev, y_dev).small_trees_ is None
    monkeypatch.setattr(estimator, "SMALL_DATA", sum(map(len, y)))  # "auto": too large for the other fits
    large = TreeCRF(decode=decode).fit(X, y, X_dev, y_dev)
    assert large.small_trees_ == first and large.predict(X_dev) == fits[first].predict(X_dev)
    assert TreeCRF(decode=decode, small_trees=True).fit(X, y, X_dev, y_dev).small_trees_ == best
    continued = TreeCRF(decode=decode, n_rounds=plain.best_round_ + 5, warm_start=True)
    continued.crf_, continued.features, continued.history_ = plain.crf_, plain.features, plain.history_
    assert continued.fit(X, y, X_dev, y_dev).small_trees_ is None


def test_marginal_decoding_grows_the_papers_per_label_trees_on_few_labels(monkeypatch):
    """small_trees "auto" under marginal decoding: at most PER_LABEL_LABELS labels over fewer than
    PER_LABEL_CELLS positions x labels, the first fit (the only one without validation data) is the paper's
    per-label trees, the same model as the plain fit with those settings; more labels or cells, tree settings
    the user gave, or Viterbi decoding: the estimator's own settings. A continued fit goes on with the per-label
    trees."""
    from spacy_treecrf import estimator
    from spacy_treecrf.estimator import PER_LABEL_LABELS, SMALL_TREES, round_budget

    rng = np.random.default_rng(5)
    X, y = noisy_hmm(rng, 20)
    assert len({label for labels in y for label in labels}) <= PER_LABEL_LABELS
    per_label = TreeCRF(decode="marginal").fit(X, y)
    assert per_label.small_trees_ == "per_label" and not per_label.ensemble.shared
    assert per_label.predict_marginals(X) == profile_fit("per_label", "marginal").fit(X, y).predict_marginals(X)
    assert TreeCRF().fit(X, y).small_trees_ is None and TreeCRF().fit(X, y).ensemble.shared
    assert TreeCRF(decode="marginal", small_trees=False).fit(X, y).ensemble.shared
    own = TreeCRF(decode="marginal", max_leaves=8).fit(X, y)  # (tree settings a user gives are kept)
    assert own.small_trees_ is None and own.ensemble.shared and own.crf_.params.max_leaves == 8
    monkeypatch.setattr(estimator, "PER_LABEL_CELLS", sum(map(len, y)) * 3)  # (3 labels)
    assert TreeCRF(decode="marginal").fit(X, y).small_trees_ is None
    assert TreeCRF(decode="marginal", small_trees=True).fit(X, y).small_trees_ == "per_label"
    monkeypatch.undo()
    many = [[str(int(label) + 3 * (t % 2)) for t, label in enumerate(labels)] for labels in y]  # 6 labels
    assert TreeCRF(decode="marginal").fit(X, many).small_trees_ is None
    assert TreeCRF(decode="marginal", small_trees=True).fit(X, many).ensemble.shared  # (True lifts only the size)
    rounds = per_label.crf_.rounds
    assert rounds == round_budget(SMALL_TREES["per_label"], 100, 3) == 34  # (as many trees as the default fit)
    per_label.set_params(warm_start=True, n_rounds=3 * (rounds + 2))  # (n_rounds counts its trees)
    per_label.fit(X, y)  # (the estimator's shared_trees=True is not what the kept model asked for)
    assert per_label.crf_.rounds == rounds + 2 and not per_label.ensemble.shared


def test_small_trees_keeps_the_default_fit_where_it_scores_better():
    """Labels that depend on two tests together: the default trees' validation accuracy is higher, and the
    default fit is kept as it was."""
    from spacy_treecrf.estimator import best_validation

    rng = np.random.default_rng(0)

    def xor_data(n_seq, length=30):
        X, y = [], []
        for _ in range(n_seq):
            a, b = rng.integers(2, size=length), rng.integers(2, size=length)
            X.append([[f"a={u}", f"b={v}", f"c={int(rng.integers(5))}"] for u, v in zip(a, b)])
            y.append([str(u ^ v) for u, v in zip(a, b)])
        return X, y
    X, y = xor_data(40)
    X_dev, y_dev = xor_data(20)
    plain = TreeCRF(small_trees=False).fit(X, y, X_dev, y_dev)
    chosen = TreeCRF().fit(X, y, X_dev, y_dev)
    assert best_validation(chosen.history_) == best_validation(plain.history_)
    assert chosen.small_trees_ is None and untimed(chosen.history_) == untimed(plain.history_)
    assert chosen.predict_marginals(X_dev) == plain.predict_marginals(X_dev)


def test_small_trees_setting_is_checked():
    with pytest.raises(ValueError, match="E234"):
        TreeCRF(small_trees="yes")
    with pytest.raises(ValueError, match="E234"):
        TreeCRF().set_params(small_trees=None)
