"""CoNLL-2003 NER through `spacy train`, in one process and on a Dask LocalCluster: the same trees and test
predictions, wall time, peak memory of the driver and of each worker, and what travels per round.

    TREECRF_DATA_DIR=../shared/data python benchmarks/cluster.py [--rounds 10] [--workers 2] \
        [--out benchmarks/results/cluster_ner]
    TREECRF_DATA_DIR=../shared/data python benchmarks/cluster.py --shards 1 2 8 32 128 --rounds 3 \
        [--out benchmarks/results/cluster_shards]

configs/ner.cfg with the fast settings (max_leaves 300, trim 0.05, label_splits fallback), `--training.max_steps`
so that the fit has --rounds boosting rounds (step 0 is one), dev scored once at the end. In one process: 2
threads. On the cluster: LocalCluster(n_workers=--workers, threads_per_worker=1), started here, and the same
command with SPACY_TREECRF_SCHEDULER set to its address. Each `spacy train` runs in a
subprocess under /usr/bin/time (the driver's peak RSS) with `--code benchmarks/cluster_traffic.py`, which
records each round's seconds and, on the cluster, the calls to the shards, the bytes they carry (pickled sizes)
and the workers' peak RSS; the median time of a call answered at once by every worker (an actor that does
nothing) is then measured on the same cluster. The two model-last pipelines are loaded here: their treecrf
forests are compared node by node (structure equal, leaf values within 1e-9) and both tag the test set (entity
spans compared doc by doc). Needs the 'dask' extra and CoNLL-2003 under TREECRF_DATA_DIR.

With --defaults, the boosting settings' defaults (BoostParams: shared trees of 1000 leaves, l1 0.1, ...) instead
of the fast ones.

With --estimator, the TreeCRF estimator instead (token dicts of the word, POS and chunk columns over a window of
one, the same fast settings with per-label trees), in this process and through the cluster: the same forest and
test predictions (`python benchmarks/cluster.py --estimator --rounds 10`).

With --shards, no cluster: the same training with N shards held in this process (cluster.InProcessClient), for
each N given, to count what N workers would be sent and send back per round (calls, bytes) and the driver's
time adding their Landings up and deciding (the shards' own time is not a cluster's: they run one after the
other). docs/cluster_scaling.md models round time against workers from these counts.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FAST = {"max_leaves": 300, "trim": 0.05, "label_splits": "fallback"}


def default_settings() -> dict:
    """The boosting settings' defaults (BoostParams) but threads: what a user gets untuned."""
    import dataclasses
    from spacy_treecrf.engine.booster import BoostParams
    return {f.name: f.default for f in dataclasses.fields(BoostParams) if f.name != "n_threads"}


def spacy_train(out: Path, rounds: int, traffic: Path, overrides: dict, settings: dict = FAST,
                scheduler: str = "") -> dict:
    data = Path(os.environ["TREECRF_DATA_DIR"]) / "conll2003"
    command = [sys.executable, "-m", "spacy", "train", str(ROOT / "configs" / "ner.cfg"), "--output", str(out),
               "--code", str(ROOT / "benchmarks" / "cluster_traffic.py"),
               "--paths.train", str(data / "train.txt"), "--paths.dev", str(data / "valid.txt"),
               "--training.max_steps", str(rounds - 1), "--training.eval_frequency", str(rounds)]
    for key, value in {**{f"booster.{k}": v for k, v in settings.items()}, **overrides}.items():
        command += [f"--components.treecrf.{key}", json.dumps(value) if isinstance(value, bool) else str(value)]
    t0 = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M"] + command, capture_output=True, text=True,
                          env={**os.environ, "TREECRF_TRAFFIC_OUT": str(traffic),
                               "SPACY_TREECRF_SCHEDULER": scheduler})
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(done.stdout + done.stderr)
    return {"wall_seconds": wall, "driver_peak_rss_mb": int(done.stderr.strip().splitlines()[-1]) / 1024,
            "rounds": json.loads(traffic.read_text())}


