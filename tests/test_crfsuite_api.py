"""sklearn-crfsuite's interface: the metrics against scikit-learn's on the same flattened labels, the per-sequence
methods and inspection attributes, and the tutorial script run with only its imports changed."""
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn import metrics as sk

import spacy_treecrf
from spacy_treecrf import TreeCRF, metrics

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("TREECRF_DATA_DIR", ROOT.parent / "shared" / "data"))


def random_labels(seed, labels=("B-NP", "I-NP", "O", "B-VP", "I-VP")):
    rng = random.Random(seed)
    lengths = [rng.randint(0, 7) for _ in range(rng.randint(1, 12))]
    true = [[rng.choice(labels) for _ in range(n)] for n in lengths]
    pred = [[t if rng.random() < 0.6 else rng.choice(labels) for t in seq] for seq in true]
    return true, pred


def flat(y):
    return [label for seq in y for label in seq]


@pytest.mark.parametrize("seed", range(25))
def test_flat_scores_are_scikit_learns_of_the_flattened_labels(seed):
    true, pred = random_labels(seed)
    if not flat(true):
        return
    t, p = flat(true), flat(pred)
    assert metrics.flat_accuracy_score(true, pred) == pytest.approx(sk.accuracy_score(t, p))
    subset = sorted(set(t) | set(p))[:3] + ["B-ADJP"]  # with a label neither holds
    for average in ("micro", "macro", "weighted", None):
        for labels in (None, subset):
            for name in ("precision", "recall", "f1"):
                ours = getattr(metrics, f"flat_{name}_score")(true, pred, labels=labels, average=average)
                theirs = getattr(sk, f"{name}_score")(t, p, labels=labels, average=average, zero_division=0.0)
                np.testing.assert_allclose(ours, theirs, atol=1e-12)
            np.testing.assert_allclose(metrics.flat_fbeta_score(true, pred, 0.5, labels=labels, average=average),
                                       sk.fbeta_score(t, p, beta=0.5, labels=labels, average=average,
                                                      zero_division=0.0), atol=1e-12)
    for labels in (None, subset, sorted(set(t) | set(p), reverse=True)):
        assert metrics.flat_classification_report(true, pred, labels=labels, digits=3) == \
            sk.classification_report(t, p, labels=labels, digits=3, zero_division=0.0)
        ours = metrics.flat_classification_report(true, pred, labels=labels, output_dict=True)
        theirs = sk.classification_report(t, p, labels=labels, output_dict=True, zero_division=0.0)
        assert ours.keys() == theirs.keys()
        for key, row in theirs.items():
            np.testing.assert_allclose(list(row.values()) if isinstance(row, dict) else row,
                                       list(ours[key].values()) if isinstance(row, dict) else ours[key])


def test_binary_average_and_sequence_accuracy_as_sklearn_crfsuite_has_them():
    y1, y2 = [["x", "z", "y"], ["x", "x"]], [["y", "z", "y"], ["x", "y"]]
    assert metrics.flat_accuracy_score(y1, y2) == 3 / 5
    assert metrics.flat_f1_score(y1, y2, average="macro") == pytest.approx(2 / 3)
    assert metrics.sequence_accuracy_score(y1, y2) == 0
    assert metrics.sequence_accuracy_score([], []) == 0
    assert metrics.sequence_accuracy_score([[1, 2], [3], [4]], [[1, 2], [4], [4]]) == pytest.approx(2 / 3)
    b1, b2 = [[1, 0, 1], [1]], [[1, 1, 0], [1]]
    assert metrics.flat_f1_score(b1, b2) == pytest.approx(sk.f1_score(flat(b1), flat(b2)))
    with pytest.raises(ValueError, match="E228"):
        metrics.flat_f1_score(y1, y2)
    with pytest.raises(ValueError, match="E229"):
        metrics.flat_precision_score([["a", "b"]], [["b", "a"]])
    with pytest.raises(ValueError, match="E227"):
        metrics.flat_recall_score(y1, y2, average="samples")
    with pytest.raises(ValueError, match="E226"):
        metrics.flat_accuracy_score(y1, [["x"]])


