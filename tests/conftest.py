"""Shared helpers and fixtures: CSR rows of small dense problems, start masks, and the grower and tree kernels
called the way the booster calls them."""
import numpy as np

from spacy_treecrf.engine.grow import grow_tree
from spacy_treecrf.engine.sparse import csc_index
from spacy_treecrf.engine.trees import GrowSettings, Rows, Target, Tree, no_missing, tree_depth

TREE_KEYS = Tree._fields + ("pbuf", "pstart", "plen")


def dense_csr(X):
    """CSR rows (indptr int64, sorted indices int32) of a dense boolean feature matrix."""
    X = np.asarray(X, dtype=bool)
    indptr = np.concatenate([[0], np.cumsum(X.sum(axis=1))]).astype(np.int64)
    indices = np.nonzero(X)[1].astype(np.int32)  # row-major, so sorted within each row
    return indptr, indices


def start_mask(seq_starts, T):
    is_start = np.zeros(T, dtype=bool)
    is_start[seq_starts[:-1][seq_starts[:-1] < seq_starts[1:]]] = True
    return is_start


def grow(indptr, indices, n_features, D, is_start, allowed_k, positions=None, max_leaves=4, lam=0.0, min_leaf=1.0,
         min_gain=0.0, feature_ok=None, states_last=False, missing=None, n_surrogates=0):
    """grow_tree on plain arrays; ``missing``: a MissingRows (None: no routing). Returns a dict of the Tree's
    fields and its segments (pbuf, pstart, plen)."""
    T = len(D)
    positions = np.arange(T, dtype=np.int64) if positions is None else np.asarray(positions, dtype=np.int64)
    ok = np.ones(n_features, dtype=np.bool_) if feature_ok is None else np.asarray(feature_ok, dtype=np.bool_)
    target = Target(np.ascontiguousarray(D, dtype=np.float64), np.asarray(is_start, dtype=np.bool_),
                    np.asarray(allowed_k, dtype=np.bool_))
    settings = GrowSettings(int(max_leaves), float(lam), float(min_leaf), float(min_gain), bool(states_last),
                            int(n_surrogates))
    tree, segments = grow_tree(Rows(indptr, indices), csc_index(indptr, indices, n_features), target, positions,
                               settings, ok, no_missing() if missing is None else missing.index())
    return dict(zip(TREE_KEYS, tuple(tree) + tuple(segments)))


def as_tree(tr) -> Tree:
    """The Tree of a dict with its fields (counts 1 and surrogate slots empty where the dict has none)."""
    n = len(tr["kind"])
    slots = {"count": np.ones(n), "surr_feature": np.zeros((n, 0), dtype=np.int32),
             "surr_same": np.zeros((n, 0), dtype=np.bool_)}
    return Tree(*(np.asarray(tr[name]) if name in tr else slots[name] for name in Tree._fields))


def depth(tr) -> int:
    return tree_depth(tr["yes"], tr["no"])


def component_config(config: dict) -> dict:
    """A treecrf component's config with its boosting settings in the [booster] block where they belong."""
    from spacy_treecrf.engine.booster import BoostParams

    booster = {key: value for key, value in config.items() if key in BoostParams.__dataclass_fields__}
    rest = {key: value for key, value in config.items() if key not in booster}
    return {**rest, "booster": {**rest.get("booster", {}), **booster}} if booster else rest
