"""Missing input values (paper Sec. 6): the routing rule the grower and the tree walk share, and the row
transformations of the other strategies.

Missingness reaches the kernels as a MissingIndex (trees.py): a second CSR of *variables* per position plus
``fvar``, the variable of every feature (-1: the feature belongs to no variable and is never missing). A
variable is the group of binary tests that go missing together (a letter at one window offset: all its one-hot
indicators). A feature test at position t is then present, absent or missing.

- Instance weighting (C4.5's proportional distribution, Sec. 6.1): a feature split is chosen on the examples where
  its variable is known; the others go to both children, their weight multiplied by the share n_yes / (n_yes +
  n_no) of the known ones. At prediction both branches are followed and averaged with those shares. The share is
  count[yes] / (count[yes] + count[no]) of the tree arrays (the missing examples carried into the children keep
  that ratio), so every tree, even one fitted without missing values, can be evaluated this way.
- Surrogate splits (CART, Sec. 6.2): each feature split keeps up to ``N_SURROGATES`` other features ranked by how
  often they send the node's known examples the same way as the split; an example missing the split's variable
  follows the first surrogate it knows, else the majority branch, in training as at prediction.
- Imputation and indicators are transformations of the rows (``most_common_columns``, ``fill_rows``) before the
  engine sees them.
- Learned direction (XGBoost, LightGBM): a numeric column's missing value holds none of its bins, and each
  threshold split sends it the way that gains more (numeric.py); other variables get indicators.

The grower (grow.py) and the walk (predict_walk.py) call ``route``; rows without missing values never do.
"""
import numpy as np
from numba import njit

from .numeric import passes
from .trees import MissingIndex
from .sparse import has_feature, take_rows
from ..errors import Errors

STRATEGIES = ("instance_weighting", "surrogate", "imputation", "indicator", "learned_direction")
ENGINE_STRATEGIES = ("instance_weighting", "surrogate")  # the others are input transforms (estimator, featurizer)
# strategies that give a missing variable an indicator feature (learned_direction: the variables without a numeric
# column, whose missing values need no feature of their own)
INDICATOR_STRATEGIES = ("indicator", "learned_direction")
N_SURROGATES = 4


def check_strategy(value, where: str) -> str:
    if value not in STRATEGIES:
        raise ValueError(Errors.E017.format(where=where, strategies=STRATEGIES, value=value))
    return value


class MissingRows:
    """Where variables are missing: CSR rows (indptr, sorted variable ids) per position, and each feature's
    variable (``feature_var``, -1 for none) among ``n_vars``. ``known``: per variable, at how many positions it
    has a value (it applies there and is not missing; what imputation counts over), if the producer knows."""

    def __init__(self, indptr, indices, feature_var, n_vars: int, known=None):
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        self.feature_var = np.ascontiguousarray(feature_var, dtype=np.int32)
        self.n_vars = int(n_vars)
        self.known = None if known is None else np.asarray(known, dtype=np.int64)

    @property
    def any(self) -> bool:
        return len(self.indices) > 0

    def index(self) -> MissingIndex:
        """The kernels' view of these rows."""
        return MissingIndex(indptr=self.indptr, indices=self.indices, fvar=self.feature_var, n_vars=self.n_vars)

    def rows(self) -> np.ndarray:
        """The positions with at least one missing variable."""
        return np.flatnonzero(np.diff(self.indptr) > 0).astype(np.int64)

    def take(self, positions: np.ndarray) -> "MissingRows":
        """The rows of ``positions`` (int64, in that order; the same variables)."""
        return MissingRows(*take_rows(self.indptr, self.indices, positions), self.feature_var, self.n_vars,
                           self.known)


def most_common_columns(indptr, indices, missing_rows: MissingRows) -> np.ndarray:
    """Imputation table: for each variable, its most common outcome at the ``missing_rows.known`` positions that
    give it a value -- the feature most often present, or -1 when more of them hold none of its features (a falsy
    value, a word too short for a prefix). Ties go to the lower feature id."""
    V = missing_rows.n_vars
    T = len(indptr) - 1
    fvar = missing_rows.feature_var
    t = np.repeat(np.arange(T, dtype=np.int64), np.diff(indptr))
    v = fvar[indices].astype(np.int64)
    has = v >= 0
    t, v, c = t[has], v[has], indices[has].astype(np.int64)
    F = max(len(fvar), 1)
    keys, counts = np.unique(v * F + c, return_counts=True)
    best = np.full(V, -1, dtype=np.int64)
    top = np.zeros(V, dtype=np.int64)
    order = np.lexsort((keys % F, -counts, keys // F))  # per variable: largest count first, then lower id
    first = np.unique(keys[order] // F, return_index=True)[1]
    best[keys[order][first] // F] = keys[order][first] % F
    top[keys[order][first] // F] = counts[order][first]
    known = missing_rows.known
    holding = np.bincount(np.unique(t * V + v) % V, minlength=V)[:V] if V else np.zeros(0, dtype=np.int64)
    return np.where(top > known - holding, best, -1).astype(np.int32)


def fill_rows(indptr, indices, missing_rows: MissingRows, table, n_features: int):
    """Rows where each missing variable v gets the feature table[v] (imputed value or indicator; -1: none)."""
    T = len(indptr) - 1
    F = max(int(n_features), 1)
    t_new = np.repeat(np.arange(T, dtype=np.int64), np.diff(missing_rows.indptr))
    f_new = np.asarray(table, dtype=np.int64)[missing_rows.indices]
    t_old = np.repeat(np.arange(T, dtype=np.int64), np.diff(indptr))
    keys = np.unique(np.concatenate([t_old * F + indices, (t_new * F + f_new)[f_new >= 0]]))
    out_ptr = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // F, minlength=T), out=out_ptr[1:])
    return out_ptr, (keys % F).astype(np.int32)


@njit(cache=True, nogil=True)
def is_missing(missing, t, f):
    """Whether feature f's variable is missing at position t (a numeric "x > u" test, past fvar, is only made
    where missing values are not routed)."""
    v = missing.fvar[f] if f < missing.fvar.shape[0] else -1
    return v >= 0 and has_feature(missing.indptr, missing.indices, t, v)


@njit(cache=True, nogil=True)
def yes_share(count, a, b):
    """Share of a split's known training examples that went to the yes child a (b: the no child)."""
    total = count[a] + count[b]
    return count[a] / total if total > 0.0 else 0.5


@njit(cache=True, nogil=True)
def route(rows, numeric, missing, t, f, surr_feature, surr_same):
    """Branch of position t at a feature split on f whose surrogates are surr_feature / surr_same (that node's
    rows of the tree arrays): 1 yes, 0 no, -1 missing with no known surrogate. rows: atom rows with their
    NumericIndex (the grower's), or rows expanded for the kernels with no_numeric() (numeric.py)."""
    if not is_missing(missing, t, f):
        return 1 if passes(rows, numeric, t, f) else 0
    for r in range(surr_feature.shape[0]):
        g = surr_feature[r]
        if g < 0:
            break
        if not is_missing(missing, t, g):
            return 1 if has_feature(rows.indptr, rows.indices, t, g) == surr_same[r] else 0
    return -1
