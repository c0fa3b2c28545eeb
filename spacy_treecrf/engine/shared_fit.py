"""A shared tree's round (BoostParams.shared_trees): one tree for all labels, grown on the residuals of every label
projected on their top principal directions (project.py), its leaves given every label's value. A mixin of
booster.Trainer, over its training rows and cached potentials.
"""

import numpy as np

from . import crf
from .grow import Segments, grow_tree, grow_tree_threads
from .leaves import values_of
from .numeric import expand, tested
from .predict_walk import walk_moves
from .project import directions_from_moments, low_rank_rows
from .trees import LowRank, Target, Tree, no_missing, tree_depth
from .chunks import in_chunks, lazy_zeros

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


class SharedTreeFit:
    """Trainer's shared-tree round: _fit_shared and the projected targets and leaf vectors it needs."""

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
        return Segments(pos=position[order], start=np.cumsum(length) - length, length=length, share=weight[order])

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
            return Target(D=np.zeros((T, S, 0)), is_start=self.is_start, allowed_k=allowed_any,
                          low=self._low_rank(passes, W))
        big = T * S * W.shape[1] * 8 > PROJECTED_BYTES
        projected = np.empty((T, S, W.shape[1]), dtype=np.float32 if big else np.float64)

        def project(a, D):
            np.matmul(D, W, out=projected[a:a + len(D)])
        self._over_residuals(passes, project)
        return Target(D=projected, is_start=self.is_start, allowed_k=allowed_any)

    def _low_rank(self, passes, W: np.ndarray) -> LowRank:
        """The LowRank of the CRF or rank loss's residuals projected on W (K x d): a d-vector per row of the
        cached potentials (and one more per row in partially labelled sequences), in threads over chunks of
        sequences."""
        T = len(self.y)
        weight = passes.extra.weights if self.params.loss == "rank" else np.ones(T)
        rows = self.P.values.shape[0]
        free = np.empty((rows, W.shape[1]))
        clamped = lazy_zeros((rows if self.partial.any() else 0, W.shape[1]))  # written in partial sequences only

        def chunk(a, b, q0, q1):
            lo, hi = self.P.start[a], self.P.start[b]
            low_rank_rows(crf.part(self.P, a, b), self.seq_starts[q0:q1 + 1] - a, self.y[a:b], self.partial[q0:q1],
                          crf.cells(passes.free, a, b), crf.cells(passes.clamped, a, b), W,
                          weight[a:b], free[lo:hi], clamped[lo:hi] if len(clamped) else clamped)
        in_chunks(self.seq_starts, self.params.threads, chunk)
        coef = np.repeat(self.partial, np.diff(self.seq_starts)).astype(np.float64)
        gold = np.where((coef == 0.0) & ~self.is_start, weight, 0.0)
        return LowRank(start=self.P.start, group=self.P.group, free=free, clamped=clamped, alpha=passes.free.alpha,
                       calpha=passes.clamped.alpha, coef=coef, y=self.y, gold=gold, W=W)

    def _leaf_vectors(self, passes, tree: Tree, segments, lam: float) -> np.ndarray:
        """nodes x K: every label's leaf_values over the cells of each leaf of a shared tree."""
        return values_of(self.leaf_sums(passes, tree, segments), lam, self.params.l1)
