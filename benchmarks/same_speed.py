"""Same speed before and after a change: boosting-round seconds and tagging tokens/s of this checkout against a
git worktree of another commit, measured in turns in one run.

    python benchmarks/same_speed.py --against 4a76416 [--turns 3] [--rounds 10]
    python benchmarks/same_speed.py --against 4a76416 --pipeline MODEL_DIR --test TEST.spacy [--turns 3]

Each turn runs one process per commit (the other commit's package from its worktree, its numba cache warmed by
a first untimed turn): the treecrf component from configs/ner.cfg with the fast settings (max_leaves 300, trim
0.05, label_splits fallback), initialized on CoNLL-2003 train, boosted full-batch for --rounds rounds (the
round time is the median of rounds 2..), then `nlp.pipe` over the test docs (tokens/s: the median of 5 passes
after a warm-up, each after a full garbage collection). Reports the medians over the turns and their ratios.
Data: CoNLL-2003 under TREECRF_DATA_DIR. With --pipeline, tagging alone: that trained pipeline (the same model
files for both commits) over the docs of --test, texts only, measured the same way.
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def tagging_speed(nlp, test) -> float:
    """Tokens/s of nlp.pipe over copies of the docs: the median of 5 passes after a warm-up, each after a full
    garbage collection."""
    n_tokens = sum(len(doc) for doc in test)
    speeds = []
    for i in range(6):
        docs = [doc.copy() for doc in test]
        gc.collect()
        t0 = time.perf_counter()
        list(nlp.pipe(docs, batch_size=1000))
        if i:
            speeds.append(n_tokens / (time.perf_counter() - t0))
    return statistics.median(speeds)


def run(package_dir: Path, args, rounds: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(package_dir)}
    what = ["--pipeline", str(args.pipeline.resolve()), "--test", str(args.test.resolve())] if args.pipeline else []
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
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if bool(args.pipeline) != bool(args.test):
        parser.error("--pipeline and --test go together")
    if args.measure:
        print(json.dumps(measure_pipeline(args.pipeline, args.test) if args.pipeline else measure(args.rounds)))
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
        rounds = f"round {values['round_seconds']:.3f} s, " if "round_seconds" in values else ""
        print(f"{name}: {rounds}tagging {values['tokens_per_second']:,.0f} tokens/s")
    this, other = med["this"], med[args.against]
    rounds = (f"round time {this['round_seconds'] / other['round_seconds']:.3f}, " if "round_seconds" in this
              else "")
    print(f"ratio this / {args.against}: {rounds}tagging {this['tokens_per_second'] / other['tokens_per_second']:.3f}")


if __name__ == "__main__":
    main()
