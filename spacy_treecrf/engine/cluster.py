"""Boosting rounds on a Dask cluster (the optional extra ``spacy-treecrf[dask]``; nothing imports dask until a fit
is given a scheduler address or a ``distributed.Client``).

The training sequences are cut once into one shard per worker (whole sequences, about as many positions each)
and shipped there; a worker holds a Shard: a Trainer over its sequences, with its rows and its part of the cached
potentials, plus the data side of the trees being grown (grow.ShardGrowth). The driver, a ClusterTrainer, is the
Trainer of the round's other decisions and holds no rows: its gradient pass is the shards' (the objective is a
sum over sequences), a shared tree's directions come from the shards' moments of the residual sums, leaf values
from the shards' leaf sums, and the finished trees go back to the shards, which move their own potentials.

The trees grow best-first as in one process (grow.py), but among the shards, not through the driver: one
request (Shard.grow) starts them, and the shards pass each Step down and its Landings up a tree of direct links
(peers.py, wire.py), rank 0 deciding (sums over positions: the shards' sums are the whole set's, so the trees are
the same up to the order of the additions). The per-label trees of a round grow in lockstep, a message carrying a
Step of each. So a round takes a fixed number of requests (about ten; a few more per group of per-label trees)
whatever max_leaves, where growing through the driver took one per leaf, each a round trip to every worker
(docs/cluster_scaling.md). After the first shipment only Steps, histograms, sums and trees travel.

A worker lost mid-round never leaves the fit waiting: every call polls the scheduler for the shard's worker and
raises ClusterError naming it once it is gone (a restarted worker would hold a fresh shard, so a shard answers
with the token it was made with, and a different one is an error too). The driver keeps every completed round's
trees (the Ensemble), so what was fitted before the loss is kept.

Not on a cluster (yet): the routing rule for missing values (instance weighting or surrogates over rows that
have missing values; the other strategies rewrite the rows and work) and the rank loss (its line search needs
a forward-backward pass per trial step).
"""
import dataclasses
import resource
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import List, NamedTuple, Optional

import numpy as np
from numba.typed import List as TypedList

from . import crf
from .booster import Passes, Trainer
from .settings import LEAF_VALUES
from .shared_fit import SHARED_DIRECTIONS
from .grow import (add_up, advance_all, first_step, grown_trees, new_growth, new_landing, new_shard,
                   shard_segments, shard_steps)
from .peers import PeerError, Peers
from .wire import active_steps, add_reply, decode_steps, encode_packed, encode_steps, replies_of, steps_message
from .leaves import LeafSums, add_leaf_sums, values_of
from .project import directions_from_moments
from .numeric import no_numeric
from .trees import KEPT_BYTES, Target, no_missing
from ..errors import Errors

POLL_SECONDS = 1.0  # how often a call waiting on a shard asks the scheduler whether its worker is alive
LOSS_GRACE = 30.0  # how long a shard's broken peer connection waits for the scheduler to name the worker lost
# Residuals a shard keeps at once for the per-label trees of a round growing in lockstep: labels beyond this
# budget grow in a further group (one tree per label and round either way; only the round trips differ).
RESIDUAL_BUDGET = 512 * 2 ** 20


class ClusterError(RuntimeError):
    """A worker holding a shard was lost, or a shard failed."""


