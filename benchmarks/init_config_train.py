"""`spacy init config --pipeline treecrf` and `spacy train` as a new user runs them, with spaCy's default training
block and no edits: CoNLL-2003 NER converted by spaCy's own converter (text only: no POS or chunk columns), or UD
English EWT UPOS / XPOS converted by spaCy's CoNLL-U converter (one sentence per doc; the target and its score
weight set on the command line, as a user must); then `spacy evaluate` of model-best on the test set.

    TREECRF_DATA_DIR=../shared/data python benchmarks/init_config_train.py [--task ner|upos|xpos]
        [--set NAME=VALUE ...] [--work DIR]

--set overrides one setting of the generated config (a boosting setting, a feature setting or a component
setting, found by name), to try candidate defaults the way the generated config would carry them.
Prints spaCy's training log, then one summary line: rounds (spaCy's epochs), the best dev score and its round,
the training command's wall-clock seconds (evaluations and the patience tail included) and peak resident memory,
model-best's test score and spaCy evaluate's words/s on the test set.
Data under TREECRF_DATA_DIR: conll2003/{train,valid,test}.txt, ud_english_ewt/en_ewt-ud-{train,dev,test}.conllu.
"""
import argparse
import inspect
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from spacy_treecrf.engine.booster import BoostParams
from spacy_treecrf.features import window_features

EWT = "ud_english_ewt/en_ewt-ud-{}.conllu"
NO_NER_SCORES = [arg for key in ("ents_f", "ents_p", "ents_r") for arg in (f"--training.score_weights.{key}", "null")]
TASKS = {  # data files (train, dev, test), converter and its options, command-line overrides, score key
    "ner": (["conll2003/train.txt", "conll2003/valid.txt", "conll2003/test.txt"], ["--converter", "ner"], [],
            "ents_f"),
    "upos": ([EWT.format(s) for s in ("train", "dev", "test")], ["--converter", "conllu", "-n", "1"],
             ["--components.treecrf.target", "pos", "--training.score_weights.pos_acc", "1.0"] + NO_NER_SCORES,
             "pos_acc"),
    "xpos": ([EWT.format(s) for s in ("train", "dev", "test")], ["--converter", "conllu", "-n", "1"],
             ["--components.treecrf.target", "tag", "--training.score_weights.tag_acc", "1.0"] + NO_NER_SCORES,
             "tag_acc"),
}


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


def log_scores(log: str, key: str) -> list:
    """(epoch, step, score) of each evaluation in spaCy's console log, the score from the column named key."""
    lines = [line.split() for line in log.splitlines()]
    header = next(words for words in lines if words[:2] == ["E", "#"])
    column = header.index(key.upper()) - 1  # the header's "LOSS TREECRF" is one column
    return [(int(words[0]), int(words[1]), float(words[column])) for words in lines
            if len(words) == len(header) - 1 and all(w.replace(".", "").isdigit() for w in words)]


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, check=True, text=True, **kwargs)


def streamed(command: list) -> str:
    """Run command, printing its output as it comes; returns the output."""
    print("$", " ".join(command), flush=True)
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line)
    if proc.returncode:
        raise SystemExit(f"{command[2:4]} failed with exit code {proc.returncode}")
    return "".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="ner")
    parser.add_argument("--set", nargs="*", default=[], help="config settings, NAME=VALUE")
    parser.add_argument("--work", type=Path, default=Path("init_config_train"), help="where corpus and models go")
    args = parser.parse_args()
    files, converter, task_overrides, key = TASKS[args.task]
    data = Path(os.environ["TREECRF_DATA_DIR"])
    corpus = args.work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    python = [sys.executable, "-m", "spacy"]
    converted = []
    for name in files:
        converted.append(corpus / (Path(name).stem + ".spacy"))
        if not converted[-1].exists():
            run(python + ["convert", str(data / name), str(corpus)] + converter, stdout=subprocess.DEVNULL)
    config = args.work / "my.cfg"
    run(python + ["init", "config", str(config), "--pipeline", "treecrf", "--force"], stdout=subprocess.DEVNULL)
    out = args.work / "out"
    t0 = time.perf_counter()
    log = streamed(python + ["train", str(config), "--paths.train", str(converted[0]), "--paths.dev",
                             str(converted[1]), "--output", str(out)] + task_overrides
                   + [part for item in args.set for part in override(item)])
    train_seconds = time.perf_counter() - t0
    train_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    evals = log_scores(log, key)
    best = max(evals, key=lambda e: (e[2], -e[1]))
    metrics = args.work / "test_metrics.json"
    run(python + ["evaluate", str(out / "model-best"), str(converted[2]), "--output", str(metrics)],
        stdout=subprocess.DEVNULL)
    scores = json.loads(metrics.read_text())
    print(f"{args.task}, settings {args.set or 'defaults'}: {evals[-1][0]} rounds ({evals[-1][1]} steps); best dev "
          f"{key} {best[2]:.2f} at round {best[0]} (step {best[1]}); spacy train {train_seconds:.1f} s wall, peak "
          f"RSS {train_rss:.0f} MB; model-best test {key} {100 * scores[key]:.2f}, spacy evaluate "
          f"{scores['speed']:,.0f} words/s")


if __name__ == "__main__":
    main()
