"""How spaCy's update() / finish_update() calls become boosting rounds (see pipe.py's docstring for the rules).

spaCy hands a component batches of examples, copied every step; a TreeCRF round is a full-gradient pass over the
corpus. RoundFeeder keeps what a pass has collected so far, one entry per example: its content digest
(``example_digest``; spaCy's copies cannot be told apart by identity) and the example itself, or None where the
current Trainer already holds a sequence with that content (its rows are then taken from the trainer, not made
again). It decides when a round's gradient pass runs and reuses the Trainer, with its cached potentials, while
the corpus is unchanged. It knows nothing of Docs beyond the digests: the component makes trainers for it.
"""
import hashlib
from typing import Callable, List, Optional, Tuple

import numpy as np
from spacy.attrs import DEP, ENT_IOB, ENT_TYPE, LEMMA, ORTH, POS, TAG
from spacy.tokens import Token
from spacy.training import Example

from .engine import booster as boost
from .feature_tests import MISSING_EXT, stored_token_values

INPUT_ATTRS = [ORTH, TAG, POS, LEMMA, DEP, ENT_IOB, ENT_TYPE]  # what the featurizer may read from a predicted doc
Entry = Tuple[bytes, Optional[Example]]


def extensions_read(featurizer) -> Tuple[Tuple[str, ...], List[str], bytes]:
    """The Token extensions ``featurizer`` reads (and the missing marker), split into those whose values spaCy
    stores in user_data and those it computes, and a salt of their names and defaults (part of the content)."""
    read = list(getattr(featurizer, "attrs", [])) + list(getattr(featurizer, "numeric_attrs", []))
    names = [MISSING_EXT] + list(dict.fromkeys(a[2:] for a in read if a.startswith("_.")))
    specs = {name: Token.get_extension(name) for name in names if Token.has_extension(name)}
    stored = tuple(name for name, (_, method, getter, _) in specs.items() if method is None and getter is None)
    computed = [name for name in specs if name not in stored]
    defaults = [repr(specs[name][0]) for name in stored]
    return stored, computed, repr((stored, computed, defaults)).encode("utf8")


def example_digest(eg: Example, gold_bytes: Callable, featurizer, read: Tuple[Tuple[str, ...], List[str], bytes]
                   ) -> bytes:
    """A content key of one example: what the featurizer reads of the predicted doc, the reference's words and
    gold (``gold_bytes``: the target's), and the extension values read (``read``: extensions_read's; values kept
    in user_data are hashed from one pass over it, only computed extensions are read token by token)."""
    stored, computed, salt = read
    h = hashlib.blake2b(salt, digest_size=16)
    h.update(eg.predicted.to_array(INPUT_ATTRS).tobytes())
    ref = eg.reference
    h.update(ref.to_array([ORTH]).tobytes())
    h.update(gold_bytes(ref))
    h.update(repr(stored_token_values(eg.predicted, stored)).encode("utf8"))
    if computed:
        h.update(repr([[t._.get(name) for name in computed] for t in eg.predicted]).encode("utf8"))
    tensor = eg.predicted.tensor
    if getattr(featurizer, "tensor", False) and getattr(tensor, "size", 0):  # a numeric source then
        h.update(np.ascontiguousarray(tensor if isinstance(tensor, np.ndarray) else tensor.get()).tobytes())
    return h.digest()


