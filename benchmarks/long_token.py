"""Tagging time of one doc holding a very long token (the pattern tests must be linear in its length).

    python benchmarks/long_token.py [--chars 200000] [--repeats 5]

A blank English pipeline with a treecrf tagger initialized on two tokens; each kind of long token (letters, an
acronym-like run of 'A.' ending in a letter, digits) is tagged --repeats times, a new token each time (the
featurizer caches a word's tests), in a fresh doc; prints the median seconds per doc.
"""
import argparse
import statistics
import time

import spacy
from spacy.tokens import Doc
from spacy.training import Example

import spacy_treecrf.pipe  # noqa: F401  (registers the factory)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config={"target": "tag", "booster": {"max_leaves": 2}})
    nlp.initialize(lambda: [Example.from_dict(Doc(nlp.vocab, words=["a", "b"]), {"tags": ["X", "Y"]})])
    nlp(Doc(nlp.vocab, words=["warm", "up"]))
    n = args.chars
    kinds = (("letters", "a", "bcdefghijk"), ("A.A.…a", "A.", "bcdefghijk"), ("digits", "1", "234567890"))
    for name, body, last in kinds:
        seconds = []
        for i in range(args.repeats):
            token = (body * n)[: n - 1] + last[i % len(last)]
            doc = Doc(nlp.vocab, words=["before", token, "after"])
            start = time.perf_counter()
            nlp(doc)
            seconds.append(time.perf_counter() - start)
        print(f"{name:8s} {n:,} characters: median {statistics.median(seconds):.4f} s per doc")


if __name__ == "__main__":
    main()
