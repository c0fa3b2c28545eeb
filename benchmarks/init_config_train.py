"""`spacy init config --pipeline treecrf` and `spacy train` as a new user runs them, on CoNLL-2003 NER converted by
spaCy's own converter (text only: no POS or chunk columns), with spaCy's default training block and no edits;
then `spacy evaluate` of model-best on the test set.

    TREECRF_DATA_DIR=../shared/data python benchmarks/init_config_train.py [--set NAME=VALUE ...] [--work DIR]

--set overrides one setting of the generated config (a boosting setting, a feature setting or a component
setting, found by name), to try candidate defaults the way the generated config would carry them.
Prints spaCy's training log, then one summary line: rounds (spaCy's epochs), the best dev ents_f and its round,
the training command's wall-clock seconds (evaluations and the patience tail included) and peak resident memory,
model-best's test ents_f and spaCy evaluate's words/s on the test set.
Data: CoNLL-2003 under TREECRF_DATA_DIR (conll2003/{train,valid,test}.txt).
"""
import argparse
import inspect
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

from spacy_treecrf.engine.booster import BoostParams
from spacy_treecrf.features import window_features

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def override(item: str) -> list:
    """NAME=VALUE as spacy train's --components.treecrf[.booster|.features].NAME VALUE."""
    name, sep, value = item.partition("=")
    if not sep:
        raise SystemExit(f"--set wants NAME=VALUE, got {item!r}")
    if name in BoostParams.__dataclass_fields__:
        block = "booster."
    elif name in inspect.signature(window_features).parameters:
        block = "features."
    else:
        block = ""
    return [f"--components.treecrf.{block}{name}", value]


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, check=True, text=True, **kwargs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", nargs="*", default=[], help="config settings, NAME=VALUE")
    parser.add_argument("--work", type=Path, default=Path("init_config_train"), help="where corpus and models go")
    args = parser.parse_args()
    data = Path(os.environ["TREECRF_DATA_DIR"]) / "conll2003"
    corpus = args.work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    python = [sys.executable, "-m", "spacy"]
    for split in ("train", "valid", "test"):
        if not (corpus / f"{split}.spacy").exists():
            run(python + ["convert", str(data / f"{split}.txt"), str(corpus), "--converter", "ner"],
                stdout=subprocess.DEVNULL)
    config = args.work / "my.cfg"
    run(python + ["init", "config", str(config), "--pipeline", "treecrf", "--force"], stdout=subprocess.DEVNULL)
    out = args.work / "out"
    t0 = time.perf_counter()
    log = run(python + ["train", str(config), "--paths.train", str(corpus / "train.spacy"), "--paths.dev",
                        str(corpus / "valid.spacy"), "--output", str(out)]
              + [part for item in args.set for part in override(item)], stdout=subprocess.PIPE).stdout
    train_seconds = time.perf_counter() - t0
    train_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(log)
    rows = [ROW.match(line) for line in log.splitlines()]
    evals = [(int(m[1]), int(m[2]), float(m[4])) for m in rows if m]
    best = max(evals, key=lambda e: (e[2], -e[1]))
    metrics = args.work / "test_metrics.json"
    run(python + ["evaluate", str(out / "model-best"), str(corpus / "test.spacy"), "--output", str(metrics)],
        stdout=subprocess.DEVNULL)
    scores = json.loads(metrics.read_text())
    print(f"settings {args.set or 'defaults'}: {evals[-1][0]} rounds ({evals[-1][1]} steps); best dev ents_f "
          f"{best[2]:.2f} at round {best[0]} (step {best[1]}); spacy train {train_seconds:.1f} s wall, peak RSS "
          f"{train_rss:.0f} MB; model-best test ents_f {100 * scores['ents_f']:.2f}, spacy evaluate "
          f"{scores['speed']:,.0f} words/s")


if __name__ == "__main__":
    main()
