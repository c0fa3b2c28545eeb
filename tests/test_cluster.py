"""Training on a Dask cluster (engine/cluster.py): the same trees as in one process, and a lost worker is an error
naming it, never a hang.

The shards' arithmetic is checked in this process first, with cluster.InProcessClient (a stand-in for
distributed.Client that holds the shards as plain objects: three shards of unequal size, every option a cluster
fit takes); a LocalCluster of two worker processes then checks the real thing: the estimator, the spaCy
component, a worker killed between rounds or mid-round.
"""
import os
import re
import signal
import time

import numpy as np
import pytest

from spacy_treecrf.engine import cluster
from spacy_treecrf.engine.booster import BoostParams, Ensemble, Trainer
from spacy_treecrf.engine.cluster import ClusterError, ClusterTrainer, InProcessClient, sequence_shards
from spacy_treecrf.engine.missing import MissingRows
from spacy_treecrf.engine.numeric import numeric_index


def sequences(seed=0, n_seq=240, K=4, F=150, numeric=False, partial=False):
    """Generated rows: every position holds a few of F features (and, with ``numeric``, one of 20 bins of a
    numeric column); its label depends on its first feature."""
    rng = np.random.default_rng(seed)
    seq_starts = np.concatenate([[0], np.cumsum(rng.integers(1, 12, n_seq))]).astype(np.int64)
    T = int(seq_starts[-1])
    rows = [sorted(set(rng.integers(0, F, 4).tolist())) for _ in range(T)]
    if numeric:
        rows = [r + [F + int(rng.integers(0, 20))] for r in rows]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    indices = np.concatenate(rows).astype(np.int32)
    y = np.array([(r[0] + (r[-1] if numeric else 0)) % K for r in rows], dtype=np.int32)
    if partial:
        y[rng.random(T) < 0.1] = -1
    allowed = np.ones((K + 1, K), dtype=bool)
    allowed[2, 3] = False  # a transition mask: label 3 never follows label 1
    y[1:][(y[:-1] == 1) & (y[1:] == 3) & ~np.isin(np.arange(1, T), seq_starts)] = 0
    n_atoms = F + (20 if numeric else 0)
    index = numeric_index(n_atoms, [F], [F + 20]) if numeric else None
    return indptr, indices, n_atoms, y, seq_starts, allowed, index


def fit(make, data, params, rounds=3):
    indptr, indices, n_atoms, y, seq_starts, allowed, numeric = data
    K = allowed.shape[1]
    ensemble = Ensemble(K + 1, K, 0, shared=params.shared_trees)
    trainer = make(indptr, indices, n_atoms, y, seq_starts, allowed, params, numeric=numeric)
    objectives = [trainer.fit_round(ensemble) for _ in range(rounds)]
    trainer.close()
    return ensemble.forest(), np.array(objectives)


def assert_same_forest(a, b, tol=1e-9):
    for name in ("kind", "feature", "yes", "no", "states", "count"):
        np.testing.assert_array_equal(getattr(a.nodes, name), getattr(b.nodes, name), err_msg=name)
    np.testing.assert_allclose(a.nodes.value, b.nodes.value, rtol=0, atol=tol)
    np.testing.assert_array_equal(a.vectors.label, b.vectors.label)
    np.testing.assert_allclose(a.vectors.value, b.vectors.value, rtol=0, atol=tol)


SETTINGS = [
    {},
    {"subsample": 0.7, "colsample": 0.5, "trim": 0.01},
    {"leaf_values": "mean", "l1": 0.0, "label_splits": "best"},
    {"leaf_values": "newton", "max_leaves": 3},
    {"loss": "hamming"},
    {"loss": "pseudo_likelihood"},
]


@pytest.mark.parametrize("shared", [False, True], ids=["per_label", "shared"])
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "defaults")
def test_shards_grow_the_trees_of_one_process(shared, settings):
    params = BoostParams(**{"max_leaves": 25, "n_threads": 1, "shared_trees": shared, **settings})
    data = sequences(seed=len(settings))
    here, objective_here = fit(Trainer, data, params)
    there, objective_there = fit(lambda *a, **k: ClusterTrainer(InProcessClient(3), *a, **k), data, params)
    assert here.nodes.kind.shape[0] > 3 * (1 if shared else 4)
    assert_same_forest(here, there)
    np.testing.assert_allclose(objective_here, objective_there, rtol=1e-12)


