"""Training on partial annotation: CoNLL-2003 NER with a share of the gold entities removed.

Three training sets from the same train file: full annotation; REMOVE of the entities removed and their tokens
marked *missing* (summed over by the clamped forward-backward); the same entities removed and their tokens
taken as "O" (what a labeller that cannot represent missing gold does). Each is trained for up to ROUNDS
full-batch rounds, the round with the best dev F1 (checked every EVAL rounds) is kept, and test F1 is printed.

    python benchmarks/partial_annotation.py [--data-dir DATA] [--remove 0.3] [--rounds 150] [--eval 10]
"""
import argparse
import os
import random
import time
from pathlib import Path

import spacy
from spacy.tokens import Span
from spacy.training import Example

from spacy_treecrf.readers import ColumnCorpus

ROOT = Path(__file__).resolve().parent.parent
FEATURES = {"@misc": "spacy_treecrf.window_features.v1", "window": 2, "prefix": 3, "suffix": 4}


def load(nlp, path):
    return list(ColumnCorpus(str(path), format="conll2003")(nlp))


def degrade(examples, share, seed, as_outside):
    rng = random.Random(seed)
    out = []
    for eg in examples:
        ref = eg.reference.copy()
        ents = list(ref.ents)
        removed = [e for e in ents if rng.random() < share]
        kept = [e for e in ents if e not in removed]
        ref.set_ents([], default="outside")
        if as_outside:
            ref.set_ents([Span(ref, e.start, e.end, e.label_) for e in kept], default="outside")
        else:
            ref.set_ents([Span(ref, e.start, e.end, e.label_) for e in kept],
                         missing=[Span(ref, e.start, e.end) for e in removed], default="outside")
        out.append(Example(eg.predicted.copy(), ref))
    return out


def train(train_examples, dev, rounds, every):
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config={"target": "ner", "features": FEATURES})
    nlp.initialize(lambda: train_examples)
    best, best_f, best_round = None, -1.0, 0
    t0 = time.perf_counter()
    for r in range(1, rounds + 1):
        nlp.update(train_examples)
        if r % every == 0 or r == rounds:
            f = nlp.evaluate(dev)["ents_f"]
            if f > best_f:
                best, best_f, best_round = nlp.get_pipe("treecrf").to_bytes(), f, r
    nlp.get_pipe("treecrf").from_bytes(best)
    return nlp, best_f, best_round, time.perf_counter() - t0


def main(data_dir: Path, remove: float, rounds: int, every: int, seed: int):
    nlp = spacy.blank("en")
    data = data_dir / "conll2003"
    train_examples = load(nlp, data / "train.txt")
    dev = load(nlp, data / "valid.txt")
    test = load(nlp, data / "test.txt")
    variants = [("full annotation", train_examples),
                (f"{remove:.0%} entities removed, marked missing", degrade(train_examples, remove, seed, False)),
                (f"{remove:.0%} entities removed, taken as O", degrade(train_examples, remove, seed, True))]
    rows = []
    for name, examples in variants:
        model, dev_f, best_round, seconds = train(examples, dev, rounds, every)
        test_f = model.evaluate(test)["ents_f"]
        rows.append((name, dev_f, test_f, best_round, seconds))
        print(f"{name:40s} dev F1 {dev_f * 100:6.2f}  test F1 {test_f * 100:6.2f}  "
              f"(best round {best_round}, {seconds:.0f} s)", flush=True)
    base = rows[0][2]
    print("\ntest F1 loss against full annotation:")
    for name, _, test_f, _, _ in rows[1:]:
        print(f"  {name:40s} {100 * (base - test_f):+.2f} points")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path,
                        default=Path(os.environ.get("TREECRF_DATA_DIR", ROOT.parent / "shared" / "data")))
    parser.add_argument("--remove", type=float, default=0.3)
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--eval", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.data_dir, args.remove, args.rounds, args.eval, args.seed)
