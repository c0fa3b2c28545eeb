"""The one place where model state becomes msgpack bytes and back.

Arrays travel as {"dtype", "shape", "data"} with a fixed allow-list of dtypes; nothing is pickled, evaluated or
imported. Everything read back is validated here (types, shapes, tree indices in range), because the numba
kernels trust their inputs.
"""
from typing import Any, Dict

import numpy as np
import srsly
from ..errors import Errors

# 2: surrogate splits in the ensemble and the missing-value settings and tables (absent in version 1 files, which
# load as models without them); 3: shared trees (the ensemble's leaf vectors, dense; version 2 files have per-label
# trees); 4: shared trees' leaf vectors sparse (vector_ptr, vector_label, vector_value; version 3's dense ``vector``
# still loads); 5: one schema for both front ends (kind "model", model.py), the kinds "treecrf" and "TreeCRF" of
# versions 1-4 read through model.legacy_payload
FORMAT_VERSION = 5
DTYPES = {"bool": np.bool_, "int8": np.int8, "int32": np.int32, "int64": np.int64, "float32": np.float32,
          "float64": np.float64, "uint8": np.uint8}
DTYPE_NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        name = DTYPE_NAMES.get(obj.dtype)
        if name is None:
            raise TypeError(Errors.E038.format(dtype=obj.dtype))
        return {"__ndarray__": True, "dtype": name, "shape": list(obj.shape),
                "data": np.ascontiguousarray(obj).astype(obj.dtype.newbyteorder("<")).tobytes()}
    if isinstance(obj, dict):
        return {str(k): _encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _decode(obj: Any, where: str) -> Any:
    if isinstance(obj, dict):
        if obj.get("__ndarray__") is True:
            dtype = DTYPES.get(obj.get("dtype"))
            shape = obj.get("shape")
            data = obj.get("data")
            if dtype is None or not isinstance(shape, list) or not isinstance(data, bytes) or not all(
                    isinstance(n, int) and n >= 0 for n in shape):
                raise ValueError(Errors.E045.format(where=where))
            expected = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            if len(data) != expected:
                raise ValueError(Errors.E046.format(where=where, n_data=len(data), expected=expected))
            return np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype).reshape(shape)
        return {k: _decode(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if obj is None or isinstance(obj, (str, bytes, bool, int, float)):
        return obj
    # msgpack extension types, timestamps and anything a decoding hook made are refused, never interpreted
    raise ValueError(Errors.E018.format(type_name=type(obj).__name__, where=where))


def dumps(kind: str, payload: Dict[str, Any]) -> bytes:
    return srsly.msgpack_dumps({"format": "spacy_treecrf", "kind": kind, "version": FORMAT_VERSION,
                                "payload": _encode(payload)})


def loads(kind: str, data: bytes) -> Dict[str, Any]:
    """Decode and check the envelope: a truncated, foreign or newer file is a ValueError, never a crash."""
    msg = envelope(data, kind)
    if msg.get("kind") != kind:
        raise ValueError(Errors.E021.format(found=msg.get('kind'), kind=kind))
    return payload(msg)


def envelope(data: bytes, kind: str) -> Dict[str, Any]:
    """The file's envelope (format, kind, version, payload), its format and version checked: a truncated,
    foreign or newer file is a ValueError, never a crash. ``kind``: what the caller expects, for the messages."""
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(Errors.E019.format(kind=kind, type_name=type(data).__name__))
    try:
        # object_pairs_hook bypasses the decoders registered with srsly (numpy, entry points): plain msgpack only
        msg = srsly.msgpack.unpackb(bytes(data), raw=False, use_list=True, object_pairs_hook=dict)
    except Exception as err:  # msgpack raises several types for garbage
        raise ValueError(Errors.E039.format(kind=kind, type_name=type(err).__name__, err=err)) from None
    if not isinstance(msg, dict) or msg.get("format") != "spacy_treecrf":
        raise ValueError(Errors.E020.format(kind=kind))
    version = msg.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(Errors.E210.format(kind=kind, version=version))
    if version > FORMAT_VERSION:
        raise ValueError(Errors.E022.format(kind=kind, version=version, format_version=FORMAT_VERSION))
    return msg


def payload(msg: Dict[str, Any]) -> Dict[str, Any]:
    """An envelope's payload, its arrays decoded and checked."""
    kind = str(msg.get("kind"))
    if not isinstance(msg.get("payload"), dict):
        raise ValueError(Errors.E023.format(kind=kind))
    return _decode(msg["payload"], kind)


def field(msg: Dict[str, Any], name: str, typ):
    if name not in msg:
        raise ValueError(Errors.E024.format(name=name))
    value = msg[name]
    if not isinstance(value, typ):
        raise ValueError(Errors.E025.format(name=name, type_name=typ.__name__, type_name_2=type(value).__name__))
    return value


def check_array(msg: Dict[str, Any], name: str, dtype, shape) -> np.ndarray:
    arr = field(msg, name, np.ndarray)
    if arr.dtype != np.dtype(dtype):
        raise ValueError(Errors.E026.format(name=name, dtype=arr.dtype, dtype_2=np.dtype(dtype)))
    if len(arr.shape) != len(shape) or any(want is not None and got != want for got, want in zip(arr.shape, shape)):
        raise ValueError(Errors.E027.format(name=name, shape=arr.shape, shape_2=shape))
    return np.ascontiguousarray(arr)


def load_ensemble(arrays: Dict[str, Any], n_labels: int, n_features: int, numeric=None):
    """Rebuild an Ensemble, checking every index the kernels will follow; ``numeric``: the NumericIndex of its
    rows' n_features atoms (None: all binary), whose "x > u" tests lie past them (numeric.py)."""
    from .ensemble import Ensemble
    from .numeric import is_test, no_numeric

    numeric = no_numeric() if numeric is None else numeric

    S = n_labels + 1
    kind = check_array(arrays, "kind", np.int8, (None,))
    n = len(kind)
    feature = check_array(arrays, "feature", np.int32, (n,))
    yes = check_array(arrays, "yes", np.int32, (n,))
    no = check_array(arrays, "no", np.int32, (n,))
    value = check_array(arrays, "value", np.float64, (n,))
    count = check_array(arrays, "count", np.float64, (n,))
    states = check_array(arrays, "states", np.bool_, (n, S))
    roots = check_array(arrays, "roots", np.int64, (None,))
    if len(roots) == 0 or roots[0] != 0 or roots[-1] != n or np.any(np.diff(roots) < 1):
        raise ValueError(Errors.E028)
    labels = check_array(arrays, "labels", np.int32, (len(roots) - 1,))
    shared = "vector" in arrays or "vector_ptr" in arrays
    if shared:
        vectors = _leaf_vectors(arrays, kind, n_labels)
        if np.any(labels != -1):
            raise ValueError(Errors.E169.format(n_labels=n_labels))
    elif np.any((labels < 0) | (labels >= n_labels)):
        raise ValueError(Errors.E029)
    if np.any((kind < 0) | (kind > 2)):
        raise ValueError(Errors.E030)
    if not np.all(np.isfinite(value)):
        raise ValueError(Errors.E031)
    check_leaf_values(value[kind == 0])
    sizes = np.repeat(np.diff(roots), np.diff(roots))
    local = np.arange(n) - np.repeat(roots[:-1], np.diff(roots))
    inner = kind != 0
    for name, child in (("yes", yes), ("no", no)):
        if np.any(inner & ((child <= local) | (child >= sizes))):
            raise ValueError(Errors.E040.format(name=name))
    if np.any(~inner & ((yes != -1) | (no != -1))):
        raise ValueError(Errors.E032)
    # each node but a root is the child of exactly one node: a shared node would make the depth, and so the
    # kernels' traversal stack, too small
    base = np.repeat(roots[:-1], np.diff(roots))
    parents = np.bincount(np.concatenate([(base + yes)[inner], (base + no)[inner]]), minlength=n)
    is_root = np.zeros(n, dtype=np.bool_)
    is_root[roots[:-1]] = True
    if np.any(parents != np.where(is_root, 0, 1)):
        raise ValueError(Errors.E033)
    if np.any((kind == 1) & ~is_test(numeric, n_features, feature)):
        raise ValueError(Errors.E034)
    if np.any(count < 0) or not np.all(np.isfinite(count)):
        raise ValueError(Errors.E035)
    checked = {"kind": kind, "feature": feature, "yes": yes, "no": no, "value": value, "count": count,
               "states": states, "roots": roots, "labels": labels, **(vectors if shared else {})}
    if "surr_feature" in arrays or "surr_same" in arrays:
        surr = check_array(arrays, "surr_feature", np.int32, (n, None))
        checked["surr_feature"] = surr
        checked["surr_same"] = check_array(arrays, "surr_same", np.bool_, surr.shape)
        if np.any((surr < -1) | (surr >= n_features)):
            raise ValueError(Errors.E041)
        if np.any((kind != 1)[:, None] & (surr >= 0)):
            raise ValueError(Errors.E042)
        if surr.shape[1] > 1 and np.any((surr[:, :-1] < 0) & (surr[:, 1:] >= 0)):
            raise ValueError(Errors.E043)
    ensemble = Ensemble.from_arrays(S, n_labels, checked)
    ensemble.set_numeric(numeric)
    return ensemble


def _leaf_vectors(arrays: Dict[str, Any], kind: np.ndarray, n_labels: int) -> Dict[str, np.ndarray]:
    """Shared trees' leaf vectors (trees.LeafVectors' arrays), checked: a version 3 file's dense ``vector``
    (nodes x K) made sparse, or a version 4 file's vector_ptr / vector_label / vector_value, with pairs on leaves
    only, labels ascending within a leaf and below K, values finite."""
    n = len(kind)
    if "vector" in arrays:
        from .trees import sparse_vectors
        vector = check_array(arrays, "vector", np.float64, (n, n_labels))
        if not np.all(np.isfinite(vector)):
            raise ValueError(Errors.E169.format(n_labels=n_labels))
        ptr, label, value = sparse_vectors(np.where((kind == 0)[:, None], vector, 0.0))
    else:
        ptr = check_array(arrays, "vector_ptr", np.int64, (n + 1,))
        label = check_array(arrays, "vector_label", np.int32, (None,))
        value = check_array(arrays, "vector_value", np.float64, label.shape)
        sizes = np.diff(ptr)
        if ptr[0] != 0 or ptr[-1] != len(label) or np.any(sizes < 0) or np.any((kind != 0) & (sizes > 0)):
            raise ValueError(Errors.E169.format(n_labels=n_labels))
        first = np.zeros(len(label), dtype=bool)
        first[ptr[:-1][sizes > 0]] = True
        if (np.any((label < 0) | (label >= n_labels)) or not np.all(np.isfinite(value))
                or np.any(~first[1:] & (np.diff(label) <= 0))):
            raise ValueError(Errors.E169.format(n_labels=n_labels))
    check_leaf_values(value)
    return {"vector_ptr": ptr, "vector_label": label, "vector_value": value}


def check_leaf_values(values: np.ndarray) -> None:
    """Refuse leaf values no training can produce: every stored value is a leaf's value times its round's step,
    and the step keeps each round's move of a log potential within booster.MAX_MOVE. A larger one (1e300, or
    8e210 from a few flipped bytes) would make every potential overflow: each token an entity, NaN marginals."""
    from .booster import MAX_MOVE

    if len(values) and float(np.abs(values).max()) > MAX_MOVE * (1 + 1e-9):
        raise ValueError(Errors.E217.format(value=float(values[np.argmax(np.abs(values))]), bound=MAX_MOVE))


def check_numeric(msg: Dict[str, Any], n_features: int) -> Dict[str, Any]:
    """A model's numeric columns (estimator.FeatureIndex): keys, each column's bin upper bounds (ascending) and its
    first id; its ids (one per bin) follow one another within the n_features and do not overlap. Files before
    numeric columns have none."""
    keys = msg.get("numeric_keys", [])
    uppers = msg.get("numeric_uppers", [])
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
        raise ValueError(Errors.E185.format(problem="its keys are not distinct strings"))
    if not isinstance(uppers, list) or len(uppers) != len(keys):
        raise ValueError(Errors.E185.format(problem="it needs one array of bin bounds per key"))
    base = check_array(msg, "numeric_base", np.int64, (len(keys),)) if keys else np.zeros(0, dtype=np.int64)
    checked = []
    for u in uppers:
        u = np.asarray(u)
        if u.ndim != 1 or u.dtype != np.float64 or np.any(np.isnan(u)) or np.any(np.diff(u) <= 0):
            raise ValueError(Errors.E185.format(problem="bin bounds must be ascending float64 numbers"))
        checked.append(u)
    end = base + np.array([len(u) + 1 for u in checked], dtype=np.int64)
    order = np.argsort(base)
    if len(base) and (base.min() < 0 or end.max() > n_features or np.any(base[order][1:] < end[order][:-1])):
        raise ValueError(Errors.E185.format(problem=f"its ids must lie within the {n_features} features, apart"))
    return {"keys": keys, "uppers": checked, "base": base, "end": end}


def check_missing_table(msg: Dict[str, Any], n_features: int) -> Dict[str, Any]:
    """The missing-value tables of a model (see estimator.FeatureIndex): variable names, each feature's variable,
    each variable's imputed feature and indicator feature (-1: none). Version 1 files have none: empty tables."""
    variables = msg.get("variables", [])
    if not isinstance(variables, list) or not all(isinstance(v, str) for v in variables):
        raise ValueError(Errors.E036)
    V = len(variables)
    if "feature_var" not in msg:
        return {"variables": variables, "feature_var": np.full(n_features, -1, dtype=np.int32),
                "impute": np.full(V, -1, dtype=np.int32), "indicator": np.full(V, -1, dtype=np.int32)}
    out = {"variables": variables, "feature_var": check_array(msg, "feature_var", np.int32, (n_features,))}
    if np.any((out["feature_var"] < -1) | (out["feature_var"] >= V)):
        raise ValueError(Errors.E037)
    for name in ("impute", "indicator"):
        out[name] = check_array(msg, name, np.int32, (V,))
        if np.any((out[name] < -1) | (out[name] >= n_features)):
            raise ValueError(Errors.E044.format(name=name))
    return out
