"""The one model layer under both front ends (the spaCy component and `TreeCRF`), as LightGBM's Booster sits under
its sklearn and dask front ends.

A front end turns its input (Docs, or lists of feature dicts) into engine rows with its own featurizer and turns
label ids back into its output (spans and tags on Docs, lists of labels); everything between is here, once:
- what a model is: its labels and which may follow which (``allowed``), the boosting settings it was trained with
  (BoostParams), its trees (booster.Ensemble), its columns (``n_features`` atoms, of which the numeric ones are
  described by a NumericIndex), the column that stands in for each variable where it is missing under the
  input-rewriting missing-value strategies (``fill``), and how many boosting rounds made it;
- what is done with it: a Trainer over training rows (from the model's potentials when it has trees: continued
  training), the gold check against the transition constraints, decoding (Viterbi or marginals, n-best, span
  probabilities), explanations and rules over readable test names the front end gives;
- its file: one schema, written by ``to_bytes`` and read by ``load`` with one set of checks and error codes. The
  front end's own state (its featurizer's, its settings) rides in the same file as two dicts the front end writes
  and checks, the featurizer's first, since the columns it describes are what the trees are checked against.

Nothing here imports spaCy: labels are whatever the front end names them with (strings, or the estimator's
integers too).
"""
import dataclasses
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .engine import booster as boost
from .engine.chunks import forward_backward, viterbi
from .engine import crf, missing, serialize
from .engine.ensemble import DevCache, Ensemble, potentials_to_scaled
from .engine.settings import BoostParams
from .engine.crf import ForwardBackward
from .engine.missing import ENGINE_STRATEGIES, N_SURROGATES, MissingRows
from .engine.numeric import NumericIndex, with_numeric_columns
from .engine.rules import Explanation, ensemble_rules, explain_sequence
from .engine.transitions import first_forbidden
from .engine.sparse import take_rows, with_label_columns
from .engine.trees import no_missing
from .errors import Errors

MODEL_KIND = "model"  # the envelope's kind of a version 5 file, whichever front end wrote it
CLAMP_CELLS = 1 << 22  # raw potentials (float64 cells) a block of sequences with known labels is decoded from
FRONT_ENDS = {"component": "treecrf", "estimator": "TreeCRF"}  # front end -> the kind its files had before
DEFAULT_PATIENCE = 10  # rounds without a better validation score before a fit stops, when patience is None ...
SMALL_DEV_PATIENCE, SMALL_DEV = 30, 10_000  # ... or this many where the validation data has fewer positions: a
# small validation set's accuracy is noisy from round to round, and 10 rounds stopped protein at round 22 of the
# 90 its dev accuracy kept rising to (benchmarks/results/defaults_candidates.md, "Patience for small validation
# sets")
# A stacked model's second stage reads the first stage's marginal of each label at the position itself as a
# numeric column of these bins (the trees learn thresholds among the cuts, as on any numeric column), beside its
# windowed labels: on CoNLL-2003 dev the marginals took the gain over the first stage from +0.29 to +0.76
# (benchmarks/results/context_levers.md)
MARGINAL_CUTS = (0.05, 0.2, 0.5, 0.8, 0.95)
MARGINAL_BINS = len(MARGINAL_CUTS) + 1
STACK_MAX_ROUNDS = 300  # the most rounds a first-stage fold model of a stacked model runs (it stops on its
# validation half long before on every task of benchmarks/defaults.py)


class EngineRows(NamedTuple):
    """A batch of sequences as the engine reads them: CSR rows of atom ids (indptr: int64, rows + 1; indices:
    int32, sorted within a row), sequence offsets (int64, sequences + 1) and the variables missing at each row
    (None where none is, or where the missing-value strategy rewrote the rows)."""
    indptr: np.ndarray
    indices: np.ndarray
    seq_starts: np.ndarray
    missing: Optional[MissingRows]

    def take(self, positions: np.ndarray, seq_starts: np.ndarray) -> "EngineRows":
        """The rows of ``positions`` (int64, in that order), as sequences at offsets ``seq_starts``."""
        return EngineRows(*take_rows(self.indptr, self.indices, positions), seq_starts,
                          None if self.missing is None else self.missing.take(positions))


class Known(NamedTuple):
    """What is known of a batch's labels before it is decoded: ``permitted`` (positions x labels, bool) holds the
    labels each position may take (every label where nothing is known, one where the label is, all but some where
    only those are ruled out, as after a preset entity: its I- cannot continue past it); ``where(q, t)`` names
    position t of sequence q in the front end's words, for the error when no allowed path agrees with them."""
    permitted: np.ndarray
    where: Callable[[int, int], str]


class Confidence(NamedTuple):
    """How sure the model is of each sequence's predicted labelling (float64, one value a sequence), for choosing
    what to annotate next: ``probability``, P(the predicted labelling | the input and what was known);
    ``least_marginal``, the smallest marginal probability of a predicted label (the weakest token); and
    ``mean_entropy``, the per-token entropy of the marginals (nats), averaged over the sequence. An empty sequence
    is certain (1, 1, 0)."""
    probability: np.ndarray
    least_marginal: np.ndarray
    mean_entropy: np.ndarray


