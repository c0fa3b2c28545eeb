"""Same speed before and after a change: boosting-round seconds and tagging tokens/s of this checkout against a
git worktree of another commit, measured in turns in one run.

    python benchmarks/same_speed.py --against 4a76416 [--turns 3] [--rounds 10]
    python benchmarks/same_speed.py --against 4a76416 --pipeline MODEL_DIR --test TEST.spacy [--turns 3]
    python benchmarks/same_speed.py --against 4a76416 --task nettalk [--turns 3]

Each turn runs one process per commit (the other commit's package from its worktree, its numba cache warmed by
a first untimed turn): the treecrf component from configs/ner.cfg with the fast settings (max_leaves 300, trim
0.05, label_splits fallback), initialized on CoNLL-2003 train, boosted full-batch for --rounds rounds (the
round time is the median of rounds 2..), then `nlp.pipe` over the test docs (tokens/s: the median of 5 passes
after a warm-up, each after a full garbage collection). Reports the medians over the turns and their ratios.
Data: CoNLL-2003 under TREECRF_DATA_DIR. With --pipeline, tagging alone: that trained pipeline (the same model
files for both commits) over the docs of --test, texts only, measured the same way. With --task (an estimator
row of benchmarks/defaults.py), the estimator: TreeCRF with its defaults fitted on the row's training data (the
fit's seconds), then its tagging of the test sequences from their feature dicts (positions/s of ``predict``) and
the trees alone (microseconds a position of the decoder's potentials, one thread), each the median of 5 passes
after a warm-up.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure import median_seconds

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"components.treecrf.max_leaves": 300, "components.treecrf.trim": 0.05,
            "components.treecrf.label_splits": "fallback", "components.treecrf.n_threads": 2}


def measure(rounds: int) -> dict:
    """One measurement in this process, with whichever spacy_treecrf is on the path."""
    import spacy
    from spacy.util import load_config

    from spacy_treecrf.readers import ColumnCorpus

    data = Path(os.environ["TREECRF_DATA_DIR"]) / "conll2003"
    import spacy_treecrf.pipe  # noqa: F401  (the factory of the package on the path)

    config = load_config(ROOT / "configs" / "ner.cfg")
    component = config["components"]["treecrf"]
    block = component.pop("booster", {})
    block.pop("@misc", None)
    settings = {**block, **{key.rsplit(".", 1)[1]: value for key, value in SETTINGS.items()}}
    if "booster" in spacy.Language.get_factory_meta("treecrf").default_config:  # settings in a [booster] block
        component["booster"] = {"@misc": "spacy_treecrf.booster.v1", **settings}
    else:  # a commit from before the block
        component.update(settings)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    keep = dict(config["corpora"]["train"].get("keep_columns", {}))
    train = list(ColumnCorpus(data / "train.txt", format="conll2003", keep_columns=keep)(nlp))
    test = [eg.predicted for eg in ColumnCorpus(data / "test.txt", format="conll2003", keep_columns=keep)(nlp)]
    nlp.initialize(lambda: train)
    seconds = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        nlp.update(train)
        seconds.append(time.perf_counter() - t0)
    return {"round_seconds": statistics.median(seconds[1:]), "tokens_per_second": tagging_speed(nlp, test)}


def measure_pipeline(pipeline: Path, test_file: Path) -> dict:
    """Tagging alone: the trained pipeline over the texts of test_file's docs."""
    import spacy
    from spacy.tokens import DocBin

    import spacy_treecrf.pipe  # noqa: F401  (the factory of the package on the path)

    nlp = spacy.load(pipeline)
    test = [nlp.make_doc(doc.text) for doc in DocBin().from_disk(test_file).get_docs(nlp.vocab)]
    return {"tokens_per_second": tagging_speed(nlp, test)}


def measure_task(row: str) -> dict:
    """The estimator's fit and tagging on an estimator row of benchmarks/defaults.py (see the docstring)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import defaults
    from spacy_treecrf import TreeCRF

    train, _, _, test = defaults.estimator_data(row, Path(os.environ["TREECRF_DATA_DIR"]))
    t0 = time.perf_counter()
    model = TreeCRF().fit(*train)
    fit_seconds = time.perf_counter() - t0
    X = test[0]
    positions = sum(map(len, X))
    indptr, indices, seq_starts, missing_rows = model._rows(X)

    def trees():
        model.ensemble.scaled_potentials(indptr, indices, model.allowed, seq_starts, 1, missing_rows)
    return {"fit_seconds": fit_seconds, "tokens_per_second": positions / median_seconds(lambda: model.predict(X)),
            "trees_us_per_position": median_seconds(trees) * 1e6 / positions}


def tagging_speed(nlp, test) -> float:
    """Tokens/s of nlp.pipe over fresh copies of the docs (measure.median_seconds)."""
    seconds = median_seconds(lambda docs: list(nlp.pipe(docs, batch_size=1000)),
                             setup=lambda: [doc.copy() for doc in test])
    return sum(len(doc) for doc in test) / seconds


def run(package_dir: Path, args, rounds: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(package_dir)}
    what = ["--pipeline", str(args.pipeline.resolve()), "--test", str(args.test.resolve())] if args.pipeline else []
    what += ["--task", args.task] if args.task else []
    out = subprocess.run([sys.executable, __file__, "--measure", "--rounds", str(rounds), *what], env=env,
                         check=True, capture_output=True, text=True, cwd=package_dir).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="the commit to compare with (a git worktree of it is made)")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pipeline", type=Path, help="a trained pipeline: measure its tagging alone")
    parser.add_argument("--test", type=Path, help="with --pipeline: the .spacy file whose texts it tags")
    parser.add_argument("--task", help="an estimator row of benchmarks/defaults.py: the estimator's fit and tagging")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if bool(args.pipeline) != bool(args.test):
        parser.error("--pipeline and --test go together")
    if args.measure:
        print(json.dumps(measure_pipeline(args.pipeline, args.test) if args.pipeline else
                         measure_task(args.task) if args.task else measure(args.rounds)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.against], check=True,
                       capture_output=True)
        try:
            sides = {"this": ROOT, args.against: base}
            for name, path in sides.items():  # warm the numba caches
                run(path, args, 2)
            results = {name: [] for name in sides}
            for turn in range(args.turns):
                for name, path in sides.items():
                    results[name].append(run(path, args, args.rounds))
                    print(f"turn {turn + 1} {name}: {results[name][-1]}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=True)
    med = {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for name, runs in results.items()}
    for name, values in med.items():
        print(f"{name}: " + ", ".join(f"{key} {value:,.3f}" for key, value in values.items()))
    this, other = med["this"], med[args.against]
    print(f"ratio this / {args.against}: " + ", ".join(f"{key} {this[key] / other[key]:.3f}" for key in this))


if __name__ == "__main__":
    main()
