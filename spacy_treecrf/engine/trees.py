"""What a tree is, and the named tuples the kernels exchange (numba takes them as structs: no positional tuples).

A node is a product P x A: a set of positions times a set of previous states (intersected with validity). A
FEATURE node sends a position to ``yes`` when its row holds the feature, else to ``no``; a STATE node sends the
states in its ``yes`` child's state set there and the rest to ``no``; a LEAF adds ``value`` to the potential of
its label for every (position, state) that reaches it, or, in a SHARED tree (one tree a round for all labels),
its ``vector`` of values, one per label. Children always follow their parent in the node arrays.
"""
from typing import NamedTuple

import numpy as np
from numba import njit

LEAF, FEATURE, STATE = 0, 1, 2

# Relative tolerance under which two gains count as tied (then the lower feature id, the feature split over
# the state split, and the lower node id win). Sums reached by histogram subtraction differ from direct
# sums by rounding only, so exact ties of the arithmetic must not decide the tree.
TIE = 1e-10


@njit(cache=True, nogil=True)
def tie_slack(n):
    """How far apart two split gains of a node of weight n may be and still count as tied, beyond TIE of them. A
    gain is a difference of squared sums over the node, so where it is small against them its rounding, which
    differs with the order of the additions (a scan or histogram subtraction; one process or a cluster's
    shards), is large against it: a feature and its complement in the node, of the same exact gain, came out
    with gains further apart than TIE of them on CoNLL-2003. A residual cell is at most about 1 in magnitude,
    so that rounding stays far below TIE * n."""
    return TIE * n


class Tree(NamedTuple):
    """Node arrays, one row per node, of one tree or (in an Ensemble) of all trees end to end.

    kind (int8): LEAF / FEATURE / STATE; feature (int32): the feature a FEATURE node tests, else -1; yes / no
    (int32): the children, relative to the tree's root (-1 at a leaf); value (float64): the leaf value (inner
    nodes: the value they had as leaves); count (float64): the node's training weight N; states (bool, nodes x
    S): the previous states reaching the node; surr_feature (int32, nodes x R): a FEATURE node's surrogate
    features, best first, -1 padded; surr_same (bool, nodes x R): surrogate present -> the yes side. R = 0 for
    trees without surrogates (instance weighting routes missing values). vector (float64, nodes x W): a shared
    tree's leaf values per label (W = K; 0 for labels the leaf leaves alone; inner nodes 0); W = 0 for a
    per-label tree, whose leaves hold ``value`` for its one label."""
    kind: np.ndarray
    feature: np.ndarray
    yes: np.ndarray
    no: np.ndarray
    value: np.ndarray
    count: np.ndarray
    states: np.ndarray
    surr_feature: np.ndarray
    surr_same: np.ndarray
    vector: np.ndarray


TREE_FIELDS = Tree._fields


def scaled_tree(tree: Tree, step: float) -> Tree:
    """The tree with every value multiplied by ``step`` (a round's learning rate or line-search step)."""
    return tree._replace(value=tree.value * step, vector=tree.vector * step)


def is_shared(tree: Tree) -> bool:
    """Whether the tree's leaves hold a value per label (see Tree.vector)."""
    return tree.vector.shape[1] > 0


def concat_trees(trees) -> Tree:
    """Node arrays of several trees end to end (each keeps its root-relative children)."""
    return Tree(*(np.concatenate(parts) for parts in zip(*trees)))


def empty_tree(n_states: int, n_surrogates: int, width: int = 0) -> Tree:
    """A tree of no nodes; ``width``: its leaf vectors' (Tree.vector)."""
    return Tree(kind=np.zeros(0, np.int8), feature=np.zeros(0, np.int32), yes=np.zeros(0, np.int32),
                no=np.zeros(0, np.int32), value=np.zeros(0), count=np.zeros(0),
                states=np.zeros((0, n_states), np.bool_), surr_feature=np.zeros((0, n_surrogates), np.int32),
                surr_same=np.zeros((0, n_surrogates), np.bool_), vector=np.zeros((0, width)))


class LeafVectors(NamedTuple):
    """An ensemble's shared-tree leaf vectors, sparse: node n's (label, value) pairs are label[ptr[n]:ptr[n + 1]]
    (int32) and value[...] (float64). Inner nodes, per-label trees' nodes and the labels a leaf leaves at 0 have
    none: with an L1 penalty (BoostParams.l1) a leaf keeps the few labels whose residuals there are large, so
    the model's size and a leaf's cost do not grow with K."""
    ptr: np.ndarray
    label: np.ndarray
    value: np.ndarray


def sparse_vectors(vector: np.ndarray) -> LeafVectors:
    """The LeafVectors of dense leaf vectors (nodes x W; W = 0: none)."""
    nodes, labels = np.nonzero(vector) if vector.shape[1] else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    ptr = np.concatenate([[0], np.cumsum(np.bincount(nodes, minlength=vector.shape[0]))]).astype(np.int64)
    return LeafVectors(ptr=ptr, label=labels.astype(np.int32),
                       value=np.ascontiguousarray(vector[nodes, labels], dtype=np.float64))


def concat_vectors(parts) -> LeafVectors:
    """LeafVectors of several node ranges end to end."""
    offsets = np.cumsum([0] + [p.ptr[-1] for p in parts[:-1]])
    return LeafVectors(ptr=np.concatenate([parts[0].ptr[:1]] + [p.ptr[1:] + o for p, o in zip(parts, offsets)]),
                       label=np.concatenate([p.label for p in parts]), value=np.concatenate([p.value for p in parts]))


