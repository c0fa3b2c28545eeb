"""Stacked sequential learning (BoostParams.stack_window, model.py): the first stage's labels as columns, the
cross-fitted first stage, decoding from the summed potentials (brute force), the model file, and the errors."""
import dataclasses
import re

import numpy as np
import pytest
import spacy

from brute import best_path, seq_expectations
from conftest import NER_DATA, SMALL, component_config, ner_examples, train
from spacy_treecrf import TreeCRF
from spacy_treecrf.engine.sparse import with_label_columns
from spacy_treecrf.model import STACK_MAX_ROUNDS, EngineRows, FirstStage, SequenceModel, resolved_patience

SETTINGS = dict(max_leaves=6, shrinkage=1.0, early_stopping=False, n_rounds=6)


def chain_data(n, seed):
    """Three labels that mostly persist; a word shows its label only 60% of the time, so neighbours' labels
    matter."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        state, xs, ys = int(rng.integers(3)), [], []
        for _ in range(int(rng.integers(2, 6))):
            state = state if rng.random() < 0.7 else int(rng.integers(3))
            shown = state if rng.random() < 0.6 else int(rng.integers(3))
            xs.append({"w": "abc"[shown]})
            ys.append("ABC"[state])
        X.append(xs)
        y.append(ys)
    return X, y


@pytest.fixture(scope="module")
def stacked():
    X, y = chain_data(80, 1)
    return TreeCRF(stack_window=1, window=1, **SETTINGS).fit(X, y)


def test_label_columns_are_each_neighbours_label_under_its_offset_then_each_marginals_bin():
    rng = np.random.default_rng(0)
    seq_starts = np.array([0, 3, 4, 9], dtype=np.int64)
    T, K, window, base, n_bins = 9, 3, 2, 20, 6
    rows = [sorted(rng.choice(base, size=int(rng.integers(0, 4)), replace=False).tolist()) for _ in range(T)]
    indptr = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    indices = np.array([f for r in rows for f in r], dtype=np.int32)
    labels = rng.integers(0, K, size=T).astype(np.int32)
    bins = rng.integers(0, n_bins, size=(T, K)).astype(np.int32)
    out_ptr, out = with_label_columns(indptr, indices, labels, seq_starts, base, K, window, bins, n_bins)
    marginal_base = base + (2 * window + 1) * K
    for q in range(len(seq_starts) - 1):
        a, b = seq_starts[q], seq_starts[q + 1]
        for t in range(a, b):
            expected = rows[t] + [base + (u - t + window) * K + labels[u] for u in range(a, b) if abs(u - t) <= window]
            expected += [marginal_base + k * n_bins + bins[t, k] for k in range(K)]
            assert out[out_ptr[t]:out_ptr[t + 1]].tolist() == expected


def test_stacked_marginals_are_those_of_the_summed_potentials(stacked):
    """Brute force: the first stage's best path and marginals from its own potentials, the second stage's trees
    over the columns of those, and every path of the summed potentials enumerated."""
    model = stacked.crf_
    assert model.stage1.n_trees and model.n_trees
    X, _ = chain_data(6, 2)
    rows = stacked._rows(X)
    forbidden = np.where(model.allowed, 0.0, -np.inf)
    phi1 = model.stage1.ensemble.potentials(rows.indptr, rows.indices) + forbidden
    bounds = list(zip(rows.seq_starts[:-1], rows.seq_starts[1:]))
    first = FirstStage(np.concatenate([best_path(phi1, a, b)[0] for a, b in bounds]).astype(np.int32),
                       np.concatenate([seq_expectations(phi1, a, b).sum(axis=1) for a, b in bounds]))
    second = model.stacked_rows(rows, first)
    phi = phi1 + model.ensemble.potentials(second.indptr, second.indices)
    got = stacked.predict_marginals(X)
    for q, (a, b) in enumerate(zip(rows.seq_starts[:-1], rows.seq_starts[1:])):
        expected = seq_expectations(phi, a, b).sum(axis=1)
        assert np.allclose([[m[label] for label in stacked.classes_] for m in got[q]], expected, atol=1e-5)
        assert [stacked.classes_.index(label) for label in stacked.predict([X[q]])[0]] == \
            best_path(phi, a, b)[0].tolist()


def test_the_first_stage_labels_each_half_with_the_model_fitted_on_the_other():
    """The cross-fitted labels of the even sequences are those of a model fitted on the odd ones alone, stopped
    on the even ones; the first stage itself is fitted on all for the fold models' mean best round."""
    X, y = chain_data(60, 3)
    est = TreeCRF(**{**SETTINGS, "n_rounds": 1}).fit(X, y)  # (the feature index, the labels)
    model = SequenceModel(est.classes_, est.allowed, dataclasses.replace(est.params, stack_window=1),
                          len(est.features.names), est.features.numeric_index())
    rows = est._rows(X)
    y_ids = model.label_ids(y)
    first, _ = model.fit_first_stage(rows, y_ids)
    odd, even = X[1::2], X[0::2]
    n_even = sum(map(len, y[0::2]))
    fold = TreeCRF(**{**SETTINGS, "n_rounds": STACK_MAX_ROUNDS, "patience": resolved_patience(n_even),
                      "small_trees": False})  # (a fold model is one fit)
    fold.fit(odd, y[1::2], even, y[0::2])
    at_even = np.repeat(np.arange(len(X)) % 2 == 0, [len(s) for s in X])
    expected = [model.labels.index(label) for labels_ in fold.predict(even) for label in labels_]
    assert first.labels[at_even].tolist() == expected
    assert model.stage1.rounds > 0


