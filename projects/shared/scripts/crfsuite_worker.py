"""sklearn-crfsuite (L-BFGS) on precomputed feature columns; runs in its own process without spaCy, so its peak
RSS is CRFsuite's own. Called by side_by_side.py:

    python crfsuite_worker.py FEATURES.npz OUT.json --metric f1|acc --grid 0.05,0.01 0.2,0.1 [--max-iterations N]
        [--jobs N]

FEATURES.npz holds, for the splits train / dev / test: CSR rows of the treecrf featurizer's columns
(`<split>_indptr`, `<split>_indices`), sequence starts (`<split>_starts`) and label ids (`<split>_y`, into
`labels`). A column id becomes the CRFsuite attribute name, so both learners see exactly the same binary features.

Every (c1, c2) of the grid is fitted on train (no holdout evaluation, so the fit time is training only) and scored
on dev (span F1 from BIO labels, or token accuracy); the best one is kept. With --jobs N, N grid points are fitted
at once, each in its own process (one core each: CRFsuite is single-threaded). The chosen model's tagging of test
is timed after every fit has ended (a point's own process could tag while another still fits on the other core);
its test predictions, fit seconds, iterations and per-iteration seconds are written; then `dev_curve`, the task's
own dev score against training seconds (Figure 1; `--no-curve` skips it): for token accuracy, the chosen setting
fitted once more with dev as CRFsuite's holdout set (its log's accuracy per L-BFGS iteration and the iterations'
cumulative seconds); for span F1, which CRFsuite's log does not give, the chosen setting fitted again with
max_iterations CURVE_ITERATIONS up to the chosen fit's iterations (each fit's seconds and dev F1, the last point
the chosen fit's own).
"""
import argparse
import json
import resource
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import sklearn_crfsuite


class Sequences:
    """Lazy per-sequence feature lists: CRFsuite copies each sequence when it is appended, so the Python lists
    of one sequence exist at a time."""

    def __init__(self, data, split):
        self.indptr = data[f"{split}_indptr"]
        self.indices = data[f"{split}_indices"]
        self.starts = data[f"{split}_starts"]

    def __len__(self):
        return len(self.starts) - 1

    def __iter__(self):
        ip, ix = self.indptr, self.indices
        for s in range(len(self)):
            a, b = int(self.starts[s]), int(self.starts[s + 1])
            yield [[str(c) for c in ix[ip[t]:ip[t + 1]].tolist()] for t in range(a, b)]


def predict(model, X):
    return [[str(tag) for tag in seq] for seq in model.predict(X)]


def label_seqs(data, split, labels):
    y, starts = data[f"{split}_y"], data[f"{split}_starts"]
    names = [labels[i] if i >= 0 else "O" for i in y.tolist()]
    return [names[int(starts[s]):int(starts[s + 1])] for s in range(len(starts) - 1)]


def bio_spans(tags):
    """(start, end, type); an I-X that does not continue an X span opens one (the component's reading)."""
    spans, start, kind = set(), -1, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, label = tag.partition("-")
        if kind is not None and (prefix != "I" or label != kind):
            spans.add((start, i, kind))
            kind = None
        if prefix == "B" or (prefix == "I" and kind is None):
            start, kind = i, label
    return spans


def score(pred, gold, metric):
    if metric == "acc":
        pairs = [(p, g) for ps, gs in zip(pred, gold) for p, g in zip(ps, gs)]
        return sum(p == g for p, g in pairs) / max(1, len(pairs))
    tp = n_pred = n_gold = 0
    for ps, gs in zip(pred, gold):
        a, b = bio_spans(ps), bio_spans(gs)
        tp += len(a & b)
        n_pred += len(a)
        n_gold += len(b)
    return 2 * tp / max(1, n_pred + n_gold)


def fit_point(features, c1, c2, max_it, metric, model_dir):
    """One grid point: fit on train (the model written into model_dir), score dev; returns the choice's record,
    the model's path and the process's peak RSS."""
    data = np.load(features, allow_pickle=False)
    labels = [str(x) for x in data["labels"]]
    path = str(Path(model_dir) / f"c1={c1:g},c2={c2:g}.crfsuite")
    model = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=max_it, model_filename=path)
    t0 = time.perf_counter()
    model.fit(Sequences(data, "train"), label_seqs(data, "train", labels))
    seconds = time.perf_counter() - t0
    dev = score(predict(model, Sequences(data, "dev")), label_seqs(data, "dev", labels), metric)
    its = model.training_log_.iterations if model.training_log_ is not None else []
    run = dict(c1=c1, c2=c2, dev=dev, seconds=seconds, iterations=len(its),
               iteration_seconds=[float(it.get("time", 0.0)) for it in its])
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"  [crfsuite] c1={c1:g} c2={c2:g}: dev {metric} {dev * 100:.2f} ({len(its)} iterations, "
          f"{seconds:.1f} s)", flush=True)
    return run, path, peak_rss_mb


