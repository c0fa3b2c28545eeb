"""Damaged or hostile model files: truncated or random bytes, other targets or versions, wrong types, tree
indices out of range, pickles and extension types: each refused with a clear error, nothing run, nothing changed."""
import builtins
import copy
import os
import json
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import spacy
import srsly
from srsly.msgpack.ext import Timestamp

from conftest import LANG, fresh_component, make_nlp, ner_examples, paper_crf, train
import spacy_treecrf.pipe  # noqa: F401  (registers the factory)
from spacy_treecrf.engine import serialize


def _arr(d):
    return np.frombuffer(d["data"], dtype=np.dtype(d["dtype"]).newbyteorder("<")).reshape(d["shape"]).copy()


def _put(d, a):
    d.update(serialize._encode(np.ascontiguousarray(a)))


def _reencode(msg):
    return srsly.msgpack_dumps(msg)


_UNLOADED = {}


def assert_refused(data, match=None, target="ner"):
    """The bytes are refused with a ValueError, and the component is left as it was (never initialized)."""
    if target not in _UNLOADED:
        _UNLOADED[target] = fresh_component(target)
    comp = _UNLOADED[target]
    try:
        with pytest.raises(ValueError, match=match):
            comp.from_bytes(data)
        assert comp.ensemble is None and not comp.labels  # nothing half-loaded
    finally:
        if comp.ensemble is not None or comp.labels:
            del _UNLOADED[target]  # a failure here must not spill into the next case


@pytest.fixture(scope="module")
def model_msg(ner_model):
    _, data = ner_model
    return srsly.msgpack_loads(data)


def test_truncated_model_bytes(ner_model, tmp_path):
    _, data = ner_model
    cuts = sorted(set(range(0, 40)) | set(range(len(data) - 40, len(data)))
                  | set(np.linspace(0, len(data) - 1, 60).astype(int).tolist()))
    for cut in cuts:
        assert_refused(data[:cut])
    # from disk, the message names the file
    nlp, crf = make_nlp()
    train(nlp, ner_examples(nlp), rounds=2)
    nlp.to_disk(tmp_path / "model")
    path = tmp_path / "model" / "treecrf" / "model.msgpack"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="model.msgpack"):
        spacy.load(tmp_path / "model")