def tree_depth(yes, no) -> int:
    """The depth of a tree (its root, node 0: 0) from its children arrays, one level of nodes at a time (a loop
    over the nodes in Python cost a large tree more than its boosting round)."""
    level = np.zeros(1 if len(yes) else 0, dtype=np.int64)
    depth = 0
    while True:
        inner = level[yes[level] >= 0]
        if not len(inner):
            return depth
        level = np.concatenate([yes[inner], no[inner]]).astype(np.int64)
        depth += 1


class Rows(NamedTuple):
    """Binary feature rows in CSR form: row t holds the feature ids indices[indptr[t]:indptr[t + 1]], ascending."""
    indptr: np.ndarray
    indices: np.ndarray


class MissingIndex(NamedTuple):
    """Where variables are missing, for the kernels' routing rule: CSR rows of missing variable ids (indptr,
    indices, ascending per row) and each feature's variable (fvar, -1: never missing) among n_vars. An empty
    fvar means no routing: every feature test is present or absent."""
    indptr: np.ndarray
    indices: np.ndarray
    fvar: np.ndarray
    n_vars: int


def no_missing() -> MissingIndex:
    return MissingIndex(indptr=np.zeros(1, np.int64), indices=np.zeros(0, np.int32), fvar=np.zeros(0, np.int32),
                        n_vars=0)


@njit(cache=True, nogil=True)
def routes_missing(missing):
    """True when the routing rule is on (see MissingIndex)."""
    return missing.fvar.shape[0] > 0


# A leaf waiting to be split keeps its histogram, so that one of its children is the histogram minus its
# sibling's instead of a scan. Summed over the waiting leaves of a large tree that is the training rows' size
# times d + 1 floats (0.4-0.5 GB for 3000-leaf shared trees on UD EWT); beyond this budget the leaves least
# likely to be split next (lowest candidate gain) give theirs up and are scanned for both children if they are.
# 64 MB: on UD EWT XPOS with 3000-leaf trees the round's peak is 70 MB lower than with 128 MB (1,321 against
# 1,391 MB) for rounds about 15% slower (benchmarks/results/defaults_candidates.md, "Leaves by the size of the
# data"); the full XPOS run still peaked at 1,562 MB.
KEPT_BYTES = 1 << 26


class GrowSettings(NamedTuple):
    """How a tree grows: at most max_leaves leaves; leaf values and gains with the paper's shrinkage lam (Eq. 1:
    value G / (N + lam)); no child lighter than min_leaf; no split gaining min_gain or less; states_last: a leaf
    splits on the previous state only where no feature split gains (label_splits "fallback"); n_surrogates:
    surrogate splits kept per feature split where values are missing (0: instance weighting); kept_bytes: the
    most the histograms of leaves waiting to be split may hold (grow.py)."""
    max_leaves: int
    lam: float
    min_leaf: float
    min_gain: float
    states_last: bool
    n_surrogates: int
    kept_bytes: int = KEPT_BYTES


class LowRank(NamedTuple):
    """A shared tree's projected residuals D[t, s] (d values) without a T x S x d array (project.low_rank_rows):
    the functional gradient of the CRF loss is, per cell, a forward coefficient times a vector shared by the
    position's group of previous states (crf.Potentials), so per position and group it keeps d values, not per
    state. With r = start[t] + group[t, s] (the group's row; -1: an invalid cell, D = 0) and s > 0:

        D[t, s] = coef[t] calpha[t - 1, s - 1] clamped[r] - alpha[t - 1, s - 1] free[r] + gold[t] W[y[t]] if s = y[t - 1] + 1

    (clamped: partially labelled sequences only, coef[t] 1 there and 0 elsewhere; gold: the weight of the gold
    cell, 0 in partially labelled sequences); at a sequence start only state 0 has a cell, D[t, 0] = free[r]. On
    UD EWT XPOS (51 states, 3 groups a position) it takes a twentieth of the dense array. Empty (no rows in W):
    the residuals are Target.D."""
    start: np.ndarray
    group: np.ndarray
    free: np.ndarray
    clamped: np.ndarray
    alpha: np.ndarray
    calpha: np.ndarray
    coef: np.ndarray
    y: np.ndarray
    gold: np.ndarray
    W: np.ndarray


NO_LOW_RANK = LowRank(start=np.zeros(1, np.int64), group=np.zeros((0, 0), np.int32), free=np.zeros((0, 0)),
                      clamped=np.zeros((0, 0)), alpha=np.zeros((0, 0)), calpha=np.zeros((0, 0)), coef=np.zeros(0),
                      y=np.zeros(0, np.int32), gold=np.zeros(0), W=np.zeros((0, 0)))


class Target(NamedTuple):
    """What one tree is fitted to: the residuals D (T x S x d: its label's, d = 1, or a shared tree's residuals of
    all labels projected on d directions; a shared tree's T x S x 0 when they come as a LowRank, ``low``), which
    positions start a sequence (is_start, T), and after which states its label (a shared tree: any label) may
    follow (allowed_k, S)."""
    D: np.ndarray
    is_start: np.ndarray
    allowed_k: np.ndarray
    low: LowRank = NO_LOW_RANK


class Forest(NamedTuple):
    """All trees of an ensemble as one Tree of node arrays end to end: tree i has nodes roots[i]:roots[i + 1],
    predicts label labels[i] (-1: a shared tree, predicting every label from its leaves' vectors, sparse in
    ``vectors``; the nodes' Tree.vector is empty) and is depths[i] deep."""
    nodes: Tree
    roots: np.ndarray
    labels: np.ndarray
    depths: np.ndarray
    vectors: LeafVectors
