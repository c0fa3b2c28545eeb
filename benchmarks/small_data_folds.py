"""Small data: where to spend spare compute, on the estimator's small tasks' dev splits (never test).

For each task, `TreeCRF(decode="marginal")` as it is (its 10% hold-out stops the fit) against three uses of K folds
of the training sequences (random folds):
- fold curve refit: K fits each scored on its held-out fold after every round (no early stop); the round R with the
  best mean fold accuracy; then one fit on all the training data for R rounds (and for R * K / (K - 1), as the fold
  fits saw (K - 1) / K of the data);
- fold bag: the K fold models fitted for R rounds, their marginals averaged, each position's most probable label.
Tasks: hmm (benchmarks/estimator_defaults.py's synthetic HMM, Bayes-optimal accuracy printed beside), and
defaults.py's estimator rows nettalk, protein, nettalk_phoneme_stress (their dicts, their dev splits).

    TREECRF_DATA_DIR=../shared/data python benchmarks/small_data_folds.py [--task hmm protein nettalk] [--folds 5]
"""
import argparse
import time

import numpy as np

import defaults
import estimator_defaults
import paper_tasks
from spacy_treecrf import TreeCRF


def accuracy(pred, gold) -> float:
    flat = [label for seq in gold for label in seq]
    return float(np.mean([p == g for p, g in zip((label for seq in pred for label in seq), flat)]))


def fold_parts(X, y, fold):
    held = set(fold.tolist())
    return ([x for i, x in enumerate(X) if i not in held], [s for i, s in enumerate(y) if i not in held],
            [X[i] for i in fold], [y[i] for i in fold])


def run(task: str, k: int):
    if task == "hmm":
        (X, y), (Xd, yd), bayes = estimator_defaults.hmm_data(False)
        print(f"{task}: Bayes-optimal dev accuracy {bayes * 100:.2f}")
    else:
        _, (X, y), (Xd, yd), _ = defaults.estimator_data(task, paper_tasks.data_dir(None))
    t0 = time.perf_counter()
    base = TreeCRF(decode="marginal").fit(X, y)
    print(f"{task}: defaults dev {accuracy(base.predict(Xd), yd) * 100:.2f} (round {base.best_round_} of "
          f"{len(base.history_)}, {time.perf_counter() - t0:.1f} s)", flush=True)
    folds = np.array_split(np.random.default_rng(0).permutation(len(X)), k)
    curves, weights = [], []
    t0 = time.perf_counter()
    for fold in folds:
        Xf, yf, Xh, yh = fold_parts(X, y, fold)
        model = TreeCRF(decode="marginal", patience=10 ** 6).fit(Xf, yf, Xh, yh)
        curves.append([entry["dev_accuracy"] for entry in model.history_])
        weights.append(sum(map(len, yh)))
    n = min(map(len, curves))
    mean = np.average([c[:n] for c in curves], axis=0, weights=weights)
    best = int(np.argmax(mean)) + 1
    print(f"{task}: mean fold curve best at round {best} of {n} ({time.perf_counter() - t0:.1f} s for {k} folds)")
    for rounds in dict.fromkeys((best, int(round(best * k / (k - 1))))):
        model = TreeCRF(decode="marginal", n_rounds=rounds, early_stopping=False).fit(X, y)
        print(f"{task}: fold curve refit, {rounds} rounds: dev {accuracy(model.predict(Xd), yd) * 100:.2f}",
              flush=True)
    marginals = [TreeCRF(decode="marginal", n_rounds=best, early_stopping=False).fit(*fold_parts(X, y, fold)[:2])
                 .predict_marginals(Xd) for fold in folds]
    classes = base.classes_
    bagged = [[max(classes, key=lambda c: sum(m[q][t].get(c, 0.0) for m in marginals)) for t in range(len(seq))]
              for q, seq in enumerate(Xd)]
    print(f"{task}: fold bag of {k} at {best} rounds: dev {accuracy(bagged, yd) * 100:.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", nargs="+", default=["hmm", "protein", "nettalk"],
                        choices=("hmm", "protein", "nettalk", "nettalk_phoneme_stress"))
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    for task in args.task:
        run(task, args.folds)


if __name__ == "__main__":
    main()
