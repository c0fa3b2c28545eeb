"""Structural fuzzer of treecrf model files, run by test_model_files.py in a subprocess under a memory limit.

    python tests/fuzz_model_files.py MEMORY_MB EXAMPLES SEED

Trains a small NER component, then lets Hypothesis replace 1-3 nodes anywhere in the model file's structure (the
msgpack tree: settings, labels, featurizer state, tree arrays and their shapes and dtypes) by values of other
types, extreme numbers, long strings, huge declared array shapes, and set up to 3 leaf values (the trees' value
array, whose dtype and shape stay right) to extreme finite numbers or to a few flipped bytes of their own; then
loads each result into a fresh component. Every file must either be refused with a ValueError or load and tag a
doc with finite marginals, span probabilities and confidence; a MemoryError, another exception or a crash is a finding. Prints one JSON line: {"examples": n, "loaded": n, "refused": n, "findings": [...]}.
"""
import json
import resource
import sys

memory_mb, n_examples, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2 ** 20, memory_mb * 2 ** 20))

import numpy as np  # noqa: E402
import spacy  # noqa: E402
import srsly  # noqa: E402
from hypothesis import HealthCheck, given, seed as hypothesis_seed, settings, strategies as st  # noqa: E402
from spacy.training import Example  # noqa: E402

import spacy_treecrf.pipe  # noqa: E402,F401  (registers the factory)

DATA = [("Alice lives in Paris .", [(0, 5, "PER"), (15, 20, "LOC")]), ("Bob met Carol in Rome", [(0, 3, "PER")])]


def trained_bytes() -> bytes:
    nlp = spacy.blank("xx")
    crf = nlp.add_pipe("treecrf", config={"booster": {"max_leaves": 4, "n_threads": 1},
                                          "features": {"@misc": "spacy_treecrf.window_features.v1",
                                                       "lexicons": {}}})
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in DATA]
    nlp.initialize(lambda: examples)
    for _ in range(3):
        nlp.update(examples)
    return crf.to_bytes()


ORIGINAL = srsly.msgpack_loads(trained_bytes())


def paths(node, path=()):
    """Every node of the structure (arrays as one node: their dict holds dtype, shape and data)."""
    yield path
    if isinstance(node, dict) and not node.get("__ndarray__"):
        for key, value in node.items():
            yield from paths(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node[:6]):
            yield from paths(value, path + (i,))


PATHS = list(paths(ORIGINAL))[1:]
BIG = st.sampled_from([2 ** 31, 2 ** 40, 10 ** 12, -(2 ** 40), 2 ** 63 - 1])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 70), BIG,
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
                    st.sampled_from(["x" * 100_000, "B-", "O", "", "../../etc/passwd"]), st.binary(max_size=40))
ARRAYS = st.builds(lambda dtype, shape, n: {"__ndarray__": True, "dtype": dtype, "shape": shape,
                                            "data": b"\x01" * n},
                   st.sampled_from(["bool", "int8", "int32", "int64", "float32", "float64", "uint8", "complex"]),
                   st.lists(st.one_of(st.integers(0, 9), BIG), max_size=3), st.integers(0, 64))
