"""Seconds and driver-worker requests of a boosting round on a Dask LocalCluster against one process, with the
estimator's defaults (issue: a cluster faster than one machine).

    TREECRF_DATA_DIR=../shared/data python benchmarks/cluster_rounds.py --repeat 4 --rounds 3 --workers 1 2 \
        --repeats 5 [--out benchmarks/results/cluster_rounds]
    TREECRF_DATA_DIR=../shared/data python benchmarks/cluster_rounds.py --repeat 1 --rounds 3 --workers 2 \
        --leaves 300 1000 3000 --no-one-process [--out benchmarks/results/cluster_requests]

The data: CoNLL-2003's training sentences (repeated --repeat times), each position a dict of its word, POS and
chunk columns, window=1. TreeCRF with its defaults but early_stopping=False and --rounds rounds: once in this
process (its default threads), then with LocalCluster(n_workers=W, threads_per_worker=1) for each W of
--workers. A round's seconds are the differences of the fit's history_ times (the median over rounds 2 .. n; the
first round also pays for shipping the shards); a round's requests are history_'s cluster_calls (each a call to
every worker); the depth of each round's tree is read off the fitted forest. The cluster's trees and test-set
predictions are compared with one process's (structure equal, leaf values within 1e-9). With --repeats N, the
fits run N times, alternating, and each cluster fit's ratio to the one-process fit just before it is reported
with their median. With --leaves, each given max_leaves in turn.
"""
import argparse
import json
import os
import platform
import statistics
from pathlib import Path

import numpy as np

from spacy_treecrf import TreeCRF
from spacy_treecrf.readers import read_columns


def load(repeat: int):
    data = Path(os.environ["TREECRF_DATA_DIR"]) / "conll2003"
    columns = ["word", "pos", "chunk", "ner"]
    train, test = (list(read_columns(data / name, columns)) for name in ("train.txt", "test.txt"))

    def dicts(s):
        return [{"word": w, "pos": p, "chunk": c} for w, p, c, _ in s]
    X = [dicts(s) for s in train] * repeat
    y = [[row[3] for row in s] for s in train] * repeat
    return X, y, [dicts(s) for s in test]


def round_seconds(model) -> list:
    times = [0.0] + [entry["seconds"] for entry in model.history_]
    return [b - a for a, b in zip(times, times[1:])]


def same_forest(a, b) -> dict:
    fa, fb = a.ensemble.forest(), b.ensemble.forest()
    same = len(fa.nodes.kind) == len(fb.nodes.kind) and all(
        np.array_equal(getattr(fa.nodes, n), getattr(fb.nodes, n)) for n in ("kind", "feature", "yes", "no", "states"))
    diff = (max(float(np.abs(fa.nodes.value - fb.nodes.value).max(initial=0.0)),
                float(np.abs(fa.vectors.value - fb.vectors.value).max(initial=0.0)))
            if same and len(fa.vectors.value) == len(fb.vectors.value) else None)
    return {"same_structure": bool(same), "max_leaf_value_difference": diff}


def run(args, max_leaves):
    from distributed import LocalCluster

    X, y, X_test = load(args.repeat)
    settings = dict(n_rounds=args.rounds, early_stopping=False, window=1)
    if max_leaves is not None:
        settings["max_leaves"] = max_leaves
    out = {"positions": sum(map(len, X)), "max_leaves": max_leaves or "auto", "rounds": args.rounds,
           "repeats": args.repeats}
    for rep in range(args.repeats):  # the fits alternate, so that the machine's drift touches both alike
        here = None
        if not args.no_one_process:
            here = TreeCRF(**settings).fit(X, y)
            seconds = round_seconds(here)
            entry = out.setdefault("one_process", {"threads": here.params.threads, "runs": []})
            entry["runs"].append({"round_seconds": seconds, "median_round_seconds": statistics.median(seconds[1:])})
            print("one process", json.dumps(entry["runs"][-1]), flush=True)
        for W in args.workers:
            with LocalCluster(n_workers=W, threads_per_worker=1, dashboard_address=":0", silence_logs=40) as lc:
                there = TreeCRF(**settings).fit(X, y, scheduler=lc.scheduler_address)
            seconds = round_seconds(there)
            forest = there.ensemble.forest()
            run = {"round_seconds": seconds, "median_round_seconds": statistics.median(seconds[1:]),
                   "requests_per_round": [e["cluster_calls"] for e in there.history_],
                   "tree_depths": [int(d) for d in forest.depths],
                   "tree_leaves": [int((forest.nodes.kind[a:b] == 0).sum())
                                   for a, b in zip(forest.roots[:-1], forest.roots[1:])]}
            if here is not None:
                run["ratio_to_one_process"] = (run["median_round_seconds"]
                                               / out["one_process"]["runs"][-1]["median_round_seconds"])
                if rep == 0:
                    run.update(same_forest(here, there))
                    pred, pred_here = there.predict(X_test), here.predict(X_test)
                    run["test_sentences_tagged_the_same"] = (f"{sum(a == b for a, b in zip(pred_here, pred))} / "
                                                             f"{len(pred)}")
            entry = out.setdefault(f"cluster_{W}_workers", {"runs": []})
            entry["runs"].append(run)
            print(W, json.dumps(run), flush=True)
    for key, entry in out.items():
        if isinstance(entry, dict) and "runs" in entry:
            entry["median_round_seconds"] = statistics.median(r["median_round_seconds"] for r in entry["runs"])
            if "ratio_to_one_process" in entry["runs"][0]:
                entry["median_ratio_to_one_process"] = statistics.median(
                    r["ratio_to_one_process"] for r in entry["runs"])
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1, help="run the fits this many times, alternating")
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--leaves", type=int, nargs="*", help="max_leaves settings to run (default: the default)")
    parser.add_argument("--no-one-process", action="store_true", help="only the cluster fits")
    parser.add_argument("--out", type=Path, help="write OUT.json")
    args = parser.parse_args()
    results = {"machine": f"{platform.machine()}, {os.cpu_count()} cores",
               "runs": [run(args, leaves) for leaves in (args.leaves or [None])]}
    print(json.dumps(results, indent=1))
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