class RoundFeeder:
    """One training run's pass state. ``round_every``: "corpus" (a round per pass of ``corpus_size`` examples)
    or "batch"; ``rounds_per_pass``: rounds fitted at each finish_update that has a gradient pass."""

    def __init__(self, round_every: str, rounds_per_pass: int):
        self.round_every = round_every
        self.rounds_per_pass = rounds_per_pass
        self.corpus_size = 0
        self.forget()

    def forget(self) -> None:
        """No trainer and no pass under way: the next update starts a pass that makes its trainer anew."""
        self.trainer: Optional[boost.Trainer] = None
        self.trainer_key: Optional[tuple] = None
        self.trainer_seqs = {}  # the trainer's sequence of each content digest
        self.pending: List[Entry] = []  # this pass's entries so far
        self.primed: List[Entry] = []  # initialize()'s corpus, for the first round
        self.next_pass: List[Entry] = []  # the first round's batch, which opens pass 2
        self.passes = None  # the gradient pass the next finish_update fits on
        self.steps = 0  # finish_update() calls: spaCy's training steps
        self.eval_every = 0  # spaCy's eval_frequency where initialize() was given its nlp (see update)
        self.fresh_round = False  # a round fitted since spaCy's last evaluation

    def held(self, keep_all: bool) -> dict:
        """The digests whose rows the trainer holds ({} with ``keep_all``: a trainer on a cluster keeps its rows on
        the workers, so there every example is kept)."""
        return {} if keep_all else self.trainer_seqs

    def update(self, batch: List[Entry], training_set: Callable[[List[Example]], boost.TrainingSet],
               make: Callable[[boost.TrainingSet], boost.Trainer], check: Callable[[], object]) -> Optional[float]:
        """Keep the batch's entries; once a round's worth is kept run the gradient pass over all of them (on
        trainer_for's trainer: ``training_set`` makes the rows of examples, ``make`` a trainer over rows) and
        return the loss; before that, only ``check`` the batch's gold labels, and run an evaluation's round where
        one is due (pipe.py)."""
        pending = self.pending + batch
        if self.primed and len(batch) < self.corpus_size:
            # the first round: on the corpus initialize() saw (and what this batch adds to it); this batch begins
            # the next pass, so that passes stay spaCy's epochs
            primed = {digest for digest, _ in self.primed}
            pending = self.primed + [entry for entry in batch if entry[0] not in primed]
            self.next_pass = batch
        self.primed = []
        if self.round_every == "corpus" and len(pending) < self.corpus_size:
            check()
            self.pending = pending
            if self.evaluation_follows() and not self.fresh_round and self.passes is None and self.trainer is not None:
                self.passes = self.trainer.gradient_pass()  # the corpus of the last pass
                return -self.passes.objective
            return None
        trainer = self.trainer_for(pending, training_set, make)
        self.passes = trainer.gradient_pass()
        self.pending = pending
        return -self.passes.objective

    def evaluation_follows(self) -> bool:
        """Whether spaCy's loop evaluates after this step's finish_update ([training] eval_frequency)."""
        return self.eval_every > 0 and self.steps % self.eval_every == 0

    def finish(self, fit_round: Callable[[Optional[object]], None]) -> None:
        """rounds_per_pass rounds (``fit_round(passes)``; passes None: the trainer runs its own) on what update
        kept, once it ran the first one's gradient pass; counts spaCy's steps."""
        if self.passes is not None:
            passes = self.passes
            ends_pass = self.round_every == "batch" or len(self.pending) >= self.corpus_size
            # the trainer holds all the rounds need, so what a finished pass kept of its examples goes first; an
            # evaluation's round leaves the pass under way as it is
            going_on = [] if ends_pass else self.pending
            self.pending = []
            self.passes = None
            for _ in range(self.rounds_per_pass):
                fit_round(passes)
                passes = None
            self.pending = self.next_pass if ends_pass else going_on
            self.next_pass = []
            self.fresh_round = True
        if self.evaluation_follows():
            self.fresh_round = False
        self.steps += 1

    def trainer_for(self, entries: List[Entry], training_set: Callable[[List[Example]], boost.TrainingSet],
                    make: Callable[[boost.TrainingSet], boost.Trainer]) -> boost.Trainer:
        """The Trainer over the entries' examples, in the order of their digests: the current one where the
        contents are its own (its cached potentials go on); else a new one over the rows the current trainer holds
        and ``training_set``'s rows of the other examples (their potentials start from the model's)."""
        order = sorted(range(len(entries)), key=lambda i: entries[i][0])
        key = tuple(entries[i][0] for i in order)
        if key == self.trainer_key:
            return self.trainer
        fresh = [entries[i][1] for i in order if entries[i][1] is not None]
        is_held = np.array([entries[i][1] is None for i in order], dtype=bool)
        parts, pick = [], np.empty(len(order), dtype=np.int64)  # pick: the sequences of the parts, in key order
        if is_held.any():
            parts.append(self.trainer.training_set())
            pick[is_held] = [self.trainer_seqs[entries[i][0]] for i in order if entries[i][1] is None]
        if fresh or not parts:
            part = training_set(fresh)
            pick[~is_held] = sum(len(p.seq_starts) - 1 for p in parts) + np.arange(len(fresh))
            parts.append(part)
        rows = boost.picked_sequences(parts, pick) if is_held.any() else parts[0]
        if self.trainer is not None:  # its memory goes before a new one is made
            self.trainer.close()
        try:
            trainer = make(rows)
        except Exception:  # the old trainer is closed: a pass that kept only digests of its rows cannot go on
            self.forget()
            raise
        self.trainer, self.trainer_key = trainer, key
        self.trainer_seqs = {digest: q for q, digest in enumerate(key)}
        return trainer
