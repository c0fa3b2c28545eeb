"""Figure 1 / Figure 2-style PNGs from side_by_side.py's results.json.

    python plot_curves.py benchmark/results.json benchmark/

- `<task>_dev_curve.png` (Figure 1): the task's own dev score (F1 of spans, or token accuracy) against training
  seconds (evaluations excluded), on one axis: every TreeCRF pipeline's rounds (from the `spacy train` log) and
  CRFsuite's chosen c1/c2 (crfsuite_worker.py's dev_curve: per L-BFGS iteration for accuracy, refits at
  checkpoint iterations for F1).
- `<task>_train_seconds.png` (Figure 2): cumulative training seconds (evaluations excluded) vs round / iteration.
  TreeCRF and stock spaCy: from the `spacy train` log, so the first point includes reading and featurizing the
  data; CRFsuite: the per-iteration times of its log, without the loading of the data into CRFsuite (the
  table's "train s" for CRFsuite is the whole fit, loading included).
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(results_path, out_dir):
    res = json.loads(Path(results_path).read_text())
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    task = res["task"]
    tree = [r for r in res["rows"] if r["kind"] == "treecrf"]
    crf = [r for r in res["rows"] if r["kind"] == "crfsuite"]
    stock = [r for r in res["rows"] if r["kind"] == "stock"][:1]

    metrics = sorted({r["metric"] for r in tree + crf})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in tree + crf:
        pts = [(c["train_seconds"], c["score"]) for c in r["curve"]
               if c.get("train_seconds") and c.get("score") is not None]  # (seconds > 0: a log axis)
        if not pts or r.get("curve_metric", r["metric"]) != r["metric"]:
            continue  # (results.json of older runs: CRFsuite's curve in token accuracy, another metric)
        label = r["system"] if r["kind"] == "treecrf" else f"{r['system']} c1={r['c1']:g} c2={r['c2']:g}"
        ax.plot([x for x, _ in pts], [y * 100 for _, y in pts], marker="." if r["kind"] == "treecrf" else "x",
                label=label)
    ax.set_xscale("log")  # the learners' times differ by orders of magnitude on some tasks
    ax.set_xlabel("training seconds (evaluations excluded; log scale)")
    ax.set_ylabel(f"dev {' / '.join(metrics)} (%)")
    ax.set_title(f"{task}: dev score against training time", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / f"{task}_dev_curve.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for r in tree + crf:
        xs = [c["step"] for c in r["curve"]]
        ax.plot(xs, [c["train_seconds"] for c in r["curve"]], marker="." if r["kind"] == "treecrf" else None,
                label=r["system"])
    ax.set_xlabel("round (TreeCRF) / L-BFGS iteration (CRFsuite)")
    ax.set_ylabel("cumulative training seconds")
    ax.legend(fontsize=7, loc="upper left")
    for r in stock:  # spaCy's update steps on their own (top) axis
        top = ax.twiny()
        top.plot([c["step"] for c in r["curve"]], [c["train_seconds"] for c in r["curve"]], ls=":", color="k",
                 label=f"{r['system']} (top axis)")
        top.set_xlabel("update step (stock spaCy)", fontsize=8)
        top.legend(fontsize=7, loc="lower right")
    ax.set_title(f"{task}: training time, evaluations excluded", fontsize=9, pad=28 if stock else 6)
    fig.tight_layout()
    fig.savefig(out / f"{task}_train_seconds.png", dpi=110)
    plt.close(fig)
    print(f"plots -> {out / (task + '_dev_curve.png')}, {out / (task + '_train_seconds.png')}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