class Reply(NamedTuple):
    """A shard's answer: the token it was made with (a worker restarted in between holds a fresh shard) and the
    result."""
    token: str
    result: object


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class Shard:
    """One worker's share of the training set (a Dask actor): a Trainer over its sequences and, during a round,
    the data side of each tree being grown."""

    def __init__(self, indptr, indices, n_features, y, seq_starts, allowed, params, initial=None,
                 numeric=None):
        self.token = uuid.uuid4().hex
        self.trainer = Trainer(indptr, indices, n_features, y, seq_starts, allowed, params, initial=initial,
                               numeric=numeric)
        self.passes = None
        self.trees = []  # per tree being grown: (label, residual Target, its positions)
        self.growing = TypedList()  # per tree being grown: its grow.ShardGrowth
        self.landing = None  # the Landing the trees' steps fill (residual width d: that of the trees grown)
        self.done = []  # per tree of the round grown: (label, its positions, its grow.Segments)
        self.positions = (self.trainer.all_positions, None)  # this round's positions and the skipped ones
        self.peers = Peers(_worker_host())

    def _reply(self, result=None) -> Reply:
        return Reply(self.token, result)

    def gradient_pass(self) -> Reply:
        self.passes = self.trainer.gradient_pass()
        return self._reply(self.passes.objective)

    def set_positions(self, positions) -> Reply:
        """This round's positions (local ids; None: all of them) and so the ones its trees skip."""
        tr = self.trainer
        if positions is None:
            self.positions = (tr.all_positions, None)
        else:
            pos = np.ascontiguousarray(positions, dtype=np.int64)
            self.positions = (pos, np.setdiff1d(tr.all_positions, pos, assume_unique=True))
        return self._reply()

    def position_moments(self) -> Reply:
        return self._reply(self.trainer.position_moments(self.passes, self.positions[0]))

    def begin_labels(self, labels, max_leaves, masks) -> Reply:
        """The per-label trees of ``labels``: each label's residuals, trimmed positions and data side; masks: per
        label, the atoms its tree may split on (np.packbits; None: all), the only histogram entries sent. Returns
        their positions' counts."""
        tr = self.trainer
        T, S = len(tr.y), tr.allowed.shape[0]
        self._new_trees(masks)
        for k in labels:
            D = tr.residuals(self.passes, k, np.empty((T, S, 1)))
            target = Target(D=D, is_start=tr.is_start, allowed_k=np.ascontiguousarray(tr.allowed[:, k]))
            self._begin(k, target, max_leaves)
        return self._reply([len(pos) for _, _, pos in self.trees])

    def begin_shared(self, W, max_leaves, mask) -> Reply:
        """A shared tree on the residuals projected on W (mask: as begin_labels')."""
        self._new_trees([mask])
        self._begin(-1, self.trainer._projected_target(self.passes, W), max_leaves)
        return self._reply([len(self.trees[0][2])])

    def _new_trees(self, masks=()):
        self.trees = []
        self.growing = TypedList()
        F = self.trainer.n_features
        self.keeps = np.ones((len(masks), F), dtype=np.bool_)
        for i, mask in enumerate(masks):
            if mask is not None:
                self.keeps[i] = np.unpackbits(mask, count=F).astype(np.bool_)

    def _begin(self, k, target, max_leaves):
        tr = self.trainer
        pos = tr._trimmed(target, self.positions[0])
        shard = new_shard(tr.rows, tr.column_index, tr.numeric, no_missing(), target, pos, max_leaves, 0)
        self.trees.append((k, target, pos))
        self.growing.append(shard)
        d = shard.slots.val.shape[1]
        if self.landing is None or self.landing.g.shape[1] != d:
            self.landing = new_landing(tr.n_features, 0, tr.allowed.shape[0], d, 0, True)

    def address(self) -> Reply:
        """Where this shard's peers reach it (peers.Peers)."""
        return self._reply(self.peers.address)

    def join(self, rank: int, addresses) -> Reply:
        """Take rank ``rank`` among the shards at ``addresses`` (every shard is called at once)."""
        self.peers.join(rank, addresses)
        return self._reply()

    def grow(self, settings, counts) -> Reply:
        """Grow the trees begun (begin_labels, begin_shared) with the other shards, best-first as in one process:
        every Step goes down the shards' tree (peers.py), each runs its data side on its positions, and the
        Landings come back up, added; rank 0 decides each tree's next Step (settings: the trees' GrowSettings;
        counts: their positions over all shards) and returns the grown trees, the others None."""
        peers = self.peers
        S = self.trainer.allowed.shape[0]
        decide = peers.rank == 0
        if decide:
            growths, steps = TypedList(), TypedList()
            for i, (k, _, _) in enumerate(self.trees):
                allowed_k = self.trainer.allowed[:, k] if k >= 0 else self.trainer.allowed.any(axis=1)
                growth = new_growth(settings, S, self.landing.g.shape[1], self.keeps[i], self.trainer.numeric,
                                    no_missing(), np.ascontiguousarray(allowed_k))
                growths.append(growth)
                steps.append(first_step(growth, int(counts[i])))
            landing = new_landing(self.trainer.n_features, 0, S, self.landing.g.shape[1], 0, True)
        elif peers.children:  # where this shard adds its children's Landings to its own (a dense histogram)
            adding = new_landing(self.trainer.n_features, 0, S, self.landing.g.shape[1], 0, True)
        while True:
            if decide:
                peers.pass_down(encode_steps(steps, S))
                which, todo = active_steps(steps)
            else:
                which, todo = decode_steps(*peers.pass_down())
            if not len(which):
                return self._reply(list(grown_trees(growths)) if decide else None)
            if not decide and not peers.children:
                peers.to_parent(*steps_message(self.growing, which, todo, self.landing, self.keeps))
                continue
            replies = replies_of(shard_steps(self.growing, which, todo, self.landing, self.keeps))
            for floats, ints in peers.from_children():
                add_reply(replies, floats, ints)
            if decide:
                advance_all(growths, steps, which, landing, replies)
            else:
                peers.to_parent(*encode_packed(add_up(adding, replies, which, self.keeps)))

    def leaf_sums(self, trees, mode) -> Reply:
        """Each grown tree's leaf_values sums over this shard's cells (per-label trees: nodes x 1; shared: x K)."""
        tr = self.trainer
        out = []
        for (k, target, pos), shard, tree in zip(self.trees, self.growing, trees):
            segments = shard_segments(shard, len(tree.kind))
            if k < 0:
                out.append(tr.leaf_sums(self.passes, tree, segments))
                continue
            sums = LeafSums(np.zeros((len(tree.kind), 1)), np.zeros((len(tree.kind), 1)))
            add_leaf_sums(target.D, 0, tr.is_start, np.ascontiguousarray(tr.allowed[:, k:k + 1]), tree, segments,
                          mode, sums)
            out.append(sums)
        return self._reply(out)

    def end_trees(self, sizes) -> Reply:
        """The trees being grown are grown (their node counts): keep their segments, drop their residuals."""
        for (k, _, pos), shard, n_nodes in zip(self.trees, self.growing, sizes):
            self.done.append((k, pos, shard_segments(shard, n_nodes)))
        self._new_trees()
        return self._reply()

    def move(self, trees, scale) -> Reply:
        """The round's trees (unscaled, as grown) applied to this shard's potentials at ``scale`` over their leaves'
        segments (and walked at the positions they skipped)."""
        tr = self.trainer
        positions, skipped = self.positions
        tr._move([(k, tree, segments, tr._rest(pos, positions, skipped))
                  for (k, pos, segments), tree in zip(self.done, trees)], scale)
        return self._reply()

    def rescale(self) -> Reply:
        """The end of a round: potentials rescaled, the round's state dropped."""
        self.trainer._rescale()
        self.passes = None
        self.done = []
        return self._reply()

    def peak_rss_mb(self) -> Reply:
        return self._reply(_peak_rss_mb())


