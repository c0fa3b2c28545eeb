"""The grower alone: median seconds of grow_tree for one per-label tree on a fixed synthetic problem, or for the
shared tree of a real round of the estimator's defaults (--task).

    python benchmarks/grow_speed.py [--label-splits best|fallback] [--repeats 7]
    TREECRF_DATA_DIR=../shared/data python benchmarks/grow_speed.py --task hyphenation [--round 5] [--repeats 7]
    git worktree add /tmp/before <commit> && PYTHONPATH=/tmp/before python benchmarks/grow_speed.py

--task ROW (an estimator row of benchmarks/defaults.py) fits TreeCRF with its defaults for --round rounds on the
row's training data and times grow_tree on the inputs of the last round's tree (its shared target, positions,
settings and column sample), the tree the fit grew.

Without --task: 150,000 positions in sequences of 15, 10 states, 12 of 60,000 Zipf-distributed features per position, 300
leaves, shrinkage 10. The second form times another commit's grower on the same problem (before shared trees,
the grower took one label's residuals as T x S; after, T x S x d). Clear the numba caches (*.nbi, *.nbc) after
editing a kernel: a cached caller keeps its callees' old code.
"""
import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from spacy_treecrf.engine.grow import grow_tree
from spacy_treecrf.engine.sparse import csc_index
from spacy_treecrf.engine.numeric import no_numeric
from spacy_treecrf.engine.trees import GrowSettings, Rows, Target, Tree, no_missing


def problem(seed=0):
    rng = np.random.default_rng(seed)
    T, F, S, per_row = 150_000, 60_000, 10, 12
    indices = np.sort((rng.zipf(1.2, size=T * per_row) % F).reshape(T, per_row), axis=1).astype(np.int32).ravel()
    indptr = np.arange(0, T * per_row + 1, per_row, dtype=np.int64)
    D = rng.normal(size=(T, S)) * 0.1
    D[:, 3] += (indices.reshape(T, per_row)[:, 0] % 3 == 0) * 0.5
    is_start = np.zeros(T, dtype=bool)
    is_start[::15] = True
    if "vector" in Tree._fields:  # a grower over residual vectors: one component
        D = D[:, :, None].copy()
    return Rows(indptr, indices), csc_index(indptr, indices, F), Target(D, is_start, np.ones(S, dtype=bool)), F


def round_inputs(task: str, rounds: int) -> tuple:
    """grow_tree's arguments for the tree of round ``rounds`` of TreeCRF().fit on the task's training data."""
    import defaults
    from spacy_treecrf import TreeCRF
    from spacy_treecrf.engine import booster
    data = Path(os.environ.get("TREECRF_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
    train, *_, featurize = defaults.estimator_sequences(task, data)
    calls = []
    grow = booster.grow_tree

    def recorded(*args):
        calls.append(args)
        return grow(*args)
    booster.grow_tree = recorded
    try:
        TreeCRF(n_rounds=rounds, early_stopping=False).fit(*defaults.as_xy(train, featurize))
    finally:
        booster.grow_tree = grow
    return calls[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--label-splits", choices=["best", "fallback"], default="best")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--task", help="an estimator row of benchmarks/defaults.py: time a real round's shared tree")
    p.add_argument("--round", type=int, default=5, help="with --task: the round whose tree is grown")
    args = p.parse_args()
    if args.task:
        inputs = round_inputs(args.task, args.round)
        label = f"{args.task}, round {args.round}"
    else:
        rows, index, target, F = problem()
        settings = GrowSettings(300, 10.0, 1.0, 0.0, args.label_splits == "fallback", 0)
        inputs = (rows, index, target, np.arange(target.D.shape[0], dtype=np.int64), settings,
                  np.ones(F, dtype=bool), no_missing(), no_numeric())
        label = f"label_splits {args.label_splits}"
    grow = lambda: grow_tree(*inputs)  # noqa: E731
    tree = grow()[0]  # compiles (or loads the cache)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        grow()
        times.append(time.perf_counter() - t0)
    print(f"grow_tree, {label}: median {statistics.median(times):.4f} s over "
          f"{args.repeats}; {len(tree.kind)} nodes")


if __name__ == "__main__":
    main()