def test_random_bytes_and_bit_flips(ner_model):
    _, data = ner_model
    rng = np.random.default_rng(0)
    for n in [1, 2, 7, 100, len(data)]:
        for _ in range(5):
            assert_refused(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
    assert_refused(b"")
    assert_refused(srsly.msgpack_dumps([1, 2, 3]), match="not a spacy_treecrf model")
    # single bit flips anywhere: either refused with a ValueError, or a model that still predicts
    nlp = spacy.blank(LANG)
    comp = nlp.add_pipe("treecrf")
    refused = 0
    for pos in rng.choice(len(data), 250, replace=False):
        flipped = bytearray(data)
        flipped[pos] ^= 1 << int(rng.integers(0, 8))
        try:
            comp.from_bytes(bytes(flipped))
        except ValueError:
            refused += 1
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # absurd leaf values may overflow: no crash is the claim
            doc = nlp("Alice lives in Paris .")
        assert len(doc) == 5
    assert refused > 0


def test_model_from_another_target_or_kind(ner_model):
    _, data = ner_model
    assert_refused(data, match="target 'ner'", target="tag")
    est = paper_crf(n_rounds=1, max_leaves=2).fit([[{"w": "a"}, {"w": "b"}]], [["X", "Y"]])
    assert_refused(est.to_bytes(), match="E021.*'estimator' model, expected a 'component'")
    with pytest.raises(ValueError, match="E021.*'component' model, expected a 'estimator'"):
        paper_crf().from_bytes(data)


def test_model_from_a_newer_format_version(ner_model, model_msg, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(serialize, "FORMAT_VERSION", serialize.FORMAT_VERSION + 1)
        newer = serialize.dumps("model", model_msg["payload"])
    assert_refused(newer, match=f"format version {serialize.FORMAT_VERSION + 1}.*upgrade")
    for damaged in ("1", 0, -3, True, None, 1.5):  # no version number: a damaged file, not a newer one
        msg = copy.deepcopy(model_msg)
        msg["version"] = damaged
        assert_refused(_reencode(msg), match=r"E210.*format version .*no version number.*damaged")
    msg = copy.deepcopy(model_msg)
    msg["payload"]["features"]["version"] = 99
    assert_refused(_reencode(msg), match="state version 99")


def _mutated(msg, path, fn):
    msg = copy.deepcopy(msg)
    node = msg
    for key in path[:-1]:
        node = node[key]
    fn(node, path[-1])
    return _reencode(msg)


def _set_array(name, make, where="ensemble"):
    def fn(node, key):
        arrays = {k: _arr(v) for k, v in node.items()}
        _put(node[key], make(arrays))
    return ["payload", where, name], fn


DTYPE_SHAPE_CASES = {
    "value float32": (_set_array("value", lambda a: a["value"].astype(np.float32)), "dtype"),
    "kind int32": (_set_array("kind", lambda a: a["kind"].astype(np.int32)), "dtype"),
    "roots int32": (_set_array("roots", lambda a: a["roots"].astype(np.int32)), "dtype"),
    "roots empty": (_set_array("roots", lambda a: np.zeros(0, np.int64)), r"E028.*tree offsets"),
    "states extra column": (_set_array("states", lambda a: np.ones((len(a["kind"]), a["states"].shape[1] + 1), bool)),
                            "shape"),
    "states 1-d": (_set_array("states", lambda a: a["states"][:, 0].copy()), "shape"),
    "yes too short": (_set_array("yes", lambda a: a["yes"][:-1]), "shape"),
    "labels too long": (_set_array("labels", lambda a: np.append(a["labels"], 0).astype(np.int32)), "shape"),
    "value as a list": ((["payload", "ensemble", "value"], lambda n, k: n.__setitem__(k, [0.0])), "ndarray"),
    "allowed wrong shape": ((["payload", "allowed"], lambda n, k: _put(n[k], np.ones((2, 2), bool))), "shape"),
    "allowed wrong dtype": ((["payload", "allowed"], lambda n, k: _put(n[k], _arr(n[k]).astype(np.uint8))), "dtype"),
    "array byte count": ((["payload", "ensemble", "count", "data"], lambda n, k: n.__setitem__(k, n[k][:-3])),
                         "bytes"),
    "negative shape": ((["payload", "ensemble", "count", "shape"], lambda n, k: n.__setitem__(k, [-1])),
                       "malformed"),
    "no ensemble": ((["payload", "ensemble"], lambda n, k: n.pop(k)), "ensemble"),
    "labels not strings": ((["payload", "labels"], lambda n, k: n.__setitem__(k, [1, 2, 3, 4])), "label"),
    "decode unknown": ((["payload", "settings", "decode"], lambda n, k: n.__setitem__(k, "beam")), "decode"),
    "store_scores not bool": ((["payload", "settings", "store_scores"], lambda n, k: n.__setitem__(k, "yes")),
                              "store_scores"),
    "max_leaves not a number": ((["payload", "params", "max_leaves"], lambda n, k: n.__setitem__(k, "many")),
                                "settings"),
    "feature column out of window": ((["payload", "features", "column_offsets"],
                                      lambda n, k: n.__setitem__(k, [99] + n[k][1:])), "window"),
}


@pytest.mark.parametrize("case", sorted(DTYPE_SHAPE_CASES))
def test_model_with_wrong_types_dtypes_or_shapes(model_msg, case):
    (path, fn), match = DTYPE_SHAPE_CASES[case]
    assert_refused(_mutated(model_msg, path, fn), match=match)


def _tree_case(mutate):
    """Mutate the ensemble arrays (a dict of numpy arrays, plus the model's feature and label counts) in place."""
    def fn(node, key):
        arrays = {k: _arr(v) for k, v in node[key].items()}
        counts = {"n_features": len(node["features"]["column_atoms"]), "n_labels": len(node["labels"])}
        mutate({**arrays, **counts})
        for k, v in arrays.items():
            _put(node[key][k], v)
    return ["payload", "ensemble"], fn


def _first_inner(a, kind=None):
    return int(np.flatnonzero(a["kind"] != 0 if kind is None else a["kind"] == kind)[0])


def _share_a_child(a):
    """Give a node of the first tree a second parent (a DAG, not a tree): the root's 'no' child becomes the
    'no' child of the root's 'yes' child as well. Every index stays in range and points forwards."""
    root_yes, root_no = int(a["yes"][0]), int(a["no"][0])
    assert a["kind"][0] != 0 and a["kind"][root_yes] != 0 and root_no > root_yes
    a["no"][root_yes] = root_no


TREE_CASES = {
    "child past its tree": (lambda a: a["yes"].__setitem__(_first_inner(a), a["roots"][1]), "'yes' child"),
    "child far out of range": (lambda a: a["no"].__setitem__(_first_inner(a), 2 ** 31 - 1), "'no' child"),
    "child pointing backwards": (lambda a: a["yes"].__setitem__(_first_inner(a), 0), "'yes' child"),
    "negative child": (lambda a: a["no"].__setitem__(_first_inner(a), -5), "'no' child"),
    "leaf with children": (lambda a: a["yes"].__setitem__(int(np.flatnonzero(a["kind"] == 0)[-1]), 2 ** 20),
                           "leaf has children"),
    "shared child": (_share_a_child, "exactly one path"),
    "feature id = n_features": (lambda a: a["feature"].__setitem__(_first_inner(a, 1), a["n_features"]),
                                "feature id"),
    "feature id far out": (lambda a: a["feature"].__setitem__(_first_inner(a, 1), 2 ** 31 - 1), "feature id"),
    "negative feature id": (lambda a: a["feature"].__setitem__(_first_inner(a, 1), -1), "feature id"),
    "label id = K": (lambda a: a["labels"].__setitem__(0, a["n_labels"]), "label out of range"),
    "negative label id": (lambda a: a["labels"].__setitem__(-1, -1), "label out of range"),
    "unknown node kind": (lambda a: a["kind"].__setitem__(0, 7), "node kind"),
    "roots not from 0": (lambda a: a["roots"].__setitem__(0, 1), "tree offsets"),
    "roots past the nodes": (lambda a: a["roots"].__setitem__(-1, a["roots"][-1] + 5), "tree offsets"),
    "empty tree": (lambda a: a["roots"].__setitem__(1, 0), "tree offsets"),
    "infinite leaf value": (lambda a: a["value"].__setitem__(int(np.flatnonzero(a["kind"] == 0)[0]), np.inf),
                            "non-finite"),
    "NaN leaf value": (lambda a: a["value"].__setitem__(int(np.flatnonzero(a["kind"] == 0)[0]), np.nan),
                       "non-finite"),
    "absurd leaf value": (lambda a: a["value"].__setitem__(int(np.flatnonzero(a["kind"] == 0)[0]), 1e300),
                          r"E217.*1e\+300"),
    "leaf value past a round's move": (lambda a: a["value"].__setitem__(int(np.flatnonzero(a["kind"] == 0)[-1]),
                                                                        -10.5), r"E217.*-10.5"),
}


@pytest.mark.parametrize("case", sorted(TREE_CASES))
def test_model_with_tree_indices_out_of_range(model_msg, case):
    mutate, match = TREE_CASES[case]
    assert_refused(_mutated(model_msg, *_tree_case(mutate)), match=match)


def test_deep_shared_subtree_is_refused_not_run(model_msg):
    """A chain of state splits reached by a long and by a short path: before the loader checked that every
    node has one parent, the traversal stack was sized by the short path and the kernel wrote past it."""
    S = len(model_msg["payload"]["labels"]) + 1
    chain, tail = 150, 150
    X, J = chain + 1, chain + 2
    n_inner = J + tail
    yes, no = [], []
    next_leaf = iter(range(n_inner, 10 ** 6))
    for i in range(n_inner):
        if i == 0:
            yes.append(1), no.append(X)
        elif i in (chain, X):
            yes.append(J), no.append(next(next_leaf))
        elif i == n_inner - 1:
            yes.append(next(next_leaf)), no.append(next(next_leaf))
        else:
            yes.append(i + 1), no.append(next(next_leaf))
    n = next(next_leaf)
    arrays = {"kind": np.array([2] * n_inner + [0] * (n - n_inner), np.int8),
              "feature": np.full(n, -1, np.int32), "yes": np.array(yes + [-1] * (n - n_inner), np.int32),
              "no": np.array(no + [-1] * (n - n_inner), np.int32), "value": np.full(n, 0.01),
              "count": np.ones(n), "states": np.ones((n, S), bool), "roots": np.array([0, n], np.int64),
              "labels": np.array([0], np.int32)}
    msg = copy.deepcopy(model_msg)
    msg["payload"]["ensemble"] = serialize._encode(arrays)
    assert_refused(_reencode(msg), match="exactly one path")


_PWNED = "_treecrf_test_unpickled"


class _Evil:
    def __reduce__(self):
        return exec, (f"import builtins; builtins.{_PWNED} = True",)


def test_loader_never_unpickles_or_interprets_extensions(model_msg, monkeypatch):
    def no_pickle(*args, **kwargs):
        raise AssertionError("the model loader must never unpickle")

    # numba reads its cache's index with pickle the first time a process calls a kernel (the loader's warm-up
    # prediction calls several): load once before the guard, so that it checks the loader, not numba's cache
    # (run alone, this test failed there)
    fresh_component().from_bytes(_reencode(model_msg))
    monkeypatch.setattr(pickle, "loads", no_pickle)
    monkeypatch.setattr(pickle, "load", no_pickle)
    evil = pickle.dumps(_Evil())
    assert fresh_component().from_bytes(_reencode(model_msg)).labels  # the real thing loads without pickle
    n = len(_arr(model_msg["payload"]["ensemble"]["value"]))
    payloads = {
        "ext type in cfg": (["payload", "labels"], srsly.msgpack.ExtType(1, evil), "ExtType"),
        "ext type as array": (["payload", "ensemble", "value"], srsly.msgpack.ExtType(42, evil), "ExtType"),
        "ext type in an unused key": (["payload", "settings", "extra"], srsly.msgpack.ExtType(0, evil), "ExtType"),
        "timestamp ext type": (["payload", "params", "n_threads"], Timestamp(1, 0), "Timestamp"),
        "object dtype": (["payload", "ensemble", "value"],
                         {"__ndarray__": True, "dtype": "object", "shape": [1], "data": evil}, "malformed array"),
        "numpy '|O' dtype": (["payload", "ensemble", "value"],
                             {"__ndarray__": True, "dtype": "|O", "shape": [n], "data": b"\0" * 8 * n},
                             "malformed array"),
        "srsly numpy encoding, object dtype": (["payload", "ensemble", "value"],
                                               {b"nd": True, b"type": "|O", b"kind": b"", b"shape": [1],
                                                b"data": evil}, "ndarray"),
        "srsly numpy encoding, float dtype": (["payload", "ensemble", "value"],
                                              {b"nd": True, b"type": "<f8", b"kind": b"", b"shape": [n],
                                               b"data": np.zeros(n).tobytes()}, "ndarray"),
        "srsly complex encoding": (["payload", "rounds"], {b"complex": True, b"data": "1j"}, "rounds"),
    }
    for name, (path, value, match) in payloads.items():
        data = _mutated(model_msg, path, lambda node, key: node.__setitem__(key, value))
        assert_refused(data, match=match)
    ext_envelope = srsly.msgpack_dumps(srsly.msgpack.ExtType(1, evil))
    assert_refused(ext_envelope)
    assert_refused(evil)
    assert_refused(pickle.dumps({"format": "spacy_treecrf"}))
    assert not hasattr(builtins, _PWNED)


def test_refused_model_leaves_a_trained_component_unchanged(ner_model, model_msg):
    nlp, data = ner_model
    nlp2, crf2 = make_nlp()
    crf2.from_bytes(data)
    before = [(e.start, e.end, e.label_) for e in nlp2("Bob lives in Rome .").ents]
    # the features of another model but a broken ensemble: nothing may be replaced
    other_nlp, other = make_nlp(target="ner")
    train(other_nlp, ner_examples(other_nlp, [("x y z", [(0, 1, "PER")])]), rounds=1)
    msg = srsly.msgpack_loads(other.to_bytes())
    msg["payload"]["ensemble"]["labels"] = {"__ndarray__": True, "dtype": "float64", "shape": [0], "data": b""}
    with pytest.raises(ValueError):
        crf2.from_bytes(_reencode(msg))
    assert crf2.to_bytes() == data
    assert [(e.start, e.end, e.label_) for e in nlp2("Bob lives in Rome .").ents] == before


@pytest.mark.parametrize("old, new, match", [
    ("I-LOC", "B-LOC", "listed twice"),
    ("B-LOC", "LOC", "not a BIO label"),
    ("B-LOC", "B-", "not a BIO label"),
])
def test_component_labels_a_model_file_gives_are_checked_as_initialize_checks_them(model_msg, old, new, match):
    def put(node, key):
        assert old in node[key]
        node[key] = [new if label == old else label for label in node[key]]
    assert_refused(_mutated(model_msg, ["payload", "labels"], put), match)


def estimator_bytes_with(change):
    X = [[{"w": "a"}, {"w": "b"}]] * 3
    msg = serialize.loads("model", paper_crf(n_rounds=2, max_leaves=2).fit(X, [["A", "B"]] * 3).to_bytes())
    change(msg)
    return serialize.dumps("model", msg)


@pytest.mark.parametrize("change, match", [
    (lambda m: m.update(rounds=float("inf")), "E110.*'rounds'"),
    (lambda m: m.update(rounds=-1), "E110.*'rounds'"),
    (lambda m: m.update(rounds=3), "best_round must be an integer"),
    (lambda m: m["features"].update(names=m["features"]["names"][:1] * len(m["features"]["names"])),
     "feature names must be distinct"),
    (lambda m: m["features"].update(names=[None] + m["features"]["names"][1:]), "feature names must be distinct"),
    (lambda m: m.update(labels=[1, "1"]), "E155.*listed twice"),
    (lambda m: m.update(labels=[1.5, "1"]), "E152.*distinct strings or integers"),
    (lambda m: m["params"].update(n_threads=10 ** 6), "'n_threads' must be in"),
    (lambda m: m["params"].update(max_leaves="10"), "'max_leaves' must be an integer"),
    (lambda m: m["settings"].update(n_rounds=float("inf")), "n_rounds"),
])
def test_estimator_model_bytes_with_bad_fields_are_refused_and_change_nothing(change, match):
    X = [[{"w": "a"}, {"w": "c"}]] * 3
    model = paper_crf(n_rounds=2, max_leaves=2).fit(X, [["A", "C"]] * 3)
    before = model.to_bytes()
    with pytest.raises(ValueError, match=match):
        model.from_bytes(estimator_bytes_with(change))
    assert model.to_bytes() == before


def test_a_lexicon_path_inside_a_model_file_is_never_read(tmp_path):
    """A model file naming a lexicon file used to make a later nlp.initialize() read that file into the next
    model; the entries travel inside the model, the paths to read come from the component's own config."""
    cities = tmp_path / "cities.txt"
    cities.write_text("Paris\nRome\n", encoding="utf8")
    nlp, crf = make_nlp(features={"@misc": "spacy_treecrf.window_features.v1", "lexicons": {"cities": str(cities)}})
    train(nlp, ner_examples(nlp), rounds=2)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET\n", encoding="utf8")

    def put(node, key):
        node[key] = {"cities": str(secret)}
    data = _mutated(srsly.msgpack_loads(crf.to_bytes()), ["payload", "features", "config", "lexicons"], put)
    nlp2 = spacy.blank(LANG)
    loaded = nlp2.add_pipe("treecrf").from_bytes(data)
    assert loaded.featurizer.lexicons == {"cities": ""}  # the entries came with the model; no file to read
    loaded.initialize(lambda: ner_examples(nlp2), nlp=nlp2)
    again = loaded.to_bytes()
    assert b"TOPSECRET" not in again and b"paris" in again


FUZZER = Path(__file__).resolve().parent / "fuzz_model_files.py"


def test_structural_fuzzer_under_a_memory_limit_finds_nothing():
    """Hypothesis rewrites the model file's structure (types, extreme numbers, long strings, declared array shapes,
    same-kind perturbations); under a 1 GB address-space limit every file is refused with a ValueError or loads
    and tags a doc (tests/fuzz_model_files.py; more examples: run it by hand)."""
    out = subprocess.run([sys.executable, str(FUZZER), "1024", "200", "7"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert stats["examples"] == 200 and stats["loaded"] > 0 and stats["refused"] > 0
    assert stats["findings"] == []


HOSTILE_SIZES = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1024 * 2 ** 20, 1024 * 2 ** 20))
    import spacy, srsly
    import spacy_treecrf.pipe
    data = open(sys.argv[1], "rb").read()
    results = []
    for key, value in (("window", 10 ** 6), ("prefix", 10 ** 7), ("suffix", 10 ** 7)):
        msg = srsly.msgpack_loads(data)
        msg["payload"]["features"]["config"][key] = value
        try:
            spacy.blank("xx").add_pipe("treecrf").from_bytes(srsly.msgpack_dumps(msg))
            results.append(f"file {key}: loaded")
        except ValueError as err:
            results.append(f"file {key}: refused {'E159' in str(err)}")
        try:
            spacy.blank("xx").add_pipe("treecrf", config={"features": {"@misc": "spacy_treecrf.window_features.v1",
                                                                       key: value}})
            results.append(f"config {key}: accepted")
        except Exception as err:
            results.append(f"config {key}: refused {'E159' in str(err)}")
    print("|".join(results))
""")


def test_sizes_from_a_file_or_a_config_are_bounded_before_anything_is_allocated(ner_model, tmp_path):
    """A model file or config with a huge window or affix length made loading allocate 7-15 GiB; under a 1 GB
    address-space limit each is now refused naming the setting."""
    _, data = ner_model
    (tmp_path / "model.msgpack").write_bytes(data)
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE_SIZES, encoding="utf8")
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "model.msgpack")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    results = out.stdout.strip().splitlines()[-1].split("|")
    assert results == [f"{where} {key}: refused True" for key in ("window", "prefix", "suffix")
                       for where in ("file", "config")]


@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
def test_a_model_file_that_is_not_a_regular_file_is_refused_without_reading(ner_model, tmp_path, kind):
    """A link to /dev/zero read until MemoryError; a FIFO hung."""
    nlp, _ = ner_model
    nlp.to_disk(tmp_path / "model")
    target = tmp_path / "model" / "treecrf" / "model.msgpack"
    target.unlink()
    if kind == "device":
        target.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    with pytest.raises(ValueError, match="E162"):
        spacy.load(tmp_path / "model")


LOPSIDED = textwrap.dedent("""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (1024 * 2 ** 20, 1024 * 2 ** 20))
    import numpy as np
    from spacy_treecrf.engine.booster import Ensemble
    from spacy_treecrf.engine.trees import Tree

    def tree(n_leaves, S):  # a chain of feature tests: node 2i tests feature i, its no-branch goes on
        n = 2 * n_leaves - 1
        kind = np.zeros(n, np.int8); feature = np.full(n, -1, np.int32)
        yes = np.full(n, -1, np.int32); no = np.full(n, -1, np.int32)
        for i in range(n_leaves - 1):
            kind[2 * i], feature[2 * i], yes[2 * i], no[2 * i] = 1, i % 50, 2 * i + 1, 2 * i + 2
        return Tree(kind, feature, yes, no, np.full(n, 0.01), np.ones(n), np.ones((n, S), bool),
                    np.zeros((n, 0), np.int32), np.zeros((n, 0), bool), np.zeros((n, 0)))

    ens = Ensemble(3, 2)
    ens.add(0, tree(100_000, 3))
    for i in range(20_000):
        ens.add(i % 2, tree(1, 3))
    indptr, indices = np.array([0, 2], np.int64), np.array([1, 3], np.int32)
    phi = ens.potentials(indptr, indices)
    print(phi.shape, round(float(phi[0, 1, 0]), 6))
""")


def test_one_huge_tree_among_many_small_ones_does_not_blow_up_single_row_prediction(tmp_path):
    """The bit-mask tables grow as trees x the largest tree: 20,000 one-leaf trees beside one of 100,000 leaves
    asked for ~2 GB to tag one row; the partition kernel serves such ensembles (here under a 1 GB limit)."""
    script = tmp_path / "lopsided.py"
    script.write_text(LOPSIDED, encoding="utf8")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["(1,", "3,", "2)", "100.01"]  # 10,000 one-leaf trees and the chain's leaf


FORMAT_4 = Path(__file__).parent / "data" / "format_4"


def test_files_of_format_version_4_still_load_and_predict_as_they_did():
    """Model files written by the last release before one schema for both front ends (format version 4, kinds
    'treecrf' and 'TreeCRF'; made by that code: an estimator with imputation and numbers, one with a window, an NER
    component with indicator columns), and what that code predicted with them (expected.json)."""
    expected = json.loads((FORMAT_4 / "expected.json").read_text())
    assert srsly.msgpack_loads((FORMAT_4 / "estimator.msgpack").read_bytes())["version"] == 4
    X = [[{"w": w, "title": w.istitle(), "n": float(len(w))} for w in s.split()] for s in
         ["Alice met Bob", "Bob saw a cat", "the cat met Alice", "a dog saw Bob"]]
    est = paper_crf().from_bytes((FORMAT_4 / "estimator.msgpack").read_bytes())
    assert est.predict(X) == expected["estimator"] and est.missing == "imputation"
    got = [[round(p["P"], 12) for p in seq] for seq in est.predict_marginals(X)]
    assert [len(seq) for seq in got] == [len(seq) for seq in expected["estimator_marginals"]]
    assert np.allclose(sum(got, []), sum(expected["estimator_marginals"], []), atol=1e-12, rtol=0)
    Xw = [[w.lower() for w in s.split()] for s in ["Alice met Bob", "Bob saw a cat", "the cat met Alice"]]
    window = paper_crf().from_bytes((FORMAT_4 / "estimator_window.msgpack").read_bytes())
    assert window.window_ == 1 and window.predict(Xw) == expected["estimator_window"]
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config={"booster": {"missing": "indicator"}}).from_disk(FORMAT_4 / "ner")
    assert [[list(e) for e in ((ent.start, ent.end, ent.label_) for ent in nlp(text).ents)]
            for text in expected["ner_texts"]] == expected["ner"]
    again = paper_crf().from_bytes(est.to_bytes())  # saved again: in this version's schema, the same model
    assert srsly.msgpack_loads(est.to_bytes())["kind"] == "model" and again.predict(X) == expected["estimator"]


def test_a_damaged_file_gets_the_same_error_from_either_front_end(ner_model):
    """One loader: the same damage to a component's and to an estimator's file is refused with the same code."""
    _, data = ner_model
    est = paper_crf(n_rounds=2, max_leaves=2).fit([[{"w": "a"}, {"w": "b"}]] * 3, [["A", "B"]] * 3).to_bytes()
    damages = {
        "E039": lambda b: b[: len(b) // 2],
        "E022": lambda b: _bump(b, version=serialize.FORMAT_VERSION + 1),
        "E028": lambda b: _bump(b, payload=lambda p: p["ensemble"]["roots"].update(serialize._encode(
            np.zeros(0, np.int64)))),
        "E027": lambda b: _bump(b, payload=lambda p: p["allowed"].update(serialize._encode(np.ones((2, 2), bool)))),
        "E111": lambda b: _bump(b, payload=lambda p: p["params"].update(max_leaves="many")),
        "E110": lambda b: _bump(b, payload=lambda p: p.update(rounds=-2)),
        "E170": lambda b: _bump(b, payload=lambda p: p["params"].update(shared_trees=True)),
        "E152": lambda b: _bump(b, payload=lambda p: p.update(labels=[])),
    }
    for code, damage in damages.items():
        with pytest.raises(ValueError, match=code):
            fresh_component("ner").from_bytes(damage(data))
        with pytest.raises(ValueError, match=code):
            paper_crf().from_bytes(damage(est))


def _bump(data: bytes, version=None, payload=None) -> bytes:
    msg = srsly.msgpack_loads(data)
    if version is not None:
        msg["version"] = version
    if payload is not None:
        payload(msg["payload"])
    return _reencode(msg)
