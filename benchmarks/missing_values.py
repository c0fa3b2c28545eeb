"""Missing input values (paper Sec. 7.4, Table 7, Figure 4): the four strategies of TreeCRF on NETtalk stress and
protein secondary structure, with CRFsuite (imputation / indicator features) alongside.

    python benchmarks/missing_values.py [--datasets nettalk protein] [--rates 0.05 0.1 0.2 0.4]
        [--train-versions 5] [--test-versions 5] [--rounds-nettalk 100] [--rounds-protein 60] [--out results.json]
    python benchmarks/missing_values.py --replot nettalk.json protein.json   # table and plot from saved scores

Protocol (the paper's): for each missing rate, ``--train-versions`` versions of the training set and
``--test-versions`` of the test set, each letter / residue missing independently with that probability. A
missing letter makes every test derived from it missing at every window offset that sees it (the paper's
letter-level missingness: all 26 indicators go together). Every method is trained on every training version and
scored on every test version with marginal (forward-backward) decoding; accuracy is the mean over those pairs.

Features: a window of letters (NETtalk, offsets -6..+6) or residues (protein, -5..+5); the key ``w[d]`` holds the
symbol at offset d (None if missing), and a position whose window leaves the sequence gets ``pad[d]`` instead of
``w[d]`` -- the same information as paper_tasks.py's padding symbol, but kept out of ``w[d]``'s values so that
imputation fills in the most common *letter* at that offset (the paper imputes at the letter level) rather than
the padding symbol.

Methods: TreeCRF with missing = instance_weighting, surrogate, imputation, indicator; CRFsuite (L-BFGS) with the
same imputed values or the same indicator features. Settings are fixed, not tuned on these data (TreeCRF:
max_leaves 100, shrinkage 40, ``--rounds-*`` rounds; CRFsuite: c1 0, c2 1).

Table 7-style output: each method's accuracy minus instance weighting's, mean ± standard deviation over the
(train version, test version) pairs, in percentage points, and the mean difference in log-odds of a correct label
(the scale of the paper's coefficients). The table is printed and written to benchmarks/results/missing_values.md;
the Figure 4-style plot (accuracy against missing rate, one line per method) to benchmarks/results/.
"""
import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from spacy_treecrf import TreeCRF
from spacy_treecrf.engine.booster import PAPER_SETTINGS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paper_tasks import crfsuite_scores, data_dir, load_nettalk, load_protein  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TREECRF = ("instance_weighting", "surrogate", "imputation", "indicator")
CRFSUITE = ("crfsuite_imputation", "crfsuite_indicator")
LABELS = {"instance_weighting": "TreeCRF instance weighting", "surrogate": "TreeCRF surrogate splits",
          "imputation": "TreeCRF imputation", "indicator": "TreeCRF indicator features",
          "crfsuite_imputation": "CRFsuite imputation", "crfsuite_indicator": "CRFsuite indicator features"}
HALF = {"nettalk": 6, "protein": 5}
# The paper's Table 7 (log-odds coefficient of each method relative to instance weighting; * = p < 0.05).
PAPER = {"nettalk": {0.05: ("-0.051*", "-0.066*", "-0.064*"), 0.1: ("-0.051*", "-0.067*", "-0.059*"),
                     0.2: ("-0.069*", "-0.057*", "-0.052*"), 0.4: ("-0.080*", "-0.116*", "-0.111*")},
         "protein": {0.05: ("-0.018", "-0.072*", "-0.028*"), 0.1: ("-0.013", "-0.040*", "0.001"),
                     0.2: ("-0.025*", "-0.074*", "-0.020*"), 0.4: ("-0.041*", "-0.072*", "-0.020*")}}


def load(name, root):
    if name == "nettalk":
        return load_nettalk(root)
    train, test, _ = load_protein(root)
    return train, test


def version(seqs, rate, seed):
    """Which symbols are missing in one version of a data set: one boolean array per sequence."""
    rng = np.random.default_rng(seed)
    return [rng.random(len(x)) < rate for x, _ in seqs]


def window(symbols, gone, half):
    n = len(symbols)
    out = []
    for t in range(n):
        position = {}
        for d in range(-half, half + 1):
            u = t + d
            if 0 <= u < n:
                position[f"w[{d:+d}]"] = None if gone[u] else symbols[u]
            else:
                position[f"pad[{d:+d}]"] = True
        out.append(position)
    return out


def featurize(seqs, masks, half):
    return [window(x, gone, half) for (x, _), gone in zip(seqs, masks)]


