"""The grower alone: median seconds of grow_tree for one per-label tree on a fixed synthetic problem, or for the
shared tree of a real round of the estimator's defaults (--task), there against grow_tree_threads.

    python benchmarks/grow_speed.py [--label-splits best|fallback] [--repeats 7]
    TREECRF_DATA_DIR=../shared/data python benchmarks/grow_speed.py --task hyphenation [--round 5] [--repeats 7]
    git worktree add /tmp/before <commit> && PYTHONPATH=/tmp/before python benchmarks/grow_speed.py

--task ROW (an estimator row of benchmarks/defaults.py) fits TreeCRF with its defaults for --round rounds on the
row's training data and times the grower on the inputs of the last round's tree (its shared target, positions,
settings and column sample), the tree the fit grew: grow_tree, grow_tree_threads on two threads and on one, in
alternating turns, with the median of each, the first two's ratio and whether they grew the same tree.

Without --task: 150,000 positions in sequences of 15, 10 states, 12 of 60,000 Zipf-distributed features per position, 300
leaves, shrinkage 10. The second form times another commit's grower on the same problem (before shared trees,
the grower took one label's residuals as T x S; after, T x S x d). Clear the numba caches (*.nbi, *.nbc) after
editing a kernel: a cached caller keeps its callees' old code.
"""
import argparse
import os
from pathlib import Path

import numpy as np

from spacy_treecrf.engine import grow as grower
from spacy_treecrf.engine.grow import grow_tree, grow_tree_threads
from spacy_treecrf.engine.sparse import csc_index
from spacy_treecrf.engine.numeric import no_numeric
from spacy_treecrf.engine.trees import GrowSettings, Rows, Target, Tree, no_missing

from measure import median_turns


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
    from spacy_treecrf.engine import booster, shared_fit
    data = Path(os.environ.get("TREECRF_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
    train, *_, featurize = defaults.estimator_sequences(task, data)
    calls = []
    serial, threads = booster.grow_tree, shared_fit.grow_tree_threads

    def recorded(*args):
        calls.append(args)
        return serial(*args)

    def recorded_threads(rows, index, target, positions, settings, feature_ok, numeric, threads):
        return recorded(rows, index, target, positions, settings, feature_ok, grower.no_missing(), numeric)
    booster.grow_tree = shared_fit.grow_tree = recorded  # (per-label trees, shared trees)
    shared_fit.grow_tree_threads = recorded_threads
    try:
        TreeCRF(n_rounds=rounds, early_stopping=False).fit(*defaults.as_xy(train, featurize))
    finally:
        booster.grow_tree = shared_fit.grow_tree = serial
        shared_fit.grow_tree_threads = threads
    return calls[-1]


def same_tree(a, b) -> bool:
    """Whether two Grown trees have the same splits and the same positions in each leaf (values up to rounding)."""
    fields = ("kind", "feature", "yes", "no", "states")
    if any(not np.array_equal(getattr(a.tree, f), getattr(b.tree, f)) for f in fields):
        return False
    for node in np.flatnonzero(a.tree.kind == 0):
        pa, pb = (np.sort(g.segments.pos[g.segments.start[node]:g.segments.start[node] + g.segments.length[node]])
                  for g in (a, b))
        if not np.array_equal(pa, pb):
            return False
    return bool(np.allclose(a.tree.value, b.tree.value, rtol=1e-9, atol=1e-12))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--label-splits", choices=["best", "fallback"], default="best")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--task", help="an estimator row of benchmarks/defaults.py: time a real round's shared tree")
    p.add_argument("--round", type=int, default=5, help="with --task: the round whose tree is grown")
    args = p.parse_args()
    if args.task:
        inputs = round_inputs(args.task, args.round)
        rows, index, target, positions, settings, feature_ok, _, numeric = inputs
        calls = {"grow_tree": lambda: grow_tree(*inputs),
                 "grow_tree_threads": lambda: grow_tree_threads(rows, index, target, positions, settings,
                                                                feature_ok, numeric, 2),
                 "one thread": lambda: grow_tree_threads(rows, index, target, positions, settings, feature_ok,
                                                         numeric, 1)}
        grown = [call() for call in calls.values()]  # (compiles, or loads the cache)
        medians = median_turns(calls, args.repeats)
        print(f"{args.task}, round {args.round}: {len(positions)} positions, {len(grown[0].tree.kind)} nodes; "
              f"medians over {args.repeats} alternating turns: grow_tree {medians['grow_tree']:.4f} s, "
              f"grow_tree_threads {medians['grow_tree_threads']:.4f} s "
              f"({medians['grow_tree'] / medians['grow_tree_threads']:.2f}x), on one thread "
              f"{medians['one thread']:.4f} s; the same tree: {same_tree(grown[0], grown[1])} (grow_tree's), "
              f"{same_tree(grown[1], grown[2])} (one thread's)")
        return
    rows, index, target, F = problem()
    settings = GrowSettings(300, 10.0, 1.0, 0.0, args.label_splits == "fallback", 0)
    inputs = (rows, index, target, np.arange(target.D.shape[0], dtype=np.int64), settings,
              np.ones(F, dtype=bool), no_missing(), no_numeric())
    tree = grow_tree(*inputs)[0]  # compiles (or loads the cache)
    median = median_turns({"grow_tree": lambda: grow_tree(*inputs)}, args.repeats)["grow_tree"]
    print(f"grow_tree, label_splits {args.label_splits}: median {median:.4f} s over {args.repeats}; "
          f"{len(tree.kind)} nodes")


if __name__ == "__main__":
    main()
