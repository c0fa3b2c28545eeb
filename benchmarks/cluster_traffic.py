"""`spacy train --code` module for benchmarks/cluster.py: records, per boosting round, its seconds and, on a
cluster, the calls the driver makes to its shards (and the seconds spent in each kind of call), the bytes they
carry (pickled size of each call's arguments, sent to every shard, and of every shard's result), and the
workers' peak RSS. The Steps and Landings of a growing tree travel between the shards (engine/peers.py), not in
these calls: with shards in this process the time spent adding Landings up and deciding (rank 0's) and running
Steps (all shards', on their threads at once) is recorded too; on a real cluster that runs on the workers, and
those two figures read 0. Written as JSON to $TREECRF_TRAFFIC_OUT when the process exits. A scheduler address
"inprocess://N" (SPACY_TREECRF_SCHEDULER) trains with N shards in this process (cluster.InProcessClient): the
calls and bytes of N workers without a cluster (its timings are not a cluster's)."""
import atexit
import json
import os
import pickle
import time

from spacy_treecrf.engine import booster, cluster

ROUNDS = []
FRESH = {"sent": 0, "received": 0, "calls": 0, "driver_seconds": 0.0, "pass_seconds": 0.0, "shard_seconds": 0.0}
_now = {**FRESH, "seconds_in": {}}  # the round under way, from its gradient pass (the component runs that first)


def _size(value) -> int:
    return len(pickle.dumps(value, protocol=5))


def _counted_call(call):
    def wrapper(self, name, *args, per_shard=None):
        t0 = time.perf_counter()
        results = call(self, name, *args, per_shard=per_shard)
        if name != "peak_rss_mb":
            _now["seconds_in"][name] = _now["seconds_in"].get(name, 0.0) + time.perf_counter() - t0
            _now["calls"] += 1
            _now["sent"] += sum(map(_size, per_shard)) if per_shard is not None else _size(args) * len(self.actors)
            _now["received"] += sum(map(_size, results))
        return results
    return wrapper


def _timed(kernel, key):
    def wrapper(*args):
        t0 = time.perf_counter()
        out = kernel(*args)
        _now[key] += time.perf_counter() - t0
        return out
    return wrapper


def _timed_pass(gradient_pass):
    def wrapper(self):
        t0 = time.perf_counter()
        out = gradient_pass(self)
        _now["pass_seconds"] += time.perf_counter() - t0
        return out
    return wrapper


def _recorded_round(fit_round):
    """A round's entry: its seconds with its gradient pass's (which the component runs in update(), the Trainer
    in fit_round), and on a cluster the counts since the last round ended."""
    def wrapper(self, *args, **kwargs):
        given = kwargs.get("passes", args[2] if len(args) > 2 else None) is not None  # else run inside
        t0 = time.perf_counter()
        out = fit_round(self, *args, **kwargs)
        seconds = time.perf_counter() - t0 + (_now["pass_seconds"] if given else 0.0)
        entry = {"seconds": seconds, "positions": len(self.all_positions)}
        if isinstance(self, cluster.ClusterTrainer):
            entry.update(_now, workers=self.workers, worker_peak_rss_mb=self.peak_rss_mb())
        ROUNDS.append(entry)
        _now.update(FRESH, seconds_in={})
        return out
    return wrapper


def _connect(connect):
    def wrapper(scheduler):
        if isinstance(scheduler, str) and scheduler.startswith("inprocess://"):
            return cluster.InProcessClient(int(scheduler[len("inprocess://"):]))
        return connect(scheduler)
    return wrapper


cluster.connect = _connect(cluster.connect)
cluster.ClusterTrainer._call = _counted_call(cluster.ClusterTrainer._call)
cluster.advance_all = _timed(cluster.advance_all, "driver_seconds")
cluster.shard_steps = _timed(cluster.shard_steps, "shard_seconds")  # shards in this process only (inprocess://)
booster.Trainer.fit_round = _recorded_round(booster.Trainer.fit_round)
booster.Trainer.gradient_pass = _timed_pass(booster.Trainer.gradient_pass)
cluster.ClusterTrainer.gradient_pass = _timed_pass(cluster.ClusterTrainer.gradient_pass)


@atexit.register
def _write():
    path = os.environ.get("TREECRF_TRAFFIC_OUT")
    if path:
        with open(path, "w") as f:
            json.dump(ROUNDS, f)
