"""The boosting loop (paper Table 3) over sparse binary rows, and the tree ensemble it grows.

Everything here takes plain numpy arrays: ``indptr``/``indices`` (CSR rows of active feature ids, one row per
position, sequences concatenated), ``seq_starts`` (sequence offsets), ``y`` (int32 label ids, -1 = unknown) and
``allowed`` (S x K bool: row 0 = labels allowed at a sequence start, row j + 1 = labels allowed after label j).
"""
from concurrent.futures import ThreadPoolExecutor
import ctypes
import ctypes.util
import dataclasses
from dataclasses import dataclass
import mmap
import os
import threading
from typing import List, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import crf, losses, missing, moves
from .crf import Potentials
from .grow import Segments, grow_tree, grow_tree_threads, influential_positions
from .leaves import (CELL_MEAN, NEWTON, POSITION_MEAN, LeafSums, add_label_leaf_sums, add_leaf_sums,
                     covering_leaves, leaf_nodes, leaf_values as leaf_value_kernel, values_of)
from .missing import MissingRows
from .numeric import NumericIndex, expand, no_numeric, tested
from .predict_bitmask import bitmask_index, bitmask_potentials
from .predict_partition import Cells, block_rows, label_state_words, partition_index, partition_potentials
from .predict_walk import walk_moves, walk_potentials
from .rules import path_tables
from .project import directions_from_moments, low_rank_rows
from .sparse import csc_index, take_rows
from .trees import (FEATURE, LEAF, Forest, GrowSettings, LeafVectors, LowRank, Rows, Target, Tree, TREE_FIELDS,
                    concat_trees, concat_vectors, empty_tree, is_shared, no_missing, scaled_tree, sparse_vectors,
                    tree_depth)
from ..errors import Errors

LOSSES = ("crf", "pseudo_likelihood", "hamming", "rank")
DECODERS = ("viterbi", "marginal")
LEAF_VALUES = {"mean": CELL_MEAN, "newton": NEWTON, "position_mean": POSITION_MEAN}  # leaves.leaf_values' modes
# "best": a leaf splits on the previous label where that gains more than its best feature split (the paper's
# trees); "fallback": only where no feature split gains at all. Fewer label splits make tagging cheaper: a row
# goes down both sides of a label split that its previous labels straddle.
LABEL_SPLITS = ("best", "fallback")
MAX_MOVE = 10.0  # a round changes no log potential by more than this: exp() stays finite in the float32 cache
GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
# Bounds of what a config or a model file may ask for: larger trees than MAX_LEAVES leaves would allocate their
# node arrays (2 * max_leaves rows of S states) before growing anything; threads beyond MAX_THREADS only cost.
MAX_LEAVES = 100_000
MAX_THREADS = 256
TYPE_WORDS = {int: "an integer", float: "a finite number", str: "a string", bool: "true or false",
              Union[float, str]: 'a finite number or "auto"', Union[int, str]: 'an integer or "auto"'}
# shrinkage "auto" (resolved_shrinkage): lambda = AUTO_SHRINKAGE_POSITIONS / the training positions, within
# AUTO_SHRINKAGE_RANGE
AUTO_SHRINKAGE_POSITIONS = 150_000
AUTO_SHRINKAGE_RANGE = (1.0, 10.0)
# max_leaves "auto" (resolved_max_leaves): a leaf per AUTO_LEAF_POSITIONS training positions, within AUTO_LEAVES_RANGE
AUTO_LEAF_POSITIONS = 50
AUTO_LEAVES_RANGE = (1000, 3000)
# A shared tree is grown over two shards of its positions (grow.grow_tree_threads, on two threads where there are
# two) from this many positions, where no value is routed: with fewer, a Step's work is too short for the
# hand-over to pay (benchmarks/results/grow_threads.md: 0.90x at 18,105 positions, 1.42x at 297,818). Whatever
# the threads, the same data grows the same tree.
GROW_THREADS_POSITIONS = 100_000
# A shared tree's splits are chosen on the residuals projected on this many directions (project.py): the
# histograms, per-state sums and the projected residuals (a LowRank's rows, or a T x S x d array) grow with it.
SHARED_DIRECTIONS = 16
# Projected residuals as a T x S x d array (losses without a LowRank: hamming, pseudo_likelihood) that would take
# more than this as float64 are kept as float32 (a split's gain needs no more precision); smaller ones stay float64.
PROJECTED_BYTES = 256 * 2 ** 20
MOMENT_BLOCK = 65_536  # positions whose residual sums position_moments makes at once (T x K float64 each)
RESIDUAL_BLOCK_BYTES = 32 * 2 ** 20  # residuals of every label a thread makes at once for a chunk (shared trees)
LINE_SEARCH_STEPS = 6  # golden-section steps of the rank loss's line search (step known to 0.618**7 of its range)


# The paper's model (Dietterich, Hao & Ashenfelter 2008): a tree per label and round over every feature column, its
# mean leaves, label splits wherever they gain. Not the defaults (BoostParams: chosen on dev data across tasks), but
# what the paper's experiments and the engine's tests run: TreeCRF(max_leaves=100, **PAPER_SETTINGS).
PAPER_SETTINGS = {"shared_trees": False, "leaf_values": "mean", "l1": 0.0, "colsample": 1.0, "label_splits": "best"}


@dataclass
class BoostParams:
    """Tree and round settings; checked once here so every caller gets the same messages."""

    max_leaves: Union[int, str] = "auto"
    shrinkage: Union[float, str] = "auto"
    learning_rate: float = 1.0
    min_samples_leaf: float = 1.0
    min_gain: float = 0.0
    subsample: float = 1.0
    colsample: float = 0.5
    trim: float = 0.0
    random_state: int = 0
    n_threads: int = 0
    loss: str = "crf"
    missing: str = "instance_weighting"
    leaf_values: str = "position_mean"
    label_splits: str = "fallback"
    shared_trees: bool = True
    l1: float = 0.1

    def __post_init__(self):
        for f in dataclasses.fields(self):  # the type first: a string "10" must not reach a comparison
            value = getattr(self, f.name)
            if f.type is str:
                ok = isinstance(value, str)
            elif f.type is bool:
                ok = isinstance(value, (bool, np.bool_))
            elif isinstance(value, str):  # Union[float | int, str]: a number or "auto" (in: == on typing objects)
                ok = f.type in (Union[float, str], Union[int, str]) and value == "auto"
            elif f.type in (int, Union[int, str]):
                ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
            else:
                ok = (isinstance(value, (int, float, np.integer, np.floating))
                      and not isinstance(value, (bool, np.bool_)) and bool(np.isfinite(value)))
            if not ok:
                raise ValueError(Errors.E015.format(name=f.name, want=TYPE_WORDS[f.type], value=value))
        if self.loss not in LOSSES:
            raise ValueError(Errors.E010.format(losses=LOSSES, loss=self.loss))
        if self.leaf_values not in LEAF_VALUES:
            raise ValueError(Errors.E011.format(choices=tuple(LEAF_VALUES), leaf_values=self.leaf_values))
        if self.label_splits not in LABEL_SPLITS:
            raise ValueError(Errors.E012.format(choices=LABEL_SPLITS, label_splits=self.label_splits))
        if self.leaf_values == "newton" and self.loss != "crf":
            raise ValueError(Errors.E013.format(loss=self.loss))
        missing.check_strategy(self.missing, "TreeCRF")
        checks = [
            ("max_leaves", self.max_leaves == "auto" or 2 <= self.max_leaves <= MAX_LEAVES,
             f'an integer in [2, {MAX_LEAVES}] or "auto"'),
            ("shrinkage", self.shrinkage == "auto" or self.shrinkage >= 0, '>= 0 or "auto"'),
            ("l1", self.l1 >= 0, ">= 0"),
            ("learning_rate", 0 < self.learning_rate <= 10, "in (0, 10] (|leaf value| <= 1, so this keeps exp() "
                                                                  "of a round finite in the float32 cache)"),
            ("min_samples_leaf", self.min_samples_leaf >= 0, ">= 0"),
            ("min_gain", self.min_gain >= 0, ">= 0"),
            ("subsample", 0 < self.subsample <= 1, "in (0, 1]"),
            ("colsample", 0 < self.colsample <= 1, "in (0, 1]"),
            ("trim", 0 <= self.trim < 1, "in [0, 1)"),
            ("n_threads", 0 <= self.n_threads <= MAX_THREADS, f"in [0, {MAX_THREADS}] (0 = all cores)"),
            ("random_state", self.random_state >= 0, "an integer >= 0 (the seed)"),
        ]
        for name, ok, want in checks:
            if not ok:
                raise ValueError(Errors.E015.format(name=name, want=want, value=getattr(self, name)))
        if self.max_leaves != "auto":
            self.max_leaves = int(self.max_leaves)

    @property
    def threads(self) -> int:
        """Worker threads: n_threads (0: up to 8), never more than the machine's cores, which is all they
        could use."""
        return min(self.n_threads or 8, os.cpu_count() or 1)


