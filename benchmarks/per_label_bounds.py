"""Where marginal decoding wants the paper's per-label trees rather than the default shared ones: the evidence
behind small_trees' PER_LABEL_LABELS and PER_LABEL_CELLS (dev data only, never test).

Each case fits `TreeCRF(decode="marginal", small_trees=False)` (the default shared trees) and the same with
SMALL_TREES["per_label"]'s settings and round budget (a tree per label and round of up to 100 leaves, lambda 200, as
many trees as the shared ones: 100 / labels rounds) on the first N training sequences, no dev data given (each holds
out its own 10% to stop where that has 1,000 positions), and scores token accuracy on dev:
- chunking N: CoNLL-2000, sklearn-crfsuite's tutorial features (examples/crfsuite_tutorial.py); dev: the last
  1,000 training sentences (never among the first N fitted here).
- ner N: CoNLL-2003 English, the same tutorial features over its word and POS columns; dev: valid.txt.
- hyphenation N: the first N words of benchmarks/defaults.py's hyphenation training words, 9-letter window; dev:
  its dev words.

    TREECRF_DATA_DIR=../shared/data python benchmarks/per_label_bounds.py [--case chunking=60 ner=300 ...]
    TREECRF_DATA_DIR=../shared/data python benchmarks/per_label_bounds.py --budget [protein nettalk]

--budget: how many per-label trees (budget()): the round budget's evidence (round_budget).
"""
import argparse
import os
import sys
import time
from pathlib import Path

import defaults
import measure
import paper_tasks
from spacy_treecrf import TreeCRF
from spacy_treecrf.estimator import SMALL_TREES, round_budget

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from crfsuite_tutorial import read_conll2000, sent2features  # noqa: E402

CURVE_ROUNDS = (5, 10, 20, 34, 40, 50, 70, 100)
CASES = ("chunking=60", "chunking=120", "chunking=200", "chunking=600", "ner=300", "ner=1000", "hyphenation=2000",
         "hyphenation=6000")


def tutorial_data(path: Path):
    """(X, y) of a CoNLL column file through the tutorial's sent2features (word, POS; the last column the label),
    without -DOCSTART- lines."""
    sents = [s for s in read_conll2000(path, 0) if s[0][0] != "-DOCSTART-"]
    return [sent2features(s) for s in sents], [[token[-1] for token in s] for s in sents]


def task_data(task: str, data: Path):
    """(train X, train y, dev X, dev y, settings) of a task, train in its order."""
    if task == "chunking":
        X, y = tutorial_data(data / "conll2000" / "train.txt")
        return X[:-1000], y[:-1000], X[-1000:], y[-1000:], {}
    if task == "ner":
        return (*tutorial_data(data / "conll2003" / "train.txt"), *tutorial_data(data / "conll2003" / "valid.txt"),
                {})
    *parts, featurizer = defaults.estimator_sequences("hyphenation", data)
    own = lambda seqs: defaults.as_xy(seqs, lambda xs: defaults.token_features(xs, {}))
    return (*own(parts[1]), *own(parts[2]), {"window": featurizer.keywords["half"]})


def main(cases, data: Path):
    loaded = {}
    for case in cases:
        task, _, n = case.partition("=")
        if task not in loaded:
            loaded[task] = task_data(task, data)
        X, y, X_dev, y_dev, settings = loaded[task]
        X, y = X[:int(n)], y[:int(n)]
        scores = {}
        labels = len({label for labels in y for label in labels})
        per_label = SMALL_TREES["per_label"]
        for name, trees in (("shared", {}), ("per_label", dict(per_label.settings, n_rounds=round_budget(
                per_label, 100, labels)))):
            model = TreeCRF(decode="marginal", small_trees=False, **settings, **trees)
            t0 = time.perf_counter()
            model.fit(X, y)
            scores[name] = (paper_tasks.accuracy(model.predict(X_dev), y_dev), time.perf_counter() - t0,
                            model.best_round_)
        positions = sum(map(len, y))
        print(f"| {task} | {n} | {positions:,} | {labels} | {positions * labels:,} | " + " | ".join(
            f"{s[0] * 100:.2f} | {s[1]:.1f}" for s in scores.values())
            + f" | {(scores['per_label'][0] - scores['shared'][0]) * 100:+.2f} |", flush=True)


def budget(task: str, data: Path, repeats: int = 7) -> None:
    """--budget: per-label trees' dev accuracy and tagging speed by their number, against the shared trees', on an
    estimator row's dev split (defaults.py's data, each position's own features through `window`): the dev
    accuracy after each of 100 rounds (dev data given, no stopping), then dev positions/s of featurize + predict
    (medians of ``repeats`` interleaved turns) of models fitted without stopping to 1, 2 and 5 times the shared
    trees' 100."""
    *parts, featurizer = defaults.estimator_sequences(task, data)
    classes, half = featurizer.keywords["classes"], featurizer.keywords["half"]
    own = lambda seqs: defaults.as_xy(seqs, lambda xs: defaults.token_features(xs, classes))
    (X, y), (X_dev, y_dev) = own(parts[1]), own(parts[2])
    labels = len({label for labels in y for label in labels})
    per_label = SMALL_TREES["per_label"]
    kinds = {"shared": {}, "per_label": per_label.settings}
    for name, trees in kinds.items():
        model = TreeCRF(decode="marginal", small_trees=False, window=half, patience=100, **trees)
        curve = [entry["dev_accuracy"] for entry in model.fit(X, y, X_dev, y_dev).history_]
        print(f"| {task} | {name} | " + " | ".join(f"{curve[r - 1] * 100:.2f}" for r in CURVE_ROUNDS) + " |",
              flush=True)
    models = {"shared, 100 trees": TreeCRF(decode="marginal", small_trees=False, window=half, early_stopping=False)}
    for times in (1, 2, 5):
        models[f"per_label, {times * 100} trees"] = TreeCRF(
            decode="marginal", small_trees=False, window=half, early_stopping=False, **dict(
                per_label.settings, n_rounds=round_budget(per_label, times * 100, labels)))
    symbols = [x for x, _ in parts[2]]
    for model in models.values():
        model.fit(X, y)
    seconds = measure.median_turns({name: (lambda m=model: m.predict(defaults.token_features(symbols, classes)))
                                    for name, model in models.items()}, repeats)
    for name, model in models.items():
        print(f"| {task} | {name} | {paper_tasks.accuracy(model.predict(X_dev), y_dev) * 100:.2f} | "
              f"{sum(map(len, symbols)) / seconds[name]:,.0f} |", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", default=list(CASES), help="TASK=N: chunking, ner or hyphenation")
    parser.add_argument("--budget", nargs="*", choices=("protein", "nettalk"), default=None,
                        help="instead: per-label trees' dev accuracy and tagging speed by their number (budget())")
    args = parser.parse_args()
    data = Path(os.environ.get("TREECRF_DATA_DIR", "../shared/data"))
    if args.budget is not None:
        print("| task | trees | dev after round " + " | ".join(map(str, CURVE_ROUNDS)) + " |\n|---|---|"
              + "---:|" * len(CURVE_ROUNDS))
        for task in args.budget or ("protein", "nettalk"):
            budget(task, data)
        sys.exit()
    print("| task | sequences | positions | labels | positions x labels | shared dev | shared fit s | "
          "per-label dev | per-label fit s | per-label gain |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    main(args.case, data)