def test_entity_scores_are_conllevals_spans():
    true = [["B-PER", "I-PER", "O", "B-LOC"], ["I-ORG", "I-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "I-ORG", "B-MISC"]]
    assert metrics.bio_entities(true) == {(0, 0, 2, "PER"), (0, 3, 4, "LOC"), (1, 0, 2, "ORG")}
    p, r, f = metrics.entity_precision_recall_f1(true, pred)
    assert (p, r) == (2 / 4, 2 / 3)
    assert metrics.entity_f1_score(true, pred) == pytest.approx(2 * p * r / (p + r))


@pytest.fixture(scope="module")
def tagger():
    rng = random.Random(1)
    X, y = [], []
    for _ in range(150):
        words = [rng.choice(["the", "a", "dog", "cat", "runs", "sleeps"]) for _ in range(rng.randint(1, 6))]
        X.append([{"bias": 1.0, "w": w, "title": w.istitle()} for w in words])
        y.append(["DT" if w in ("the", "a") else "NN" if w in ("dog", "cat") else "VB" for w in words])
    return TreeCRF(n_rounds=8, early_stopping=False).fit(X, y), X


def test_per_sequence_methods_and_the_training_log(tagger):
    model, X = tagger
    assert model.predict_single(X[0]) == model.predict(X[:1])[0]
    assert model.predict_marginals_single(X[1]) == model.predict_marginals(X[1:2])[0]
    log = model.training_log_
    assert [it["num"] for it in log.iterations] == list(range(1, 9)) and log.last_iteration == log.iterations[-1]
    assert all(it["time"] >= 0 and np.isfinite(it["loss"]) for it in log.iterations)
    assert log.iterations[-1]["loss"] < log.iterations[0]["loss"]
    assert TreeCRF().training_log_ is None and TreeCRF().state_features_ is None


def test_state_and_transition_features_are_the_trees_potentials_of_single_tests(tagger):
    """A state feature is what the test alone adds to the label's potential (averaged over the previous
    labels), a transition feature the potential where no test holds: both checked against the trees' own
    potentials of such rows."""
    model, _ = tagger
    state, trans = model.state_features_, model.transition_features_
    assert set(trans) == {(a, b) for a in model.classes_ for b in model.classes_}
    ensemble = model.crf_.ensemble
    empty = ensemble.potentials(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int32))[0]
    for (a, b), weight in trans.items():
        assert weight == pytest.approx(empty[model.classes_.index(a) + 1, model.classes_.index(b)])
    assert ("w=dog", "NN") in state and state[("w=dog", "NN")] > 0 > state[("w=dog", "DT")]
    for (name, label), weight in list(state.items())[:20]:
        f = model.features.names.index(name)
        phi = ensemble.potentials(np.array([0, 1], dtype=np.int64), np.array([f], dtype=np.int32))[0]
        k = model.classes_.index(label)
        assert weight == pytest.approx((phi[1:, k] - empty[1:, k]).mean())


def test_crf_takes_crfsuites_settings_and_says_they_are_unused():
    with pytest.warns(UserWarning, match=r"W012.*'all_possible_transitions', 'c1', 'c2', 'max_iterations'"):
        model = spacy_treecrf.CRF(algorithm=None, c1=0.1, c2=0.1, max_iterations=100, all_possible_transitions=True,
                                  n_rounds=7, verbose=False)
    assert isinstance(model, TreeCRF) and model.n_rounds == 7


def test_the_sklearn_crfsuite_tutorial_runs_with_only_its_imports_changed(tmp_path):
    """examples/crfsuite_tutorial.py is written for sklearn-crfsuite; with its two imports pointed at this package
    it runs as it is on CoNLL-2000 (the first 1,000 training and 300 test sentences)."""
    if not (DATA / "conll2000" / "train.txt").exists():
        pytest.skip(f"needs CoNLL-2000 under TREECRF_DATA_DIR ({DATA}), which is not bundled: its licence differs")
    text = (ROOT / "examples" / "crfsuite_tutorial.py").read_text(encoding="utf8")
    imports = "import sklearn_crfsuite\nfrom sklearn_crfsuite import metrics\n"
    assert text.count(imports) == 1
    script = tmp_path / "tutorial.py"
    script.write_text(text.replace(imports, "import spacy_treecrf as sklearn_crfsuite\n"
                                            "from spacy_treecrf import metrics\n"), encoding="utf8")
    out = subprocess.run([sys.executable, str(script), str(DATA / "conll2000"), "--train", "1000", "--test", "300"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "W012" in out.stderr  # CRFsuite's optimiser settings, named as unused
    f1 = float(re.search(r"weighted F1: ([\d.]+)", out.stdout).group(1))
    assert f1 > 0.85, out.stdout
    assert "weighted avg" in out.stdout and "B-NP" in out.stdout and "Top positive:" in out.stdout
