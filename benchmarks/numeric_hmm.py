"""Real-valued emissions: TreeCRF's learned thresholds against Bayes-optimal decoding and sklearn-crfsuite.

An HMM with 3 labels (stay 0.7, switch 0.15 to each other label) emits 2 real values per position, independent
given the label, with class-conditional densities no linear weight can separate (not monotone in x):

    x0: label 0 ~ N(0, 0.7); label 1 ~ N(-3, 0.7) or N(3, 0.7); label 2 ~ a wide mixture of N(-1.5, 2),
        N(1.5, 2), N(0, 5)
    x1: label 0 ~ N(-2, 0.8) or N(2, 0.8); label 1 ~ N(0, 0.8); label 2 ~ N(0, 3)

100 training sequences of length 100, a dev set of 50 and fresh test sequences from the same HMM. The
Bayes-optimal decoder is posterior (marginal) decoding with the true model. Every model sees the values at
offsets -1, 0, +1 (absent past a sequence's ends):

- TreeCRF: the values as numbers (numeric columns, learned thresholds), with the estimator's defaults and with
  settings chosen on dev (decoding by marginals, as the Bayes-optimal decoder does);
- sklearn-crfsuite on the raw values (each a feature whose weight scales with the value, CRFsuite's only use of a
  number), and on hand-binned values (unit-wide bins from -8 to 8 as categories), each with a bias feature (as
  sklearn-crfsuite's tutorial has), c1 / c2 chosen on dev.

    python benchmarks/numeric_hmm.py [--seeds 0 1 2] [--n-test 300] [--out benchmarks/results/numeric_hmm]

sklearn-crfsuite is optional (pip install sklearn-crfsuite); without it its rows are left out.
"""
import argparse
import json
import time
from pathlib import Path

import numpy as np

from spacy_treecrf import TreeCRF

K = 3
TRANS = np.full((K, K), 0.15) + np.eye(K) * 0.55
START = np.full(K, 1.0 / K)
# per dimension and label: mixture components (weight, mean, sd)
EMISSIONS = [
    [[(1.0, 0.0, 0.7)], [(0.5, -3.0, 0.7), (0.5, 3.0, 0.7)], [(1 / 3, -1.5, 2.0), (1 / 3, 1.5, 2.0), (1 / 3, 0, 5.0)]],
    [[(0.5, -2.0, 0.8), (0.5, 2.0, 0.8)], [(1.0, 0.0, 0.8)], [(1.0, 0.0, 3.0)]],
]
OFFSETS = (-1, 0, 1)
TREECRF_GRID = [{}, {"max_leaves": 16, "learning_rate": 0.3, "label_splits": "best"},
                {"max_leaves": 4, "learning_rate": 0.3, "leaf_values": "newton"},
                {"max_leaves": 16, "learning_rate": 0.3, "leaf_values": "newton", "label_splits": "best"}]
CRFSUITE_GRID = [{"c1": c1, "c2": c2} for c1 in (0.0, 0.1) for c2 in (0.01, 0.1, 1.0)]


def sample(rng, n, length):
    """n sequences: (x: length x 2 floats, y: length label ids)."""
    seqs = []
    for _ in range(n):
        y = np.empty(length, dtype=int)
        y[0] = rng.choice(K, p=START)
        for t in range(1, length):
            y[t] = rng.choice(K, p=TRANS[y[t - 1]])
        x = np.empty((length, len(EMISSIONS)))
        for d, per_label in enumerate(EMISSIONS):
            for t in range(length):
                parts = per_label[y[t]]
                w, mean, sd = parts[rng.choice(len(parts), p=[p[0] for p in parts])]
                x[t, d] = rng.normal(mean, sd)
        seqs.append((x, y))
    return seqs


def density(x):
    """p(x_t | label) for every position (T x K)."""
    out = np.ones((len(x), K))
    for d, per_label in enumerate(EMISSIONS):
        for k, parts in enumerate(per_label):
            out[:, k] *= sum(w * np.exp(-0.5 * ((x[:, d] - m) / s) ** 2) / (s * np.sqrt(2 * np.pi))
                             for w, m, s in parts)
    return out


def posterior_decode(x):
    e = density(x)
    T = len(x)
    alpha = np.zeros((T, K))
    beta = np.ones((T, K))
    alpha[0] = START * e[0]
    alpha[0] /= alpha[0].sum()
    for t in range(1, T):
        alpha[t] = alpha[t - 1] @ TRANS * e[t]
        alpha[t] /= alpha[t].sum()
    for t in range(T - 2, -1, -1):
        beta[t] = TRANS @ (e[t + 1] * beta[t + 1])
        beta[t] /= beta[t].sum()
    return (alpha * beta).argmax(axis=1)


def numbers(x):
    """Each position's values at the window offsets, as numbers."""
    T = len(x)
    return [{f"x{d}@{o}": float(x[t + o, d]) for o in OFFSETS if 0 <= t + o < T for d in range(x.shape[1])}
            for t in range(T)]


def binned(x):
    """The same values in unit-wide bins from -8 to 8, as categories."""
    return [{key: str(int(np.clip(np.floor(v), -8, 8))) for key, v in position.items()} for position in numbers(x)]


def labels(data):
    return [[str(k) for k in y] for _, y in data]