def most_common_values(X):
    """Each key's most common known value in X (what TreeCRF's imputation learns)."""
    counts = {}
    for seq in X:
        for position in seq:
            for key, value in position.items():
                if value is not None:
                    counts.setdefault(key, Counter())[value] += 1
    return {key: c.most_common(1)[0][0] for key, c in counts.items()}


def fill(X, method, table):
    """CRFsuite's inputs: missing values imputed from ``table``, or replaced by a '<key> missing' indicator."""
    out = []
    for seq in X:
        rows = []
        for position in seq:
            row = {}
            for key, value in position.items():
                if value is not None:
                    row[key] = value
                elif method == "crfsuite_imputation":
                    row[key] = table[key]
                else:
                    row[f"{key} missing"] = True
            rows.append(row)
        out.append(rows)
    return out


def fit_predict(method, X, y, tests, args, rounds):
    """Accuracy of one method trained on (X, y) on each (X_test, y_test) of ``tests``, and the fit seconds."""
    t0 = time.perf_counter()
    if method in TREECRF:
        model = TreeCRF(n_rounds=rounds, max_leaves=100, shrinkage=args.shrinkage, decode="marginal",
                        missing=method, n_threads=args.threads, early_stopping=False, **PAPER_SETTINGS).fit(X, y)
        seconds = time.perf_counter() - t0
        return [model.score(Xt, yt) for Xt, yt in tests], seconds
    import sklearn_crfsuite
    table = most_common_values(X)
    model = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=args.c1, c2=args.c2)
    model.fit(fill(X, method, table), y)
    seconds = time.perf_counter() - t0
    return [crfsuite_scores(model, fill(Xt, method, table), yt)["marginal"] for Xt, yt in tests], seconds


def run_dataset(name, root, args):
    train, test = load(name, root)
    half = HALF[name]
    rounds = args.rounds_nettalk if name == "nettalk" else args.rounds_protein
    y = [list(labels) for _, labels in train]
    y_test = [list(labels) for _, labels in test]
    out = {}
    for rate in args.rates:
        key = int(round(rate * 1000))
        tests = [(featurize(test, version(test, rate, [args.seed, key, 1, v]), half), y_test)
                 for v in range(args.test_versions)]
        scores = {m: [] for m in args.methods}  # per method: train versions x test versions
        seconds = {m: [] for m in args.methods}
        for v in range(args.train_versions):
            X = featurize(train, version(train, rate, [args.seed, key, 0, v]), half)
            for method in args.methods:
                accs, sec = fit_predict(method, X, y, tests, args, rounds)
                scores[method].append(accs)
                seconds[method].append(sec)
                print(f"  {name} rate {rate:g} train version {v}: {method:<20} "
                      f"{' '.join(f'{a * 100:.2f}' for a in accs)}  (fit {sec:.1f} s)", flush=True)
        out[str(rate)] = {"scores": scores, "fit_seconds": seconds}
    return out


def logit(p):
    p = np.clip(np.asarray(p, dtype=float), 1e-9, 1 - 1e-9)
    return np.log(p / (1 - p))