@pytest.mark.parametrize("shared", [False, True], ids=["per_label", "shared"])
def test_a_tree_of_five_shards_grows_the_same_trees_with_as_many_requests_at_every_leaf_budget(shared):
    """Five shards: rank 0 hears from ranks 1, 2 and 4, rank 2 adds rank 3's Landings to its own before passing
    them up (peers.py). The driver's requests a round do not depend on max_leaves."""
    data = sequences(seed=7)
    requests = []
    for max_leaves in (2, 20, 200):
        params = BoostParams(max_leaves=max_leaves, n_threads=1, shared_trees=shared)
        here, objective_here = fit(Trainer, data, params)
        K = data[5].shape[1]
        ensemble = Ensemble(K + 1, K, 0, shared=shared)
        trainer = ClusterTrainer(InProcessClient(5), *data[:6], params, numeric=data[6])
        calls = []
        for _ in range(3):
            trainer.fit_round(ensemble)
            calls.append(trainer.round_report()["cluster_calls"])
        trainer.close()
        assert_same_forest(here, ensemble.forest())
        assert (here.nodes.kind == 0).sum() > (3 * (1 if shared else K) * min(max_leaves, 40)) // 2
        requests.append(calls)
    assert requests[0] == requests[1] == requests[2], requests


@pytest.mark.parametrize("what", ["numeric", "partial"])
def test_shards_with_numeric_columns_and_partial_labels(what):
    params = BoostParams(max_leaves=25, n_threads=1, shared_trees=False)
    data = sequences(seed=3, numeric=what == "numeric", partial=what == "partial")
    here, _ = fit(Trainer, data, params)
    there, _ = fit(lambda *a, **k: ClusterTrainer(InProcessClient(2), *a, **k), data, params)
    assert_same_forest(here, there)
    if what == "numeric":
        assert (here.nodes.feature >= data[2] - 20).any()  # thresholds were learned


def test_a_slow_shard_is_waited_for_and_a_failing_one_named():
    """A call that takes longer than a poll is no error (TimeoutError is an OSError, as a lost connection is);
    a shard's own exception is E198 with the worker and the message."""
    indptr, indices, n_atoms, y, seq_starts, allowed, _ = sequences()
    trainer = ClusterTrainer(InProcessClient(2), indptr, indices, n_atoms, y, seq_starts, allowed, BoostParams())

    class Slow:
        def __init__(self, outcomes):
            self.outcomes = list(outcomes)

        def result(self, timeout=None):
            outcome = self.outcomes.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
    assert trainer._wait(Slow([TimeoutError("timed out after 1 s."), TimeoutError("again"), "done"]), 1) == "done"
    with pytest.raises(ClusterError, match=r"E198.*inprocess://worker-0001.*round 1.*ValueError: bad row"):
        trainer._wait(Slow([ValueError("bad row")]), 1)
    with pytest.raises(ClusterError, match=r"E199.*inprocess://worker-0000"):
        trainer._wait(Slow([ConnectionResetError("reset by peer")]), 0)


def test_shards_are_whole_sequences_of_about_equal_size():
    seq_starts = np.array([0, 5, 6, 30, 31, 40, 41, 42])
    parts = sequence_shards(seq_starts, 3)
    assert parts[0][0] == 0 and parts[-1][1] == len(seq_starts) - 1
    assert all(a < b for a, b in parts) and all(p[1] == q[0] for p, q in zip(parts, parts[1:]))
    assert len(sequence_shards(np.array([0, 4]), 5)) == 1  # one sequence: one shard


def test_what_a_cluster_fit_does_not_do_is_an_error_before_anything_ships():
    indptr, indices, n_atoms, y, seq_starts, allowed, _ = sequences()
    T = len(y)
    missing = MissingRows(np.concatenate([[0], np.ones(T, dtype=np.int64).cumsum()]), np.zeros(T, np.int32),
                          np.zeros(n_atoms, np.int32), 1)
    with pytest.raises(ValueError, match="E195.*instance_weighting"):
        ClusterTrainer(InProcessClient(2), indptr, indices, n_atoms, y, seq_starts, allowed, BoostParams(),
                       missing_rows=missing)
    with pytest.raises(ValueError, match="E196"):
        ClusterTrainer(InProcessClient(2), indptr, indices, n_atoms, y, seq_starts, allowed,
                       BoostParams(loss="rank"))


def test_a_scheduler_without_dask_says_what_to_install(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"E194.*spacy-treecrf\[dask\]"):
        cluster.connect("tcp://127.0.0.1:1")


# -- a LocalCluster of two worker processes -----------------------------------------------------------------------
try:
    import distributed
