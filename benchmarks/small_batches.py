"""Small batches of a model the bit-mask tables do not fit (shared trees): the tree walk against the partition
kernel, the choice Ensemble._evaluate makes by booster.PARTITION_ROWS.

    python benchmarks/small_batches.py PIPELINE [--tokens 6 28 100 250 500 1000] [--repeats 50]

For one doc of about N tokens (a sentence repeated), the median microseconds of the component's
Ensemble.scaled_potentials (the potentials decoding reads) with every batch sent through the walk, then through
the partition kernel (PARTITION_ROWS set above / below N for the measurement), after a warm-up of each.
"""
import argparse
import statistics
import time

import spacy

from spacy_treecrf.engine import booster
from spacy_treecrf.pipe import TreeCRFComponent

SENTENCE = "Alice Smith lives in Paris and works for the United Nations in New York ."


def median_us(call, repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline")
    parser.add_argument("--tokens", type=int, nargs="+", default=[6, 28, 100, 250, 500, 1000])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    nlp = spacy.load(args.pipeline)
    pipe = next(p for _, p in nlp.pipeline if isinstance(p, TreeCRFComponent))
    ens = pipe.ensemble
    words = nlp.make_doc(SENTENCE)
    print(f"{args.pipeline}: {ens.n_trees} trees, shared {ens.shared}, bit-mask tables fit {ens._bitmask_fits()}")
    print("| tokens | walk us | partition us | walk / partition |")
    print("|---:|---:|---:|---:|")
    default = booster.PARTITION_ROWS
    try:
        for n in args.tokens:
            doc = nlp.make_doc(" ".join([SENTENCE] * (n // len(words) + 1)))[:n].as_doc()
            indptr, indices, starts = pipe.featurizer([doc])[:3]
            call = lambda: ens.scaled_potentials(indptr, indices, pipe.allowed, starts)  # noqa: E731
            booster.PARTITION_ROWS = n + 1
            walk = median_us(call, args.repeats)
            booster.PARTITION_ROWS = 1
            partition = median_us(call, args.repeats)
            print(f"| {len(doc)} | {walk:,.0f} | {partition:,.0f} | {walk / partition:.2f} |", flush=True)
    finally:
        booster.PARTITION_ROWS = default


if __name__ == "__main__":
    main()
