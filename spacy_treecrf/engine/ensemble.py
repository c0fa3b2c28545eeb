"""The trees of a model (Ensemble: all trees end to end, evaluated by the prediction kernels), the moves a round's
trees make to cached potentials (MoveList), and held-out rows whose potentials follow the trees a fit adds
(DevCache).
"""
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional, Tuple

import numpy as np

from . import crf, moves
from .crf import Potentials
from .missing import MissingRows
from .numeric import NumericIndex, expand, no_numeric, tested
from .predict_bitmask import bitmask_index, bitmask_potentials
from .predict_partition import Cells, block_rows, label_state_words, partition_index, partition_potentials
from .predict_walk import walk_moves, walk_potentials
from .rules import path_tables
from .trees import (FEATURE, LEAF, Forest, LeafVectors, Rows, Tree, TREE_FIELDS, concat_trees, concat_vectors,
                    empty_tree, no_missing, sparse_vectors, tree_depth)
from ..errors import Errors
from .chunks import in_chunks, marginal_probs, viterbi

# Rows from which Ensemble.potentials takes predict_partition over predict_bitmask: the partition
# visits every node that a tree's rows pass, however few the rows, so a single sentence costs it several times
# what the bit masks cost; on the CoNLL-2003 models the two break even at a few hundred rows.
PARTITION_ROWS = 512


BITMASK_BYTES = 64 * 2 ** 20  # bit-mask tables beyond this plus 4 x the trees' own size: the partition kernel


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
        return Potentials(values=values, start=start, group=P.group, c=P.c)


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
        return Forest(nodes=self.nodes, roots=self.roots, labels=self.labels, depths=self.depths, vectors=self.vectors)

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
        self.vectors = LeafVectors(ptr=self.vectors.ptr[:end + 1].copy(), label=self.vectors.label[:cut].copy(),
                                   value=self.vectors.value[:cut].copy())
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
        ens.vectors = (LeafVectors(ptr=arrays["vector_ptr"], label=arrays["vector_label"], value=arrays["vector_value"])
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