except ImportError:  # the tests above need no dask
    distributed = None
needs_dask = pytest.mark.skipif(distributed is None, reason="the 'dask' extra is not installed (pip install -e "
                                                            "'.[test,dask]', as the README's test command does)")


@pytest.fixture(scope="module")
def local_cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                                  silence_logs=40) as lc:
        yield lc


def word_sequences(n=150, seed=0):
    rng = np.random.default_rng(seed)
    words = ["the", "a", "Paris", "London", "said", "runs", "Anna", "big", ",", "."]
    X, y = [], []
    for _ in range(n):
        ws = [words[i] for i in rng.integers(0, len(words), rng.integers(2, 12))]
        X.append([{"w": w, "upper": w[0].isupper(), "len": len(w)} for w in ws])
        y.append(["B" if w[0].isupper() else "O" for w in ws])
    return X, y


@needs_dask
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per_label"])
def test_the_estimator_on_a_local_cluster_fits_the_same_model(local_cluster, shared):
    from spacy_treecrf import TreeCRF

    X, y = word_sequences()
    settings = dict(n_rounds=4, max_leaves=30, shared_trees=shared, n_threads=1)
    here = TreeCRF(**settings).fit(X, y)
    there = TreeCRF(**settings).fit(X, y, scheduler=local_cluster.scheduler_address)
    assert_same_forest(here.ensemble.forest(), there.ensemble.forest())
    assert here.predict(X) == there.predict(X)
    assert "scheduler" not in there.get_params()
    data = there.to_bytes()
    assert b"scheduler" not in data and local_cluster.scheduler_address.encode() not in data
    import subprocess
    import sys
    # a model trained on a cluster loads and predicts where dask cannot be imported
    script = ("import sys, pickle; sys.modules['distributed'] = None; sys.modules['dask'] = None\n"
              "from spacy_treecrf import TreeCRF\n"
              "m = TreeCRF().from_bytes(sys.stdin.buffer.read())\n"
              f"print(m.predict({X[:5]!r}) == {there.predict(X[:5])!r})")
    done = subprocess.run([sys.executable, "-c", script], input=data, capture_output=True, timeout=300)
    assert done.stdout.decode().strip() == "True", done.stderr.decode()[-2000:]


@needs_dask
def test_a_stacked_model_fits_its_fold_models_on_the_cluster_the_same(local_cluster):
    """stack_window: the fold models, the first stage and the second stage all train on the workers, to the
    model one process fits."""
    from spacy_treecrf import TreeCRF

    X, y = word_sequences(80, seed=3)
    settings = dict(n_rounds=3, max_leaves=10, n_threads=1, stack_window=1, early_stopping=False)
    here = TreeCRF(**settings).fit(X, y)
    there = TreeCRF(**settings).fit(X, y, scheduler=local_cluster.scheduler_address)
    assert here.crf_.stage1.rounds == there.crf_.stage1.rounds > 0
    assert_same_forest(here.crf_.stage1.ensemble.forest(), there.crf_.stage1.ensemble.forest())
    assert_same_forest(here.ensemble.forest(), there.ensemble.forest())
    assert here.predict(X) == there.predict(X)


@needs_dask
def test_the_component_trains_through_a_local_cluster(local_cluster, monkeypatch):
    """spacy train's way: the scheduler comes from SPACY_TREECRF_SCHEDULER, and the pipeline's config and model
    files do not hold it."""
    import spacy
    from spacy.tokens import Doc, Span
    from spacy.training import Example

    X, y = word_sequences(80, seed=1)

    def trained(scheduler):
        monkeypatch.setenv("SPACY_TREECRF_SCHEDULER", scheduler)
        nlp = spacy.blank("en")
        nlp.add_pipe("treecrf", config={"booster": {"max_leaves": 20, "n_threads": 1}})
        examples = []
        for xs, ys in zip(X, y):
            doc = Doc(nlp.vocab, words=[x["w"] for x in xs])
            ref = Doc(nlp.vocab, words=[x["w"] for x in xs])
            ref.ents = [Span(ref, i, i + 1, label="LOC") for i, lab in enumerate(ys) if lab == "B"]
            examples.append(Example(doc, ref))
        nlp.initialize(lambda: examples)
        for _ in range(3):
            nlp.update(examples)
        return nlp

    here, there = trained(""), trained(local_cluster.scheduler_address)
    assert_same_forest(here.get_pipe("treecrf").ensemble.forest(), there.get_pipe("treecrf").ensemble.forest())
    there.get_pipe("treecrf").feeder.trainer.close()
    address = local_cluster.scheduler_address.encode()
    assert address not in there.config.to_str().encode() and address not in there.get_pipe("treecrf").to_bytes()