def table(results, args) -> str:
    lines = []
    for name, per_rate in results["datasets"].items():
        rounds = args.rounds_nettalk if name == "nettalk" else args.rounds_protein
        lines.append(f"\n### {name}: accuracy (%) and difference to instance weighting\n")
        lines.append(f"{args.train_versions} training x {args.test_versions} test versions per rate, TreeCRF "
                     f"{rounds} rounds (max_leaves 100, shrinkage {args.shrinkage:g}), marginal decoding. "
                     "Difference: mean ± sd over the (train, test) pairs in percentage points; [log-odds] = mean "
                     "difference of logit(accuracy), the scale of the paper's Table 7, whose values follow in "
                     "(paper: ...) for surrogate / imputation / indicator.\n")
        methods = [m for m in args.methods if m != "instance_weighting"]
        head = "| missing rate | instance weighting | " + " | ".join(LABELS[m] for m in methods) + " |"
        lines.append(head)
        lines.append("|" + "---|" * (len(methods) + 2))
        for rate, res in per_rate.items():
            iw = np.array(res["scores"]["instance_weighting"])
            cells = [f"{float(rate) * 100:g}%", f"{iw.mean() * 100:.2f}"]
            for i, m in enumerate(methods):
                acc = np.array(res["scores"][m])
                diff = (acc - iw) * 100
                cell = f"{acc.mean() * 100:.2f}: {diff.mean():+.2f} ± {diff.std():.2f} " \
                       f"[{(logit(acc) - logit(iw)).mean():+.3f}]"
                paper = PAPER.get(name, {}).get(float(rate))
                if paper and m in TREECRF:
                    cell += f" (paper: {paper[TREECRF.index(m) - 1]})"
                cells.append(cell)
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results, path: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(results["datasets"])
    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        per_rate = results["datasets"][name]
        rates = [float(r) for r in per_rate]
        for method in results["settings"]["methods"]:
            acc = [np.mean(per_rate[r]["scores"][method]) * 100 for r in per_rate]
            ax.plot(np.array(rates) * 100, acc, "--" if method in CRFSUITE else "-", marker="o", label=LABELS[method])
        ax.set_xlabel("missing rate (%)")
        ax.set_ylabel("token accuracy (%)")
        ax.set_title(f"{name}: mean over {results['settings']['train_versions']} x "
                     f"{results['settings']['test_versions']} versions")
        ax.set_xticks(np.array(rates) * 100)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--datasets", nargs="+", choices=["nettalk", "protein"], default=["nettalk", "protein"])
    p.add_argument("--rates", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.4])
    p.add_argument("--train-versions", type=int, default=5)
    p.add_argument("--test-versions", type=int, default=5)
    p.add_argument("--methods", nargs="+", choices=TREECRF + CRFSUITE, default=list(TREECRF + CRFSUITE))
    p.add_argument("--rounds-nettalk", type=int, default=100)
    p.add_argument("--rounds-protein", type=int, default=60)
    p.add_argument("--shrinkage", type=float, default=40.0)
    p.add_argument("--c1", type=float, default=0.0)
    p.add_argument("--c2", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="TreeCRF threads")
    p.add_argument("--out", default=None, help="also write all scores as JSON here")
    p.add_argument("--results-dir", default=str(RESULTS), help="where the table (.md) and the plot (.png) go")
    p.add_argument("--replot", nargs="+", default=None,
                   help="JSON files written by --out (runs with the same settings, e.g. one per data set): print and "
                        "save their table and plot")
    args = p.parse_args(argv)
    if args.replot:
        runs = [json.loads(Path(path).read_text()) for path in args.replot]
        results = {"settings": runs[0]["settings"], "datasets": {},
                   "total_seconds": sum(r["total_seconds"] for r in runs)}
        for run in runs:
            same = {k: v for k, v in run["settings"].items() if k not in ("datasets", "out", "results_dir")}
            if same != {k: v for k, v in results["settings"].items() if k not in ("datasets", "out", "results_dir")}:
                p.error("--replot: the runs were made with different settings")
            results["datasets"].update(run["datasets"])
        results["settings"]["datasets"] = list(results["datasets"])
        results["runs"] = len(runs)
        args = argparse.Namespace(**{**results["settings"], "results_dir": args.results_dir})
    else:
        if "instance_weighting" not in args.methods:
            p.error("--methods must include instance_weighting (the baseline of the table)")
        root = data_dir(args.data_dir)
        t0 = time.perf_counter()
        results = {"settings": vars(args).copy(), "datasets": {}}
        for name in args.datasets:
            print(f"\n=== {name} ===", flush=True)
            results["datasets"][name] = run_dataset(name, root, args)
        results["total_seconds"] = time.perf_counter() - t0
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1))
    text = table(results, args)
    print(text)
    print(f"\ntotal {results['total_seconds']:.0f} s")
    out_dir = Path(args.results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = results.get("runs", 1)
    how = (f" (run as {runs} processes, one per data set, merged with --replot; {results['total_seconds']:.0f} s "
           f"of runs in all)" if runs > 1 else f" ({results['total_seconds']:.0f} s)")
    (out_dir / "missing_values.md").write_text(f"# Missing input values (paper Sec. 7.4)\n\n`{command_line(args)}`"
                                               f"{how}\n{text}\n")
    plot(results, out_dir / "missing_values.png")


def command_line(args) -> str:
    """The command that measured these scores (settings that change them only)."""
    parts = ["python benchmarks/missing_values.py", "--datasets", *args.datasets, "--rates",
             *(f"{r:g}" for r in args.rates), "--methods", *args.methods]
    for name in ("train_versions", "test_versions", "rounds_nettalk", "rounds_protein", "shrinkage", "c1", "c2",
                 "seed"):
        parts += [f"--{name.replace('_', '-')}", f"{getattr(args, name):g}"]
    return " ".join(parts)


if __name__ == "__main__":
    main()