class Echo:
    """A Dask actor that answers at once: the cost of a round trip to every worker, without work."""

    def ping(self, payload=None):
        return 0


def round_trip_seconds(client, n: int = 300) -> float:
    """Median seconds of a call to one Echo actor per worker, answered by all (ClusterTrainer._call's pattern)."""
    from spacy_treecrf.engine.cluster import live_workers
    actors = [client.submit(Echo, actor=True, workers=[w]).result() for w in sorted(live_workers(client))]
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        for future in [actor.ping() for actor in actors]:
            future.result()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compare(local: Path, distributed: Path) -> dict:
    import spacy
    from spacy_treecrf.readers import ColumnCorpus

    a, b = spacy.load(local), spacy.load(distributed)
    fa, fb = a.get_pipe("treecrf").ensemble.forest(), b.get_pipe("treecrf").ensemble.forest()
    structure = all(np.array_equal(getattr(fa.nodes, n), getattr(fb.nodes, n))
                    for n in ("kind", "feature", "yes", "no", "states"))
    values = max(float(np.abs(fa.nodes.value - fb.nodes.value).max(initial=0.0)),
                 float(np.abs(fa.vectors.value - fb.vectors.value).max(initial=0.0))
                 if len(fa.vectors.value) == len(fb.vectors.value) else float("inf"))
    data = Path(os.environ["TREECRF_DATA_DIR"]) / "conll2003"
    keep = {"pos": "tag_", "chunk": "_.chunk"}
    test = [eg.predicted for eg in ColumnCorpus(data / "test.txt", format="conll2003", keep_columns=keep)(a)]
    spans = [[[(e.start, e.end, e.label_) for e in doc.ents] for doc in nlp.pipe([d.copy() for d in test])]
             for nlp in (a, b)]
    same_docs = sum(x == y for x, y in zip(*spans))
    return {"trees": len(fa.roots), "nodes": len(fa.nodes.kind), "same_structure": structure,
            "max_leaf_value_difference": values, "test_docs": len(test), "test_docs_tagged_the_same": same_docs,
            "test_entities": sum(len(x) for x in spans[0])}


def token_dicts(sentence) -> list:
    """The estimator's input for a CoNLL-2003 sentence (rows: word, POS, chunk, NER): per token its lower case,
    3-letter suffix, capitalisation and digit flags, POS and chunk tags, and those of its neighbours."""
    out = []
    for i in range(len(sentence)):
        x = {}
        for off in (-1, 0, 1):
            if not 0 <= i + off < len(sentence):
                x[f"{off}:edge"] = True
                continue
            word, pos, chunk, _ = sentence[i + off]
            x.update({f"{off}:lower": word.lower(), f"{off}:suffix3": word[-3:].lower(), f"{off}:title": word.istitle(),
                      f"{off}:upper": word.isupper(), f"{off}:digit": word.isdigit(), f"{off}:pos": pos,
                      f"{off}:chunk": chunk})
        out.append(x)
    return out


def estimator_check(args):
    """TreeCRF on CoNLL-2003 with the fast per-label settings, in this process (2 threads) and through a
    LocalCluster of --workers workers: the same forest and the same test predictions."""
    from distributed import LocalCluster
    from spacy_treecrf import TreeCRF
    from spacy_treecrf.readers import read_columns

    data = Path(os.environ["TREECRF_DATA_DIR"]) / "conll2003"
    columns = ["word", "pos", "chunk", "ner"]
    train, test = (list(read_columns(data / name, columns)) for name in ("train.txt", "test.txt"))
    X, y = [token_dicts(s) for s in train], [[row[3] for row in s] for s in train]
    X_test = [token_dicts(s) for s in test]
    settings = dict(n_rounds=args.rounds, shared_trees=False, leaf_values="position_mean", colsample=0.3, l1=0.0,
                    **FAST)
    t0 = time.perf_counter()
    here = TreeCRF(n_threads=2, **settings).fit(X, y)
    seconds_here = time.perf_counter() - t0
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=":0", silence_logs=40) as lc:
        t0 = time.perf_counter()
        there = TreeCRF(n_threads=1, **settings).fit(X, y, scheduler=lc.scheduler_address)
        seconds_there = time.perf_counter() - t0
    fa, fb = here.ensemble.forest(), there.ensemble.forest()
    pa, pb = here.predict(X_test), there.predict(X_test)
    summary = {"fit_seconds_one_process": seconds_here, "fit_seconds_cluster": seconds_there,
               "trees": len(fa.roots), "nodes": len(fa.nodes.kind),
               "same_structure": len(fa.nodes.kind) == len(fb.nodes.kind) and all(
                   np.array_equal(getattr(fa.nodes, n), getattr(fb.nodes, n))
                   for n in ("kind", "feature", "yes", "no", "states")),
               "max_leaf_value_difference": float(np.abs(fa.nodes.value - fb.nodes.value).max(initial=0.0))
               if len(fa.nodes.value) == len(fb.nodes.value) else None,
               "test_sentences": len(pa), "test_sentences_tagged_the_same": sum(a == b for a, b in zip(pa, pb)),
               "test_tokens": sum(map(len, pa))}
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps(summary, indent=1))


