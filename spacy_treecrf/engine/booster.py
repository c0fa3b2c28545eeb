"""The boosting loop (paper Table 3) over sparse binary rows: a Trainer fits each round's trees to the functional
gradient of its loss and moves its cached potentials by them. The settings live in settings.py, the trees it grows
in ensemble.py, the threaded forward-backward and Viterbi in chunks.py; the shared trees' round in shared_fit.py.

Everything here takes plain numpy arrays: ``indptr``/``indices`` (CSR rows of active feature ids, one row per
position, sequences concatenated), ``seq_starts`` (sequence offsets), ``y`` (int32 label ids, -1 = unknown) and
``allowed`` (S x K bool: row 0 = labels allowed at a sequence start, row j + 1 = labels allowed after label j).
"""
from concurrent.futures import ThreadPoolExecutor
import threading
from typing import List, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import crf, losses
from .grow import grow_tree, influential_positions
from .leaves import (NEWTON, LeafSums, add_label_leaf_sums, add_leaf_sums, covering_leaves, leaf_nodes,
                     leaf_values as leaf_value_kernel)
from .missing import MissingRows
from .numeric import NumericIndex, no_numeric
from .sparse import csc_index, take_rows
from .trees import LEAF, GrowSettings, Rows, Target, Tree, is_shared, no_missing, scaled_tree
from ..errors import Errors
from .chunks import by_chunks, forward_backward
from .ensemble import Ensemble, MoveList
from .memory import release_freed_memory
from .settings import LEAF_VALUES, BoostParams, resolved_max_leaves, resolved_shrinkage
from .shared_fit import SharedTreeFit
# The engine's boosting API for its callers (the model layer, the cluster, tests), from the modules it builds on
from .chunks import decode, marginal_probs, viterbi  # noqa: F401,E402
from .ensemble import BITMASK_BYTES, PARTITION_ROWS, DevCache, potentials_to_scaled  # noqa: F401,E402
from .settings import DECODERS, LABEL_SPLITS, LOSSES, PAPER_SETTINGS  # noqa: F401,E402

MAX_MOVE = 10.0  # a round changes no log potential by more than this: exp() stays finite in the float32 cache
GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
RESIDUAL_BLOCK_BYTES = 32 * 2 ** 20  # residuals of every label a thread makes at once for a chunk (shared trees)
LINE_SEARCH_STEPS = 6  # golden-section steps of the rank loss's line search (step known to 0.618**7 of its range)


def logsumexp(values: np.ndarray) -> float:
    top = values.max() if len(values) else -np.inf
    if not np.isfinite(top):
        return float(top)
    return float(top + np.log(np.exp(values - top).sum()))


class Passes(NamedTuple):
    """One gradient pass over the training set. ``objective`` is minus the loss (the log-likelihood for
    loss="crf"); ``free`` / ``clamped``: forward-backward results (None for the pseudo-likelihood); ``extra``:
    the loss's own arrays, a named tuple of losses.py per loss (PseudoTerms, HammingTerms, RankTerms; None for
    "crf")."""
    free: Optional[crf.ForwardBackward]
    clamped: Optional[crf.ForwardBackward]
    objective: float
    extra: Optional[Union[losses.PseudoTerms, losses.HammingTerms, losses.RankTerms]] = None


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