def _glibc_malloc_trim():
    """glibc's malloc_trim (None on other C libraries)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


MALLOC_TRIM = _glibc_malloc_trim()


def release_freed_memory():
    """Return freed heap pages to the system. A round's large buffers are made and freed in worker threads, i.e.
    in glibc's per-thread arenas, which keep freed pages: the resident size grew with every round."""
    if MALLOC_TRIM is not None:
        MALLOC_TRIM(0)


# Rows from which Ensemble.potentials takes predict_partition over predict_bitmask: the partition
# visits every node that a tree's rows pass, however few the rows, so a single sentence costs it several times
# what the bit masks cost; on the CoNLL-2003 models the two break even at a few hundred rows.
PARTITION_ROWS = 512
BITMASK_BYTES = 64 * 2 ** 20  # bit-mask tables beyond this plus 4 x the trees' own size: the partition kernel


def resolved_shrinkage(shrinkage: Union[float, str], n_positions: int) -> float:
    """The paper's lambda for a fit over ``n_positions`` training positions: the setting itself, or for "auto"
    AUTO_SHRINKAGE_POSITIONS / n_positions within AUTO_SHRINKAGE_RANGE (10 up to 15,000 positions, 1 from
    150,000). Chosen on dev data across tasks (benchmarks/results/defaults_candidates.md): the tasks with 5,000 to
    15,000 training positions (NETtalk, protein, the synthetic HMM) scored best with 10, those with 134,000 to
    223,000 (CoNLL-2003, CoNLL-2000, EWT UPOS, XPOS and cross-genre, Moby hyphenation) with 1. A leaf's value is
    its residual sum over (lambda + its positions): where the data is small, most leaves hold a few positions and
    lambda keeps them from fitting noise; where it is large, the small leaves are its rare words and patterns,
    which lambda = 10 held back (XPOS dev 92.05 against 92.64 with 1)."""
    if shrinkage != "auto":
        return float(shrinkage)
    low, high = AUTO_SHRINKAGE_RANGE
    return float(min(high, max(low, AUTO_SHRINKAGE_POSITIONS / max(n_positions, 1))))


def resolved_max_leaves(max_leaves: Union[int, str], n_positions: int) -> int:
    """A tree's most leaves for a fit over ``n_positions`` training positions: the setting itself, or for "auto"
    a leaf per AUTO_LEAF_POSITIONS positions within AUTO_LEAVES_RANGE (1000 up to 50,000 positions, 3000 from
    150,000). Chosen on dev data across tasks (benchmarks/results/defaults_candidates.md, "Leaves by the size of
    the data"): on the large corpora a 3000-leaf tree does the work of two or three 1000-leaf ones (EWT XPOS dev
    92.76 at round 52, where 1000 leaves reached 92.64 at round 87, spaCy's max_steps), while on a few thousand
    positions more leaves only fit noise (NETtalk phoneme+stress dev 74.50 / 73.10 / 71.96 with 1000 / 2000 /
    3000)."""
    if max_leaves != "auto":
        return int(max_leaves)
    low, high = AUTO_LEAVES_RANGE
    return int(min(high, max(low, n_positions // AUTO_LEAF_POSITIONS)))


def in_chunks(seq_starts: np.ndarray, threads: int, call, min_positions: int = 20000) -> list:
    """call(a, b, q0, q1) over balanced chunks of whole sequences (positions a:b, sequences q0:q1), run in
    threads since the kernels release the GIL; results in chunk order."""
    n_seq = len(seq_starts) - 1
    T = int(seq_starts[-1]) if n_seq >= 0 else 0
    if threads <= 1 or T < min_positions or n_seq < 2:
        return [call(0, T, 0, n_seq)]
    cuts = np.unique(np.searchsorted(seq_starts, np.linspace(0, T, threads + 1), side="left"))
    cuts[0], cuts[-1] = 0, n_seq
    cuts = np.unique(cuts)
    jobs = [(int(seq_starts[q0]), int(seq_starts[q1]), int(q0), int(q1)) for q0, q1 in zip(cuts[:-1], cuts[1:])]
    with ThreadPoolExecutor(len(jobs)) as pool:
        return list(pool.map(lambda job: call(*job), jobs))


def by_chunks(seq_starts, threads: int, call) -> tuple:
    """call(a, b, starts) over chunks of whole sequences (positions a:b, their offsets ``starts`` from a) in
    threads; each returns a tuple of arrays along positions or sequences, joined here in chunk order."""
    parts = in_chunks(seq_starts, threads, lambda a, b, q0, q1: call(a, b, seq_starts[q0:q1 + 1] - a))
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0])))


