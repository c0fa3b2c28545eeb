"""NETtalk stress / protein secondary structure as .spacy files (one token per letter / residue, gold in tag_),
with the same internal dev split as benchmarks/paper_tasks.py (its fold 0: a seeded 20% of the training words;
for protein, whole homology groups), so `spacy train` can stop early without looking at test.

    python paper_splits.py nettalk|protein DATA_DIR OUT_DIR [--seed 0] [--dev-fraction 0.2]

writes OUT_DIR/train.spacy (training data minus dev), dev.spacy, train-full.spacy (all training data) and
test.spacy. NETtalk uses the fixed 1000/1000 word split (split_train_1000.txt / split_test_1000.txt).
"""
import argparse
import sys
from pathlib import Path

import spacy
from spacy.tokens import DocBin

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "benchmarks"))

import paper_tasks  # noqa: E402
from spacy_treecrf.readers import sequences_to_docs  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("task", choices=["nettalk", "protein"])
    p.add_argument("data_dir", type=Path)
    p.add_argument("out_dir", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dev-fraction", type=float, default=0.2)
    args = p.parse_args()
    if args.task == "nettalk":
        train, test = paper_tasks.load_nettalk(args.data_dir)
        groups = list(range(len(train)))
    else:
        train, test, proteins = paper_tasks.load_protein(args.data_dir)
        groups = paper_tasks.homology_groups(train, proteins, 2 * paper_tasks.TASKS["protein"]["half"] + 1)
    dev_idx = set(paper_tasks.dev_folds(train, groups, args.dev_fraction, args.seed)[0])
    parts = {"train": [s for i, s in enumerate(train) if i not in dev_idx],
             "dev": [s for i, s in enumerate(train) if i in dev_idx],
             "train-full": train, "test": test}
    nlp = spacy.blank("en")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, seqs in parts.items():
        docs = sequences_to_docs(nlp.vocab, seqs, "tag")
        DocBin(docs=docs).to_disk(args.out_dir / f"{name}.spacy")
        print(f"{name}: {len(docs)} sequences, {sum(len(d) for d in docs)} tokens -> {args.out_dir / name}.spacy")


if __name__ == "__main__":
    main()
