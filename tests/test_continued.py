"""Continued training: a fitted TreeCRF (warm_start) or a trained treecrf component (initialize(resume_from=...))
goes on from its trees, on new data, with labels and features it has not seen."""
import warnings

import numpy as np
import pytest
import spacy

from conftest import paper_crf
from spacy_treecrf.engine.booster import Ensemble


def words_data(n, seed=0, labels="ABCD"):
    """Words whose identity decides the label (a -> A, ..., d -> D), 'x' copying the previous label; only the
    labels in ``labels`` occur (a word of another label is dropped)."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        words = [w for w in rng.choice(["a", "b", "c", "d", "x"], size=rng.integers(2, 9))
                 if w == "x" or w.upper() in labels]
        seq, prev = [], labels[0]
        for w in words:
            prev = w.upper() if w != "x" else prev
            seq.append(prev)
        if words:
            X.append([{"w": w, "suffix": w + "!"} for w in words])
            y.append(seq)
    return X, y


@pytest.mark.parametrize("shared", [False, True])
def test_warm_start_continues_as_one_longer_fit(shared):
    X, y = words_data(80)
    Xt, _ = words_data(30, seed=1)
    whole = paper_crf(n_rounds=8, shared_trees=shared, max_leaves=6).fit(X, y)
    part = paper_crf(n_rounds=4, shared_trees=shared, max_leaves=6, warm_start=True).fit(X, y)
    part.set_params(n_rounds=8)
    part.fit(X, y)
    assert part.best_round_ == 8 and part.ensemble.n_trees == whole.ensemble.n_trees
    assert part.predict(Xt) == whole.predict(Xt)
    for got, want in zip(part.predict_marginals(Xt)[0], whole.predict_marginals(Xt)[0]):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("shared", [False, True])
def test_warm_start_adds_a_label_and_features_keeping_the_old_trees(shared):
    X_old, y_old = words_data(120, labels="ABC")
    X, y = words_data(120, seed=2)
    Xt, yt = words_data(60, seed=3)
    model = paper_crf(n_rounds=5, shared_trees=shared, max_leaves=8, warm_start=True).fit(X_old, y_old)
    before = model.ensemble.forest()
    old_names = list(model.features.names)
    model.set_params(n_rounds=15)
    model.fit(X, y)
    assert model.classes_[:3] == ["A", "B", "C"] and model.classes_[3] == "D"
    assert model.features.names[:len(old_names)] == old_names and "w=d" in model.features.names
    after = model.ensemble.forest()
    n = before.roots[-1]
    for field in ("kind", "feature", "yes", "no", "value"):
        assert np.array_equal(getattr(after.nodes, field)[:n], getattr(before.nodes, field))
    assert np.array_equal(after.nodes.states[:n, :4], before.nodes.states)
    assert model.score(Xt, yt) >= 0.95


def test_with_labels_keeps_old_potentials_and_routes_new_states_one_way():
    X, y = words_data(60, labels="ABC")
    model = paper_crf(n_rounds=3, max_leaves=8, label_splits="best").fit(X, y)
    ens = model.ensemble
    grown = ens.with_labels(5)
    indptr, indices = model._rows(X)[:2]
    old, new = ens.potentials(indptr, indices), grown.potentials(indptr, indices)
    assert new.shape == (old.shape[0], 6, 5)
    assert np.array_equal(new[:, :4, :3], old)
    assert not new[:, :, 3:].any()  # no tree for the new labels yet
    nodes, roots = grown.forest().nodes, grown.forest().roots
    assert (nodes.states[:, 4] == nodes.states[:, 5]).all()
    splits = 0
    for i in range(len(roots) - 1):  # a new state follows every feature split and one side of a state split
        assert nodes.states[roots[i], 4]
        for n in range(roots[i], roots[i + 1]):
            if nodes.kind[n] == 0 or not nodes.states[n, 4]:
                continue
            a, b = roots[i] + nodes.yes[n], roots[i] + nodes.no[n]
            if nodes.kind[n] == 1:
                assert nodes.states[a, 4] and nodes.states[b, 4]
            else:  # the side that held more training weight
                splits += 1
                assert nodes.states[a, 4] != nodes.states[b, 4]
                assert nodes.states[a, 4] == (nodes.count[a] > nodes.count[b])
    assert splits > 0
    with pytest.raises(ValueError, match="lose labels"):
        ens.with_labels(2)
    assert isinstance(grown, Ensemble)


def test_warm_start_settings_and_messages():
    X, y = words_data(40)
    model = paper_crf(n_rounds=3, warm_start=True).fit(X, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    assert any("W006" in str(w.message) for w in caught) and model.ensemble.n_trees == 3 * 4
    with pytest.raises(ValueError, match="shared_trees"):
        model.set_params(shared_trees=True, n_rounds=6).fit(X, y)
    with pytest.raises(ValueError, match="warm_start"):
        paper_crf(warm_start="yes")
    cold = paper_crf(n_rounds=3).fit(X, y)
    cold.fit(X, y)  # without warm_start a second fit starts over
    assert cold.ensemble.n_trees == 3 * 4
    loaded = paper_crf(warm_start=True).from_bytes(model.set_params(shared_trees=False).to_bytes())
    assert loaded.warm_start and loaded.set_params(n_rounds=5).fit(X, y).ensemble.n_trees == 5 * 4


def test_warm_start_with_validation_keeps_only_rounds_that_beat_the_model():
    X, y = words_data(150)
    model = paper_crf(n_rounds=30, warm_start=True, patience=3).fit(X, y, X[:40], y[:40])
    rounds, trees = model.best_round_, model.ensemble.n_trees
    model.set_params(n_rounds=60).fit(X, y, X[:40], y[:40])  # already perfect on dev: nothing beats it
    assert model.best_round_ == rounds and model.ensemble.n_trees == trees
    assert [h["round"] for h in model.history_][0] == rounds + 1


def loc_missing(examples):
    """The examples with their LOC entities unannotated (missing: unknown labels, not O)."""
    from spacy.tokens import Span
    from spacy.training import Example

    out = []
    for eg in examples:
        ref = eg.reference.copy()
        ref.set_ents([Span(ref, e.start, e.end, e.label_) for e in ref.ents if e.label_ != "LOC"],
                     missing=[Span(ref, e.start, e.end) for e in ref.ents if e.label_ == "LOC"], default="outside")
        out.append(Example(eg.predicted.copy(), ref))
    return out


@pytest.mark.parametrize("config", [{}] + [{"missing": strategy, "features": {
    "@misc": "spacy_treecrf.window_features.v1", "missing_text": "?", "label_dictionary": True}}
    for strategy in ("indicator", "imputation")])
def test_component_resumes_a_trained_model_with_a_new_label(tmp_path, config):
    from conftest import make_nlp, ner_examples, train

    nlp, crf = make_nlp(**config)
    full = ner_examples(nlp) + ner_examples(nlp, [("We saw ? in Rome", [(12, 16, "LOC")])])
    train(nlp, loc_missing(full), rounds=4)
    assert "B-LOC" not in crf.labels
    nlp.to_disk(tmp_path / "first")
    docs = [nlp.make_doc(text) for text in ("Alice lives in Paris .", "We saw ? in Rome")]
    indptr, indices = crf._rows(docs)[:2]
    before = crf.ensemble.potentials(indptr, indices)

    again, crf2 = make_nlp(**config)
    again.config["initialize"]["components"]["treecrf"] = {"resume_from": str(tmp_path / "first")}
    again.initialize(lambda: full)
    assert crf2.labels[:len(crf.labels)] == crf.labels and {"B-LOC", "I-LOC"} <= set(crf2.labels)
    assert crf2.cfg["rounds"] == 4
    if config:  # the label dictionary learns that Paris and Rome were LOC: new columns
        names = crf2.featurizer.feature_names()
        assert "ld=B-LOC@0" in set(names) - set(crf.featurizer.feature_names())
        carol = crf2._rows([full[3].predicted], crf2._own_labels([full[3]]))  # Carol (B-PER) occurs once
        assert "ld=B-PER@0" not in [names[c] for c in carol[1][carol[0][0]:carol[0][1]]]
    old_names, names = crf.featurizer.feature_names(), crf2.featurizer.feature_names()
    assert set(old_names) <= set(names)
    indptr2, indices2 = crf2._rows(docs + [eg.predicted for eg in full])[:2]  # each row ascending
    assert all(np.all(np.diff(indices2[a:b]) > 0) for a, b in zip(indptr2[:-1], indptr2[1:]))
    again.to_disk(tmp_path / "second")  # a grown index saves and loads
    assert spacy.load(tmp_path / "second").get_pipe("treecrf").featurizer.feature_names() == names
    indptr, indices = crf2._rows(docs)[:2]
    after = crf2.ensemble.potentials(indptr, indices)
    S, K = before.shape[1:]
    assert np.allclose(after[:, :S, :K], before)  # the old trees read the same columns
    for _ in range(6):
        again.update(full)
    assert crf2.cfg["rounds"] == 10
    assert again.evaluate(full)["ents_f"] == 1.0
    assert ("Paris", "LOC") in [(e.text, e.label_) for e in again("Alice lives in Paris .").ents]


def test_resume_from_a_path_without_the_component_names_it(tmp_path):
    from conftest import make_nlp, ner_examples

    nlp, _ = make_nlp()
    with pytest.raises(ValueError, match="model.msgpack"):
        nlp.get_pipe("treecrf").initialize(lambda: ner_examples(nlp), resume_from=str(tmp_path))


def test_with_feature_map_reads_the_moved_columns():
    X, y = words_data(60)
    model = paper_crf(n_rounds=3, max_leaves=8).fit(X, y)
    indptr, indices = model._rows(X)[:2]
    n = len(model.features.names)
    moved = np.arange(n) + 7 * (np.arange(n) >= n // 2)  # new columns went in before the second half
    assert (model.ensemble.forest().nodes.feature >= n // 2).any()
    renumbered = model.ensemble.with_feature_map(moved)
    assert np.array_equal(renumbered.potentials(indptr, moved[indices].astype(np.int32)),
                          model.ensemble.potentials(indptr, indices))


def test_a_sourced_component_goes_on_training_and_warns_of_labels_it_lacks():
    import spacy

    from conftest import make_nlp, ner_examples, train

    nlp, crf = make_nlp()
    train(nlp, loc_missing(ner_examples(nlp)), rounds=3)
    sourced = spacy.blank(nlp.lang)
    sourced.add_pipe("treecrf", source=nlp)
    again = sourced.get_pipe("treecrf")
    trees = again.ensemble.n_trees
    sourced.update(loc_missing(ner_examples(sourced)))
    assert again.cfg["rounds"] == 4 and again.ensemble.n_trees > trees
    with pytest.warns(UserWarning, match=r"W007.*B-LOC.*resume_from"):
        sourced.update(ner_examples(sourced))