class Decoded(NamedTuple):
    """SequenceModel.decode's results: label ids per position (int32), the batch's scaled Potentials, and where
    asked for, the forward-backward pass (its alpha, beta, scale and log Z), the marginals (positions x labels,
    float64), the n best paths ((n x positions) label ids and (sequences x n) log probabilities, crf.nbest) and
    the Confidence of the predicted labelling. Given known labels, all of them are conditional on those."""
    ids: np.ndarray
    potentials: crf.Potentials
    fb: Optional[ForwardBackward]
    gamma: Optional[np.ndarray]
    nbest: Optional[Tuple[np.ndarray, np.ndarray]]
    confidence: Optional[Confidence] = None


class FirstStage(NamedTuple):
    """What a stacked model's second stage reads of its first stage, per position: the Viterbi label (int32) and
    the marginals (positions x labels, float64)."""
    labels: np.ndarray
    marginals: np.ndarray


class Validation(NamedTuple):
    """Held-out rows that pick a fit's best round (SequenceModel.fit_rounds): their DevCache, gold label ids
    (int64; -1 unknown, left out; -2 a label the model does not know, always an error) and the decoding scored."""
    cache: DevCache
    gold: np.ndarray
    decode: str

    def accuracy(self, threads: int) -> float:
        """Token accuracy of the cache's current potentials (0 where no gold label is known)."""
        pred = self.cache.predict(self.decode, threads)
        known = self.gold != -1
        return float((pred[known] == self.gold[known]).mean()) if known.any() else 0.0


class StackedTests(Sequence):
    """A stacked model's tests in words: the front end's ``tests`` for its columns and their numeric thresholds;
    the label columns (SequenceModel.n_columns) as "first stage: LABEL[offset]" and the marginal columns' tests as
    "first stage: P(LABEL) <= cut" (or > cut, past every column)."""

    def __init__(self, tests: Sequence[str], n_features: int, labels: Sequence, window: int):
        self.tests, self.n_features, self.labels, self.window = tests, n_features, list(labels), window
        self.n_label_columns = (2 * window + 1) * len(self.labels)
        self.n_columns = n_features + self.n_label_columns + MARGINAL_BINS * len(self.labels)

    def __len__(self) -> int:
        return self.n_columns

    def __getitem__(self, col: int) -> str:
        if col < self.n_features:
            return self.tests[col]
        if col < self.n_features + self.n_label_columns:
            offset, k = divmod(col - self.n_features, len(self.labels))
            return f"first stage: {self.labels[k]}[{offset - self.window:+d}]"
        above = col >= self.n_columns  # a numeric threshold's "x > u" test (numeric.py)
        atom = col - self.n_columns if above else col
        if atom < self.n_features:
            return self.tests[self.n_features + atom]  # (the front end's numbering: its own atoms' count first)
        k, b = divmod(atom - self.n_features - self.n_label_columns, MARGINAL_BINS)
        cut = MARGINAL_CUTS[b] if b < len(MARGINAL_CUTS) else 1.0
        return f"first stage: P({self.labels[k]}) {'>' if above else '<='} {cut:g}"


class Columns(NamedTuple):
    """What a front end's featurizer state says of the engine's columns, for the loader to check the trees
    against: the number of atoms, their NumericIndex, the variables a missing value can belong to, the front end's
    restored state (returned to it by ``load``), and for files from before the model kept ``fill``, the table
    the front end kept in its place (None: no column stands in for a missing variable)."""
    n_features: int
    numeric: NumericIndex
    n_variables: int
    state: object
    fill: Optional[np.ndarray] = None


class Loaded(NamedTuple):
    """``load``'s result: the model and the front end's own state (Columns.state) and settings dict."""
    model: "SequenceModel"
    state: object
    settings: Dict[str, object]