def sequence_shards(seq_starts: np.ndarray, n: int) -> List[tuple]:
    """(first sequence, end sequence) of n shards of whole sequences with about as many positions each (fewer
    shards where there are fewer sequences)."""
    T = int(seq_starts[-1])
    cuts = np.unique(np.searchsorted(seq_starts, np.linspace(0, T, n + 1), side="left"))
    cuts[0], cuts[-1] = 0, len(seq_starts) - 1
    cuts = np.unique(cuts)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]


CONNECT_SECONDS = 20  # how long a scheduler has to answer a new Client (distributed waits on a silent peer)
REMOTE_SCHEMES = ("tcp", "tls", "ucx", "ws", "wss")  # distributed's transports that reach another process


def connect(scheduler):
    """A distributed.Client for a scheduler address, or the Client (or stand-in) given. An address of a transport
    that cannot reach another process (inproc://) is E220; anything but a Dask scheduler answering within
    CONNECT_SECONDS (nothing listening, a silent peer, another protocol, whose first bytes distributed reads
    as a frame length and tries to allocate) is E221, not a wait of minutes or distributed's own error."""
    if not isinstance(scheduler, str):
        return scheduler
    try:
        from distributed import Client
    except ImportError as e:  # the extra is not installed
        raise ImportError(Errors.E194) from e
    scheme = scheduler.split("://", 1)[0] if "://" in scheduler else "tcp"
    if scheme not in REMOTE_SCHEMES:
        raise ValueError(Errors.E220.format(address=scheduler, scheme=scheme, schemes=list(REMOTE_SCHEMES)))
    outcome = {}

    def start():  # (distributed bounds the connection, not the handshake: a silent peer holds it until it closes)
        try:  # a call goes to its worker, not through the scheduler
            outcome["client"] = Client(scheduler, direct_to_workers=True, timeout=CONNECT_SECONDS)
        except Exception as err:  # distributed raises OSError, TimeoutError, CommClosedError, MemoryError, ...
            outcome["error"] = err

    starting = threading.Thread(target=start, name="spacy_treecrf-connect", daemon=True)
    starting.start()
    starting.join(CONNECT_SECONDS)
    if "client" in outcome:
        return outcome["client"]
    err = outcome.get("error") or TimeoutError("no handshake")
    raise ValueError(Errors.E221.format(address=scheduler, seconds=CONNECT_SECONDS, type_name=type(err).__name__,
                                        err=str(err)[:300]))