def accuracy(pred, gold) -> float:
    pairs = [(p, g) for ps, gs in zip(pred, gold) for p, g in zip(ps, gs)]
    return sum(p == g for p, g in pairs) / len(pairs)


def run_treecrf(train, dev, test) -> list:
    """The estimator's defaults, and the best of TREECRF_GRID on dev."""
    best = None
    t0 = time.perf_counter()
    test_x = [numbers(x) for x, _ in test]
    for settings in TREECRF_GRID:
        # (each grid point as it is: the defaults' small_trees would fit its own small trees beside it)
        model = TreeCRF(n_rounds=400, decode="marginal", patience=30, **settings, **(
            {"small_trees": False} if settings else {}))
        model.fit([numbers(x) for x, _ in train], labels(train), [numbers(x) for x, _ in dev], labels(dev))
        dev_acc = max(h["dev_accuracy"] for h in model.history_)
        print(f"  TreeCRF {settings or 'defaults'}: dev {dev_acc * 100:.2f}% at round {model.best_round_}")
        if not settings:
            defaults = {"model": "TreeCRF, numeric columns, defaults", "settings": "defaults",
                        "rounds": model.best_round_, "accuracy": accuracy(model.predict(test_x), labels(test))}
        if best is None or dev_acc > best[0]:
            best = (dev_acc, settings, model)
    _, settings, model = best
    return [defaults, {"model": "TreeCRF, numeric columns, chosen on dev", "settings": settings or "defaults",
                       "rounds": model.best_round_, "accuracy": accuracy(model.predict(test_x), labels(test)),
                       "grid_seconds": time.perf_counter() - t0}]


def run_crfsuite(name, featurize, train, dev, test):
    import sklearn_crfsuite

    best = None
    for settings in CRFSUITE_GRID:
        model = sklearn_crfsuite.CRF(algorithm="lbfgs", max_iterations=200, **settings)
        model.fit([with_bias(featurize(x)) for x, _ in train], labels(train))
        dev_acc = accuracy(model.predict([with_bias(featurize(x)) for x, _ in dev]), labels(dev))
        if best is None or dev_acc > best[0]:
            best = (dev_acc, settings, model)
    _, settings, model = best
    return {"model": name, "settings": settings, "rounds": None,
            "accuracy": accuracy(model.predict([with_bias(featurize(x)) for x, _ in test]), labels(test))}


def with_bias(positions):
    return [{**position, "bias": 1.0} for position in positions]


def run(seed: int, n_test: int) -> list:
    """The rows of one draw of training, dev and test sequences."""
    rng = np.random.default_rng(seed)
    train, dev, test = sample(rng, 100, 100), sample(rng, 50, 100), sample(rng, n_test, 100)
    gold = np.concatenate([y for _, y in test])
    bayes = float((np.concatenate([posterior_decode(x) for x, _ in test]) == gold).mean())
    rows = [{"model": "Bayes-optimal (true HMM, posterior decoding)", "settings": None, "rounds": None,
             "accuracy": bayes}] + run_treecrf(train, dev, test)
    try:
        rows += [run_crfsuite("sklearn-crfsuite, raw values", numbers, train, dev, test),
                 run_crfsuite("sklearn-crfsuite, hand-binned values", binned, train, dev, test)]
    except ImportError:
        print("sklearn-crfsuite is not installed: its rows are left out")
    return [{**row, "seed": seed, "below_bayes": bayes - row["accuracy"], "test_positions": len(gold)}
            for row in rows]


def main(seeds, n_test: int, out: Path = None):
    rows = [row for seed in seeds for row in run(seed, n_test)]
    lines = ["| seed | model | test accuracy | points below Bayes-optimal | chosen on dev |", "|---|---|---:|---:|---|"]
    for row in rows:
        chosen = "" if row["settings"] is None else f"{row['settings']}" + (
            f", {row['rounds']} rounds" if row["rounds"] else "")
        lines.append(f"| {row['seed']} | {row['model']} | {row['accuracy'] * 100:.2f}% | "
                     f"{row['below_bayes'] * 100:.2f} | {chosen} |")
    medians = ["", "| model | median points below Bayes-optimal |", "|---|---:|"]
    for model in dict.fromkeys(row["model"] for row in rows):
        gaps = [row["below_bayes"] for row in rows if row["model"] == model]
        medians.append(f"| {model} | {np.median(gaps) * 100:.2f} |")
    table = "\n".join(lines + medians)
    print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps({"seeds": list(seeds), "n_test": n_test, "rows": rows},
                                                       indent=1, default=str))
        out.with_suffix(".md").write_text(
            f"# Real-valued emissions: learned thresholds against the Bayes-optimal decoder\n\n"
            f"`python benchmarks/numeric_hmm.py --seeds {' '.join(map(str, seeds))} --n-test {n_test} --out {out}`"
            f"\n\n{rows[0]['test_positions']} test positions per seed; the HMM and the models are described in the "
            f"script's header. Every emission density is symmetric about 0, so a value's sign or size tells nothing "
            f"on its own and a linear weight per value (CRFsuite on raw values) is no better than chance.\n\n"
            f"{table}\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--n-test", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    main(args.seeds, args.n_test, args.out)