def test_a_stacked_model_file_predicts_the_same_and_needs_its_first_stage(stacked):
    from spacy_treecrf.engine import serialize
    X, _ = chain_data(10, 4)
    data = stacked.to_bytes()
    again = TreeCRF().from_bytes(data)
    assert again.predict(X) == stacked.predict(X) and again.crf_.stage1.rounds == stacked.crf_.stage1.rounds
    envelope = serialize.envelope(data, "model")
    payload = serialize.payload(envelope)
    del payload["stage1"]
    with pytest.raises(ValueError, match="stage1"):
        TreeCRF().from_bytes(serialize.dumps("model", payload))


def test_known_labels_hold_in_a_stacked_model(stacked):
    X, _ = chain_data(8, 5)
    known = [[None] * len(x) for x in X]
    for q, x in enumerate(X):
        known[q][len(x) // 2] = "C"
    for q, labels in enumerate(stacked.predict(X, known=known)):
        assert labels[len(X[q]) // 2] == "C"


def test_explanations_of_a_stacked_model_add_up_and_name_the_first_stage(stacked):
    X, _ = chain_data(4, 6)
    for explanation in stacked.explain(X[0]):
        assert explanation.potential == pytest.approx(sum(part.value for part in explanation.parts), abs=1e-6)
    rules = [conjunction for _, conjunction, _, _ in stacked.rules(top=1000, min_support=0.0)]
    assert any(re.search(r"first stage: [ABC]\[[+-]\d\]", rule) for rule in rules)
    assert any(re.search(r"first stage: P\([ABC]\) (<=|>) [0-9.]+", rule) for rule in rules)


def test_stacking_refuses_continued_training_and_a_single_sequence(stacked):
    X, y = chain_data(20, 7)
    with pytest.raises(ValueError, match="fitted once"):
        TreeCRF(stack_window=1, warm_start=True, **SETTINGS).fit(X, y).fit(X, y)
    with pytest.raises(ValueError, match="at least two sequences"):
        TreeCRF(stack_window=1, **SETTINGS).fit(X[:1], y[:1])
    with pytest.raises(ValueError, match="stack_window"):
        TreeCRF(stack_window=11)


def test_a_stacked_component_trains_in_spacys_loop_and_loads():
    nlp = spacy.blank("xx")
    nlp.add_pipe("treecrf", config=component_config({**SMALL, "stack_window": 1}))
    examples = ner_examples(nlp, NER_DATA * 2)
    train(nlp, examples, rounds=3)
    crf = nlp.get_pipe("treecrf")
    assert crf.crf.stage1.n_trees and crf.crf.n_trees
    docs = [nlp(text) for text, _ in NER_DATA]
    nlp2 = spacy.blank("xx")
    nlp2.add_pipe("treecrf", config=component_config({**SMALL, "stack_window": 1})).from_bytes(crf.to_bytes())
    assert [[(e.text, e.label_) for e in nlp2(doc.text).ents] for doc in docs] == \
        [[(e.text, e.label_) for e in doc.ents] for doc in docs]
    with pytest.raises(ValueError, match="round_every"):
        spacy.blank("xx").add_pipe("treecrf", config=component_config({"stack_window": 1, "round_every": "batch"}))


def test_stacked_rows_keep_the_missing_variables_of_the_rows():
    X, y = chain_data(30, 8)
    X = [[{**p, "v": None} if t == 0 else p for t, p in enumerate(x)] for x in X]
    model = TreeCRF(stack_window=1, **SETTINGS).fit(X, y)
    rows = model._rows(X)
    T = len(rows.indptr) - 1
    second = model.crf_.stacked_rows(rows, FirstStage(np.zeros(T, dtype=np.int32), np.full((T, 3), 1 / 3)))
    assert isinstance(second, EngineRows) and len(second.missing.feature_var) == model.crf_.n_columns
    assert len(model.predict(X)) == len(X)
