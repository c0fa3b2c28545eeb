"""Tagging speed with numeric columns against the same number of binary columns, at equal trees.

Generated sequences with C columns per position, labels (3) from a hidden chain whose emissions move every
column. Two encodings of the same kind of input, trained with the same settings and rounds:

- numeric: each column a real value (its numeric column: binned, threshold tests, rows expanded for the
  prediction kernels, see engine/numeric.py);
- binary: each column a flag (a feature present or not), drawn with the same label dependence.

Both train to full trees (every tree max_leaves leaves, checked), so the ensembles have the same number of nodes.
Tagging speed is positions / s, the median of --repeats passes, of (a) the trees alone
(Ensemble.scaled_potentials on ready rows, large batches: the partition kernel; one sequence at a time: the
bit-mask kernel for per-label trees) and (b) ``predict`` from dicts. The ratio binary / numeric is the cost of
numeric columns.

    python benchmarks/numeric_speed.py [--columns 20] [--positions 50000] [--out benchmarks/results/numeric_speed]
"""
import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from spacy_treecrf import TreeCRF

K = 3


def data(rng, n_seq, length, columns, numeric: bool):
    """Sequences of dicts and their labels: label k shifts column c's value by a per-(k, c) amount (numeric) or
    its flag's probability (binary)."""
    shift = np.random.default_rng(0).normal(0, 1, (K, columns))
    X, Y = [], []
    for _ in range(n_seq):
        y = np.empty(length, dtype=int)
        y[0] = rng.integers(K)
        for t in range(1, length):
            y[t] = y[t - 1] if rng.random() < 0.7 else rng.integers(K)
        values = rng.normal(shift[y], 1.0)
        if numeric:
            X.append([{f"c{j}": float(v) for j, v in enumerate(row)} for row in values])
        else:
            X.append([{f"c{j}": bool(v > 0) for j, v in enumerate(row)} for row in values])
        Y.append([str(k) for k in y])
    return X, Y


def median_speed(call, positions: int, repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return positions / statistics.median(times)


def measure(numeric: bool, args) -> dict:
    rng = np.random.default_rng(1)
    length = 50
    X, Y = data(rng, args.train_positions // length, length, args.columns, numeric)
    Xt, _ = data(rng, args.positions // length, length, args.columns, numeric)
    model = TreeCRF(n_rounds=args.rounds, max_leaves=args.max_leaves, shared_trees=args.shared_trees,
                    early_stopping=False).fit(X, Y)
    forest = model.ensemble.forest()
    sizes = np.diff(forest.roots)
    leaves = (sizes + 1) // 2
    indptr, indices, seq_starts, missing_rows = model._rows(Xt)
    T = len(indptr) - 1
    ens = model.ensemble

    def trees_large():
        ens.scaled_potentials(indptr, indices, model.allowed, seq_starts, model.params.threads, missing_rows)

    one = [model._rows([x]) for x in Xt[:200]]

    def trees_small():
        for i, s, st, mr in one:
            ens.scaled_potentials(i, s, model.allowed, st, model.params.threads, mr)

    kernel_rows = ens.kernel_rows(indptr, indices)
    return {"encoding": "numeric" if numeric else "binary", "trees": int(len(sizes)),
            "nodes": int(sizes.sum()), "full_trees": bool(np.all(leaves == args.max_leaves)),
            "row_ids_per_position": float(len(indices) / T),
            "kernel_ids_per_position": float(len(kernel_rows.indices) / T),
            "trees_positions_per_second": median_speed(trees_large, T, args.repeats),
            "trees_one_sequence_positions_per_second": median_speed(trees_small, 200 * length, args.repeats),
            "predict_positions_per_second": median_speed(lambda: model.predict(Xt), T, args.repeats)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--columns", type=int, default=20)
    p.add_argument("--positions", type=int, default=50_000, help="test positions")
    p.add_argument("--train-positions", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--max-leaves", type=int, default=32)
    p.add_argument("--shared-trees", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    rows = [measure(numeric, args) for numeric in (False, True)]
    binary, numeric = rows
    keys = ["trees_positions_per_second", "trees_one_sequence_positions_per_second", "predict_positions_per_second"]
    lines = ["| | binary columns | numeric columns | binary / numeric |", "|---|---:|---:|---:|"]
    for name in ["trees", "nodes", "full_trees", "row_ids_per_position", "kernel_ids_per_position"]:
        lines.append(f"| {name.replace('_', ' ')} | {binary[name]} | {numeric[name]} | |")
    for key in keys:
        lines.append(f"| {key.replace('_', ' ')} | {binary[key]:,.0f} | {numeric[key]:,.0f} | "
                     f"{binary[key] / numeric[key]:.2f} |")
    table = "\n".join(lines)
    print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps({"settings": {k: str(v) for k, v in vars(args).items()},
                                                             "rows": rows}, indent=1))
        command = (f"python benchmarks/numeric_speed.py --columns {args.columns} --positions {args.positions} "
                   f"--rounds {args.rounds} --max-leaves {args.max_leaves}"
                   f"{' --shared-trees' if args.shared_trees else ''} --out {args.out}")
        args.out.with_suffix(".md").write_text(
            f"# Tagging speed: numeric columns against binary columns at equal trees\n\n`{command}`\n\n"
            f"{args.columns} columns, {args.rounds} rounds of {'shared' if args.shared_trees else 'per-label'} "
            f"trees of {args.max_leaves} leaves, {K} labels; positions / s, median of {args.repeats} passes on an "
            f"otherwise idle machine.\n\n{table}\n")


if __name__ == "__main__":
    main()
