"""Stacked label consistency on CoNLL-2003 NER (text only), as an experiment outside the package: does a second
stage that sees the first stage's labels gain on dev over the first stage with document tests?

    TREECRF_DATA_DIR=../shared/data python benchmarks/stacking_experiment.py [--work DIR] [--test]

Both stages are `spacy train` of the generated config (defaults.py's user_config for the ner row) with
`doc_context` on, reading the files through the column reader with `documents = true` (a Doc per document, gold
tokens, sentence starts). Stage 1: two fold models, each trained on every other document of train, label the
documents the other one trained on; a model trained on all of train labels dev. Stage 2 reads two more columns
as token attributes (`features.attrs`): the stage-1 BIO label of the token (windowed like every test) and the
stage-1 entity type given most often to the same word's other mentions in its document ("-" for a word that is
not capitalised or has none); stage2_own_labels reads the first only. Prints each model's best dev ents_f and its
round; --test: stage 1's and stage 2's
test ents_f too (the test file read the same way, stage 1's columns from the model trained on all of train).
"""
import argparse
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import spacy
from spacy import util
from spacy.tokens import Doc

from defaults import SCRIPTS, user_config
from spacy_treecrf.readers import ColumnCorpus, _iter_documents

STAGE2_COLUMNS = ["word", "pos", "chunk", "s1", "dl", "ner"]


def write_documents(docs, path: Path, extra=None) -> Path:
    """A CoNLL-2003 file of (rows, line numbers, sentence starts) documents; ``extra``: per document, per token,
    the stage-1 columns to insert before the NER column."""
    with open(path, "w", encoding="utf8") as f:
        for q, (rows, _, starts) in enumerate(docs):
            f.write("-DOCSTART- -X- -X- O\n\n")
            for i, row in enumerate(rows):
                if i and i in starts:
                    f.write("\n")
                cols = list(row) if extra is None else list(row[:3]) + list(extra[q][i]) + list(row[3:])
                f.write(" ".join(cols) + "\n")
            f.write("\n")
    return path


def train(work: Path, name: str, train_file: Path, dev_file: Path, stage2: bool = False,
          attrs: tuple = ("_.s1", "_.dl")) -> dict:
    out = work / name
    if not (out / "model-best").exists():
        path = user_config("treecrf", "ner", out)
        cfg = util.load_config(path, interpolate=False)
        for split in ("train", "dev"):
            block = {"@readers": "spacy_treecrf.ColumnCorpus.v1", "path": "${paths.%s}" % split, "documents": True,
                     "format": "conll2003"}
            if stage2:
                block.update(format="columns", columns=STAGE2_COLUMNS, target="ner",
                             keep_columns={"s1": "_.s1", "dl": "_.dl"})
            cfg["corpora"][split] = block
        cfg["components"]["treecrf"]["features"]["doc_context"] = True
        if stage2:
            cfg["components"]["treecrf"]["features"]["attrs"] = list(attrs)
        cfg.to_disk(path)
        with open(out / "train.log", "w") as log:
            subprocess.run([sys.executable, "-m", "spacy", "train", path, "--paths.train", train_file,
                            "--paths.dev", dev_file, "--output", out, "--code", SCRIPTS / "training_log.py"],
                           check=True, stdout=log, stderr=subprocess.STDOUT)
    evals = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    best = max(evals, key=lambda e: (e["score"], -e["step"]))
    return dict(model=name, best_dev=best["score"], best_round=best["epoch"], rounds=evals[-1]["epoch"])


def stage1_columns(model: Path, docs) -> list:
    """Per document, per token: (stage-1 BIO label, majority stage-1 type of the word's other mentions or "-")."""
    nlp = spacy.load(model / "model-best")
    out = []
    for rows, _, starts in docs:
        words = [r[0] for r in rows]
        doc = nlp(Doc(nlp.vocab, words=words, sent_starts=[i in starts for i in range(len(words))]))
        types = [t.ent_type_ or "O" for t in doc]
        where = defaultdict(list)
        for i, word in enumerate(words):
            where[word].append(i)
        majority = []
        for i, word in enumerate(words):
            others = [k for k in where[word] if k != i]
            majority.append(Counter(types[k] for k in others).most_common(1)[0][0]
                            if word[:1].isupper() and others else "-")
        out.append([(f"{t.ent_iob_}-{t.ent_type_}" if t.ent_type_ else "O", m) for t, m in zip(doc, majority)])
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("stacking_experiment"))
    parser.add_argument("--test", action="store_true", help="also score stage 1 and stage 2 on the test file")
    args = parser.parse_args()
    data = Path(os.environ.get("TREECRF_DATA_DIR", "../shared/data")) / "conll2003"
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    train_docs = list(_iter_documents(data / "train.txt", 4, None))
    dev_docs = list(_iter_documents(data / "valid.txt", 4, None))
    folds = [train_docs[0::2], train_docs[1::2]]
    dev = write_documents(dev_docs, work / "valid.txt")
    results = [train(work, f"stage1_fold{k}", write_documents(folds[k], work / f"fold{k}.txt"), dev) for k in (0, 1)]
    results.append(train(work, "stage1_full", data / "train.txt", dev))
    extra = [stage1_columns(work / f"stage1_fold{1 - k}", folds[k]) for k in (0, 1)]
    merged = [None] * len(train_docs)
    merged[0::2], merged[1::2] = extra
    train2 = write_documents(train_docs, work / "train2.txt", merged)
    dev2 = write_documents(dev_docs, work / "valid2.txt", stage1_columns(work / "stage1_full", dev_docs))
    results.append(train(work, "stage2", train2, dev2, stage2=True))
    results.append(train(work, "stage2_own_labels", train2, dev2, stage2=True, attrs=("_.s1",)))
    for r in results:
        print(f"{r['model']}: best dev ents_f {100 * r['best_dev']:.2f} at round {r['best_round']} of {r['rounds']}")
    if args.test:  # for the record only: nothing above was chosen on it
        test_docs = list(_iter_documents(data / "test.txt", 4, None))
        stage2_test = write_documents(test_docs, work / "test2.txt", stage1_columns(work / "stage1_full", test_docs))
        for name, path, reader in (("stage1_full", write_documents(test_docs, work / "test.txt"),
                                    dict(format="conll2003")),
                                   ("stage2", stage2_test, dict(format="columns", columns=STAGE2_COLUMNS, target="ner",
                                                                keep_columns={"s1": "_.s1", "dl": "_.dl"})),
                                   ("stage2_own_labels", stage2_test, dict(
                                       format="columns", columns=STAGE2_COLUMNS, target="ner",
                                       keep_columns={"s1": "_.s1"}))):
            nlp = spacy.load(work / name / "model-best")
            examples = list(ColumnCorpus(path, documents=True, **reader)(nlp))
            print(f"{name}: test ents_f {100 * nlp.evaluate(examples)['ents_f']:.2f}")


if __name__ == "__main__":
    main()