class ClusterTrainer(Trainer):
    """The Trainer of a fit on a Dask cluster (module docstring): the same rounds, its rows on the workers."""

    def __init__(self, scheduler, indptr, indices, n_features, y, seq_starts, allowed, params, initial=None,
                 missing_rows=None, numeric=None):
        """scheduler: a distributed.Client, or a scheduler's address (a Client is made, and closed by close());
        the rest as Trainer's. The rows are shipped to the workers here."""
        if missing_rows is not None and (missing_rows.any or (params.missing == "surrogate" and bool(
                (missing_rows.feature_var >= 0).any()))):
            raise ValueError(Errors.E195.format(strategy=params.missing))
        if params.loss == "rank":
            raise ValueError(Errors.E196)
        client = self.client = connect(scheduler)
        self._own_client = client is not scheduler
        self.params = params
        self.n_features = int(n_features)
        self.allowed = np.ascontiguousarray(allowed, dtype=np.bool_)
        self.numeric = numeric if numeric is not None else no_numeric()
        self.missing_rows = None
        seq_starts = np.ascontiguousarray(seq_starts, dtype=np.int64)
        T = int(seq_starts[-1])
        self.rng = np.random.default_rng(params.random_state)
        self.all_positions = np.arange(T, dtype=np.int64)
        self.all_features = np.ones(self.n_features, dtype=np.bool_)
        self.rounds = 0
        self.calls = 0  # requests to every shard so far (round_report)
        self._whole = True  # whether the shards' rounds are on all their positions (Shard.set_positions)
        workers = live_workers(client)
        if not workers:
            raise ClusterError(Errors.E197.format(scheduler=client.scheduler.address))
        addresses = sorted(workers)
        parts = sequence_shards(seq_starts, len(addresses))
        self.workers = addresses[:len(parts)]
        self.bounds = []
        self.actors = []
        self.tokens = []
        futures = []
        indptr = np.asarray(indptr)
        for (q0, q1), address in zip(parts, self.workers):
            a, b = int(seq_starts[q0]), int(seq_starts[q1])
            self.bounds.append((a, b))
            threads = workers[address].get("nthreads", 1)
            shard_params = dataclasses.replace(params, n_threads=min(threads, params.threads))
            rows = (indptr[a:b + 1] - indptr[a], np.asarray(indices)[indptr[a]:indptr[b]], self.n_features,
                    np.asarray(y)[a:b], seq_starts[q0:q1 + 1] - a, self.allowed, shard_params,
                    _copy_part(initial, a, b), self.numeric)
            data = client.scatter(list(rows), workers=[address], direct=True)
            futures.append((client.submit(Shard, *data, actor=True, workers=[address], allow_other_workers=False,
                                          pure=False), data))
        for i, (future, data) in enumerate(futures):
            self.actors.append(self._wait(future, i))
            self.tokens.append(self._call_one(i, "peak_rss_mb").token)
            for part in data:  # the shard holds its rows now (a shard made again would be an error anyway)
                part.release()
        self._futures = [f for f, _ in futures]
        addresses = self._call("address")
        self._call("join", per_shard=[(rank, addresses) for rank in range(len(self.actors))])
        self.calls = 0

    # -- calls ------------------------------------------------------------------------------------------------
    def _wait(self, future, i: int):
        """future's result, asking the scheduler every POLL_SECONDS whether shard i's worker is still there."""
        while True:
            try:
                return future.result(timeout=POLL_SECONDS)
            except Exception as e:  # a timeout (an OSError, as a lost connection is), or the call failed
                if not _is_timeout(e):
                    error = self._failure(i, e)  # (E198 or E199)
                    raise error from e
            if self.workers[i] not in live_workers(self.client):
                raise ClusterError(Errors.E199.format(**self._where(i)))

    def _failure(self, i: int, e: Exception) -> ClusterError:
        """What shard i's failed call means: E199 naming a shard's worker that is gone (when a peer's
        connection broke, the scheduler is given LOSS_GRACE seconds to notice the loss that caused it), else E199
        for shard i's own connection, else E198 with the shard's error."""
        deadline = time.monotonic() + (LOSS_GRACE if isinstance(e, PeerError) else 0.0)
        while True:
            live = live_workers(self.client)
            lost = [j for j, worker in enumerate(self.workers) if worker not in live]
            if lost:
                return ClusterError(Errors.E199.format(**self._where(lost[0])))
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_SECONDS / 5)
        if isinstance(e, OSError) and not isinstance(e, PeerError):  # the worker's connection (CommClosedError)
            return ClusterError(Errors.E199.format(**self._where(i)))
        return ClusterError(Errors.E198.format(worker=self.workers[i], round=self.rounds + 1,
                                               error=f"{type(e).__name__}: {e}"))

    def _where(self, i: int) -> dict:
        """Shard i's worker, the round under way and the rounds done (what E199 says)."""
        return {"worker": self.workers[i], "round": self.rounds + 1, "done": self.rounds}

    def _call_one(self, i: int, name: str, *args) -> Reply:
        return self._wait(getattr(self.actors[i], name)(*args), i)

    def _call(self, name: str, *args, per_shard: Optional[list] = None) -> list:
        """Call a Shard method on every shard (the same args, or the tuple per_shard[i]) and return their
        results."""
        self.calls += 1
        futures = [getattr(actor, name)(*(per_shard[i] if per_shard is not None else args))
                   for i, actor in enumerate(self.actors)]
        out = []
        for i, future in enumerate(futures):
            reply = self._wait(future, i)
            if reply.token != self.tokens[i]:
                raise ClusterError(Errors.E199.format(**self._where(i)))
            out.append(reply.result)
        return out

    def close(self):
        """Free the shards on the workers (and close the Client made for a scheduler address)."""
        if self.actors:
            self.client.cancel(self._futures)
            self.actors = []
            if self._own_client:
                self.client.close()

    def round_report(self) -> dict:
        """The driver's requests to the shards since the last report (each a call to every shard)."""
        calls, self.calls = self.calls, 0
        return {"cluster_calls": calls}

    def peak_rss_mb(self) -> List[float]:
        """Each shard's worker's peak resident memory (MB)."""
        return self._call("peak_rss_mb")

    # -- the data side of a round (Trainer's hooks) ------------------------------------------------------------
    def gradient_pass(self) -> Passes:
        return Passes(free=None, clamped=None, objective=float(sum(self._call("gradient_pass"))))

    def _round_positions(self) -> np.ndarray:
        positions = super()._round_positions()
        whole = len(positions) == len(self.all_positions)
        if not (whole and self._whole):  # (the shards already fit on all their positions)
            self._call("set_positions", per_shard=[
                (None if whole else positions[(positions >= a) & (positions < b)] - a,) for a, b in self.bounds])
        self._whole = whole
        return positions

    def _fit_per_label(self, passes, positions, skipped, settings, routing):
        """The per-label trees of a round, grown in lockstep a group of labels at a time (the shards keep a
        group's residuals at once: RESIDUAL_BUDGET)."""
        K, S = self.allowed.shape[1], self.allowed.shape[0]
        masks = [self._tree_features() for _ in range(K)]
        most = max(b - a for a, b in self.bounds) * S * 8
        group = max(1, min(K, RESIDUAL_BUDGET // max(most, 1)))
        settings = settings._replace(kept_bytes=max(KEPT_BYTES // group, 1))  # the driver's share per tree
        fitted = []
        for g0 in range(0, K, group):
            labels = list(range(g0, min(K, g0 + group)))
            counts = np.sum(self._call("begin_labels", labels, settings.max_leaves,
                                       [_packed(masks[k]) for k in labels]), axis=0)
            trees = self._grow(settings, counts)
            if self.params.leaf_values != "mean" or self.params.l1 > 0:  # else the grower's own values
                trees = [tree._replace(value=values_of(sums, settings.lam, self.params.l1)[:, 0])
                         for tree, sums in zip(trees, self._leaf_sums(trees))]
            self._call("end_trees", [len(tree.kind) for tree in trees])
            fitted.extend((k, tree, None, None) for k, tree in zip(labels, trees))
        return fitted

    def _fit_shared(self, passes, positions, skipped, settings, routing):
        """One tree for all labels: its directions from the shards' moments, its leaf vectors from their sums."""
        gram, total, n = (sum(part) for part in zip(*self._call("position_moments")))
        W = directions_from_moments(gram, total, n, SHARED_DIRECTIONS)
        ok = self._tree_features()
        counts = np.sum(self._call("begin_shared", W, settings.max_leaves, _packed(ok)), axis=0)
        tree = self._grow(settings, counts)[0]
        vector = values_of(self._leaf_sums([tree])[0], settings.lam, self.params.l1)
        self._call("end_trees", [len(tree.kind)])
        return -1, tree._replace(value=np.zeros(len(tree.kind)), vector=vector), None, None

    def _grow(self, settings, counts) -> list:
        """The trees begun on the shards, grown by the shards among themselves (Shard.grow): one call."""
        return self._call("grow", settings, counts)[0]

    def _leaf_sums(self, trees) -> List[LeafSums]:
        """The grown trees' leaf_values sums, added over the shards."""
        parts = self._call("leaf_sums", trees, LEAF_VALUES[self.params.leaf_values])
        return [LeafSums(sum(p[j].g for p in parts), sum(p[j].h for p in parts)) for j in range(len(trees))]

    def _move(self, fitted, scale: float):
        if scale != 0.0:
            self._call("move", [tree for _, tree, _, _ in fitted], scale)

    def _rescale(self):
        self._call("rescale")


class _Done:
    """A finished call's result, as a future holds it."""

    def __init__(self, value):
        self.value = value

    def result(self, timeout=None):
        return self.value

    def release(self):
        pass


class _InProcessActor:
    """A Shard's handle whose calls run on a thread of its own, one after the other, as a Dask actor's do on
    its worker (the shards of a growing tree wait on each other: they must run at once)."""

    def __init__(self, shard):
        self.shard = shard
        self.thread = ThreadPoolExecutor(1)

    def __getattr__(self, name):
        method = getattr(self.shard, name)
        return lambda *args: self.thread.submit(method, *args)


class InProcessClient:
    """What ClusterTrainer asks of a distributed.Client, with n_workers shards held in this process, each called
    on a thread of its own: the tests' check of the shards' arithmetic, and the benchmarks' count of what
    n_workers real workers would be sent (no faster than one process: the threads share one interpreter)."""

    def __init__(self, n_workers: int):
        self.n_workers = n_workers
        identity = {"workers": {f"inprocess://worker-{i:04d}": {"nthreads": 1} for i in range(n_workers)}}
        self.scheduler = SimpleNamespace(address="inprocess://", identity=lambda n_workers: identity)
        self.actors = []

    def sync(self, call, **kwargs):
        return call(**kwargs)

    def scatter(self, data, workers=None, direct=None):
        return [_Done(x) for x in data]

    def submit(self, cls, *args, **kwargs):
        actor = _InProcessActor(cls(*(a.value for a in args)))
        self.actors.append(actor)
        return _Done(actor)

    def cancel(self, futures):
        for actor in self.actors:
            actor.thread.shutdown(wait=False)
            actor.shard.peers.close()
        self.actors = []

    def close(self):
        pass


def live_workers(client) -> dict:
    """The scheduler's workers now (address: details), asked afresh. Not Client.scheduler_info(): it returns the
    client's cached identity, which the client's periodic refresh (asking for no worker's details) may overwrite
    with an empty "workers" between the fresh query and the return, so a live worker looked lost under load."""
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def _worker_host() -> str:
    """The host of the Dask worker this runs on (its peers connect there), or the loopback address outside one."""
    try:
        from distributed import get_worker
        address = get_worker().address
    except (ImportError, ValueError):  # no dask, or not on a worker (the in-process stand-in)
        return "127.0.0.1"
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return host if host else "127.0.0.1"


def _packed(mask):
    """A tree's feature mask as bits (None: every feature), as it travels."""
    return None if mask is None else np.packbits(mask)


def _copy_part(P, a: int, b: int):
    """Positions a:b of Potentials P as arrays of their own (None: none)."""
    return None if P is None else crf.Potentials(*(np.array(x) for x in crf.part(P, a, b)))


def _is_timeout(e: Exception) -> bool:
    return isinstance(e, TimeoutError) or type(e).__name__ == "TimeoutError"
