"""A sklearn-crfsuite user's switch, measured in one run: their feature dicts, sklearn-crfsuite against TreeCRF's
defaults.

Tasks (data from TREECRF_DATA_DIR or --data-dir):
- conll2000: CoNLL-2000 chunking with sklearn-crfsuite's tutorial features (examples/crfsuite_tutorial.py's
  word2features, `"bias": 1.0` included); scores: the tutorial's weighted token F1 over the labels but O, and chunk
  F1 (metrics.entity_f1_score);
- nettalk: NETtalk phoneme+stress (the project's fixed 1000/1000 word split), 13 shifted letter features a position
  written as sklearn-crfsuite users write them, `{"-6=<pad>": 1, ..., "0=a": 1, ...}`; score: token accuracy.

CRFsuite (L-BFGS, the tutorial's max_iterations=100 and all_possible_transitions=True) gets c1 / c2 from GRID, chosen
on a dev split carved from the training data (the last DEV_SHARE of its sequences), then is refitted on all of it;
TreeCRF is `TreeCRF()`, fitted on all of it. Printed per task: fit seconds (one fit each, the same process), tagging
positions/s of predict(X_test) on the feature dicts (median of --passes turns, the two interleaved), the scores and
the ratios TreeCRF / CRFsuite.

    python benchmarks/crfsuite_switch.py [--tasks conll2000 nettalk] [--passes 5] [--data-dir DIR] [--out FILE]
        [--parts]   (--parts: only TreeCRF's tagging, split into reading the dicts and the rest)
"""
import argparse
import json
import sys
import time
from pathlib import Path

from measure import median_turns
from paper_tasks import data_dir, load_nettalk

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from crfsuite_tutorial import read_conll2000, sent2features, sent2labels  # noqa: E402

from spacy_treecrf import TreeCRF, metrics  # noqa: E402

GRID = [(c1, c2) for c1 in (0.05, 0.1, 0.25) for c2 in (0.01, 0.1)]
DEV_SHARE = 0.1
HALF = 6  # NETtalk: letters either side


def conll2000(data: Path):
    train = read_conll2000(data / "conll2000" / "train.txt", 0)
    test = read_conll2000(data / "conll2000" / "test.txt", 0)
    return ([sent2features(s) for s in train], [sent2labels(s) for s in train],
            [sent2features(s) for s in test], [sent2labels(s) for s in test])


def letter_dicts(word):
    """A position's 13 shifted letters as sklearn-crfsuite users write indicators: {"offset=letter": 1}."""
    n = len(word)
    return [{f"{d}={word[t + d] if 0 <= t + d < n else '<pad>'}": 1 for d in range(-HALF, HALF + 1)}
            for t in range(n)]


def nettalk(data: Path):
    train, test = load_nettalk(data, "phoneme_stress")
    return ([letter_dicts(w) for w, _ in train], [list(y) for _, y in train],
            [letter_dicts(w) for w, _ in test], [list(y) for _, y in test])


def scores(task: str, y_true, y_pred) -> dict:
    if task == "conll2000":
        labels = sorted({label for seq in y_true for label in seq} - {"O"})
        return {"weighted_f1": metrics.flat_f1_score(y_true, y_pred, average="weighted", labels=labels),
                "chunk_f1": metrics.entity_f1_score(y_true, y_pred)}
    return {"accuracy": metrics.flat_accuracy_score(y_true, y_pred)}


def crfsuite(c1, c2):
    import sklearn_crfsuite
    return sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=100, all_possible_transitions=True)


def parts(task: str, data: Path, passes: int) -> dict:
    """TreeCRF's tagging of the test dicts in parts (median of ``passes``): reading the dicts into rows
    (FeatureIndex.rows) and the rest of predict (trees, decoding, labels back into lists)."""
    X, y, X_test, _ = {"conll2000": conll2000, "nettalk": nettalk}[task](data)
    model = TreeCRF().fit(X, y)
    seconds = median_turns({"rows": lambda: model.features.rows(X_test, grow=False),
                            "predict": lambda: model.predict(X_test)}, passes)
    items = sum(map(len, (position for seq in X_test for position in seq)))
    out = {"task": task, "test_positions": sum(map(len, X_test)), "items": items,
           "rows_ms": seconds["rows"] * 1000, "predict_ms": seconds["predict"] * 1000}
    print(f"[{task}] TreeCRF predict of {out['test_positions']:,} positions ({items:,} dict items): "
          f"{out['predict_ms']:.0f} ms, of which reading the dicts {out['rows_ms']:.0f} ms "
          f"({out['rows_ms'] * 1e6 / items:.0f} ns an item)", flush=True)
    return out


def run(task: str, data: Path, passes: int) -> dict:
    X, y, X_test, y_test = {"conll2000": conll2000, "nettalk": nettalk}[task](data)
    key = "weighted_f1" if task == "conll2000" else "accuracy"
    cut = int(len(X) * (1 - DEV_SHARE))
    grid = []
    for c1, c2 in GRID:
        model = crfsuite(c1, c2).fit(X[:cut], y[:cut])
        grid.append({"c1": c1, "c2": c2, "dev": scores(task, y[cut:], model.predict(X[cut:]))[key]})
        print(f"[{task}] crfsuite c1={c1:g} c2={c2:g}: dev {key} {grid[-1]['dev']:.4f}", flush=True)
    best = max(grid, key=lambda g: g["dev"])
    fitted, seconds = {}, {}
    for name, make in (("crfsuite", lambda: crfsuite(best["c1"], best["c2"])), ("treecrf", TreeCRF)):
        t0 = time.perf_counter()
        fitted[name] = make().fit(X, y)
        seconds[name] = time.perf_counter() - t0
    n = sum(map(len, X_test))
    tagging = median_turns({name: (lambda m=m: m.predict(X_test)) for name, m in fitted.items()}, passes)
    out = {"task": task, "train_positions": sum(map(len, X)), "test_positions": n, "crfsuite_c1_c2": best,
           "grid": grid, "treecrf_rounds": fitted["treecrf"].best_round_}
    for name, model in fitted.items():
        out[name] = {"fit_seconds": seconds[name], "positions_per_second": n / tagging[name],
                     **scores(task, y_test, list(map(list, model.predict(X_test))))}
    out["ratios"] = {"fit": seconds["treecrf"] / seconds["crfsuite"],
                     "tagging": tagging["crfsuite"] / tagging["treecrf"]}
    t, c = out["treecrf"], out["crfsuite"]
    print(f"[{task}] crfsuite (c1={best['c1']:g}, c2={best['c2']:g}): fit {c['fit_seconds']:.1f} s, "
          f"{c['positions_per_second']:,.0f} positions/s, {key} {c[key]:.4f}; treecrf (round {out['treecrf_rounds']}): "
          f"fit {t['fit_seconds']:.1f} s ({out['ratios']['fit']:.2f}x), {t['positions_per_second']:,.0f} positions/s "
          f"({out['ratios']['tagging']:.2f}x), {key} {t[key]:.4f}", flush=True)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=("conll2000", "nettalk"), default=["conll2000", "nettalk"])
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--parts", action="store_true", help="only TreeCRF's tagging, split into its parts")
    args = parser.parse_args()
    data = data_dir(args.data_dir)
    results = [(parts if args.parts else run)(task, data, args.passes) for task in args.tasks]
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf8")


if __name__ == "__main__":
    main()
