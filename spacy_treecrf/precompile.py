"""Compile the package's numba kernels ahead of use, into numba's cache. Building the package runs this (setup.py)
so that an installed copy's first process loads compiled kernels instead of compiling them: half a minute before
a trained pipeline's first call, more before a first training round (benchmarks/results/cold_start.md).

    python -m spacy_treecrf.precompile

It trains and runs tiny models on generated data along the paths a user's first runs take, with the default
settings and with per-label trees: for each target, `initialize` and a few rounds of `update` (the training
kernels), `evaluate` after a to_bytes / from_bytes round trip, and tagging a one-token doc and one of
PARTITION_ROWS tokens (both prediction kernels); the estimator's fit with validation data, predict, marginals
and n-best, with and without missing values, over a numeric column too, over a window, with its shared trees
grown over two shards (as large training sets grow them), and on five in-process shards of a cluster fit. What
these do not reach (another loss, newton leaves, other missing-value strategies) compiles on first use, as it
would without this.

numba keys a cached kernel on its source file's content, the argument types, the CPU and numba's version, and
keeps the cache in the package's __pycache__ folders: a copy built on one machine and installed on another with
a different CPU or numba compiles on first use there (and caches that beside the shipped code where it can
write).
"""
import random
import sys
import time
import warnings
from typing import List

import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

from . import pipe  # noqa: F401 (registers the treecrf factory)
from .engine import shared_fit
from .engine.ensemble import PARTITION_ROWS
from .engine.settings import DECODERS
from .estimator import TreeCRF

N_DOCS = 60  # a few hundred tokens: every label of the generated data occurs
TAGS = ["NOUN", "VERB", "ADJ", "ADP", "DET"]
WORDS = ["the", "a", "of", "in", "and", "to", "runs", "said", "big", "new", ",", ".", "1999", "3.5", "Paris",
         "London", "Smith", "Anna", "Acme", "Corp", "U.S.", "e-mail", "well-known", "NASA"]


def _example_docs(vocab, seed: int) -> List[Example]:
    """Generated sentences with entities (capitalised words: PER or ORG / LOC), coarse tags, fine tags and chunk
    spans, each a (predicted, reference) Example."""
    rng = random.Random(seed)
    examples = []
    for _ in range(N_DOCS):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 14))]
        pos = ["PROPN" if w[0].isupper() else "NUM" if w[0].isdigit() else "PUNCT" if w in ",." else
               TAGS[len(w) % 5] for w in words]
        doc = Doc(vocab, words=words, pos=pos, tags=[f"T{len(w) % 7}" for w in words])
        doc.ents = [Span(doc, i, i + 1, label="PER" if w in ("Smith", "Anna") else "ORG" if w[-1] in "p." else "LOC")
                    for i, w in enumerate(words) if w[0].isupper()]
        doc.spans["chunks"] = [Span(doc, i, min(len(words), i + 2), label="NP") for i in range(0, len(words), 3)]
        examples.append(Example(Doc(vocab, words=words), doc))
    return examples


def compile_component(target: str, shared_trees: bool) -> None:
    nlp = spacy.blank("en")
    config = {"target": target, "booster": {"shared_trees": shared_trees}}
    nlp.add_pipe("treecrf", config=config)
    examples = _example_docs(nlp.vocab, seed=len(target))
    with warnings.catch_warnings():  # W005: the factory's NER score weights, for other targets (no spacy train here)
        warnings.filterwarnings("ignore", message=r"\[W005\]")
        nlp.initialize(lambda: examples)
    for _ in range(3):
        nlp.update(examples)
    loaded = spacy.blank("en")
    loaded.add_pipe("treecrf", config=config)
    loaded.get_pipe("treecrf").from_bytes(nlp.get_pipe("treecrf").to_bytes())
    loaded.evaluate(examples)
    loaded(Doc(loaded.vocab, words=["Paris"]))
    loaded.get_pipe("treecrf").explain(Doc(loaded.vocab, words=["Anna", "said", "."]))
    loaded(Doc(loaded.vocab, words=["Anna", "said", "."] * (PARTITION_ROWS // 3 + 1)))


def _estimator_data(missing: bool):
    rng = random.Random(1)
    X, y = [], []
    for _ in range(N_DOCS):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 10))]
        X.append([{"w": w, "upper": w[0].isupper(), "len": None if missing and len(w) > 4 else str(len(w)),
                   "vowels": sum(c in "aeiou" for c in w) / len(w)} for w in words])
        y.append(["B" if w[0].isupper() else "O" for w in words])
    return X, y


def compile_estimator(shared_trees: bool, missing: bool) -> None:
    X, y = _estimator_data(missing)
    model = TreeCRF(n_rounds=3, shared_trees=shared_trees).fit(X, y, X[:10], y[:10])  # (validation: early stopping)
    model = TreeCRF().from_bytes(model.to_bytes())
    for decode in DECODERS:
        model.set_params(decode=decode)
        model.predict(X[:1])
        model.predict(X * (PARTITION_ROWS // sum(map(len, X)) + 1))
    model.predict_marginals(X)
    model.predict_nbest(X[:2], n=2)
    model.explain(X[0])
    if not missing:  # a window over the positions' flags and strings (its rows: sparse.window_rows)
        X = [[{k: v for k, v in position.items() if k != "vowels"} for position in seq] for seq in X]
        TreeCRF(n_rounds=2, shared_trees=shared_trees, window=1).fit(X, y, X[:10], y[:10]).predict(X)


def compile_two_shard_growth() -> None:
    """The estimator's fit with its shared trees grown over two shards (grow.grow_tree_threads), which only
    training sets of shared_fit.GROW_THREADS_POSITIONS positions reach otherwise."""
    threshold = shared_fit.GROW_THREADS_POSITIONS
    shared_fit.GROW_THREADS_POSITIONS = 0
    try:
        compile_estimator(True, False)
    finally:
        shared_fit.GROW_THREADS_POSITIONS = threshold


def compile_cluster_growth() -> None:
    """The shards' side of a fit on a Dask cluster (engine/cluster.py: the Steps and Landings they pass among
    themselves, wire.py), with five shards held in this process, so that a cluster's workers load these kernels
    rather than compile them in their first round."""
    from .engine.cluster import InProcessClient

    X, y = _estimator_data(False)
    for shared_trees in (True, False):
        TreeCRF(n_rounds=2, shared_trees=shared_trees, early_stopping=False).fit(X, y, scheduler=InProcessClient(5))


def main() -> None:
    t0 = time.perf_counter()
    for shared_trees in (True, False):
        for target in ("ner", "spans", "pos", "tag"):
            compile_component(target, shared_trees)
        for missing in (False, True):
            compile_estimator(shared_trees, missing)
    compile_two_shard_growth()
    compile_cluster_growth()
    print(f"spacy_treecrf: kernels compiled into numba's cache in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