class Trainer(SharedTreeFit):
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
        return TrainingSet(indptr=self.indptr, indices=self.indices, y=self.y, seq_starts=self.seq_starts,
                           missing_rows=self.missing_rows)

    def gradient_pass(self) -> "Passes":
        """What the loss's functional gradient needs: forward-backward (free and, for partially labelled sequences,
        clamped) for every loss but the pseudo-likelihood, plus the loss's own pass (losses.py)."""
        loss = self.params.loss
        threads = self.params.threads
        if loss == "pseudo_likelihood":
            cond, kept, logpl = by_chunks(self.seq_starts, threads, lambda a, b, starts: losses.pseudo_conditionals(
                crf.part(self.P, a, b), starts, self.y[a:b]))
            return Passes(free=None, clamped=None, objective=float(logpl.sum()),
                          extra=losses.PseudoTerms(cond=cond, kept=kept))
        free = forward_backward(self.P, self.seq_starts, self.y, False, threads)
        if loss == "hamming":
            fa, fb, known, logp = by_chunks(self.seq_starts, threads, lambda a, b, starts: losses.hamming_pass(
                starts, self.y[a:b], crf.part(self.P, a, b), free.alpha[a:b], free.beta[a:b], free.scale[a:b]))
            return Passes(free=free, clamped=free, objective=float(logp.sum()),
                          extra=losses.HammingTerms(fa=fa, fb=fb, known=known))
        clamped, nll = self._sequence_nll(free)
        if loss == "crf":
            return Passes(free=free, clamped=clamped, objective=-float(nll.sum()))
        terms = losses.log_rank_terms(nll)
        weights = np.repeat(losses.rank_weights(nll), np.diff(self.seq_starts))
        return Passes(free=free, clamped=clamped, objective=-float(np.exp(logsumexp(terms))),
                      extra=losses.RankTerms(weights=weights, log_loss=logsumexp(terms)))

    def _sequence_nll(self, free):
        """The clamped pass (``free`` itself if every sequence is fully labelled) and -log P(known labels | X)
        per sequence."""
        if self.partial.any():
            clamped = forward_backward(self.P, self.seq_starts, self.y, True, self.params.threads, self.partial)
        else:
            clamped = free
        gold = np.where(self.partial, clamped.logz, 0.0)
        full = ~self.partial & (np.diff(self.seq_starts) > 0)
        if full.any():
            gold = gold + np.where(full, crf.gold_log_score(self.P, self.seq_starts, self.y), 0.0)
        with np.errstate(invalid="ignore"):  # a gold labelling no allowed path reaches: fit_round's E158 says so
            return clamped, free.logz - gold

    def residuals(self, passes: "Passes", k0: int, out: np.ndarray, part=None) -> np.ndarray:
        """out (T x S x G) = the loss's functional gradient for the labels k = k0 .. k0 + G - 1:
        out[t, s, k - k0] = -dL/dF^k(s, x_t). ``part`` (a, b, q0, q1): only the whole sequences q0:q1, at
        positions a:b (out: (b - a) x S x G)."""
        loss = self.params.loss
        a, b, q0, q1 = part if part is not None else (0, len(self.y), 0, len(self.seq_starts) - 1)
        starts = self.seq_starts[q0:q1 + 1] - a
        y = self.y[a:b]
        if loss == "pseudo_likelihood":
            terms = passes.extra
            return losses.pseudo_residual(starts, y, terms.cond[a:b], terms.kept[a:b], k0, out)
        free = crf.cells(passes.free, a, b)
        P = crf.part(self.P, a, b)
        if loss == "hamming":
            terms = passes.extra
            return losses.hamming_residual(starts, P, *free, terms.fa[a:b], terms.fb[a:b], terms.known[q0:q1], k0,
                                           out)
        clamped = crf.cells(passes.clamped, a, b)
        crf.residual_slice(P, starts, y, self.partial[q0:q1], free, clamped, k0, out)
        if loss == "rank":
            out *= passes.extra.weights[a:b, None, None]
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
        settings = GrowSettings(max_leaves=resolved_max_leaves(self.params.max_leaves, n_positions),
                                lam=resolved_shrinkage(self.params.shrinkage, n_positions),
                                min_leaf=float(self.params.min_samples_leaf), min_gain=float(self.params.min_gain),
                                states_last=self.params.label_splits == "fallback", n_surrogates=n_surrogates)
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
            target = Target(D=D, is_start=self.is_start, allowed_k=np.ascontiguousarray(self.allowed[:, k]))
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
        weight = passes.extra.weights if self.params.loss == "rank" else np.ones(T)
        return crf.LabelTargets(self.P, self.y, self.is_start, np.repeat(self.partial, np.diff(self.seq_starts)),
                                *crf.cells(passes.free), *crf.cells(passes.clamped), weight)

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
            return self._line_search(fitted, passes.extra.log_loss, 1.0 / top), True
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


