"""Stacked sequential learning as an experiment outside the package: does a second stage that sees the first
stage's cross-fitted labels gain on dev over the first stage? CoNLL-2003 NER (text only) or CoNLL-2000 chunking.

    TREECRF_DATA_DIR=../shared/data python benchmarks/stacking_experiment.py [--task ner|chunking] [--work DIR]
        [--test]

Every model is `spacy train` of the generated config (defaults.py's user_config for the row) reading column files
through the column reader. ner: `doc_context` on and `documents = true` (a Doc per document, gold tokens, sentence
starts); chunking: the POS column as input, dev every 10th training sentence (carve_dev.py), a Doc per sentence.
Stage 1: two fold models, each trained on every other document / sentence of train, label the ones the other
trained on; a model trained on all of train labels dev (and test). Stage 2 reads the stage-1 BIO label of each
token as a token attribute (`features.attrs`, windowed like every test); for ner, `stage2` also reads the stage-1
entity type given most often to the same word's other mentions in its document ("-" for a word that is not
capitalised or has none), `stage2_own_labels` the labels alone. Prints each model's best dev score and its round;
--test: stage 1's and stage 2's test scores too, the test file read the same way.
"""
import argparse
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import NamedTuple

import spacy
from spacy import util
from spacy.tokens import Doc

import carve_dev
from defaults import SCRIPTS, user_config
from spacy_treecrf.readers import ColumnCorpus, _iter_documents, _iter_sentences


class Task(NamedTuple):
    row: str  # defaults.py's row: its generated config
    names: list  # the file's columns; the label column last
    score: str
    documents: bool  # a Doc per -DOCSTART- document (else per sentence)
    extra: list  # stage-2 columns, inserted before the label column
    stage2: dict  # stage-2 model name -> the extra columns it reads


TASKS = {
    "ner": Task("ner", ["word", "pos", "chunk", "ner"], "ents_f", True, ["s1", "dl"],
                {"stage2": ["s1", "dl"], "stage2_own_labels": ["s1"]}),
    "chunking": Task("chunking", ["word", "pos", "chunk"], "spans_chunks_f", False, ["s1"], {"stage2": ["s1"]}),
}


def blocks(task: Task, path: Path) -> list:
    """(rows, sentence starts) per Doc of a column file."""
    if task.documents:
        return [(rows, starts) for rows, _, starts in _iter_documents(path, len(task.names), None)]
    return [(rows, [0]) for rows, _ in _iter_sentences(path, len(task.names), None)]


def write_blocks(task: Task, docs, path: Path, extra=None) -> Path:
    """A column file of the Docs' rows; ``extra``: per Doc, per token, the stage-1 columns to insert before the
    label column."""
    with open(path, "w", encoding="utf8") as f:
        for q, (rows, starts) in enumerate(docs):
            if task.documents:
                f.write("-DOCSTART- -X- -X- O\n\n")
            for i, row in enumerate(rows):
                if i and i in starts:
                    f.write("\n")
                cols = list(row) if extra is None else list(row[:-1]) + list(extra[q][i]) + [row[-1]]
                f.write(" ".join(cols) + "\n")
            f.write("\n")
    return path


def reader(task: Task, reads: list = None) -> dict:
    """The column reader's settings (without its path) for stage 1, or for a stage 2 that reads ``reads``."""
    keep = {"pos": "tag_"} if task.row == "chunking" else {}
    block = {"@readers": "spacy_treecrf.ColumnCorpus.v1", "documents": task.documents}
    if task.row == "chunking":
        block.update(spans_key="chunks")
    if reads is None:
        return {**block, "format": "conll2003" if task.row == "ner" else "conll2000", "keep_columns": keep}
    columns = task.names[:-1] + task.extra + task.names[-1:]
    return {**block, "format": "columns", "columns": columns, "target": "ner" if task.row == "ner" else "spans",
            "keep_columns": {**keep, **{name: "_." + name for name in reads}}}


def train(task: Task, work: Path, name: str, train_file: Path, dev_file: Path, reads: list = None) -> dict:
    out = work / name
    if not (out / "model-best").exists():
        path = user_config("treecrf", task.row, out)
        cfg = util.load_config(path, interpolate=False)
        for split in ("train", "dev"):
            cfg["corpora"][split] = {**reader(task, reads), "path": "${paths.%s}" % split}
        features = cfg["components"]["treecrf"]["features"]
        features["doc_context"] = task.documents
        if reads:
            features["attrs"] = list(features.get("attrs") or []) + ["_." + name for name in reads]
        cfg.to_disk(path)
        with open(out / "train.log", "w") as log:
            subprocess.run([sys.executable, "-m", "spacy", "train", path, "--paths.train", train_file,
                            "--paths.dev", dev_file, "--output", out, "--code", SCRIPTS / "training_log.py"],
                           check=True, stdout=log, stderr=subprocess.STDOUT)
    evals = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    best = max(evals, key=lambda e: (e["score"], -e["step"]))
    return dict(model=name, best_dev=best["score"], best_round=best["epoch"], rounds=evals[-1]["epoch"])


