"""Where a tagging pipeline's errors are: tokens spaCy's tokenizer does not keep, and accuracy on the gold tokens by
how often training saw the word.

    python benchmarks/error_breakdown.py MODEL TRAIN.spacy DEV.spacy [--attr pos_]

MODEL is a trained pipeline whose component writes ``token.<attr>`` (a UPOS or XPOS treecrf); TRAIN / DEV are the
.spacy files it was trained and scored on (e.g. defaults.py --dev-only's WORK/corpus/upos/). Prints how many gold
tokens of DEV have no one-to-one token in spaCy's tokenization of the text (spaCy's scorer counts them wrong), the
accuracy on the gold tokens themselves, a table by the word's training frequency and ambiguity, and the most
frequent confusions.
"""
import argparse
from collections import Counter, defaultdict

import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example


def unaligned(nlp, docs) -> int:
    """Gold tokens without a one-to-one token in the tokenizer's Doc of their text."""
    count = 0
    for gold in docs:
        align = Example(nlp.make_doc(gold.text), gold).alignment
        to_pred, back = align.y2x, align.x2y.lengths
        start = 0
        for i, n in enumerate(to_pred.lengths.tolist()):
            if not (n == 1 and back[to_pred.data[start]] == 1):
                count += 1
            start += n
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("train")
    parser.add_argument("dev")
    parser.add_argument("--attr", default="pos_")
    args = parser.parse_args()
    nlp = spacy.load(args.model)
    train = list(DocBin().from_disk(args.train).get_docs(nlp.vocab))
    dev = list(DocBin().from_disk(args.dev).get_docs(nlp.vocab))
    seen = Counter(t.text for d in train for t in d)
    tags = defaultdict(set)
    for d in train:
        for t in d:
            tags[t.text].add(getattr(t, args.attr))
    total = sum(len(d) for d in dev)
    print(f"gold tokens without a one-to-one token of spaCy's tokenizer: {unaligned(nlp, dev):,} of {total:,}")
    predicted = nlp.pipe(Doc(nlp.vocab, words=[t.text for t in d]) for d in dev)
    count, wrong, confusions = Counter(), Counter(), Counter()
    for gold, pred in zip(dev, predicted):
        for g, p in zip(gold, pred):
            n = seen[g.text]
            kind = ("never seen in training" if n == 0 else "seen 1-4 times" if n < 5 else
                    "seen more, with several tags" if len(tags[g.text]) > 1 else "seen more, always one tag")
            count[kind] += 1
            if getattr(g, args.attr) != getattr(p, args.attr):
                wrong[kind] += 1
                confusions[(getattr(g, args.attr), getattr(p, args.attr))] += 1
    errors = sum(wrong.values())
    print(f"accuracy on the gold tokens: {100 * (1 - errors / total):.2f}")
    print("| words | share of dev tokens | accuracy | share of the errors |\n|---|---:|---:|---:|")
    for kind, n in count.most_common():
        print(f"| {kind} | {100 * n / total:.1f}% | {100 * (1 - wrong[kind] / n):.2f} | "
              f"{100 * wrong[kind] / max(errors, 1):.1f}% |")
    print("most frequent confusions (gold, predicted):", confusions.most_common(12))


if __name__ == "__main__":
    main()