class SequenceModel:
    """A trained (or initialized) TreeCRF: labels, transition mask, settings, trees, columns and missing-value
    table (see the module docstring). ``rounds``: the boosting rounds its trees come from."""

    def __init__(self, labels: Sequence, allowed: np.ndarray, params: BoostParams, n_features: int,
                 numeric: NumericIndex, fill: Optional[np.ndarray] = None, ensemble: Optional[Ensemble] = None,
                 rounds: int = 0, stage1: Optional["SequenceModel"] = None):
        self.labels = list(labels)
        self.allowed = np.ascontiguousarray(allowed, dtype=np.bool_)
        self.params = params
        self.n_features = int(n_features)
        self.numeric = numeric
        self.fill = np.zeros(0, dtype=np.int32) if fill is None else np.asarray(fill, dtype=np.int32)
        K = len(self.labels)
        self.stage1: Optional[SequenceModel] = None  # a stacked model's first stage (params.stack_window > 0)
        if params.stack_window:
            self.stage1 = stage1 if stage1 is not None else SequenceModel(
                labels, allowed, dataclasses.replace(params, stack_window=0), n_features, numeric, self.fill)
        if ensemble is None:
            ensemble = Ensemble(K + 1, K, N_SURROGATES if params.missing == "surrogate" else 0,
                                shared=params.shared_trees)
        ensemble.set_numeric(self.tree_numeric)
        self.ensemble = ensemble
        self.rounds = int(rounds)

    @property
    def n_columns(self) -> int:
        """The columns the trees read: the front end's ``n_features``, then for a stacked model a column per
        (offset in the label window, first-stage label) and MARGINAL_BINS per label (sparse.with_label_columns)."""
        if self.stage1 is None:
            return self.n_features
        return self.n_features + (2 * self.params.stack_window + 1 + MARGINAL_BINS) * len(self.labels)

    @property
    def tree_numeric(self) -> NumericIndex:
        """The NumericIndex of the columns the trees read: a stacked model's label columns are binary, its
        marginal columns numeric (MARGINAL_BINS bins each)."""
        if self.stage1 is None:
            return self.numeric
        bases = self.n_features + (2 * self.params.stack_window + 1) * len(self.labels) + \
            MARGINAL_BINS * np.arange(len(self.labels))
        return with_numeric_columns(self.numeric, self.n_columns, bases, bases + MARGINAL_BINS)

    @property
    def n_trees(self) -> int:
        return self.ensemble.n_trees

    # ---- rows ------------------------------------------------------------------------------------------------
    def engine_rows(self, indptr, indices, seq_starts, missing_rows: Optional[MissingRows]) -> EngineRows:
        """A front end's rows as the trees read them: under "instance_weighting" and "surrogate" the missing
        variables travel with the rows (the trees route them); under the other strategies each missing variable is
        replaced by its ``fill`` column (the imputed value, or its indicator), if it has one."""
        if self.params.missing in ENGINE_STRATEGIES:
            return EngineRows(indptr, indices, seq_starts, missing_rows)
        if missing_rows is not None and missing_rows.any:
            indptr, indices = missing.fill_rows(indptr, indices, missing_rows, self.fill, self.n_features)
        return EngineRows(indptr, indices, seq_starts, None)

    def label_ids(self, labels_per_sequence) -> np.ndarray:
        """Label ids (int32, -1 where a label is None: unknown) of sequences of labels the model knows."""
        index = {label: k for k, label in enumerate(self.labels)}
        return np.array([-1 if label is None else index.get(label, -1) for labels in labels_per_sequence
                         for label in labels], dtype=np.int32)

    def check_gold(self, y: np.ndarray, seq_starts: np.ndarray, where: Callable[[int, int], str], fix: str) -> None:
        """E156 at the first gold label that follows one the transition constraints forbid. ``where(q, t)``: the
        front end's words for position t of sequence q (a doc's token, or an index); ``fix``: the setting that
        relaxes the constraints."""
        bad = first_forbidden(y, seq_starts, self.allowed)
        if bad is not None:
            q, t, prev, k = bad
            raise ValueError(Errors.E156.format(label=self.labels[k], where=where(q, t), prev=(
                "the start of the sequence" if prev < 0 else repr(self.labels[prev])), fix=fix))

    # ---- training --------------------------------------------------------------------------------------------
    def potentials(self, rows: EngineRows, alive: Optional[np.ndarray] = None,
                   restricted: Optional[np.ndarray] = None) -> crf.Potentials:
        """The scaled Potentials of the rows under the trees and the transition mask; with ``alive`` (``agreeing``:
        the positions of the ``restricted`` sequences end to end x labels) those sequences hold only the cells of
        paths that agree with what is known (crf.clamp_potentials), scaled anew from the raw potentials, so no
        agreeing path is lost to underflow next to a much likelier path the known labels rule out. A stacked
        model's: its first stage's Potentials times its own trees' over the stacked rows (crf.product: no
        T x S x K array, whose cost grows with the labels squared); those of restricted sequences block by block
        from raw potentials (``_raw``), as the first stage's labels there must agree with what is known."""
        lengths = np.diff(rows.seq_starts)
        if alive is None or not restricted.any():
            if self.stage1 is None:
                return self.ensemble.scaled_potentials(rows.indptr, rows.indices, self.allowed, rows.seq_starts,
                                                       self.params.threads, rows.missing)
            first = self.stage1.potentials(rows)
            if not self.n_trees:
                return first
            return stacked_product(self, first, self.stacked_rows(rows, self.first_stage(first, rows.seq_starts)))
        at = np.repeat(restricted, lengths)  # the restricted sequences' positions, and their offsets end to end
        starts = np.concatenate([[0], np.cumsum(lengths[restricted])]).astype(np.int64)
        own = rows if at.all() else rows.take(np.flatnonzero(at), starts)
        budget = max(1, CLAMP_CELLS // self.allowed.size)  # positions a block of raw potentials holds
        parts, q = [], 0
        while q < len(starts) - 1:  # blocks of whole sequences of at most ``budget`` positions (or one sequence)
            q1 = max(q + 1, int(np.searchsorted(starts, starts[q] + budget, side="right")) - 1)
            a, b = starts[q], starts[q1]
            block = own if (a, b) == (0, starts[-1]) else own.take(np.arange(a, b, dtype=np.int64),
                                                                     starts[q:q1 + 1] - a)
            parts.append(self._clamped(block, None if alive is None else alive[a:b]))
            q = q1
        if at.all():
            return crf.join(parts)
        free = rows.take(np.flatnonzero(~at), np.concatenate([[0], np.cumsum(lengths[~restricted])]).astype(np.int64))
        return crf.interleave(self.potentials(free), crf.join(parts), at)

    def _clamped(self, rows: EngineRows, alive: Optional[np.ndarray]) -> crf.Potentials:
        """The Potentials of the rows, restricted to ``alive``'s labels where given (see ``potentials``)."""
        phi = self._raw(rows, alive)
        if alive is not None:
            crf.clamp_potentials(phi, alive, crf.start_mask(rows.seq_starts, len(rows.indptr) - 1))
        return potentials_to_scaled(phi, self.allowed, rows.seq_starts)

    def _raw(self, rows: EngineRows, alive: Optional[np.ndarray] = None) -> np.ndarray:
        """Raw potentials (T x S x K, float64; the cells a decoder reads) of the rows: the trees' sum; for a
        stacked model the first stage's plus its own trees' over the rows with what the first stage reads there
        (its Viterbi path and marginals, among the paths that agree with ``alive`` where given)."""
        T = len(rows.indptr) - 1
        if self.stage1 is None:
            if not self.n_trees:
                return np.zeros((T,) + self.allowed.shape)
            return self.ensemble.potentials(rows.indptr, rows.indices, self.params.threads, rows.missing,
                                            valid=(self.allowed, rows.seq_starts))
        phi = self.stage1._raw(rows)
        if not self.n_trees:
            return phi
        first = phi.copy() if alive is not None else phi
        if alive is not None:
            crf.clamp_potentials(first, alive, crf.start_mask(rows.seq_starts, T))
        second = self.stacked_rows(rows, self.first_stage(potentials_to_scaled(first, self.allowed, rows.seq_starts),
                                                          rows.seq_starts))
        return phi + self.ensemble.potentials(second.indptr, second.indices, self.params.threads, second.missing,
                                              valid=(self.allowed, rows.seq_starts))

    def first_stage(self, P: crf.Potentials, seq_starts: np.ndarray) -> FirstStage:
        """What the second stage reads of the first stage's Potentials ``P``: its Viterbi labels and its
        marginals."""
        return FirstStage(viterbi(P, seq_starts, self.params.threads),
                          marginal_pass(P, seq_starts, self.params.threads)[1])

    def stacked_rows(self, rows: EngineRows, first: FirstStage) -> EngineRows:
        """The rows a stacked model's own trees read: the front end's, each position's columns of the first
        stage's labels in the label window and the bins of its marginals (``first``)."""
        bins = np.searchsorted(np.asarray(MARGINAL_CUTS), first.marginals, side="right").astype(np.int32)
        indptr, indices = with_label_columns(rows.indptr, rows.indices, np.ascontiguousarray(first.labels, np.int32),
                                             rows.seq_starts, self.n_features, len(self.labels),
                                             self.params.stack_window, bins, MARGINAL_BINS)
        missing_rows = rows.missing
        if missing_rows is not None:
            fvar = np.full(self.n_columns, -1, dtype=np.int32)
            fvar[:len(missing_rows.feature_var)] = missing_rows.feature_var
            missing_rows = MissingRows(missing_rows.indptr, missing_rows.indices, fvar, missing_rows.n_vars,
                                       missing_rows.known)
        return EngineRows(indptr, indices, rows.seq_starts, missing_rows)

    def agreeing(self, known: Known, seq_starts: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(alive, restricted): the sequences where something is known (bool, per sequence) and, for their
        positions end to end, the labels on some allowed path that agrees with ``known`` (crf.agreeing_labels;
        the other sequences are not walked). E223 names the first position that no such path reaches."""
        permitted = np.ascontiguousarray(known.permitted, dtype=np.bool_)
        seq_starts = np.asarray(seq_starts, dtype=np.int64)
        ruled_out = np.concatenate([[0], np.cumsum(~permitted.all(axis=1))])
        restricted = ruled_out[seq_starts[1:]] > ruled_out[seq_starts[:-1]]
        lengths = np.diff(seq_starts)
        starts = np.concatenate([[0], np.cumsum(lengths[restricted])]).astype(np.int64)
        alive, dead = crf.agreeing_labels(permitted[np.repeat(restricted, lengths)], starts, self.allowed)
        bad = np.flatnonzero(dead >= 0)
        if len(bad):
            q = int(np.flatnonzero(restricted)[bad[0]])
            a, t = int(seq_starts[q]), int(seq_starts[q] + dead[bad[0]])
            shown = [i for i in range(a, t + 1) if not permitted[i].all()][-3:]
            words = "; ".join(f"{known.where(q, i - a)}: {permitted_words(self.labels, permitted[i])}" for i in shown)
            raise ValueError(Errors.E223.format(where=known.where(q, t - a), known=words))
        return alive, restricted

    def permitted(self, labels_per_sequence, where: Callable[[int, int], str]) -> Optional[np.ndarray]:
        """The ``permitted`` table (Known) of known labels given as a label or None per position (None: unknown):
        None when nothing is known. E224 names a label the model does not know."""
        index = {label: k for k, label in enumerate(self.labels)}
        permitted = np.ones((sum(map(len, labels_per_sequence)), len(self.labels)), dtype=np.bool_)
        t = 0
        for q, labels in enumerate(labels_per_sequence):
            for i, label in enumerate(labels):
                if label is not None:
                    k = index.get(label) if is_label(label) else None
                    if k is None:
                        raise ValueError(Errors.E224.format(where=where(q, i), label=label, labels=self.labels))
                    permitted[t] = False
                    permitted[t, k] = True
                t += 1
        return permitted if not permitted.all() else None

    def trainer(self, rows: EngineRows, y: np.ndarray, scheduler=None) -> boost.Trainer:
        """A Trainer over the rows (labels ``y``, int32, -1 unknown), in this process or on a Dask ``scheduler``'s
        workers, starting from the model's potentials of the rows when it has trees (continued training). A
        stacked model's first stage is fitted here, before its own first round (``fit_first_stage``): its trees
        then read the rows with the cross-fitted first-stage labels, from the fold models' potentials. E231: a
        stacked model is fitted once, on one training set."""
        if self.stage1 is None:
            return boost.new_trainer(rows.indptr, rows.indices, self.n_features, y, rows.seq_starts, self.allowed,
                                     self.params, scheduler, initial=self.potentials(rows) if self.n_trees else None,
                                     missing_rows=rows.missing, numeric=self.numeric)
        if self.n_trees or self.stage1.n_trees:
            raise ValueError(Errors.E231)
        first, initial = self.fit_first_stage(rows, y, scheduler)
        second = self.stacked_rows(rows, first)
        return boost.new_trainer(second.indptr, second.indices, self.n_columns, y, rows.seq_starts, self.allowed,
                                 self.params, scheduler, initial=initial, missing_rows=second.missing,
                                 numeric=self.tree_numeric)

    def fit_first_stage(self, rows: EngineRows, y: np.ndarray, scheduler=None) -> Tuple[FirstStage, crf.Potentials]:
        """Fit a stacked model's first stage (stacked sequential learning, Cohen & Carvalho 2005) on the rows
        (labels ``y``). Two fold models, one fitted on the even sequences and one on the odd, each stopped at its
        best round on the other half (validation token accuracy, resolved_patience), label the half they were not
        fitted on: so the second stage learns from first-stage labels and potentials as wrong as the first
        stage's are on new data. The first stage is then fitted on every sequence for the fold models' mean best
        round. Returns the cross-fitted FirstStage (Viterbi labels and marginals) and Potentials. E232: fewer than
        two sequences."""
        lengths = np.diff(rows.seq_starts)
        if len(lengths) < 2:
            raise ValueError(Errors.E232.format(n=len(lengths)))
        odd = np.arange(len(lengths)) % 2 == 1
        at_odd = np.repeat(odd, lengths)

        def half(sequences: np.ndarray) -> Tuple[EngineRows, np.ndarray]:
            positions = np.flatnonzero(np.repeat(sequences, lengths))
            return rows.take(positions, np.concatenate([[0], np.cumsum(lengths[sequences])]).astype(np.int64)), \
                y[positions]
        folds, best = [], []
        for fitted_on in (odd, ~odd):  # the model fitted on the odd sequences labels the even ones, then the reverse
            (fit_rows, fit_y), (other_rows, other_y) = half(fitted_on), half(~fitted_on)
            fold = SequenceModel(self.labels, self.allowed, self.stage1.params, self.n_features, self.numeric,
                                 self.fill)
            validation = Validation(fold.dev_cache(other_rows), other_y.astype(np.int64), "viterbi")
            best.append(fold.fit_rounds(fold.trainer(fit_rows, fit_y, scheduler), STACK_MAX_ROUNDS, validation,
                                        resolved_patience(int((other_y >= 0).sum()))))
            folds.append(fold)
            validation = fit_rows = other_rows = None  # (their memory goes before the next fit)
        rounds = int(round(np.mean(best)))
        if rounds:
            self.stage1.fit_rounds(self.stage1.trainer(rows, y, scheduler), rounds)
        first = FirstStage(np.empty(len(at_odd), dtype=np.int32), np.empty((len(at_odd), len(self.labels))))
        cross = []  # the fold models' potentials of the halves they label, made once every trainer is closed
        for fold, fitted_on in zip(folds, (odd, ~odd)):
            other_rows = half(~fitted_on)[0]
            cross.append(fold.potentials(other_rows))
            at = np.repeat(~fitted_on, lengths)
            first.labels[at], first.marginals[at] = self.first_stage(cross[-1], other_rows.seq_starts)
        return first, crf.interleave(cross[0], cross[1], at_odd)

    def fit_rounds(self, trainer: boost.Trainer, n_rounds: int, validation: Optional["Validation"] = None,
                   patience: int = DEFAULT_PATIENCE, report: Optional[Callable[[dict], None]] = None) -> int:
        """Fit up to ``n_rounds`` rounds with ``trainer`` (closed after); with ``validation`` keep the rounds up
        to the best validation accuracy (a continued fit: only rounds that beat the model as it was) and stop
        after ``patience`` rounds without a better one. ``report``: called with each round's entry (round, the
        training loss before it, seconds so far, the trainer's round report, dev_accuracy). Returns the rounds
        kept."""
        kept_rounds, kept_trees = self.rounds, self.n_trees
        best_acc, best_round = -1.0, 0
        if validation is not None and kept_trees:
            best_acc = validation.accuracy(self.params.threads)
        scores = []  # the round's validation accuracy, scored beside the round's last step (Trainer.fit_round)
        start, done = time.perf_counter(), 0
        for r in range(1, n_rounds + 1):
            objective = trainer.fit_round(self.ensemble, on_tree=validation.cache.add_tree if validation else None,
                                          beside=(lambda threads: scores.append(validation.accuracy(threads)))
                                          if validation else None)
            done = r
            entry = {"round": kept_rounds + r, "train_loss_before": -objective, "seconds": time.perf_counter() - start,
                     **trainer.round_report()}
            if validation is not None:
                entry["dev_accuracy"] = acc = scores.pop()
                if acc > best_acc:
                    best_acc, best_round = acc, r
            if report is not None:
                report(entry)
            if validation is not None and r - best_round >= patience:
                break
        new_rounds = best_round if validation is not None else done
        self.rounds = kept_rounds + new_rounds
        trainer.close()
        self.ensemble.truncate(kept_trees + new_rounds * (1 if self.params.shared_trees else len(self.labels)))
        return new_rounds

    def dev_cache(self, rows: EngineRows) -> DevCache:
        """Held-out rows whose potentials follow the trees a fit adds (per-round validation scores); a stacked
        model's, with its first stage's labels."""
        if self.stage1 is None:
            return DevCache(rows.indptr, rows.indices, rows.seq_starts, self.allowed, missing_rows=rows.missing,
                            initial=self.potentials(rows) if self.n_trees else None, numeric=self.numeric)
        first = self.stage1.potentials(rows)
        second = self.stacked_rows(rows, self.first_stage(first, rows.seq_starts))
        return DevCache(second.indptr, second.indices, rows.seq_starts, self.allowed, missing_rows=second.missing,
                        initial=stacked_product(self, first, second) if self.n_trees else first,
                        numeric=self.tree_numeric)

    def extended(self, labels: Sequence, moved: Optional[np.ndarray], n_features: int, numeric: NumericIndex,
                 allowed: np.ndarray, fill: Optional[np.ndarray] = None) -> "SequenceModel":
        """The model for continued training with ``labels`` (the old ones first, new ones after: their trees start
        from zero, the old trees keep their meaning) and new columns: ``moved`` maps each old column to its new one
        (None: unchanged). E231 for a stacked model."""
        if self.stage1 is not None:
            raise ValueError(Errors.E231)
        if list(labels[:len(self.labels)]) != self.labels:
            raise ValueError(Errors.E181.format(had=len(self.labels), n_labels=len(labels)))
        ensemble = self.ensemble.with_labels(len(labels)) if len(labels) > len(self.labels) else self.ensemble
        if moved is not None:
            ensemble = ensemble.with_feature_map(moved, numeric)
        return SequenceModel(labels, allowed, self.params, n_features, numeric,
                             self.fill if fill is None else fill, ensemble, self.rounds)

    def with_settings(self, allowed: np.ndarray, params: BoostParams) -> "SequenceModel":
        """These trees under a front end's transition constraints and settings (a loaded file's model, as the
        component that loads it is configured); a stacked model's first stage likewise."""
        first = self.stage1 and self.stage1.with_settings(allowed, dataclasses.replace(params, stack_window=0))
        return SequenceModel(self.labels, allowed, params, self.n_features, self.numeric, self.fill, self.ensemble,
                             self.rounds, first)

    # ---- prediction ------------------------------------------------------------------------------------------
    def decode(self, rows: EngineRows, method: str, scores: bool = False, n_best: int = 0,
               known: Optional[Known] = None) -> Decoded:
        """Label ids by Viterbi or per-position marginal argmax (``method``); with ``scores`` or ``n_best`` also the
        forward-backward pass, the marginals and the Confidence, and the n_best most probable paths. With
        ``known`` labels, decoding is restricted to the allowed paths that agree with them (E223 where none does):
        the best such path, the marginals and the n best paths given them."""
        alive = restricted = None
        if known is not None:
            alive, restricted = self.agreeing(known, rows.seq_starts)
        P = self.potentials(rows, alive, restricted)
        threads = self.params.threads
        fb = gamma = paths = sure = None
        if method == "marginal" or scores or n_best:
            fb, gamma = marginal_pass(P, rows.seq_starts, threads)
        if method == "viterbi":
            ids = viterbi(P, rows.seq_starts, threads)
        else:
            ids = gamma.argmax(axis=1).astype(np.int32)
        if n_best:
            paths = crf.nbest(P, rows.seq_starts, fb.logz, int(n_best))
        if scores:
            sure = confidence(P, fb, gamma, rows.seq_starts, ids)
        return Decoded(ids, P, fb, gamma, paths, sure)

    def span_probabilities(self, decoded: Decoded, seq_starts: np.ndarray, owner, start, end, first, inside
                           ) -> np.ndarray:
        """P(the CRF labels exactly span i: ``first`` at start[i], ``inside`` up to end[i], and not ``inside``
        after) per span of sequence owner[i] (positions of the batch; label ids), from decode(..., scores=True)."""
        fb = decoded.fb
        return crf.span_probs(decoded.potentials, fb.alpha, fb.beta, fb.scale, seq_starts[owner + 1], start, end,
                              first, inside)

    def explain(self, rows: EngineRows, ids: np.ndarray, tests: Sequence[str]) -> List[Explanation]:
        """The Explanation of each position of the one sequence of ``rows`` labelled ``ids`` (rules.py);
        ``tests``: the columns' tests in words, by test id. A stacked model's: its first stage's parts, then its
        own trees' over the first stage's predicted labels (their tree numbers after the first stage's)."""
        if self.stage1 is not None:
            first = self.stage1.explain(rows, ids, tests)
            if not self.n_trees:
                return first
            rows = self.stacked_rows(rows, self.first_stage(self.stage1.potentials(rows), rows.seq_starts))
            n_first = self.stage1.n_trees
            return [Explanation(a.label, a.previous, a.potential + b.potential,
                                a.parts + [part._replace(tree=part.tree + n_first) for part in b.parts])
                    for a, b in zip(first, self._explain_own(rows, ids, self.readable(tests)))]
        return self._explain_own(rows, ids, tests)

    def _explain_own(self, rows: EngineRows, ids: np.ndarray, tests: Sequence[str]) -> List[Explanation]:
        route = rows.missing.index() if rows.missing is not None and rows.missing.any else no_missing()
        return explain_sequence(self.ensemble.forest(), self.ensemble.kernel_rows(rows.indptr, rows.indices), route,
                                0, ids, tests, self.labels, self.allowed, self.ensemble.path_tables())

    def rules(self, tests: Sequence[str], top: int, min_support: float) -> List[Tuple[str, str, float, float]]:
        """The strongest root-to-leaf paths as (label, conjunction of tests, value, support) (rules.py); a stacked
        model's among its first stage's and its own trees'."""
        own = ensemble_rules(self.ensemble, self.readable(tests), self.labels, top, min_support, self.allowed)
        if self.stage1 is None:
            return own
        return sorted(self.stage1.rules(tests, top, min_support) + own, key=lambda rule: -abs(rule[2]))[:top]

    def readable(self, tests: Sequence[str]) -> Sequence[str]:
        """The tests of the columns this model's own trees read, in words, from the front end's ``tests``."""
        if self.stage1 is None:
            return tests
        return StackedTests(tests, self.n_features, self.labels, self.params.stack_window)

    # ---- the model file --------------------------------------------------------------------------------------
    def to_bytes(self, front: str, features: dict, settings: dict) -> bytes:
        """The model file: this model, and the front end's featurizer state and settings (plain dicts)."""
        payload = {"front": front, "labels": self.labels, "allowed": self.allowed, "params": vars(self.params),
                   "ensemble": self.ensemble.arrays(), "rounds": self.rounds, "fill": self.fill,
                   "features": features, "settings": settings}
        if self.stage1 is not None:
            payload["stage1"] = {"ensemble": self.stage1.ensemble.arrays(), "rounds": self.stage1.rounds}
        return serialize.dumps(MODEL_KIND, payload)


def stacked_product(model: SequenceModel, first: crf.Potentials, second: EngineRows) -> crf.Potentials:
    """A stacked ``model``'s Potentials: its first stage's (``first``) times its own trees' over the rows with what
    the first stage reads there (``second``: stacked_rows)."""
    return crf.product(first, model.ensemble.scaled_potentials(
        second.indptr, second.indices, model.allowed, second.seq_starts, model.params.threads, second.missing))


def marginal_pass(P: crf.Potentials, seq_starts: np.ndarray, threads: int) -> Tuple[ForwardBackward, np.ndarray]:
    """The unclamped forward-backward pass of Potentials ``P`` and its marginals (positions x labels)."""
    fb = forward_backward(P, seq_starts, np.full(len(P.c), -1, dtype=np.int32), False, threads)
    return fb, crf.marginals(fb.alpha, fb.beta)


def permitted_words(labels: Sequence, row: np.ndarray) -> str:
    """A position's permitted labels (``row``: bool per label) in words: the label, one of a few, or all but a
    few."""
    allowed = [labels[k] for k in np.flatnonzero(row)]
    ruled_out = [labels[k] for k in np.flatnonzero(~row)]
    if len(allowed) <= len(ruled_out):
        return repr(allowed[0]) if len(allowed) == 1 else f"one of {allowed}"
    return f"any label but {ruled_out}"


def confidence(P: crf.Potentials, fb: ForwardBackward, gamma: np.ndarray, seq_starts: np.ndarray,
               ids: np.ndarray) -> Confidence:
    """The Confidence of labelling ``ids`` (positions) from its batch's decoding: the path's probability is its
    score over Z; 0 for a path the transition mask forbids (as marginal decoding can produce), and 0 where Z
    underflowed (potentials hundreds of nats apart at every position of a long sequence, beyond float32's range:
    no probability can be told, and such a sequence is one to look at first)."""
    seq_starts = np.asarray(seq_starts, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.where(np.isfinite(fb.logz), crf.gold_log_score(P, seq_starts, ids) - fb.logz, -np.inf)
        picked = gamma[np.arange(len(ids)), ids]
        entropy = np.maximum(-np.sum(np.where(gamma > 0, gamma * np.log(np.where(gamma > 0, gamma, 1.0)), 0.0),
                                     axis=1), 0.0)
    lengths = np.diff(seq_starts)
    nonempty = lengths > 0
    least = np.ones(len(lengths))
    mean_entropy = np.zeros(len(lengths))
    if len(ids):
        least[nonempty] = np.minimum.reduceat(picked, seq_starts[:-1][nonempty])
        mean_entropy[nonempty] = np.add.reduceat(entropy, seq_starts[:-1][nonempty]) / lengths[nonempty]
    probability = np.where(nonempty, np.exp(np.minimum(logp, 0.0)), 1.0)
    return Confidence(probability=probability, least_marginal=least, mean_entropy=mean_entropy)


def load(data: bytes, front: str, owner: str, columns: Callable[[dict, BoostParams], Columns]) -> Loaded:
    """A model file of either front end, checked before anything is made of it: a file of another front end, a
    damaged, foreign or newer one is a ValueError whose code says what is wrong, the same code whichever front
    end wrote it. ``owner``: who loads it, in words (E155). ``columns(payload, params)``: the front end reads its
    featurizer state from the payload (checking it) and says what columns it describes; the trees are then
    checked against them. Files written before this
    schema (format versions 1-4, one kind per front end) are read through legacy_payload."""
    payload = _payload(data, front)
    if payload.get("front") != front:
        raise ValueError(Errors.E021.format(found=payload.get("front"), kind=front))
    labels = serialize.field(payload, "labels", list)
    if not labels or not all(is_label(label) for label in labels):
        raise ValueError(Errors.E152.format(label=labels))
    check_distinct(labels, owner)
    K = len(labels)
    allowed = serialize.check_array(payload, "allowed", np.bool_, (K + 1, K))
    settings = {k: v for k, v in serialize.field(payload, "params", dict).items()
                if k in BoostParams.__dataclass_fields__}  # (older files kept a 'scheduler': where they trained)
    try:
        params = BoostParams(**settings)
    except (TypeError, ValueError) as err:
        raise ValueError(Errors.E111.format(err=err)) from None
    rounds = _rounds(payload.get("rounds", 0), "rounds")
    serialize.field(payload, "features", dict)
    cols = columns(payload, params)
    fill = np.full(cols.n_variables, -1, dtype=np.int32) if cols.fill is None else cols.fill
    if "fill" in payload:
        fill = serialize.check_array(payload, "fill", np.int32, (cols.n_variables,))
    if np.any((fill < -1) | (fill >= cols.n_features)):
        raise ValueError(Errors.E112)
    stage1 = None
    if params.stack_window:  # a stacked model: its first stage's trees read the front end's columns
        first = serialize.field(payload, "stage1", dict)
        first_rounds = _rounds(first.get("rounds"), "stage1.rounds")
        first_params = dataclasses.replace(params, stack_window=0)
        stage1 = SequenceModel(labels, allowed, first_params, cols.n_features, cols.numeric, fill, _trees(
            serialize.field(first, "ensemble", dict), K, cols.n_features, cols.numeric, first_params), first_rounds)
    model = SequenceModel(labels, allowed, params, cols.n_features, cols.numeric, fill, None, rounds, stage1)
    model.ensemble = _trees(serialize.field(payload, "ensemble", dict), K, model.n_columns, model.tree_numeric, params)
    return Loaded(model, cols.state, serialize.field(payload, "settings", dict))


def _rounds(value, key: str) -> int:
    """A model file's count of rounds, checked (E110 names ``key``)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(Errors.E110.format(key=key, type_name="non-negative int", cfg=value))
    return value


def _trees(arrays: dict, n_labels: int, n_atoms: int, numeric: NumericIndex, params: BoostParams) -> Ensemble:
    """A model file's trees over ``n_atoms`` columns, checked against the settings they were grown with."""
    ensemble = serialize.load_ensemble(arrays, n_labels, n_atoms, numeric)
    if (params.missing == "surrogate") != (ensemble.n_surrogates > 0):
        raise ValueError(Errors.E108.format(missing=params.missing, n_surrogates=ensemble.n_surrogates))
    if params.shared_trees != ensemble.shared:
        raise ValueError(Errors.E170.format(setting=params.shared_trees,
                                            kind="shared" if ensemble.shared else "per-label"))
    return ensemble


def _payload(data: bytes, front: str) -> dict:
    """The file's payload in this schema: a version 5 file's as it is, an older file's through legacy_payload."""
    envelope = serialize.envelope(data, MODEL_KIND)
    kind = envelope["kind"]
    if kind != MODEL_KIND:
        legacy = {old: name for name, old in FRONT_ENDS.items()}
        if not isinstance(kind, str) or kind not in legacy:
            raise ValueError(Errors.E021.format(found=kind, kind=front))
        return legacy_payload(legacy[kind], serialize.payload(envelope))
    return serialize.payload(envelope)


def legacy_payload(front: str, old: dict) -> dict:
    """A format version 1-4 file's payload in this schema. The component's kept its labels, rounds and settings
    in ``cfg``, its featurizer in ``features``, its missing-value table in ``impute``; the estimator's kept its
    settings, labels (``classes``), rounds (``best_round``) and feature map side by side."""
    out = {"front": front, "allowed": old.get("allowed"), "params": old.get("params"),
           "ensemble": old.get("ensemble")}
    if front == "component":
        cfg = old.get("cfg") if isinstance(old.get("cfg"), dict) else {}
        out.update(labels=cfg.get("labels"), rounds=cfg.get("rounds", 0), features=old.get("features"),
                   settings={key: value for key, value in cfg.items() if key not in ("labels", "rounds")})
        if isinstance(out["params"], dict) and isinstance(out["ensemble"], dict):  # the trees' kind is the model's
            out["params"] = {**out["params"],
                             "shared_trees": "vector" in out["ensemble"] or "vector_ptr" in out["ensemble"]}
        if "impute" in old:  # (the component reads it: Columns.fill)
            out["impute"] = old["impute"]
        return out
    settings = ("n_rounds", "decode", "patience", "early_stopping", "validation_fraction")
    features = ("variables", "feature_var", "impute", "indicator", "numeric_keys", "numeric_uppers", "numeric_base",
                "window")
    out.update(labels=old.get("classes"), rounds=old.get("best_round", 0),
               settings={key: old[key] for key in settings if key in old},
               features={"names": old.get("features"), **{key: old[key] for key in features if key in old}})
    return out


def resolved_patience(n_validation: int) -> int:
    """The rounds a fit waits for a better validation score when its patience is not given: DEFAULT_PATIENCE, or
    SMALL_DEV_PATIENCE where the validation data has fewer than SMALL_DEV positions (SMALL_DEV_PATIENCE's
    reason)."""
    return SMALL_DEV_PATIENCE if n_validation < SMALL_DEV else DEFAULT_PATIENCE


def check_distinct(labels: Sequence, owner: str) -> None:
    """E155 for a label listed twice (labels that read the same as text are one label to a model file)."""
    seen = set()
    for label in labels:
        if str(label) in seen:
            raise ValueError(Errors.E155.format(label=label, name=owner))
        seen.add(str(label))


def is_label(label) -> bool:
    """A label a model can hold: a string or an integer (not a bool)."""
    return isinstance(label, (str, int, np.integer)) and not isinstance(label, (bool, np.bool_))
