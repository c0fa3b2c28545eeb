"""Continued training on CoNLL-2003 NER: a model trained without MISC goes on training with it, against a model
trained from scratch on everything, all as a user runs them (`spacy init config --pipeline treecrf`, spaCy's
default training block, only the target and score weight named; rounds by spaCy's early stopping on dev).

    TREECRF_DATA_DIR=../shared/data python benchmarks/continued_training.py [--work DIR] [--out FILE]

1. first: train and dev with every MISC entity unannotated (its tokens' labels unknown, not O), `spacy train`.
2. continued: the full train and dev, the same config plus `[initialize.components.treecrf] resume_from =
   first/model-best`: the trained model gains B-MISC / I-MISC (trees from zero), its feature index grows with
   the new dictionary labels, and boosting goes on from its trees.
3. scratch: the full train and dev, the same config, from nothing.
Per run: rounds (spaCy's epochs, a round each), the best dev ents_f, the training command's wall seconds (with its
dev evaluations and the patience tail) and peak RSS, and model-best's test ents_f from `spacy evaluate`; then
first + continued against scratch. The corpora are converted with `spacy convert --converter ner` (text only).
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import defaults

HERE = Path(__file__).resolve().parent


def without_misc(source: Path, target: Path) -> None:
    """The .spacy file with every MISC entity made missing (set_ents' ``missing``: unknown labels)."""
    import spacy
    from spacy.tokens import DocBin, Span

    nlp = spacy.blank("en")
    docs = list(DocBin().from_disk(source).get_docs(nlp.vocab))
    for doc in docs:
        ents = list(doc.ents)
        doc.set_ents([Span(doc, e.start, e.end, e.label_) for e in ents if e.label_ != "MISC"],
                     missing=[Span(doc, e.start, e.end) for e in ents if e.label_ == "MISC"], default="outside")
    DocBin(docs=docs).to_disk(target)


def train(config: Path, train_file: Path, dev_file: Path, out: Path, resume_from: Path = None) -> dict:
    """`spacy train` (timed, its log kept) unless OUT/run.json exists; the run's record."""
    if not (out / "run.json").exists():
        if resume_from is not None:
            text = config.read_text(encoding="utf8")
            config = out / "config.cfg"
            out.mkdir(parents=True, exist_ok=True)
            config.write_text(text + f'\n[initialize.components.treecrf]\nresume_from = "{resume_from}"\n',
                              encoding="utf8")
        defaults.run([sys.executable, defaults.SCRIPTS / "timed.py", out / "run.json", "--log", out / "train.log",
                      "--", sys.executable, "-m", "spacy", "train", config, "--paths.train", train_file,
                      "--paths.dev", dev_file, "--output", out, "--code", defaults.SCRIPTS / "training_log.py",
                      "--training.logger.path", out / "log.jsonl"])
    record = json.loads((out / "run.json").read_text())
    if record["exit_code"]:
        raise SystemExit(f"spacy train failed: see {out / 'train.log'}")
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line.strip()]
    best = max(log, key=lambda entry: entry["score"])
    meta = json.loads((out / "model-best" / "meta.json").read_text())
    return {"wall_seconds": record["wall_seconds"], "peak_rss_mb": record["peak_rss_mb"],
            "rounds_run": log[-1]["epoch"],
            "best_epoch": best["epoch"], "dev_ents_f": best["score"], "labels": meta["labels"]["treecrf"]}


def evaluate(model: Path, test_file: Path, out: Path) -> float:
    if not out.exists():
        defaults.run([sys.executable, "-m", "spacy", "evaluate", model, test_file, "--output", out],
                     stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["ents_f"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("continued_training"))
    parser.add_argument("--out", type=Path, default=HERE / "results" / "continued_training.md")
    args = parser.parse_args()
    data = Path(os.environ.get("TREECRF_DATA_DIR") or HERE.parent.parent / "shared" / "data")
    sys.path.insert(0, str(defaults.SCRIPTS))
    work = args.work.resolve()
    train_file, dev_file, test_file = defaults.spacy_corpus("ner", data, work)
    partial = [work / "corpus" / f"{f.stem}-no-misc.spacy" for f in (train_file, dev_file)]
    for source, target in zip((train_file, dev_file), partial):
        if not target.exists():
            without_misc(source, target)
    config = defaults.user_config("treecrf", "ner", work / "config")
    runs = {}
    runs["first (no MISC)"] = train(config, *partial, work / "first")
    runs["continued (+MISC)"] = train(config, train_file, dev_file, work / "continued",
                                      resume_from=work / "first" / "model-best")
    runs["scratch"] = train(config, train_file, dev_file, work / "scratch")
    for name, run in runs.items():
        folder = work / {"first (no MISC)": "first", "continued (+MISC)": "continued", "scratch": "scratch"}[name]
        run["test_ents_f"] = evaluate(folder / "model-best", test_file, folder / "test.json")
    both = runs["first (no MISC)"]["wall_seconds"] + runs["continued (+MISC)"]["wall_seconds"]
    lines = ["# Continued training on CoNLL-2003: adding MISC to a trained model", "",
             f"`python benchmarks/continued_training.py` at {defaults.commit()}; AMD EPYC, 2 CPUs, one run at a time. "
             "Test ents_f from `spacy evaluate` of model-best; wall seconds of each `spacy train` (its dev "
             "evaluations and patience tail included).", "",
             "| run | labels | rounds run | best dev round | dev ents_f | test ents_f | wall s | peak RSS MB |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, run in runs.items():
        lines.append(f"| {name} | {len(run['labels'])} | {run['rounds_run']} | {run['best_epoch']} | "
                     f"{run['dev_ents_f'] * 100:.2f} | {run['test_ents_f'] * 100:.2f} | {run['wall_seconds']:.0f} | "
                     f"{run['peak_rss_mb']:,.0f} |")
    scratch = runs["scratch"]
    continued = runs["continued (+MISC)"]
    lines += ["", f"Continued against scratch: test ents_f {continued['test_ents_f'] * 100:.2f} vs "
              f"{scratch['test_ents_f'] * 100:.2f} ({(continued['test_ents_f'] - scratch['test_ents_f']) * 100:+.2f}); "
              f"wall seconds: the continuation {continued['wall_seconds']:.0f} vs scratch "
              f"{scratch['wall_seconds']:.0f}; first + continuation {both:.0f}."]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf8")
    (args.out.with_suffix(".json")).write_text(json.dumps(runs, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