VALUES = st.recursive(st.one_of(SCALARS, ARRAYS),
                      lambda inner: st.one_of(st.lists(inner, max_size=4),
                                              st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=6)


def at(msg, path):
    for key in path:
        msg = msg[key]
    return msg


def perturbed(original, draw_int, raw):
    """A value of the original's own type and shape (so that more files get past the type checks): other
    integers, numbers, strings of the file, or an array's bytes replaced by random ones."""
    if isinstance(original, bool):
        return not original
    if isinstance(original, int):
        return draw_int
    if isinstance(original, float):
        return [float("nan"), float("inf"), -1.0, 0.0, 1e300][draw_int % 5]
    if isinstance(original, str):
        return STRINGS[draw_int % len(STRINGS)]
    if isinstance(original, dict) and original.get("__ndarray__"):
        size = len(original["data"])
        data = (raw * (size // max(len(raw), 1) + 1))[:size] if raw else original["data"]
        return {**original, "data": data}
    if isinstance(original, list) and original:
        return original[::-1]
    return original


STRINGS = sorted({node for path in PATHS for node in [at(ORIGINAL, path)] if isinstance(node, str)})


def replaced(msg, path, value):
    node = msg
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


LEAVES = np.flatnonzero(np.frombuffer(ORIGINAL["payload"]["ensemble"]["kind"]["data"], dtype=np.int8) == 0)
EXTREMES = st.sampled_from([1e300, -1e300, 8e210, 1e20, -1e5, 10.5, -10.000001, 9.999, 0.0, 5e-324])


def with_leaf_values(msg, edits):
    """Set leaf values of the trees' value array: (leaf, number) sets it, (leaf, byte index, xor mask) flips bits
    of its 8 bytes."""
    arr = msg["payload"]["ensemble"]["value"]
    value = np.frombuffer(arr["data"], dtype=np.float64).copy()
    raw = value.view(np.uint8).reshape(-1, 8)
    for edit in edits:
        leaf = int(LEAVES[edit[0] % len(LEAVES)])
        if len(edit) == 2:
            value[leaf] = edit[1]
        else:
            raw[leaf, edit[1] % 8] ^= edit[2]
    arr["data"] = value.tobytes()


stats = {"examples": 0, "loaded": 0, "refused": 0, "findings": []}


@hypothesis_seed(seed)
@settings(max_examples=n_examples, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.integers(0, len(PATHS) - 1), st.booleans(), VALUES,
                          st.integers(-3, 2 ** 31), st.binary(min_size=1, max_size=16)), max_size=3),
       st.lists(st.one_of(st.tuples(st.integers(0, 10 ** 6), EXTREMES),
                          st.tuples(st.integers(0, 10 ** 6), st.integers(0, 7), st.integers(1, 255))), max_size=3))
def fuzz(changes, leaf_edits):
    msg = srsly.msgpack_loads(srsly.msgpack_dumps(ORIGINAL))
    if leaf_edits:
        with_leaf_values(msg, leaf_edits)
    for index, same_kind, value, draw_int, raw in changes:
        try:
            if same_kind:
                value = perturbed(at(msg, PATHS[index]), draw_int, raw)
            replaced(msg, PATHS[index], value)
        except (KeyError, IndexError, TypeError):  # an earlier change removed the place
            pass
    data = srsly.msgpack_dumps(msg)
    stats["examples"] += 1
    nlp = spacy.blank("xx")
    crf = nlp.add_pipe("treecrf", config={"store_scores": True, "booster": {"n_threads": 1}})
    try:
        crf.from_bytes(data)
    except ValueError:
        stats["refused"] += 1
        return
    except BaseException as err:  # noqa: BLE001  (every other outcome is a finding)
        stats["findings"].append(f"load: {type(err).__name__}: {str(err)[:200]} after {describe(changes, leaf_edits)}")
        return
    try:
        doc = nlp("Alice met Bob in Paris .")
        for entry in doc.user_data[("treecrf", "scores")].values():
            probs, span_probs, confidence = entry[1], entry[5], entry[7]
            assert np.isfinite(probs).all(), "marginals not finite"
            assert span_probs is None or np.isfinite(np.asarray(span_probs, dtype=float)).all(), "span probabilities"
            assert np.isfinite(confidence).all(), "confidence not finite"
        stats["loaded"] += 1
    except BaseException as err:  # noqa: BLE001
        stats["findings"].append(f"tag: {type(err).__name__}: {str(err)[:200]} after {describe(changes, leaf_edits)}")


def describe(changes, leaf_edits):
    return [(PATHS[i], "same kind" if same else repr(v)[:80]) for i, same, v, _, _ in changes] + [
        ("leaf value", edit) for edit in leaf_edits]


fuzz()
print(json.dumps(stats))