def stage1_columns(task: Task, model: Path, docs) -> list:
    """Per Doc, per token: the stage-1 BIO label, and for ner the majority stage-1 type of the word's other
    mentions in the document ("-" for none)."""
    nlp = spacy.load(model / "model-best")
    out = []
    for rows, starts in docs:
        words = [r[0] for r in rows]
        tags = [r[1] for r in rows] if task.row == "chunking" else None
        doc = nlp(Doc(nlp.vocab, words=words, tags=tags, sent_starts=[i in starts for i in range(len(words))]))
        spans = doc.ents if task.row == "ner" else doc.spans["chunks"]
        labels = ["O"] * len(doc)
        for span in spans:
            labels[span.start:span.end] = ["B-" + span.label_] + ["I-" + span.label_] * (len(span) - 1)
        if task.row != "ner":
            out.append([(label,) for label in labels])
            continue
        types = [label[2:] or "O" for label in labels]
        where = defaultdict(list)
        for i, word in enumerate(words):
            where[word].append(i)
        majority = []
        for i, word in enumerate(words):
            others = [k for k in where[word] if k != i]
            majority.append(Counter(types[k] for k in others).most_common(1)[0][0]
                            if word[:1].isupper() and others else "-")
        out.append(list(zip(labels, majority)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="ner")
    parser.add_argument("--work", type=Path, default=Path("stacking_experiment"))
    parser.add_argument("--test", action="store_true", help="also score stage 1 and stage 2 on the test file")
    args = parser.parse_args()
    task = TASKS[args.task]
    data = Path(os.environ.get("TREECRF_DATA_DIR", "../shared/data"))
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    if task.row == "ner":
        train_file, dev_file, test_file = (data / "conll2003" / f"{s}.txt" for s in ("train", "valid", "test"))
    else:
        if not (work / "dev-split.txt").exists():
            carve_dev.main(data / "conll2000" / "train.txt", work, 10)
        train_file, dev_file, test_file = work / "train-split.txt", work / "dev-split.txt", data / "conll2000/test.txt"
    train_docs, dev_docs = blocks(task, train_file), blocks(task, dev_file)
    folds = [train_docs[0::2], train_docs[1::2]]
    dev = write_blocks(task, dev_docs, work / "dev1.txt")
    results = [train(task, work, f"stage1_fold{k}", write_blocks(task, folds[k], work / f"fold{k}.txt"), dev)
               for k in (0, 1)]
    results.append(train(task, work, "stage1_full", write_blocks(task, train_docs, work / "train1.txt"), dev))
    extra = [stage1_columns(task, work / f"stage1_fold{1 - k}", folds[k]) for k in (0, 1)]
    merged = [None] * len(train_docs)
    merged[0::2], merged[1::2] = extra
    train2 = write_blocks(task, train_docs, work / "train2.txt", merged)
    dev2 = write_blocks(task, dev_docs, work / "dev2.txt", stage1_columns(task, work / "stage1_full", dev_docs))
    results += [train(task, work, name, train2, dev2, reads) for name, reads in task.stage2.items()]
    for r in results:
        print(f"{r['model']}: best dev {task.score} {100 * r['best_dev']:.2f} at round {r['best_round']} of "
              f"{r['rounds']}")
    if args.test:  # for the record only: nothing above was chosen on it
        test_docs = blocks(task, test_file)
        test2 = write_blocks(task, test_docs, work / "test2.txt",
                             stage1_columns(task, work / "stage1_full", test_docs))
        test1 = write_blocks(task, test_docs, work / "test1.txt")
        for name, reads in [("stage1_full", None)] + list(task.stage2.items()):
            nlp = spacy.load(work / name / "model-best")
            block = {k: v for k, v in reader(task, reads).items() if k != "@readers"}
            examples = list(ColumnCorpus(test1 if reads is None else test2, **block)(nlp))
            print(f"{name}: test {task.score} {100 * nlp.evaluate(examples)[task.score]:.2f}")


if __name__ == "__main__":
    main()