def count_shards(args):
    """Per shard count: the median round's calls, MB sent and received, and driver seconds (module docstring)."""
    table = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.shards:
            run = spacy_train(Path(tmp) / str(n), args.rounds, Path(tmp) / f"{n}.json",
                              {"booster.n_threads": 1}, scheduler=f"inprocess://{n}")
            rounds = run["rounds"][1:] or run["rounds"]
            table[n] = {key: statistics.median(r[key] for r in rounds)
                        for key in ("calls", "sent", "received", "driver_seconds", "shard_seconds")}
            print(n, json.dumps(table[n]), flush=True)
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps(table, indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, help="write OUT.json")
    parser.add_argument("--shards", type=int, nargs="*", help="count traffic with these in-process shard counts")
    parser.add_argument("--estimator", action="store_true", help="the TreeCRF estimator instead of spacy train")
    parser.add_argument("--defaults", action="store_true", help="the default boosting settings, not the fast ones")
    args = parser.parse_args()
    if args.shards:
        return count_shards(args)
    if args.estimator:
        return estimator_check(args)
    from distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        settings = default_settings() if args.defaults else FAST
        here = spacy_train(tmp / "local", args.rounds, tmp / "local.json", {"booster.n_threads": 2}, settings)
        print(f"one process: {here['wall_seconds']:.1f} s, peak RSS {here['driver_peak_rss_mb']:.0f} MB", flush=True)
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=":0",
                          silence_logs=40) as lc:
            there = spacy_train(tmp / "cluster", args.rounds, tmp / "cluster.json",
                                {"booster.n_threads": 1}, settings, scheduler=lc.scheduler_address)
            with Client(lc) as client:
                latency = round_trip_seconds(client)
        print(f"cluster: {there['wall_seconds']:.1f} s, driver peak RSS {there['driver_peak_rss_mb']:.0f} MB",
              flush=True)
        same = compare(tmp / "local" / "model-last", tmp / "cluster" / "model-last")
    rounds = there["rounds"]
    summary = {
        "rounds": len(rounds),
        "round_seconds_one_process": statistics.median(r["seconds"] for r in here["rounds"][1:]),
        "round_seconds_cluster": statistics.median(r["seconds"] for r in rounds[1:]),
        "calls_per_round": statistics.median(r["calls"] for r in rounds),
        "sent_mb_per_round": statistics.median(r["sent"] for r in rounds) / 2 ** 20,
        "received_mb_per_round": statistics.median(r["received"] for r in rounds) / 2 ** 20,
        "driver_deciding_seconds_per_round": statistics.median(r["driver_seconds"] for r in rounds),
        "worker_peak_rss_mb": rounds[-1]["worker_peak_rss_mb"],
        "positions": rounds[0]["positions"],
        "round_trip_seconds": latency,
        **same,
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps({"summary": summary, "one_process": here,
                                                             "cluster": there}, indent=1))


if __name__ == "__main__":
    main()