def test_a_scheduler_is_no_setting():
    """TreeCRF(scheduler=...) says where it went; a config from before keeps loading, its scheduler ignored."""
    import spacy
    from spacy_treecrf import TreeCRF

    with pytest.raises(TypeError, match=r"E207.*fit\(X, y, scheduler="):
        TreeCRF(scheduler="tcp://127.0.0.1:8786")
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config={"booster": {"scheduler": ""}})  # what `spacy init config` wrote before
    with pytest.warns(UserWarning, match=r"W008.*SPACY_TREECRF_SCHEDULER=tcp://127.0.0.1:8786"):
        spacy.blank("en").add_pipe("treecrf", config={"booster": {"scheduler": "tcp://127.0.0.1:8786"}})


@needs_dask
@pytest.mark.parametrize("when", ["between_rounds", "mid_round"])
def test_a_killed_worker_is_an_error_naming_it_within_a_minute(monkeypatch, when):
    """SIGKILL, as the kernel's OOM killer would: between two rounds, or as the shards grow a round's tree among
    themselves (the others then wait on it)."""
    indptr, indices, n_atoms, y, seq_starts, allowed, _ = sequences()
    K = allowed.shape[1]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                                  silence_logs=50) as lc, distributed.Client(lc) as client:
        trainer = ClusterTrainer(client, indptr, indices, n_atoms, y, seq_starts, allowed,
                                 BoostParams(max_leaves=10, n_threads=1))
        ensemble = Ensemble(K + 1, K, 0, shared=True)
        trainer.fit_round(ensemble)
        victim = trainer.workers[1]
        pid = client.run(os.getpid, workers=[victim])[victim]
        start = time.monotonic()
        if when == "between_rounds":
            os.kill(pid, signal.SIGKILL)
        else:  # once the round's tree has begun on the shards, as the shards start growing it among themselves
            calls = []
            call = ClusterTrainer._call

            def kill_at_grow(self, name, *args, **kwargs):
                calls.append(name)
                if name == "grow":
                    os.kill(pid, signal.SIGKILL)
                return call(self, name, *args, **kwargs)
            monkeypatch.setattr(ClusterTrainer, "_call", kill_at_grow)
        with pytest.raises(ClusterError, match=f"E199.*{victim}.*round 2.*1 rounds completed"):
            trainer.fit_round(ensemble)
        assert time.monotonic() - start < 60
        assert ensemble.n_trees == 1  # the completed round is kept
        assert when == "between_rounds" or calls[-1] == "grow"


def test_an_address_without_a_dask_scheduler_is_a_clear_error_within_the_connect_time(monkeypatch):
    """Something that listens but never speaks, something that answers in another protocol (whose first bytes
    distributed would read as a frame length of exabytes) and a transport that reaches no other process: each a
    coded error naming the address, within CONNECT_SECONDS, not minutes of waiting or distributed's own error."""
    pytest.importorskip("distributed", reason="the dask extra (pip install -e '.[dask]')")
    import socket
    import threading

    monkeypatch.setattr(cluster, "CONNECT_SECONDS", 3)
    peers = []

    def listening(reply: bytes) -> str:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(5)

        def accept():
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                peers.append(conn)
                if reply:
                    conn.sendall(reply)
        threading.Thread(target=accept, daemon=True).start()
        peers.append(server)
        return f"tcp://127.0.0.1:{server.getsockname()[1]}"

    def outcome(address: str) -> str:
        """connect's error, or what it did instead, within 15 s (an unbounded wait fails here, not hangs)."""
        result = ["still waiting after 15 s"]

        def attempt():
            try:
                result[0] = f"connected: {cluster.connect(address)!r}"
            except BaseException as err:  # noqa: BLE001  (the test looks at whatever it is)
                result[0] = f"{type(err).__name__}: {err}"
        thread = threading.Thread(target=attempt, daemon=True)
        thread.start()
        thread.join(15)
        return result[0]

    try:
        for address in (listening(b""), listening(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" * 3)):
            assert re.match(rf"ValueError: \[E221\] scheduler '{address}'.*within 3 s", outcome(address))
        assert re.match(r"ValueError: \[E220\] scheduler 'inproc://nothing'", outcome("inproc://nothing"))
    finally:
        for sock in peers:
            sock.close()