CURVE_ITERATIONS = (5, 10, 20, 40, 80, 160, 320, 640)  # span F1 checkpoints: about the chosen fit's cost again


def dev_curve(data, labels, c1, c2, max_it, metric, chosen):
    """[{iterations, train_seconds, score}]: the task's dev score (``metric``) against training seconds for the
    chosen (c1, c2), as the module docstring says; ``chosen``: the chosen fit's record."""
    dev_gold = label_seqs(data, "dev", labels)
    if metric == "acc":
        model = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=max_it)
        model.fit(Sequences(data, "train"), label_seqs(data, "train", labels), Sequences(data, "dev"), dev_gold)
        points, seconds = [], 0.0
        for i, it in enumerate(model.training_log_.iterations):
            seconds += float(it.get("time", 0.0))
            points.append(dict(iterations=i + 1, train_seconds=seconds,
                               score=float(it.get("item_accuracy_float", float("nan")))))
        return points
    points = []
    for iterations in (n for n in CURVE_ITERATIONS if n < chosen["iterations"]):
        model = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=iterations)
        t0 = time.perf_counter()
        model.fit(Sequences(data, "train"), label_seqs(data, "train", labels))
        seconds = time.perf_counter() - t0
        points.append(dict(iterations=iterations, train_seconds=seconds,
                           score=score(predict(model, Sequences(data, "dev")), dev_gold, metric)))
    return points + [dict(iterations=chosen["iterations"], train_seconds=chosen["seconds"], score=chosen["dev"])]


def tag_test(path, data):
    """The saved model's test predictions and the median seconds of 3 passes (featurization from the columns +
    tagging, as the TreeCRF side's side_by_side.median_pipe_seconds)."""
    model = sklearn_crfsuite.CRF(model_filename=path)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        test_pred = predict(model, Sequences(data, "test"))
        times.append(time.perf_counter() - t0)
    return test_pred, statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("features")
    p.add_argument("out")
    p.add_argument("--metric", choices=["f1", "acc"], required=True)
    p.add_argument("--grid", nargs="+", default=["0.05,0.01", "0.05,0.1", "0.2,0.01", "0.2,0.1"])
    p.add_argument("--max-iterations", type=int, default=0, help="0: CRFsuite's own convergence test")
    p.add_argument("--curve", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--jobs", type=int, default=1, help="grid points fitted at once, one process each")
    args = p.parse_args()
    data = np.load(args.features, allow_pickle=False)
    labels = [str(x) for x in data["labels"]]
    max_it = args.max_iterations or None
    points = [tuple(float(v) for v in item.split(",")) for item in args.grid]
    with tempfile.TemporaryDirectory() as model_dir:
        calls = [(args.features, c1, c2, max_it, args.metric, model_dir) for c1, c2 in points]
        if args.jobs > 1:
            with ProcessPoolExecutor(min(args.jobs, len(calls)), max_tasks_per_child=1) as pool:
                fits = list(pool.map(fit_point, *zip(*calls)))
        else:
            fits = [fit_point(*call) for call in calls]
        run, path, _ = max(fits, key=lambda fit: fit[0]["dev"])  # the first best on ties
        test_pred, predict_seconds = tag_test(path, data)
    out = dict(chosen=dict(c1=run["c1"], c2=run["c2"]), dev=run["dev"], seconds=run["seconds"],
               iterations=run["iterations"], iteration_seconds=run["iteration_seconds"], grid=[f[0] for f in fits],
               metric=args.metric, test_predictions=test_pred, predict_seconds=predict_seconds,
               test_tokens=int(data["test_starts"][-1]), jobs=args.jobs)
    out["peak_rss_mb"] = max(max(f[2] for f in fits),  # the largest grid fit, or the tagging (before the curve fit)
                             resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
    if args.curve:
        out["dev_curve"] = dev_curve(data, labels, run["c1"], run["c2"], max_it, args.metric, run)
    with open(args.out, "w", encoding="utf8") as f:
        json.dump(out, f)
    print(f"  [crfsuite] chosen c1={run['c1']:g} c2={run['c2']:g}: dev {run['dev'] * 100:.2f}, "
          f"peak RSS {out['peak_rss_mb']:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
