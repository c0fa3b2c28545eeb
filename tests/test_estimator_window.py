"""TreeCRF(window=w): a position reads its neighbours' features, windowed in compiled code."""
import numpy as np
import pytest

from spacy_treecrf import TreeCRF
from spacy_treecrf.engine import serialize
from spacy_treecrf.estimator import window_names


def next_letter_data(n=80, seed=0):
    """Letters whose label says whether the NEXT letter is 'a' (or the previous one 'b'): a model without a window
    cannot see it; per position only its own letter and a class flag."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        s = [str(c) for c in rng.choice(list("abcde"), size=rng.integers(2, 10))]
        X.append([{"w": c, "vowel": c in "ae"} for c in s])
        y.append(["1" if (t + 1 < len(s) and s[t + 1] == "a") or (t > 0 and s[t - 1] == "b") else "0"
                  for t in range(len(s))])
    return X, y


def by_hand(X, window):
    """The windowed features as a user would write them into the dicts, named as the window names its columns."""
    out = []
    for seq in X:
        rows = []
        for t in range(len(seq)):
            names = set()
            for d in range(-window, window + 1):
                if 0 <= t + d < len(seq):
                    names |= {(f"{k}={v}" if isinstance(v, str) else k) + f"[{d:+d}]"
                              for k, v in seq[t + d].items() if v is not False}
                else:
                    names.add(f"<pad>[{d:+d}]")
            rows.append(names)
        out.append(rows)
    return out


@pytest.mark.parametrize("window", [1, 3])
def test_window_rows_hold_the_neighbours_features(window):
    X, y = next_letter_data()
    model = TreeCRF(n_rounds=2, window=window, early_stopping=False).fit(X, y)
    X_new = X[:5] + [[{"w": "z", "vowel": False}, {"w": "a", "vowel": True}]]  # 'w=z' is unknown: dropped
    indptr, indices, seq_starts, missing_rows = model._rows(X_new)
    assert missing_rows is None
    names = window_names(model.features.names, window)
    hand = [row for seq in by_hand(X_new, window) for row in seq]
    for t, expected in enumerate(hand):
        row = indices[indptr[t]:indptr[t + 1]]
        assert np.all(np.diff(row) > 0)  # sorted and unique, as the engine reads rows
        assert {names[c] for c in row} == {name for name in expected if name in names}
    assert len(names) == model._n_columns() == (2 * window + 1) * (len(model.features.names) + 1)


def test_window_learns_what_the_neighbours_decide():
    X, y = next_letter_data()
    assert TreeCRF(n_rounds=20, window=1, early_stopping=False).fit(X, y).score(X, y) == 1.0
    assert TreeCRF(n_rounds=20, early_stopping=False).fit(X, y).score(X, y) < 0.9


def test_window_model_round_trips_and_names_its_tests():
    X, y = next_letter_data()
    model = TreeCRF(n_rounds=10, window=2, early_stopping=False).fit(X, y)
    data = model.to_bytes()
    loaded = TreeCRF().from_bytes(data)
    assert loaded.window == loaded.window_ == 2 and loaded.to_bytes() == data
    assert loaded.predict(X) == model.predict(X)
    assert loaded.predict_marginals(X[:3]) == model.predict_marginals(X[:3])
    assert any("w=a[+1]" in rule for _, rule, _, _ in loaded.rules(top=20))
    parts = loaded.explain(X[0])[0].parts
    assert parts and all("[" in part.rule for part in parts)


def test_window_warm_start_with_new_features_keeps_the_old_trees():
    X, y = next_letter_data()
    model = TreeCRF(n_rounds=6, window=1, early_stopping=False).fit(X, y)
    before = model.ensemble.potentials(*model._rows(X)[:2])
    more = [[{**p, "new": p["w"] * 2} for p in seq] for seq in X]
    with pytest.warns(UserWarning, match="W006"):  # no new round: only the columns move
        copy = TreeCRF().from_bytes(model.to_bytes())
        copy.set_params(warm_start=True).fit(more, y)
    assert len(copy.features.names) > len(model.features.names)
    assert np.array_equal(copy.ensemble.potentials(*copy._rows(X)[:2]), before)
    copy.set_params(n_rounds=9).fit(more, y)
    assert copy.best_round_ == 9 and copy.score(more, y) == 1.0
    with pytest.raises(ValueError, match=r"E204.*window=2.*window of 1"):
        copy.set_params(window=2, n_rounds=12).fit(more, y)


def test_window_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match=r"E203"):
        TreeCRF(window=-1)
    with pytest.raises(ValueError, match=r"E203"):
        TreeCRF(window=True)
    model = TreeCRF(window=1, n_rounds=2, early_stopping=False)
    with pytest.raises(ValueError, match=r"E205.*sequence 1, position 2: key 'len' is a number"):
        model.fit([[{"w": "a"}], [{"w": "b"}, {"w": "c"}, {"w": "d", "len": 3.0}]], [["0"], ["1", "0", "1"]])
    assert model.ensemble is None  # a refused fit leaves the estimator as it was
    X, y = [[{"w": "a"}, {"w": None}]], [["0", "1"]]
    with pytest.raises(ValueError, match=r"E205.*sequence 0, position 1: key 'w' is missing.*imputation"):
        model.fit(X, y)
    fitted = TreeCRF(window=1, n_rounds=2, early_stopping=False, missing="indicator").fit(X * 3, y * 3)
    assert fitted.predict(X) == y


def test_window_in_model_bytes_is_checked():
    X, y = next_letter_data(20)
    model = TreeCRF(n_rounds=2, window=1, early_stopping=False).fit(X, y)
    msg = serialize.loads("model", model.to_bytes())
    for bad in (-1, 51, "1", True):
        msg["features"]["window"] = bad
        with pytest.raises(ValueError, match=r"E060.*E203"):
            TreeCRF().from_bytes(serialize.dumps("model", msg))


def test_a_string_position_is_its_one_feature():
    X, y = next_letter_data()
    letters = [[position["w"] for position in seq] for seq in X]
    as_dicts = [[{"w": c} for c in seq] for seq in letters]
    model = TreeCRF(n_rounds=10, window=1, early_stopping=False).fit(letters, y)
    assert model.score(letters, y) == 1.0 and model.features.names[:2] == [letters[0][0], letters[0][1]]
    assert model.features.feature_var == [-1] * len(model.features.names)  # names belong to no variable
    general = model.features.rows([[*seq, ["x"]] for seq in letters[:3]], grow=False)  # a list: the general path
    fast = model.features.rows([[*seq, "x"] for seq in letters[:3]], grow=False)
    assert all(np.array_equal(a, b) for a, b in zip(general[:3], fast[:3]))
    renamed = TreeCRF(n_rounds=10, window=1, early_stopping=False).fit(as_dicts, y)  # 'w=a' instead of 'a'
    assert renamed.predict(as_dicts) == model.predict(letters)
    mixed = [[seq[0], {"w": seq[1]}, *seq[2:]] for seq in letters if len(seq) > 2]
    names = TreeCRF(n_rounds=2, early_stopping=False).fit(mixed, [ys for ys, seq in zip(y, letters)
                                                                  if len(seq) > 2]).features.names
    assert mixed[0][0] in names and f"w={mixed[0][1]['w']}" in names  # the general path reads both kinds