def lazy_zeros(shape) -> np.ndarray:
    """float64 zeros whose memory the OS maps a 4 KB page at a time, as it is written. np.zeros is lazy too, but
    numpy advises the kernel to back arrays of 4 MB and more with 2 MB huge pages, so that a few scattered rows
    written map nearly all of it (82 MB of a T x K alpha on UD EWT XPOS for the 11% of its sequences that are
    partially labelled; 4 KB pages: about 20 MB). np.zeros where the platform has no anonymous private maps."""
    count = int(np.prod(shape))
    if not hasattr(mmap, "MAP_ANONYMOUS") or count == 0:
        return np.zeros(shape)
    pages = mmap.mmap(-1, count * 8, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(pages, dtype=np.float64, count=count).reshape(shape)


def forward_backward(P: Potentials, seq_starts, y, clamp: bool, threads: int, todo=None) -> crf.ForwardBackward:
    """crf.forward_backward of the sequences q with todo[q] (None: all), over sequence chunks in threads, each
    writing its rows of one ForwardBackward made here (no chunk's arrays joined afterwards: a copy of them
    all). With ``todo`` its alpha and beta are lazy_zeros, so the rows of the sequences left out take no memory:
    the clamped pass runs only on the partially labelled sequences (on UD EWT XPOS 1,355 of 12,544, while its
    full arrays would take 158 MB), and the kernels read it only there."""
    T, K = len(P.c), P.values.shape[1]
    n_seq = len(seq_starts) - 1
    zeros = np.zeros if todo is None else lazy_zeros
    out = crf.ForwardBackward(zeros((T, K)), zeros((T, K)), np.ones(T), np.zeros(n_seq))
    todo = np.ones(n_seq, dtype=np.bool_) if todo is None else np.ascontiguousarray(todo, dtype=np.bool_)

    def chunk(a, b, q0, q1):
        crf.forward_backward_into(crf.part(P, a, b), seq_starts[q0:q1 + 1] - a, y[a:b], clamp, todo[q0:q1],
                                  crf.ForwardBackward(out.alpha[a:b], out.beta[a:b], out.scale[a:b], out.logz[q0:q1]))
    in_chunks(seq_starts, threads, chunk)
    return out


def viterbi(P: Potentials, seq_starts, threads: int) -> np.ndarray:
    return np.concatenate(in_chunks(seq_starts, threads, lambda a, b, q0, q1: crf.viterbi(
        crf.part(P, a, b), seq_starts[q0:q1 + 1] - a)))


def _leaf_values(k: int, tree: Tree) -> np.ndarray:
    """A tree's node values as factor rows: nodes x K (shared, k = -1) or nodes x 1."""
    return tree.vector if k < 0 else tree.value[:, None]


class MoveList:
    """The moves (moves.py) of some trees, collected tree by tree: over a fitted tree's leaf segments or by
    walking trees at given positions; ``apply`` sorts them by position (the order they were added in within a
    position) and applies them in threads."""

    def __init__(self):
        self.parts = []  # (position, states_of, factor_of, states, label, factor), indices local to the part

    def add_leaves(self, k: int, tree: Tree, segments, scale: float):
        """E *= exp(scale * leaf value) over each leaf's segment (its positions x its states)."""
        leaves = np.flatnonzero(tree.kind == LEAF)
        lengths = segments.length[leaves]
        first = np.repeat(segments.start[leaves] - (np.cumsum(lengths) - lengths), lengths)
        position = segments.pos[first + np.arange(int(lengths.sum()))]
        which = np.repeat(np.arange(len(leaves)), lengths)
        self.parts.append((position, which, which, tree.states[leaves], np.full(len(leaves), k, dtype=np.int64),
                           np.exp(scale * _leaf_values(k, tree)[leaves]).astype(np.float32)))

    def add_walks(self, walks, rows: Rows, missing_rows: MissingRows, scale: float, threads: int = 1,
                  numeric: NumericIndex = None):
        """E *= exp(scale * tree(x_t, s)) at the positions of each (k, tree, positions) of ``walks``, by walking
        the trees, in threads (a tree with surrogate slots takes the majority branch where a variable is missing,
        one without follows both); the walks' moves are added in the order given. ``rows``: atom rows, whose
        numeric columns (``numeric``) are expanded once for all the walks' trees (numeric.py)."""
        index = missing_rows.index() if missing_rows is not None and missing_rows.any else no_missing()
        if numeric is not None and walks:
            rows = expand(rows, numeric, tested(numeric, np.concatenate([tree.feature for _, tree, _ in walks])))

        def walk(job):
            k, tree, positions = job
            position, leaf, weight = walk_moves(np.ascontiguousarray(positions, dtype=np.int64), rows, tree, index,
                                                tree_depth(tree.yes, tree.no))
            values = _leaf_values(k, tree)
            if np.all(weight == 1.0):  # one factor per leaf
                return (position, leaf, leaf, tree.states, np.full(len(values), k, dtype=np.int64),
                        np.exp(scale * values).astype(np.float32))
            # the routing rule split positions between leaves: a factor per move
            return (position, leaf, np.arange(len(leaf)), tree.states, np.full(len(leaf), k, dtype=np.int64),
                    np.exp(scale * weight[:, None] * values[leaf]).astype(np.float32))
        threads = min(threads, len(walks))
        if threads > 1:
            with ThreadPoolExecutor(threads) as pool:
                self.parts.extend(pool.map(walk, walks))
        else:
            self.parts.extend(map(walk, walks))

    def sorted(self, T: int) -> moves.Moves:
        """The moves sorted by position (tree order within a position), for positions 0 .. T - 1."""
        columns = list(zip(*self.parts))
        states_base = np.cumsum([0] + [len(st) for st in columns[3][:-1]])
        factor_base = np.cumsum([0] + [len(f) for f in columns[5][:-1]])
        return moves.sort_moves(
            T, np.concatenate(columns[0], dtype=np.int64),
            np.concatenate([s + o for s, o in zip(columns[1], states_base)], dtype=np.int64),
            np.concatenate([f + o for f, o in zip(columns[2], factor_base)], dtype=np.int64),
            np.ascontiguousarray(np.concatenate(columns[3]), dtype=np.bool_), np.concatenate(columns[4]),
            np.ascontiguousarray(np.concatenate(columns[5]), dtype=np.float32))

    def apply(self, P: Potentials) -> Potentials:
        """P moved (its group array rewritten in place, new value rows). One pass over all positions, not chunks
        in threads: the chunks' rows had to be joined into a third copy of E's values, at the peak of a training
        round (CoNLL-2000 chunking, whose BIO mask classes give ~12 groups a position: 340 MB above the
        resident set, half of it that copy)."""
        if not self.parts:
            return P
        values, start = moves.apply_moves(P, 0, P.group.shape[0], self.sorted(P.group.shape[0]))
        return Potentials(values, start, P.group, P.c)


class Ensemble:
    """All trees of all labels as one Tree of node arrays end to end (``nodes``); tree i has nodes
    roots[i]:roots[i+1] and predicts label labels[i].

    ``n_surrogates`` > 0: every node has that many surrogate slots (Tree.surr_feature, -1 = none), and a split on
    a missing variable without a known surrogate takes the majority branch; with 0, it follows both branches
    (instance weighting, see missing.py). ``shared``: every tree is a shared tree (label -1, a value per label in
    each leaf's vector, kept sparse in ``vectors``: see trees.LeafVectors), else every tree is a per-label tree."""

    def __init__(self, n_states: int, n_labels: int, n_surrogates: int = 0, shared: bool = False):
        self.n_states = n_states
        self.n_labels = n_labels
        self.n_surrogates = n_surrogates
        self.shared = shared
        self.nodes = empty_tree(n_states, n_surrogates)
        self.vectors = sparse_vectors(np.zeros((0, 0)))
        self.roots = np.zeros(1, dtype=np.int64)
        self.labels = np.zeros(0, dtype=np.int32)
        self.depths = np.zeros(0, dtype=np.int32)
        self._pending: List[Tuple[int, Tree, LeafVectors]] = []  # trees added since the last join, vectors sparse
        self._indexes = {}  # the kernels' indexes of the current trees (and whether the bit masks fit), built lazily
        self.numeric = no_numeric()  # the NumericIndex of the rows' atoms (numeric.py): set by who makes the rows

    @property
    def n_trees(self) -> int:
        self._flush()
        return len(self.labels)

    def forest(self) -> Forest:
        self._flush()
        return Forest(self.nodes, self.roots, self.labels, self.depths, self.vectors)

    def add(self, label: int, tree: Tree):
        """Append one fitted tree (values already multiplied by the round's step), with this ensemble's number
        of surrogate slots; label -1 for a shared tree."""
        if (label < 0) != self.shared or tree.vector.shape[1] != (self.n_labels if self.shared else 0):
            raise ValueError(Errors.E166.format(label=label, width=tree.vector.shape[1], shared=self.shared))
        self._pending.append((label, self.with_surrogate_slots(tree)._replace(vector=np.zeros((len(tree.kind), 0))),
                              sparse_vectors(tree.vector)))

    def with_surrogate_slots(self, tree: Tree) -> Tree:
        """The tree with this ensemble's number of surrogate slots (a tree grown without routing has none)."""
        if tree.surr_feature.shape[1] == self.n_surrogates:
            return tree
        n = len(tree.kind)
        return tree._replace(surr_feature=np.full((n, self.n_surrogates), -1, dtype=np.int32),
                             surr_same=np.zeros((n, self.n_surrogates), dtype=np.bool_))

    def _flush(self):
        if not self._pending:
            return
        parts = self._pending
        self._pending = []
        self._indexes = {}
        self.nodes = concat_trees([self.nodes] + [tree for _, tree, _ in parts])
        self.vectors = concat_vectors([self.vectors] + [vectors for _, _, vectors in parts])
        self.roots = np.concatenate([self.roots, self.roots[-1] + np.cumsum([len(tree.kind) for _, tree, _ in parts])])
        self.labels = np.concatenate([self.labels, np.array([label for label, _, _ in parts], dtype=np.int32)])
        self.depths = np.concatenate([self.depths, np.array([tree_depth(tree.yes, tree.no) for _, tree, _ in parts],
                                                            dtype=np.int32)])

    def with_labels(self, n_labels: int) -> "Ensemble":
        """A copy for ``n_labels`` labels (at least as many as now; new ones numbered after the old): the new
        labels have no trees yet (a potential of 0 until rounds fit them) and, as previous labels, go at every
        state split to the child that held more training weight (no tree saw them; the no-child on a tie), so
        every old tree scores the old labels as before."""
        self._flush()
        add = n_labels - self.n_labels
        if add < 0:
            raise ValueError(Errors.E181.format(had=self.n_labels, n_labels=n_labels))
        column = _majority_states(self.nodes, self.roots)
        states = np.concatenate([self.nodes.states, np.repeat(column[:, None], add, 1)], axis=1)
        return self._with_nodes(self.nodes._replace(states=states), n_labels)

    def with_feature_map(self, moved: np.ndarray, numeric: NumericIndex = None) -> "Ensemble":
        """A copy whose trees test feature moved[f] wherever they tested f (surrogates too): the feature columns
        were renumbered (new columns went in among them); ``numeric``: the NumericIndex of the renumbered atoms
        (None: binary), whose "x > u" tests, counted past the atoms, move with their bins (numeric.py)."""
        self._flush()
        moved = np.asarray(moved, dtype=np.int64)
        numeric = numeric if numeric is not None else no_numeric()
        old, new = len(moved), len(numeric.column)
        feature, surr = self.nodes.feature.astype(np.int64), self.nodes.surr_feature
        mapped = np.where(feature >= old, new + moved[np.clip(feature - old, 0, old - 1)],
                          moved[np.clip(feature, 0, old - 1)]) if old else feature
        ens = self._with_nodes(self.nodes._replace(
            feature=np.where(feature >= 0, mapped, -1).astype(np.int32),
            surr_feature=np.where(surr >= 0, moved[surr], -1).astype(np.int32)), self.n_labels)
        ens.numeric = numeric
        return ens

    def _with_nodes(self, nodes: Tree, n_labels: int) -> "Ensemble":
        """A copy of these trees with their node arrays replaced by ``nodes`` (n_labels labels)."""
        ens = Ensemble(n_labels + 1, n_labels, self.n_surrogates, self.shared)
        ens.nodes = nodes
        ens.vectors, ens.roots, ens.labels, ens.depths = self.vectors, self.roots, self.labels, self.depths
        ens.numeric = self.numeric
        return ens

    def truncate(self, n_trees: int):
        """Keep the first n_trees trees (early stopping keeps the best round)."""
        self._flush()
        if n_trees >= len(self.labels):
            return
        self._indexes = {}
        end = self.roots[n_trees]
        self.nodes = Tree(*(a[:end].copy() for a in self.nodes))
        cut = self.vectors.ptr[end]
        self.vectors = LeafVectors(self.vectors.ptr[:end + 1].copy(), self.vectors.label[:cut].copy(),
                                   self.vectors.value[:cut].copy())
        self.roots = self.roots[: n_trees + 1].copy()
        self.labels = self.labels[:n_trees].copy()
        self.depths = self.depths[:n_trees].copy()

    def potentials(self, indptr, indices, threads: int = 1, missing_rows: MissingRows = None,
                   valid: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> np.ndarray:
        """phi (T x S x K, float64) for new rows: the sum of every tree, before any transition mask. Rows with
        missing variables (``missing_rows``) are walked again with the routing rule. ``valid``
        (allowed, seq_starts): only the cells a decoder reads (see crf.scaled_potentials) are computed, the
        others are 0 (trees fitted under a transition mask spend much of their size on forbidden states).

        PARTITION_ROWS rows or more go through predict_partition, fewer through predict_bitmask, whose cost per
        row does not depend on how many rows come together, where its tables fit the model (never for shared
        trees, see _bitmask_fits). The tree walk is no substitute for small batches: on a default NER model it
        was 2.2x slower than the partition kernel at 28 tokens (benchmarks/results/small_batches_walk.md)."""
        phi = self._evaluate(indptr, indices, threads, valid, scaled=False)
        if missing_rows is not None and missing_rows.any:
            at = missing_rows.rows()
            phi[at] = walk_potentials(at, self.kernel_rows(indptr, indices), self.forest(), missing_rows.index(),
                                      self.n_states, self.n_labels)
        return phi

    def set_numeric(self, numeric: NumericIndex):
        """The NumericIndex of the rows these trees read from now on: the same atoms plus any appended after them
        (a continued fit's new features and columns), so the "x > u" tests' ids, which count from the number of
        atoms (numeric.py), move along."""
        old = len(self.numeric.column)
        if old and len(numeric.column) != old:  # the old atoms stay where they are: with_feature_map's identity
            self.nodes, self._indexes = self.with_feature_map(np.arange(old), numeric).nodes, {}
        self.numeric = numeric

    def kernel_rows(self, indptr, indices) -> Rows:
        """Atom rows as the walk and the bit-mask kernel take them: numeric columns' bins expanded into the ids of
        the threshold tests they pass among the trees' (numeric.py; the partition kernel reads the bins
        themselves); binary rows as they are."""
        if len(self.numeric.column) == 0:
            return Rows(indptr, indices)
        self._flush()
        if "tests" not in self._indexes:
            self._indexes["tests"] = tested(self.numeric, self.nodes.feature)
        return expand(Rows(np.ascontiguousarray(indptr, dtype=np.int64), np.ascontiguousarray(indices, dtype=np.int32)),
                      self.numeric, self._indexes["tests"])

    def scaled_potentials(self, indptr, indices, allowed: np.ndarray, seq_starts: np.ndarray, threads: int = 1,
                          missing_rows: MissingRows = None) -> Potentials:
        """potentials_to_scaled(potentials(..., valid=(allowed, seq_starts))): the Potentials for decoding, made
        block by block when the partition kernel runs and no row has missing values (no T x S x K float64
        array); without trees, the empty model's (crf.initial_potentials)."""
        if not self.n_trees:  # no tree yet (spaCy evaluates before the first round): the kernels' blocks are
            # sized for the trees there are, so an empty shared model's would hold K x S cells per row for nothing
            return crf.initial_potentials(len(indptr) - 1, np.ascontiguousarray(allowed, dtype=np.bool_),
                                          np.asarray(seq_starts, dtype=np.int64))
        if len(indptr) - 1 < PARTITION_ROWS or (missing_rows is not None and missing_rows.any):
            phi = self.potentials(indptr, indices, threads, missing_rows, valid=(allowed, seq_starts))
            return potentials_to_scaled(phi, allowed, seq_starts)
        return self._evaluate(indptr, indices, threads, (allowed, seq_starts), scaled=True)

    def _evaluate(self, indptr, indices, threads: int, valid, scaled: bool):
        """The kernels' potentials (see ``potentials``) of atom rows, or with ``scaled`` (partition kernel only)
        their Potentials."""
        forest = self.forest()
        T = len(indptr) - 1
        if valid is None:
            start_states = other_states = allowed_cells = np.ones((self.n_states, self.n_labels), dtype=bool)
            is_start = np.zeros(T, dtype=np.bool_)
            mask_class = np.zeros(self.n_states, dtype=np.int64)
        else:  # state 0 at a sequence's first position, the others elsewhere
            allowed, seq_starts = valid
            allowed_cells = np.ascontiguousarray(allowed, dtype=np.bool_)
            mask_class = crf.mask_classes(allowed_cells)[1]
            is_start = crf.start_mask(seq_starts, T)
            start_states, other_states = np.zeros_like(allowed, dtype=bool), allowed.astype(bool)
            start_states[0], other_states[0] = other_states[0], False
        rows = np.arange(T + 1, dtype=np.int64)  # any split of rows will do: treat each row as a sequence
        kernel = "partition" if T >= PARTITION_ROWS or not self._bitmask_fits() else "bitmask"
        index = self._index(kernel)
        if kernel == "bitmask":
            indptr, indices = self.kernel_rows(indptr, indices)
        if kernel == "partition":
            words = label_state_words(start_states), label_state_words(other_states)
            block = block_rows(self.n_labels, self.n_states, self.shared)

        def chunk(a, b, q0, q1):
            chunk_rows = Rows(indptr[a:b + 1] - indptr[a], indices[indptr[a]:indptr[b]])
            if kernel == "partition":
                phi, P = partition_potentials(chunk_rows, forest, index, Cells(is_start[a:b], *words, mask_class),
                                              allowed_cells, block, scaled)
                return P if scaled else phi
            phi = bitmask_potentials(chunk_rows, self.n_labels, self.labels, index)
            return phi * np.where(is_start[a:b, None, None], start_states, other_states)
        parts = in_chunks(rows, threads, chunk, min_positions=5000)
        if scaled:
            return crf.join(parts)
        return np.concatenate(parts)

    def path_tables(self):
        """rules.path_tables of the trees, kept until they change (each explanation climbs leaf-to-root paths)."""
        self._flush()
        if "paths" not in self._indexes:
            self._indexes["paths"] = path_tables(self.forest())
        return self._indexes["paths"]

    def _bitmask_fits(self) -> bool:
        """Whether the bit-mask tables stay small next to the trees: they hold, per tree, a word of bits per 64
        slots of the largest tree for every state, so one huge tree among many small ones would make them grow
        as trees x largest tree (gigabytes from a model of megabytes); then the partition kernel serves every
        batch."""
        self._flush()
        if self.shared:  # the bit-mask tables hold a value per slot: shared trees take the partition kernel
            return False
        if "bitmask_fits" not in self._indexes:
            n_trees = len(self.labels)
            n_words = (int(np.diff(self.roots).max(initial=0)) + 63) // 64
            table_bytes = n_trees * (self.n_states + 1) * n_words * 8 * 2
            node_bytes = len(self.nodes.kind) * (29 + self.n_states)
            self._indexes["bitmask_fits"] = table_bytes <= BITMASK_BYTES + 4 * node_bytes
        return self._indexes["bitmask_fits"]

    def _index(self, kernel: str):
        if kernel not in self._indexes:
            self._indexes[kernel] = (partition_index(self.forest(), numeric=self.numeric) if kernel == "partition"
                                     else bitmask_index(self.forest()))
        return self._indexes[kernel]

    def arrays(self) -> dict:
        """The node arrays to save; the surrogate slots and leaf vectors only when there are any (older files
        have none)."""
        self._flush()
        names = [name for name in TREE_FIELDS if (self.n_surrogates or not name.startswith("surr_"))
                 and name != "vector"]
        vectors = {"vector_ptr": self.vectors.ptr, "vector_label": self.vectors.label,
                   "vector_value": self.vectors.value} if self.shared else {}
        return {**{name: getattr(self.nodes, name) for name in names}, "roots": self.roots, "labels": self.labels,
                **vectors}

    @classmethod
    def from_arrays(cls, n_states: int, n_labels: int, arrays: dict) -> "Ensemble":
        # its sparse index is built on first use
        ens = cls(n_states, n_labels, arrays["surr_feature"].shape[1] if "surr_feature" in arrays else 0,
                  shared="vector_ptr" in arrays)
        n = len(arrays["kind"])
        slots = {"surr_feature": np.zeros((n, 0), dtype=np.int32), "surr_same": np.zeros((n, 0), dtype=np.bool_),
                 "vector": np.zeros((n, 0))}
        ens.nodes = Tree(*(arrays[name] if name in arrays and name != "vector" else slots[name]
                           for name in TREE_FIELDS))
        ens.vectors = (LeafVectors(arrays["vector_ptr"], arrays["vector_label"], arrays["vector_value"])
                       if ens.shared else sparse_vectors(np.zeros((n, 0))))
        ens.roots, ens.labels = arrays["roots"], arrays["labels"]
        ens.depths = np.array([tree_depth(ens.nodes.yes[a:b], ens.nodes.no[a:b])
                               for a, b in zip(ens.roots[:-1], ens.roots[1:])], dtype=np.int32)
        return ens


def _majority_states(nodes: Tree, roots: np.ndarray) -> np.ndarray:
    """Per node, whether a previous state no tree has seen reaches it: every root, both children of a feature
    split, and at a state split the child with the larger training weight (count; the no-child on a tie)."""
    reach = np.zeros(len(nodes.kind), dtype=np.bool_)
    reach[roots[:-1]] = True
    root_of = np.repeat(roots[:-1], np.diff(roots)).tolist()
    kind, yes, no, count = nodes.kind.tolist(), nodes.yes.tolist(), nodes.no.tolist(), nodes.count.tolist()
    for node in range(len(kind)):  # children follow their parent
        if not reach[node] or kind[node] == LEAF:
            continue
        a, b = root_of[node] + yes[node], root_of[node] + no[node]
        if kind[node] == FEATURE:
            reach[a] = reach[b] = True
        else:
            reach[a if count[a] > count[b] else b] = True
    return reach


def potentials_to_scaled(phi: np.ndarray, allowed: np.ndarray, seq_starts: np.ndarray) -> Potentials:
    """crf.py's Potentials from raw potentials: exp(phi - c) with forbidden and structurally invalid cells at 0."""
    is_start = crf.start_mask(seq_starts, phi.shape[0])
    return crf.scaled_potentials(np.ascontiguousarray(phi, dtype=np.float64),
                                 np.ascontiguousarray(allowed, dtype=np.bool_), is_start)


def logsumexp(values: np.ndarray) -> float:
    top = values.max() if len(values) else -np.inf
    if not np.isfinite(top):
        return float(top)
    return float(top + np.log(np.exp(values - top).sum()))


class Passes(NamedTuple):
    """One gradient pass over the training set. ``objective`` is minus the loss (the log-likelihood for
    loss="crf"); ``free`` / ``clamped``: forward-backward results (None for the pseudo-likelihood); ``extra``:
    the loss's own arrays (losses.py)."""
    free: Optional[tuple]
    clamped: Optional[tuple]
    objective: float
    extra: tuple = ()


class TrainingSet(NamedTuple):
    """A training set as a Trainer takes it: CSR rows (indptr, indices), a label id per position (y, -1: unknown),
    the sequences' offsets and the missing variables (MissingRows, or None where the rows have none)."""
    indptr: np.ndarray
    indices: np.ndarray
    y: np.ndarray
    seq_starts: np.ndarray
    missing_rows: Optional[MissingRows]


def picked_sequences(parts: List[TrainingSet], pick) -> TrainingSet:
    """The sequences ``pick`` (numbered through the parts, in order) of the parts, in the order of ``pick``: a
    training set made of an old one's sequences and new ones without making the old ones' rows again."""
    indptr, indices = stacked_rows([(part.indptr, part.indices) for part in parts])
    seq_starts, y = stacked_rows([(part.seq_starts, part.y) for part in parts])
    seqs = np.asarray(pick, dtype=np.int64)
    starts, positions = take_rows(seq_starts, np.arange(len(y), dtype=np.int64), seqs)
    missing_rows = None
    if parts[0].missing_rows is not None:
        gone = take_rows(*stacked_rows([(part.missing_rows.indptr, part.missing_rows.indices) for part in parts]),
                         positions)
        missing_rows = MissingRows(*gone, parts[0].missing_rows.feature_var, parts[0].missing_rows.n_vars)
    return TrainingSet(*take_rows(indptr, indices, positions), y[positions], starts, missing_rows)


def stacked_rows(parts) -> tuple:
    """One CSR (indptr, items) of the (indptr, items) parts, end to end (also sequence offsets and positions)."""
    offsets = np.cumsum([0] + [indptr[-1] for indptr, _ in parts[:-1]])
    indptr = np.concatenate([[0]] + [indptr[1:] + o for (indptr, _), o in zip(parts, offsets)]).astype(np.int64)
    return indptr, np.concatenate([items for _, items in parts])


def new_trainer(indptr, indices, n_features, y, seq_starts, allowed, params: BoostParams, scheduler=None,
                **kwargs) -> "Trainer":
    """A Trainer in this process, or given a ``scheduler`` (a Dask scheduler's address or a distributed.Client) one
    whose rows and rounds' data side live on that cluster's workers (cluster.py). Where a fit runs is no setting
    of the model: it is given to each fit and kept nowhere."""
    if not scheduler:
        return Trainer(indptr, indices, n_features, y, seq_starts, allowed, params, **kwargs)
    from .cluster import ClusterTrainer
    return ClusterTrainer(scheduler, indptr, indices, n_features, y, seq_starts, allowed, params, **kwargs)


class Trainer:
    """Boosting state over one fixed training set: cached scaled potentials, so a round costs the same at any size."""

    def __init__(self, indptr, indices, n_features, y, seq_starts, allowed, params: BoostParams, initial=None,
                 missing_rows: MissingRows = None, numeric: NumericIndex = None):
        """``initial``: the Potentials of an existing ensemble on these rows (see potentials_to_scaled); default
        empty.
        ``missing_rows``: the variables missing at each position (instance weighting or surrogate splits; the
        other strategies rewrite the rows before they get here).
        ``numeric``: the NumericIndex of the rows' n_features atoms (numeric.py; None: all binary)."""
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        self.n_features = int(n_features)
        self.y = np.ascontiguousarray(y, dtype=np.int32)
        self.seq_starts = np.ascontiguousarray(seq_starts, dtype=np.int64)
        self.allowed = np.ascontiguousarray(allowed, dtype=np.bool_)
        self.params = params
        S, K = self.allowed.shape
        T = len(self.y)
        self.P = initial if initial is not None else crf.initial_potentials(T, self.allowed, self.seq_starts)
        self.is_start = crf.start_mask(self.seq_starts, T)
        unknown_before = np.concatenate([[0], np.cumsum(self.y < 0)])  # unknown labels before each position
        self.partial = unknown_before[self.seq_starts[1:]] > unknown_before[self.seq_starts[:-1]]
        self.rng = np.random.default_rng(params.random_state)
        self.all_positions = np.arange(T, dtype=np.int64)
        self.rows = Rows(self.indptr, self.indices)
        self.column_index = csc_index(self.indptr, self.indices, self.n_features)
        self.all_features = np.ones(self.n_features, dtype=np.bool_)
        self.missing_rows = missing_rows
        self.numeric = numeric if numeric is not None else no_numeric()
        self.rounds = 0  # rounds fitted on this state

    def training_set(self) -> TrainingSet:
        """The rows, labels and sequences this Trainer fits on."""
        return TrainingSet(self.indptr, self.indices, self.y, self.seq_starts, self.missing_rows)

    def gradient_pass(self) -> "Passes":
        """What the loss's functional gradient needs: forward-backward (free and, for partially labelled sequences,
        clamped) for every loss but the pseudo-likelihood, plus the loss's own pass (losses.py)."""
        loss = self.params.loss
        threads = self.params.threads
        if loss == "pseudo_likelihood":
            cond, kept, logpl = by_chunks(self.seq_starts, threads, lambda a, b, starts: losses.pseudo_conditionals(
                crf.part(self.P, a, b), starts, self.y[a:b]))
            return Passes(None, None, float(logpl.sum()), (cond, kept))
        free = forward_backward(self.P, self.seq_starts, self.y, False, threads)
        if loss == "hamming":
            alpha, beta, scale, _ = free
            fa, fb, known, logp = by_chunks(self.seq_starts, threads, lambda a, b, starts: losses.hamming_pass(
                starts, self.y[a:b], crf.part(self.P, a, b), alpha[a:b], beta[a:b], scale[a:b]))
            return Passes(free, free, float(logp.sum()), (fa, fb, known))
        clamped, nll = self._sequence_nll(free)
        if loss == "crf":
            return Passes(free, clamped, -float(nll.sum()))
        terms = losses.log_rank_terms(nll)
        weights = np.repeat(losses.rank_weights(nll), np.diff(self.seq_starts))
        return Passes(free, clamped, -float(np.exp(logsumexp(terms))), (weights, logsumexp(terms)))

    def _sequence_nll(self, free):
        """The clamped pass (``free`` itself if every sequence is fully labelled) and -log P(known labels | X)
        per sequence."""
        if self.partial.any():
            clamped = forward_backward(self.P, self.seq_starts, self.y, True, self.params.threads, self.partial)
        else:
            clamped = free
        gold = np.where(self.partial, clamped[3], 0.0)
        full = ~self.partial & (np.diff(self.seq_starts) > 0)
        if full.any():
            gold = gold + np.where(full, crf.gold_log_score(self.P, self.seq_starts, self.y), 0.0)
        with np.errstate(invalid="ignore"):  # a gold labelling no allowed path reaches: fit_round's E158 says so
            return clamped, free[3] - gold

    def residuals(self, passes: "Passes", k0: int, out: np.ndarray, part=None) -> np.ndarray:
        """out (T x S x G) = the loss's functional gradient for the labels k = k0 .. k0 + G - 1:
        out[t, s, k - k0] = -dL/dF^k(s, x_t). ``part`` (a, b, q0, q1): only the whole sequences q0:q1, at
        positions a:b (out: (b - a) x S x G)."""
        loss = self.params.loss
        a, b, q0, q1 = part if part is not None else (0, len(self.y), 0, len(self.seq_starts) - 1)
        starts = self.seq_starts[q0:q1 + 1] - a
        y = self.y[a:b]
        if loss == "pseudo_likelihood":
            cond, kept = passes.extra
            return losses.pseudo_residual(starts, y, cond[a:b], kept[a:b], k0, out)
        free = tuple(x[a:b] for x in passes.free[:3])
        P = crf.part(self.P, a, b)
        if loss == "hamming":
            fa, fb, known = passes.extra
            return losses.hamming_residual(starts, P, *free, fa[a:b], fb[a:b], known[q0:q1], k0, out)
        clamped = tuple(x[a:b] for x in passes.clamped[:3])
        crf.residual_slice(P, starts, y, self.partial[q0:q1], free, clamped, k0, out)
        if loss == "rank":
            out *= passes.extra[0][a:b, None, None]
        return out

    def fit_round(self, ensemble: Ensemble, on_tree=None, passes=None, beside=None) -> float:
        """One boosting round fitted to the loss's functional gradient: one tree per label, or with shared_trees
        one tree for all labels; returns the objective before the round (minus the loss: the log-likelihood for
        loss="crf"). ``passes``: this state's gradient_pass() if already run; ``on_tree(k, tree)`` sees every tree
        added (k = -1: a shared tree). ``beside(threads)`` runs once the trees are added and seen: with threads
        > 1 on a second thread while the training potentials move (on one thread, so the other core is free
        then), given 1 thread; else after the move, as for the rank loss (whose line search moves them), given
        them all. The estimator scores its validation rows there. Its exception is raised here.

        With missing values (or surrogates to learn) the trees are grown with the routing rule and move the
        cached potentials by evaluation over all positions; leaf values other than the grower's own (the paper's
        mean, without l1) come from the cells the tree's walks reach, with the walks' weights."""
        passes = passes if passes is not None else self.gradient_pass()
        if not np.isfinite(passes.objective) and self.params.loss != "rank":  # rank: exp of the loss may overflow
            raise ValueError(Errors.E158.format(round=self.rounds + 1, objective=passes.objective))
        mr = self.missing_rows
        n_surrogates = ensemble.n_surrogates
        with_missing = mr is not None and (mr.any or (n_surrogates > 0 and bool((mr.feature_var >= 0).any())))
        positions = self._round_positions()
        skipped = np.setdiff1d(self.all_positions, positions, assume_unique=True) if len(positions) < len(
            self.all_positions) else None
        n_positions = len(self.all_positions)
        settings = GrowSettings(resolved_max_leaves(self.params.max_leaves, n_positions),
                                resolved_shrinkage(self.params.shrinkage, n_positions),
                                float(self.params.min_samples_leaf), float(self.params.min_gain),
                                self.params.label_splits == "fallback", n_surrogates)
        routing = mr.index() if with_missing else None
        if self.params.shared_trees:
            fitted = [self._fit_shared(passes, positions, skipped, settings, routing)]
        else:
            fitted = self._fit_per_label(passes, positions, skipped, settings, routing)
        step, moved = self._step(fitted, passes)
        for k, tree, _, _ in fitted:
            tree = scaled_tree(tree, step)
            ensemble.add(k, tree)
            if on_tree is not None:
                on_tree(k, tree)
        if beside is None or moved or self.params.threads < 2:
            if not moved:
                self._move(fitted, step)
            if beside is not None:
                beside(self.params.threads)
        else:
            with ThreadPoolExecutor(1) as pool:
                done = pool.submit(beside, 1)
                try:
                    self._move(fitted, step)
                finally:
                    done.result()
        self._rescale()
        release_freed_memory()
        self.rounds += 1
        return passes.objective

    def _fit_per_label(self, passes, positions, skipped, settings, routing):
        """One tree per label on its own residuals: [(label, tree, segments, positions it was not fitted on)];
        ``routing``: the MissingIndex of the routing rule (None: rows without missing values)."""
        K = self.allowed.shape[1]
        feature_masks = [self._tree_features() for _ in range(K)]
        leaf_values = self.params.leaf_values

        def fit_label(k):
            D = self.residuals(passes, k, np.empty((len(self.y), self.allowed.shape[0], 1)))
            target = Target(D, self.is_start, np.ascontiguousarray(self.allowed[:, k]))
            pos = self._trimmed(target, positions)
            ok = feature_masks[k] if feature_masks[k] is not None else self.all_features
            tree, segments = grow_tree(self.rows, self.column_index, target, pos, settings, ok,
                                       no_missing() if routing is None else routing, self.numeric)
            if leaf_values != "mean" or self.params.l1 > 0:  # else the grower's own values are the leaves'
                if routing is not None:
                    segments = self._walked_segments(tree, pos, routing)
                tree = tree._replace(value=leaf_value_kernel(D, self.is_start, np.ascontiguousarray(
                    self.allowed[:, k:k + 1]), tree, segments, settings.lam, LEAF_VALUES[leaf_values],
                    self.params.l1)[:, 0])
            if routing is not None:
                return k, tree, None, self.all_positions
            return k, tree, segments, self._rest(pos, positions, skipped)

        return self._over_labels(fit_label)

    def _fit_shared(self, passes, positions, skipped, settings, routing):
        """One tree for all labels (GBDT-MO; XGBoost's multi_output_tree): its splits are chosen on the residuals
        projected on their SHARED_DIRECTIONS top principal directions (project.py), its leaves get every label's
        value from that label's own residuals (leaf_values over the leaf's cells). The residuals of all labels
        are made a chunk of positions at a time (_over_residuals), never as one T x S x K array. ``routing``:
        the MissingIndex of the routing rule (None: rows without missing values); the leaves' cells are then
        those the tree's walks reach, with the walks' weights (_walked_segments).
        Returns (-1, tree, segments, positions it was not fitted on), as _fit_per_label's trees."""
        target = self._shared_target(passes, positions)
        pos = self._trimmed(target, positions)
        ok = self._tree_features()
        ok = ok if ok is not None else self.all_features
        if routing is None and len(pos) >= GROW_THREADS_POSITIONS:
            tree, segments = grow_tree_threads(self.rows, self.column_index, target, pos, settings, ok, self.numeric,
                                               self.params.threads)
        else:
            tree, segments = grow_tree(self.rows, self.column_index, target, pos, settings, ok,
                                       no_missing() if routing is None else routing, self.numeric)
        del target
        if routing is not None:
            segments = self._walked_segments(tree, pos, routing)
        vector = self._leaf_vectors(passes, tree, segments, settings.lam)
        tree = tree._replace(value=np.zeros(len(tree.kind)), vector=vector)
        if routing is not None:
            return -1, tree, None, self.all_positions
        return -1, tree, segments, self._rest(pos, positions, skipped)

    def _walked_segments(self, tree: Tree, positions, routing) -> Segments:
        """The Segments of a tree grown with the routing rule, from its walks at ``positions``: a position sits
        in every leaf it reaches, with the part of its weight that got there (share)."""
        rows = expand(self.rows, self.numeric, tested(self.numeric, tree.feature))
        position, leaf, weight = walk_moves(positions, rows, tree, routing, tree_depth(tree.yes, tree.no))
        order = np.lexsort((position, leaf))
        length = np.bincount(leaf, minlength=len(tree.kind)).astype(np.int64)
        return Segments(position[order], np.cumsum(length) - length, length, weight[order])

    def _shared_target(self, passes, positions) -> Target:
        """A shared tree's Target: the residuals of all labels along the top principal directions of the
        per-position residual sums r[t, k] = sum_s D[t, s, k] over ``positions``; for the CRF and rank losses as a
        LowRank (project.py), for the others as a T x S x d array (float32 beyond PROJECTED_BYTES)."""
        return self._projected_target(passes, directions_from_moments(*self.position_moments(passes, positions),
                                                                       SHARED_DIRECTIONS))

    def position_moments(self, passes, positions) -> tuple:
        """The moments of the per-position residual sums r[t, k] = sum_s D[t, s, k] over ``positions`` that a
        shared tree's directions come from (project.directions_from_moments): R^T R, R's column sums and its
        rows, R (positions x K) never whole (T x K float64: 82 MB on UD EWT XPOS). For the CRF and rank losses
        from crf.label_residual, O(K) a position, MOMENT_BLOCK positions at a time; for the others from the
        residuals, O(S K) a position, _over_residuals' chunks. A cluster adds its shards' up."""
        K = self.allowed.shape[1]
        chosen = np.zeros(len(self.y), dtype=np.bool_)
        chosen[positions] = True
        gram, total = np.zeros((K, K)), np.zeros(K)
        targets = self._label_targets(passes)
        if targets is not None:
            ordered = np.flatnonzero(chosen)
            for i in range(0, len(ordered), MOMENT_BLOCK):
                R = crf.label_residual_rows(targets, ordered[i:i + MOMENT_BLOCK],
                                            np.empty((min(MOMENT_BLOCK, len(ordered) - i), K)))
                gram += R.T @ R
                total += R.sum(axis=0)
            return gram, total, len(ordered)
        n = np.zeros(1, dtype=np.int64)

        def moments(a, D):
            R = D.sum(axis=1)[chosen[a:a + len(D)]]
            return R.T @ R, R.sum(axis=0), len(R)

        def add(part):
            gram[:] += part[0]
            total[:] += part[1]
            n[0] += part[2]
        self._reduced_in_order(passes, moments, add)
        return gram, total, int(n[0])

    def _projected_target(self, passes, W: np.ndarray) -> Target:
        """A shared tree's Target for the directions W (K x d), see _shared_target."""
        T, S = len(self.y), self.allowed.shape[0]
        allowed_any = np.ascontiguousarray(self.allowed.any(axis=1))
        if self.params.loss in ("crf", "rank"):
            return Target(np.zeros((T, S, 0)), self.is_start, allowed_any, self._low_rank(passes, W))
        big = T * S * W.shape[1] * 8 > PROJECTED_BYTES
        projected = np.empty((T, S, W.shape[1]), dtype=np.float32 if big else np.float64)

        def project(a, D):
            np.matmul(D, W, out=projected[a:a + len(D)])
        self._over_residuals(passes, project)
        return Target(projected, self.is_start, allowed_any)

    def _low_rank(self, passes, W: np.ndarray) -> LowRank:
        """The LowRank of the CRF or rank loss's residuals projected on W (K x d): a d-vector per row of the
        cached potentials (and one more per row in partially labelled sequences), in threads over chunks of
        sequences."""
        T = len(self.y)
        weight = passes.extra[0] if self.params.loss == "rank" else np.ones(T)
        rows = self.P.values.shape[0]
        free = np.empty((rows, W.shape[1]))
        clamped = lazy_zeros((rows if self.partial.any() else 0, W.shape[1]))  # written in partial sequences only

        def chunk(a, b, q0, q1):
            lo, hi = self.P.start[a], self.P.start[b]
            low_rank_rows(crf.part(self.P, a, b), self.seq_starts[q0:q1 + 1] - a, self.y[a:b], self.partial[q0:q1],
                          tuple(x[a:b] for x in passes.free[:3]), tuple(x[a:b] for x in passes.clamped[:3]), W,
                          weight[a:b], free[lo:hi], clamped[lo:hi] if len(clamped) else clamped)
        in_chunks(self.seq_starts, self.params.threads, chunk)
        coef = np.repeat(self.partial, np.diff(self.seq_starts)).astype(np.float64)
        gold = np.where((coef == 0.0) & ~self.is_start, weight, 0.0)
        return LowRank(self.P.start, self.P.group, free, clamped, passes.free[0], passes.clamped[0], coef, self.y,
                       gold, W)

    def _leaf_vectors(self, passes, tree: Tree, segments, lam: float) -> np.ndarray:
        """nodes x K: every label's leaf_values over the cells of each leaf of a shared tree."""
        return values_of(self.leaf_sums(passes, tree, segments), lam, self.params.l1)

    def leaf_sums(self, passes, tree: Tree, segments) -> LeafSums:
        """nodes x K: every label's leaf_values sums (G and its divisor) over the cells of each leaf of a shared
        tree, positions in order whatever the threads (a cluster adds its shards' up). For the CRF and rank
        losses without the T x S x K residuals (add_label_leaf_sums: a leaf that holds every previous state from
        crf.label_residual, one below a split on the previous label cell by cell); for the others from the
        residuals, _over_residuals' chunks."""
        mode = LEAF_VALUES[self.params.leaf_values]
        shape = (len(tree.kind), self.allowed.shape[1])
        total = LeafSums(np.zeros(shape), np.zeros(shape))
        targets = self._label_targets(passes) if mode != NEWTON else None
        if targets is not None:
            leaves = leaf_nodes(tree)
            add_label_leaf_sums(targets, self.allowed, tree, segments, leaves,
                                covering_leaves(tree, self.allowed)[leaves], mode, total)
            return total

        def label_sums(a, D):
            sums = LeafSums(np.zeros(shape), np.zeros(shape))
            add_leaf_sums(D, a, self.is_start, self.allowed, tree, segments, mode, sums)
            return sums

        def add(part):
            total.g[:] += part.g
            total.h[:] += part.h
        self._reduced_in_order(passes, label_sums, add)
        return total

    def _label_targets(self, passes) -> Optional[crf.LabelTargets]:
        """What crf.label_residual reads, for the losses whose residuals are a gold target minus pairwise
        marginals (crf, rank); None for the others (their residuals sum over states to something else)."""
        if self.params.loss not in ("crf", "rank"):
            return None
        T = len(self.y)
        weight = passes.extra[0] if self.params.loss == "rank" else np.ones(T)
        return crf.LabelTargets(self.P, self.y, self.is_start, np.repeat(self.partial, np.diff(self.seq_starts)),
                                *passes.free[:3], *passes.clamped[:3], weight)

    def _trimmed(self, target: Target, positions):
        """Influence trimming (trim > 0): the positions with some residual of magnitude >= trim."""
        return influential_positions(target, positions, self.params.trim) if self.params.trim > 0 else positions

    def _rest(self, pos, positions, skipped):
        """The positions a tree fitted on ``pos`` was not fitted on (None: none), out of this round's."""
        if len(pos) == len(positions):
            return skipped
        return np.setdiff1d(self.all_positions, pos, assume_unique=True)

    def _over_labels(self, call) -> list:
        """[call(k) for every label k], in threads (the kernels release the GIL)."""
        K = self.allowed.shape[1]
        threads = min(self.params.threads, K)
        if threads <= 1:
            return [call(k) for k in range(K)]
        with ThreadPoolExecutor(threads) as pool:
            return list(pool.map(call, range(K)))

    def _residual_chunks(self) -> list:
        """(a, b, q0, q1): the whole sequences q0:q1 at positions a:b, as many as fit in RESIDUAL_BLOCK_BYTES of
        residuals of every label (at least one), in position order; none without positions."""
        S, K = self.allowed.shape
        per_position = S * K * 8
        ends = self.seq_starts[1:]
        chunks = []
        q0 = 0
        while q0 < len(ends):
            a = int(self.seq_starts[q0])
            q1 = max(q0 + 1, int(np.searchsorted(ends, a + max(1, RESIDUAL_BLOCK_BYTES // per_position), "right")))
            if ends[q1 - 1] > a:  # chunks of empty sequences have nothing to do (and starts stay distinct)
                chunks.append((a, int(ends[q1 - 1]), q0, q1))
            q0 = q1
        return chunks

    def _over_residuals(self, passes, call):
        """call(a, D) for chunks of whole sequences at positions a .. a + len(D) - 1, D (len(D) x S x K) the
        residuals of every label there, in threads: a chunk holds the sequences that fit in RESIDUAL_BLOCK_BYTES
        (at least one), so the residuals of all labels never exist at once for all positions."""
        S, K = self.allowed.shape
        chunks = self._residual_chunks()

        def run(part):
            a, b, _, _ = part
            call(a, self.residuals(passes, 0, np.empty((b - a, S, K)), part))
        threads = min(self.params.threads, len(chunks))
        if threads <= 1:
            for part in chunks:
                run(part)
        else:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(run, chunks))

    def _reduced_in_order(self, passes, call, add):
        """add(call(a, D)) for every chunk of _over_residuals, in position order whatever the threads (so that
        floating-point sums come out the same with any number of them): a chunk's result waits only for the
        chunks before it."""
        order = [a for a, _, _, _ in self._residual_chunks()]
        done = {}
        lock = threading.Lock()

        def run(a, D):
            result = call(a, D)
            with lock:
                done[a] = result
                while order and order[0] in done:
                    add(done.pop(order.pop(0)))
        self._over_residuals(passes, run)

    def _step(self, fitted, passes) -> Tuple[float, bool]:
        """How far the round goes along its trees: learning_rate (times the line search's step for the rank loss),
        capped so no log potential moves by more than MAX_MOVE (a bound the CRF loss, whose leaves lie in [-1, 1],
        never reaches); and whether E has been moved there (the line search's trials move it)."""
        top = max(np.abs(tree.vector if is_shared(tree) else tree.value[tree.kind == LEAF]).max(initial=0.0)
                  for _, tree, _, _ in fitted)
        if top == 0.0:
            return 0.0, True
        if self.params.loss == "rank":
            return self._line_search(fitted, passes.extra[1], 1.0 / top), True
        return min(self.params.learning_rate, MAX_MOVE / top), False

    def _line_search(self, fitted, log_loss0: float, hi: float) -> float:
        """The rank loss's step: the rho in [0, hi] minimising the exact loss after the round (Altun et al. Eq. 13),
        by golden-section search (one forward-backward per trial; the loss is convex in rho for fully labelled
        data), then E moved to learning_rate * rho. hi = 1 / max |leaf|: per unit of learning rate no log
        potential moves by more than 1, the CRF loss's bound."""
        at = [0.0]

        def log_loss(rho):
            self._move(fitted, rho - at[0])
            at[0] = rho
            free = forward_backward(self.P, self.seq_starts, self.y, False, self.params.threads)
            return logsumexp(losses.log_rank_terms(self._sequence_nll(free)[1]))

        tried = {0.0: log_loss0, hi: log_loss(hi)}
        a, b = 0.0, hi
        x1, x2 = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
        f1, f2 = log_loss(x1), log_loss(x2)
        tried.update({x1: f1, x2: f2})
        for _ in range(LINE_SEARCH_STEPS):
            if f1 <= f2:
                b, x2, f2 = x2, x1, f1
                x1 = b - GOLDEN * (b - a)
                f1 = tried[x1] = log_loss(x1)
            else:
                a, x1, f1 = x1, x2, f2
                x2 = a + GOLDEN * (b - a)
                f2 = tried[x2] = log_loss(x2)
        rho = min(tried, key=tried.get)
        step = self.params.learning_rate * rho
        self._move(fitted, step - at[0])
        return step

    def _move(self, fitted, scale: float):
        """E *= exp(scale * tree) for the round's trees: over their leaves' segments, and by walking each tree at
        the positions it was not fitted on (subsample, trim) or, for trees without segments (grown with the
        routing rule), at every position. One application for all of them (moves.py): E's value rows are
        copied once."""
        if scale == 0.0:
            return
        round_moves = MoveList()
        for k, tree, segments, _ in fitted:
            if segments is not None:
                round_moves.add_leaves(k, tree, segments, scale)
        round_moves.add_walks([(k, tree, rest) for k, tree, _, rest in fitted if rest is not None and len(rest)],
                              self.rows, self.missing_rows, scale, self.params.threads, self.numeric)
        self.P = round_moves.apply(self.P)

    def round_report(self) -> dict:
        """What a round did besides its trees, for the fit's history (a cluster's requests; nothing here)."""
        return {}

    def close(self):
        """Let go of what the Trainer holds elsewhere (a cluster's shards; nothing here)."""

    def _rescale(self):
        """The end of a round: every position's cached potentials divided by their maximum (crf.rescale)."""
        crf.rescale(self.P)

    def _tree_features(self):
        """Column subsampling: the features one tree may split on, drawn afresh per tree (None: all). Redundant
        features (a word, its lowercase form, its suffix) then each get trees that must do without the others,
        which is what a linear CRF's L2 penalty achieves by spreading weight over them."""
        if self.params.colsample >= 1.0:
            return None
        ok = self.rng.random(self.n_features) < self.params.colsample
        bins = np.flatnonzero(self.numeric.column >= 0)
        ok[bins] = ok[self.numeric.base[self.numeric.column[bins]]]  # a numeric column is drawn as one
        return ok

    def _round_positions(self) -> np.ndarray:
        """Friedman's stochastic gradient boosting: a fresh random subset of positions each round."""
        if self.params.subsample >= 1.0:
            return self.all_positions
        T = len(self.all_positions)
        n = max(1, int(round(self.params.subsample * T)))
        return np.sort(self.rng.choice(T, size=n, replace=False)).astype(np.int64)


def decode(P: Potentials, seq_starts: np.ndarray, method: str, threads: int = 1):
    """Label ids per position by Viterbi or by per-position marginal argmax, plus the marginals (or None), from
    the Potentials of Ensemble.scaled_potentials."""
    if method == "viterbi":
        return viterbi(P, seq_starts, threads), None
    gamma = marginal_probs(P, seq_starts, threads)
    return gamma.argmax(axis=1).astype(np.int32), gamma


def marginal_probs(P: Potentials, seq_starts, threads: int = 1) -> np.ndarray:
    y = np.full(P.group.shape[0], -1, dtype=np.int32)
    alpha, beta, _, _ = forward_backward(P, seq_starts, y, False, threads)
    return crf.marginals(alpha, beta)


class DevCache:
    """Scaled potentials of held-out rows, moved by the trees added since the last prediction, so per-round dev
    scores cost no re-evaluation."""

    def __init__(self, indptr, indices, seq_starts, allowed, missing_rows: MissingRows = None,
                 initial: Potentials = None, numeric: NumericIndex = None):
        """``initial``: the rows' potentials under the trees there are already (a continued fit), else none;
        ``numeric``: the NumericIndex of the rows' atoms (None: all binary)."""
        self.rows = Rows(np.ascontiguousarray(indptr, dtype=np.int64), np.ascontiguousarray(indices, dtype=np.int32))
        self.seq_starts = np.ascontiguousarray(seq_starts, dtype=np.int64)
        T = len(self.rows.indptr) - 1
        self.P = initial if initial is not None else crf.initial_potentials(T, allowed, self.seq_starts)
        self.positions = np.arange(T, dtype=np.int64)
        self.missing_rows = missing_rows
        self.numeric = numeric
        self.pending = []  # (label, tree, positions) of the trees added since the last prediction

    def add_tree(self, k, tree: Tree):
        self.pending.append((k, tree, self.positions))

    def predict(self, method: str, threads: int = 1) -> np.ndarray:
        pending = MoveList()
        pending.add_walks(self.pending, self.rows, self.missing_rows, 1.0, threads, self.numeric)
        self.P = pending.apply(self.P)
        self.pending = []
        crf.rescale(self.P)
        if method == "viterbi":
            return viterbi(self.P, self.seq_starts, threads)
        return marginal_probs(self.P, self.seq_starts, threads).argmax(axis=1).astype(np.int32)
