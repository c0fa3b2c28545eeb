"""The `treecrf` spaCy component: a TreeCRF behind spaCy's TrainablePipe API.

Training in spaCy's loop, with ``round_every = "corpus"`` (the default): `update()` gathers spaCy's batches until
it holds as many examples as the training corpus `initialize()` saw, then runs the loss's gradient pass over all
of them (forward-backward for the CRF loss, whose value is the negative log-likelihood); the next
`finish_update()` fits a boosting round on it. So a round is a full-gradient round over the corpus, the paper's,
whatever spaCy's batch size, and the potentials of the same examples are cached from round to round (a batch of
a few hundred words would otherwise make a round of its own, from potentials evaluated afresh, and the model
would grow by a round per step). In spaCy's loop a round also comes with the first update, on the corpus
initialize() read, and before each of spaCy's evaluations that would otherwise see no new round (update()), so
every row of its training log is a new round. With ``round_every = "batch"`` every update() / finish_update()
pair is a round on that batch: stochastic boosting, and the same thing for a batch as large as the corpus. With
``rounds_per_pass`` n, finish_update() fits n rounds instead of one, each from its own gradient pass over the
cached potentials the round before moved (the full-batch rounds of the estimator).
"""
import copy
import dataclasses
import os
import warnings
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
from spacy import util
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import registry
from spacy.vocab import Vocab
from thinc.api import Model

from . import engine
from .engine import booster as boost
from .engine import crf, missing, serialize
from .engine.ensemble import PARTITION_ROWS
from .engine.settings import BOOST_DEFAULTS, DECODERS, BoostParams
from .engine.missing import INDICATOR_STRATEGIES, MissingRows
from .engine.numeric import NumericIndex, numeric_index
from .engine.predict_partition import partition_potentials
from .engine.memory import check_training_memory
from .engine.rules import Explanation
from .doc_scores import (NBEST_KEY, SCORES_KEY, bio_span_arrays, per_sequence, sentence_starts, spans_per_sequence,
                         token_key)
from .doc_scores import bio_spans, sequence_bio_spans  # noqa: F401 (imported from here by scripts and tests)
from .features import readable_test, window_features  # noqa: F401 (registers the features)
from .errors import Errors, Warnings
from .model import Columns, EngineRows, SequenceModel, load
from .round_feeder import Entry, RoundFeeder, example_digest, extensions_read
from .targets import Target, make_target, target_class

ROUND_EVERY = ("corpus", "batch")
MAX_ROUNDS_PER_PASS = 100  # beyond this a pass is the estimator's whole fit: a typo more likely than a plan
MAX_MODEL_BYTES = 2 ** 32  # a model file larger than this is refused before it is read


@registry.architectures("spacy_treecrf.NoParams.v1")
def build_no_params_model() -> Model:
    """The trees live in the component, not in Thinc: a parameter-free model keeps spaCy's loop and
    `use_params` (averaging) harmless."""
    return Model("treecrf_no_params", lambda model, X, is_train: (X, lambda dY: dY))


@registry.scorers("spacy_treecrf.scorer.v1")
def make_treecrf_scorer() -> Callable:
    return treecrf_score


def treecrf_score(examples: Iterable[Example], *, target: str = "ner", spans_key: str = "chunks",
                  token_attr: str = "", **kwargs) -> Dict[str, object]:
    """ents_p/r/f (+ per type), spans_<key>_p/r/f, tag_acc, pos_acc or <extension>_acc, by target (targets.py)."""
    return make_target(target, spans_key, token_attr).score(examples, **kwargs)


# Where `spacy train` sends a treecrf component's rounds: a Dask scheduler's address, read when a training pass
# starts. An environment variable, not a setting: where a pipeline trained is not part of it (its config.cfg and
# model files never hold the address).
SCHEDULER_ENV = "SPACY_TREECRF_SCHEDULER"


@registry.misc("spacy_treecrf.booster.v1")
def make_booster(*, max_leaves: Union[int, str] = BOOST_DEFAULTS.max_leaves,
                 shrinkage: Union[float, str] = BOOST_DEFAULTS.shrinkage,
                 learning_rate: float = BOOST_DEFAULTS.learning_rate,
                 min_samples_leaf: float = BOOST_DEFAULTS.min_samples_leaf, min_gain: float = BOOST_DEFAULTS.min_gain,
                 subsample: float = BOOST_DEFAULTS.subsample, colsample: float = BOOST_DEFAULTS.colsample,
                 trim: float = BOOST_DEFAULTS.trim, random_state: int = BOOST_DEFAULTS.random_state,
                 n_threads: int = BOOST_DEFAULTS.n_threads, loss: str = BOOST_DEFAULTS.loss,
                 missing: str = BOOST_DEFAULTS.missing, leaf_values: str = BOOST_DEFAULTS.leaf_values,
                 label_splits: str = BOOST_DEFAULTS.label_splits, shared_trees: bool = BOOST_DEFAULTS.shared_trees,
                 l1: float = BOOST_DEFAULTS.l1, stack_window: int = BOOST_DEFAULTS.stack_window,
                 scheduler: str = "") -> BoostParams:
    """The boosting settings of a treecrf component ([components.treecrf.booster]): BoostParams' fields, with its
    defaults (engine/settings.py, where each is defined and described once; TreeCRF takes the same).
    ``scheduler``: a key that configs and pipelines from before SCHEDULER_ENV hold, ignored with W008 where it
    names one (a pipeline trained on a cluster loads anywhere; PipeConfigs keeps it out of new configs)."""
    if scheduler:
        warnings.warn(Warnings.W008.format(scheduler=scheduler, env=SCHEDULER_ENV))
    return BoostParams(max_leaves=max_leaves, shrinkage=shrinkage, learning_rate=learning_rate,
                       min_samples_leaf=min_samples_leaf, min_gain=min_gain, subsample=subsample, colsample=colsample,
                       trim=trim, random_state=random_state, n_threads=n_threads, loss=loss, missing=missing,
                       leaf_values=leaf_values, label_splits=label_splits, shared_trees=shared_trees, l1=l1,
                       stack_window=stack_window)


DEFAULT_CONFIG = {
    "model": {"@architectures": "spacy_treecrf.NoParams.v1"},
    "features": {"@misc": "spacy_treecrf.window_features.v1"},
    "booster": {"@misc": "spacy_treecrf.booster.v1"},
    "target": "ner",
    "spans_key": "chunks",
    "token_attr": "",
    "decode": "viterbi",
    "constrain_bio": True,
    "store_scores": False,
    "n_best": 0,
    "overwrite": True,
    "preset_outside": False,
    "round_every": "corpus",
    "rounds_per_pass": 1,
    "scorer": {"@scorers": "spacy_treecrf.scorer.v1"},
}


def make_treecrf(nlp: Language, name: str, model: Model, features, booster: BoostParams, target: str,
                 spans_key: str, token_attr: str, decode: str, constrain_bio: bool, store_scores: bool,
                 n_best: int, overwrite: bool, preset_outside: bool, round_every: str, rounds_per_pass: int,
                 scorer: Optional[Callable], max_leaves: Optional[Union[int, str]] = None,
                 shrinkage: Optional[Union[float, str]] = None, learning_rate: Optional[float] = None,
                 min_samples_leaf: Optional[float] = None, min_gain: Optional[float] = None,
                 subsample: Optional[float] = None,
                 colsample: Optional[float] = None, trim: Optional[float] = None, random_state: Optional[int] = None,
                 n_threads: Optional[int] = None, loss: Optional[str] = None, missing: Optional[str] = None,
                 leaf_values: Optional[str] = None, label_splits: Optional[str] = None,
                 shared_trees: Optional[bool] = None, l1: Optional[float] = None) -> "TreeCRFComponent":
    """A sequence labeller trained by gradient tree boosting. Score weights default to NER's; set
    [training.score_weights] for other targets (the configs/ files do). The parameters after ``scorer`` are the
    boosting settings in their old place, directly under [components.treecrf], as configs and saved pipelines
    from before the [booster] block have them: the ones given (not None) are applied, with W001 (spaCy accepts
    only a factory's parameters, so they stay parameters; PipeConfigs keeps them out of the configs spaCy
    writes)."""
    moved = {key: value for key, value in locals().items() if key in LEGACY_KEYS and value is not None}
    if type(getattr(nlp, "_pipe_configs", None)) is dict:
        nlp._pipe_configs = PipeConfigs(nlp._pipe_configs)
    if moved:
        warnings.warn(Warnings.W001.format(name=name, settings=sorted(moved)), stacklevel=2)
        booster = dataclasses.replace(booster, **moved)
    return TreeCRFComponent(nlp.vocab, model, name, features=features, target=target, spans_key=spans_key,
                            token_attr=token_attr, params=booster, decode=decode, constrain_bio=constrain_bio,
                            store_scores=store_scores, n_best=n_best, overwrite=overwrite,
                            preset_outside=preset_outside, round_every=round_every, rounds_per_pass=rounds_per_pass,
                            scorer=scorer)


LEGACY_KEYS = tuple(BoostParams.__dataclass_fields__) + ("scheduler",)  # (see PipeConfigs)
Language.factory("treecrf", assigns=["doc.ents", "doc.spans", "token.tag", "token.pos"],
                 default_config=DEFAULT_CONFIG,
                 default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None}
                 )(make_treecrf)


class PipeConfigs(dict):
    """The configs spaCy records of a pipeline's components (Language._pipe_configs: what `nlp.config`,
    `spacy init config` and a saved config.cfg show), without the keys a treecrf component accepts only for configs
    written before they moved and that a config left unset: the boosting settings directly under
    [components.<name>] (None) and [components.<name>.booster] scheduler (""). spaCy fills every parameter of a
    factory into its record, and a config that still has those keys must load (W001, W008), so they stay
    parameters; this keeps them out of what is written, so a new config holds only the settings the component
    reads."""

    def __setitem__(self, name: str, config) -> None:
        if isinstance(config, dict) and config.get("factory") == "treecrf":
            for key in LEGACY_KEYS:
                if key in config and config[key] is None:
                    del config[key]
            booster = config.get("booster")
            if isinstance(booster, dict) and booster.get("scheduler") == "":
                del booster["scheduler"]
        super().__setitem__(name, config)



class ReadableTests(Sequence):
    """The feature columns' tests in words (features.readable_test), missing indicators included, made one at a
    time as rules and explanations read them (a model has tens of thousands of columns; a rule reads a few)."""

    def __init__(self, featurizer, indicators: bool):
        self.featurizer = featurizer
        self.n_columns = featurizer.n_features
        self.variables = featurizer.variable_names() if indicators else []

    def __len__(self) -> int:
        """The columns and indicators; a numeric bin's "x > u" test lies past them (at len + its id)."""
        return self.n_columns + len(self.variables)

    def __getitem__(self, col: int) -> str:
        if col >= len(self):
            return readable_test(self.featurizer.threshold_name(col - len(self), above=True))
        if col >= self.n_columns:
            return readable_test(f"missing:{self.variables[col - self.n_columns]}")
        return readable_test(self.featurizer.feature_name(col))


class TreeCRFComponent(TrainablePipe):
    """The trainable pipe over one SequenceModel (model.py): its ``target`` (targets.py) reads gold labels and
    writes predictions; the featurizer turns Docs into rows; the RoundFeeder turns spaCy's steps into rounds."""

    def __init__(self, vocab: Vocab, model: Model, name: str = "treecrf", *, features, target: str = "ner",
                 spans_key: str = "chunks", token_attr: str = "", params: Optional[BoostParams] = None,
                 decode: str = "viterbi", constrain_bio: bool = True, store_scores: bool = False, n_best: int = 0,
                 overwrite: bool = True, preset_outside: bool = False, round_every: str = "corpus",
                 rounds_per_pass: int = 1, scorer: Optional[Callable] = treecrf_score):
        self.task: Target = make_target(target, spans_key, token_attr)
        if decode not in DECODERS:
            raise ValueError(Errors.E004.format(decoders=DECODERS, decode=decode))
        if round_every not in ROUND_EVERY:
            raise ValueError(Errors.E171.format(choices=ROUND_EVERY, value=round_every))
        _check_n_best(n_best)
        _check_rounds_per_pass(rounds_per_pass)
        _check_stacking(params, name, round_every)
        self.vocab = vocab
        self.model = model
        self.name = name
        self.featurizer = features
        self.params = params or BoostParams()
        self.scorer = scorer
        self.cfg = {"target": target, "spans_key": spans_key, "token_attr": token_attr, "decode": decode,
                    "constrain_bio": constrain_bio, "store_scores": store_scores, "n_best": n_best,
                    "overwrite": overwrite, "preset_outside": preset_outside, "round_every": round_every,
                    "rounds_per_pass": rounds_per_pass, "labels": [], "rounds": 0, "corpus_size": 0}
        self.crf: Optional[SequenceModel] = None  # the trained (or initialized) model
        self.feeder = RoundFeeder(round_every, rounds_per_pass)
        self._unseen_warned: set = set()  # gold labels outside cfg["labels"] already warned about

    # ---- labels and state ------------------------------------------------------------------------------------
    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        return list(self.cfg["labels"])

    def add_label(self, label: str) -> int:
        if self.crf is not None and self.crf.n_trees:
            raise ValueError(Errors.E105.format(label=label, name=self.name))
        if label in self.cfg["labels"]:
            return 0
        self.cfg["labels"].append(label)
        return 1

    @property
    def target(self) -> str:
        return self.cfg["target"]

    @property
    def ensemble(self):
        """The trees (None before initialize)."""
        return None if self.crf is None else self.crf.ensemble

    @property
    def allowed(self) -> Optional[np.ndarray]:
        """Which label may follow which ((labels + 1) x labels; None before initialize)."""
        return None if self.crf is None else self.crf.allowed

    def has_gold(self, doc: Doc) -> bool:
        """Whether the reference ``doc`` holds any gold annotation of this component's target."""
        return self.task.has_gold(doc)

    def _gold(self, eg: Example) -> List[Optional[str]]:
        """Reference labels moved onto the predicted tokens; misaligned tokens are unknown (summed over)."""
        ref = self.task.reference_labels(eg.reference)
        if len(eg.predicted) == len(eg.reference) and all(
                a.text == b.text for a, b in zip(eg.predicted, eg.reference)):
            return ref
        x2y, y2x = eg.alignment.x2y, eg.alignment.y2x
        gold: List[Optional[str]] = []
        for i, n in enumerate(x2y.lengths):
            j = int(x2y[i][0]) if n == 1 else -1
            gold.append(ref[j] if j >= 0 and y2x.lengths[j] == 1 else None)
        return gold

    # ---- initialize ------------------------------------------------------------------------------------------
    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None,
                   labels: Optional[Sequence[str]] = None, lexicons: Optional[Dict[str, str]] = None,
                   resume_from: Optional[str] = None):
        """Collect the labels and freeze the feature index; no boosting happens here. ``resume_from`` (a trained
        pipeline's directory holding a component of this name, or that component's own directory): go on
        training that model instead of starting over (see _resume)."""
        validate_get_examples(get_examples, "TreeCRFComponent.initialize")
        examples = list(get_examples())
        if resume_from is not None:
            resume(self, examples, resume_from, nlp, labels)
            return
        labels = labels if labels is not None else self._found_labels(examples)
        if not labels:
            raise ValueError(Errors.E005.format(target=self.target))
        if not any(self.task.has_gold(eg.reference) for eg in examples):
            raise ValueError(Errors.E219.format(name=self.name, n=len(examples), target=self.target))
        if not os.environ.get(SCHEDULER_ENV):  # (on a cluster the positions' rows live on the workers)
            check_training_memory(sum(len(eg.predicted) for eg in examples), len(labels), f"Component '{self.name}'")
        self.task.check_labels(labels, self.name)
        self.cfg.update(labels=list(labels), rounds=0, corpus_size=len(examples))
        # spaCy's training docs are these, unless components before it annotate them during training
        in_spacy_loop = self.cfg["round_every"] == "corpus" and nlp is not None and \
            not nlp.config.get("training", {}).get("annotating_components")
        if nlp is not None:
            check_score_weights(nlp, self)
            if self.cfg["round_every"] == "corpus" and not in_spacy_loop:
                check_pass_length(nlp, self, examples)
        if lexicons:
            self.featurizer.lexicons = {**self.featurizer.lexicons, **lexicons}
        docs = [eg.predicted for eg in examples]
        own = self._own_labels(examples)
        self.featurizer.initialize(docs, **({"labels": own["own_labels"]} if own else {}))
        impute = None
        if self.params.missing == "imputation":
            indptr, indices, _, found = self.featurizer(docs, with_missing=True, **own)
            impute = missing.most_common_columns(indptr, indices, self._missing_rows(found))
        self.crf = SequenceModel(labels, self.task.allowed(labels, self.cfg["constrain_bio"]), self.params,
                                 self.n_features, self._numeric(), self._fill(impute))
        self._forget_training()
        if in_spacy_loop:
            self.feeder.primed = self._entries(examples)
            self.feeder.eval_every = max(0, int(nlp.config["training"].get("eval_frequency") or 0))

    def score_keys(self) -> List[str]:
        """The scores this component's scorer gives (the keys [training.score_weights] can weigh)."""
        return self.task.score_keys()

    # ---- rows ------------------------------------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        """The featurizer's columns, plus one indicator column per variable with missing='indicator'."""
        extra = self.featurizer.n_variables if self.params.missing in INDICATOR_STRATEGIES else 0
        return self.featurizer.n_features + extra

    def _numeric(self) -> NumericIndex:
        """The engine's view of the featurizer's numeric columns (engine/numeric.py), among all n_features."""
        return numeric_index(self.n_features, *self.featurizer.numeric_columns())

    def _fill(self, impute: Optional[np.ndarray]) -> np.ndarray:
        """The model's fill table: per featurizer variable the imputed column ('imputation'), its indicator column
        (after the featurizer's: 'indicator', 'learned_direction'), else -1."""
        V = self.featurizer.n_variables
        if self.params.missing in INDICATOR_STRATEGIES:
            return (self.featurizer.n_features + np.arange(V)).astype(np.int32)
        return np.full(V, -1, dtype=np.int32) if impute is None else impute.astype(np.int32)

    def _missing_rows(self, found) -> MissingRows:
        """MissingRows of the featurizer's missing_rows result ``found`` (its call's with_missing item)."""
        indptr, indices, known = found
        return MissingRows(indptr, indices, self.featurizer.feature_variables(), self.featurizer.n_variables, known)

    def _own_labels(self, examples: List[Example], gold: Optional[List[List[Optional[str]]]] = None
                    ) -> Dict[str, List[List[Optional[str]]]]:
        """The featurizer's keyword for training docs: their gold labels (``gold``, if the caller has them), which
        a label dictionary leaves out of their own rows (empty for a featurizer without one)."""
        if not getattr(self.featurizer, "label_dictionary", False):
            return {}
        return {"own_labels": gold if gold is not None else [self._gold(eg) for eg in examples]}

    def _rows(self, docs: List[Doc], own: Optional[Dict[str, List[List[Optional[str]]]]] = None) -> EngineRows:
        """The docs' rows as the trees read them (SequenceModel.engine_rows); ``own``: ``_own_labels`` of training
        docs."""
        indptr, indices, seq_starts, found = self.featurizer(docs, with_missing=True, **(own or {}))
        return self.crf.engine_rows(indptr, indices, seq_starts, self._missing_rows(found))

    def _check_initialized(self):
        if self.crf is None:
            raise ValueError(Errors.E008.format(name=self.name))

    # ---- training --------------------------------------------------------------------------------------------
    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """Keep the examples (RoundFeeder: only the content of those the trainer does not hold already); once a
        round's worth is kept (round_every "corpus": as many examples as the training corpus initialize() saw;
        "batch": this batch) run the gradient pass over all of them for the next finish_update() (for loss="crf"
        the loss is the NLL; it is reported by the update that completes a round). A batch with a gold label the
        transition constraints forbid is refused here and nothing of it is kept. In spaCy's loop every row of its
        training log is a new round (the module docstring says how)."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "TreeCRFComponent.update")
        self._check_initialized()
        loss = self.feeder.update(self._entries(examples), self._training_set, self._trainer,
                                  lambda: self._checked_labels(examples))
        if loss is not None:
            losses[self.name] += loss
        return losses

    def finish_update(self, sgd=None) -> None:
        """rounds_per_pass boosting rounds on what update() kept, once it has run the first one's gradient pass;
        each later one runs its own over the trainer's potentials, which every round moves."""
        def fit_round(passes) -> None:
            self.feeder.trainer.fit_round(self.crf.ensemble, passes=passes)
            self.crf.rounds += 1
            self.cfg["rounds"] = self.crf.rounds
        self.feeder.finish(fit_round)

    def _forget_training(self) -> None:
        """No trainer and no pass under way: the next update() starts a pass that makes its trainer anew."""
        self.feeder.forget()
        self.feeder.corpus_size = self.cfg["corpus_size"]

    def _entries(self, examples: List[Example]) -> List[Entry]:
        """(content digest, example) per example, the example None where the trainer holds a sequence with that
        content (round_feeder.py); on a cluster every example is kept."""
        read = extensions_read(self.featurizer)
        held = self.feeder.held(bool(os.environ.get(SCHEDULER_ENV)))
        digests = [example_digest(eg, self.task.gold_bytes, self.featurizer, read) for eg in examples]
        return [(d, None if d in held else eg) for d, eg in zip(digests, examples)]

    def _training_set(self, examples: List[Example]) -> boost.TrainingSet:
        """The rows and checked gold label ids of training examples."""
        gold, y = self._checked_labels(examples)
        rows = self._rows([eg.predicted for eg in examples], self._own_labels(examples, gold))
        return boost.TrainingSet(rows.indptr, rows.indices, y, rows.seq_starts, rows.missing)

    def _trainer(self, rows: boost.TrainingSet) -> boost.Trainer:
        """A Trainer over training rows, on the cluster SCHEDULER_ENV names if it names one."""
        return self.crf.trainer(EngineRows(rows.indptr, rows.indices, rows.seq_starts, rows.missing_rows), rows.y,
                                os.environ.get(SCHEDULER_ENV) or None)

    def _found_labels(self, examples: List[Example]) -> List[str]:
        """The labels the examples' gold annotation holds (targets.py: for BIO, with O and the B- of every I-)."""
        return self.task.found_labels({label for eg in examples for label in self.task.reference_labels(
            eg.reference) if label})

    def _checked_labels(self, examples: List[Example]) -> Tuple[List[List[Optional[str]]], np.ndarray]:
        """The gold labels of the examples (per example, on the predicted tokens) and their label ids, one array
        (-1: unknown); a label that follows one the transition constraints forbid is an error naming the doc."""
        gold = [self._gold(eg) for eg in examples]
        y = self.crf.label_ids(gold)
        unseen = {label for labels in gold for label in labels if label is not None and label not in self.crf.labels}
        if unseen - self._unseen_warned:  # trained as unknown; once per label
            self._unseen_warned |= unseen
            warnings.warn(Warnings.W007.format(name=self.name, labels=sorted(unseen), known=self.cfg["labels"]))
        seq_starts = np.cumsum([0] + [len(labels) for labels in gold], dtype=np.int64)
        self.crf.check_gold(y, seq_starts, lambda q, i: "doc {!r}, token {} ({!r})".format(
            examples[q].predicted.text[:60], i, examples[q].predicted[i].text), fix=(
            f"constrain_bio = false for component '{self.name}'"))
        return gold, y

    def get_loss(self, examples, scores):
        raise NotImplementedError(Errors.E103)

    # ---- prediction ------------------------------------------------------------------------------------------
    def predict(self, docs: Iterable[Doc]):
        """Label ids, marginals and forward-backward pieces (SequenceModel.decode's Decoded), the docs' offsets."""
        self._check_initialized()
        docs = list(docs)
        rows = self._rows(docs)
        known = None if self.cfg["overwrite"] else self.task.batch_known(docs, self.labels,
                                                                          self.cfg["preset_outside"])
        decoded = self.crf.decode(rows, self.cfg["decode"], self.cfg["store_scores"], self.cfg["n_best"], known)
        return {"ids": decoded.ids, "seq_starts": rows.seq_starts, "gamma": decoded.gamma, "decoded": decoded}

    def set_annotations(self, docs: Iterable[Doc], scores) -> None:
        docs = list(docs)
        starts, decoded = np.asarray(scores["seq_starts"], dtype=np.int64), scores["decoded"]
        labels = self.cfg["labels"]
        bounds = starts.tolist()
        tags = self.task.tag_values(labels, decoded.ids, self.vocab)
        offsets = span_p = None  # (sliced per doc in the loop below: see BatchSpans)
        if self.task.bio:
            spans = bio_span_arrays(decoded.ids, starts, labels, sentence_starts(docs, starts))
            offsets = spans_per_sequence(spans, starts)
            if decoded.fb is not None and self.cfg["store_scores"]:  # (marginal decoding runs forward-backward too)
                owner, start, end, kind, kinds = spans
                first, inside = self.task.span_label_ids(labels, kinds)
                span_p = per_sequence(owner, self.crf.span_probabilities(
                    decoded, starts, owner, start, end, first[kind], inside[kind]), len(docs))
        gamma = decoded.gamma.astype(np.float32) if self.cfg["store_scores"] and decoded.gamma is not None else None
        # What a doc keeps is one dict and one tuple of arrays per component (and the SpanGroup with its attrs):
        # every container a doc keeps is walked by each of the process's full garbage collections, and enough of
        # them set one off. A tuple per span field and a dict per extension made 12 a doc, and a full collection
        # (~120 ms) in most passes of spacy evaluate over CoNLL-2003 test; 5 now.
        label_tuple = tuple(labels)
        for q, doc in enumerate(docs):
            a, b = bounds[q], bounds[q + 1]
            if decoded.nbest is not None:  # Doc._.treecrf_nbest's analyses (doc_scores.nbest_getter)
                paths, logp = decoded.nbest
                kept = np.flatnonzero(np.isfinite(logp[q])).tolist()
                doc.user_data.setdefault(NBEST_KEY, {})[self.name] = (
                    self.target, self.task.spans_key_of(self.name),
                    [[labels[k] for k in paths[r, a:b].tolist()] for r in kept], np.exp(logp[q, kept]).tolist())
            spans = None
            if self.task.bio:
                spans = self.task.write_spans(doc, offsets.of(q), None if span_p is None else span_p[q],
                                              self.cfg["overwrite"], self.name)
            else:
                self.task.write(doc, tags[a:b], self.cfg["overwrite"], self.name)
            if gamma is not None:  # Token._.treecrf_marginals' and Span._.treecrf_prob's values (SCORES_KEY)
                span_fields = (None,) * 4 if span_p is None else (
                    np.array([span.start_char for span in spans], np.int64),
                    np.array([span.end_char for span in spans], np.int64),
                    np.array([span.label_ for span in spans], np.str_), span_p[q].copy())  # (not the SpanGroup's)
                doc.user_data.setdefault(SCORES_KEY, {})[self.name] = (
                    label_tuple, gamma[a:b].copy(), *span_fields, token_key(doc),
                    tuple(float(field[q]) for field in decoded.confidence))  # (Doc._.treecrf_confidence's)

    # ---- inspection ------------------------------------------------------------------------------------------
    def rules(self, top: int = 10, min_support: float = 5.0) -> List[Tuple[str, str, float, float]]:
        """The strongest root-to-leaf paths as (label, conjunction of tests in words, value, support), none that
        the transition constraints forbid (engine/rules.py)."""
        self._check_initialized()
        return self.crf.rules(self._test_names(), top, min_support)

    def explain(self, doc: Doc, labels: Optional[List[str]] = None) -> List[Explanation]:
        """Why each token of ``doc`` gets its label: per token an Explanation (label, previous label, the
        potential of that transition, and the trees' leaves that make it up, each with its path in words and its
        contribution; the contributions add up to the potential). ``labels``: the labels to explain, one per
        token (default: what the component predicts for the doc; for ner / spans the BIO labels)."""
        self._check_initialized()
        if not isinstance(doc, Doc):
            raise TypeError(Errors.E177.format(kind=type(doc).__name__))
        rows = self._rows([doc])
        index = {label: k for k, label in enumerate(self.cfg["labels"])}
        if labels is None:
            ids = self.crf.decode(rows, self.cfg["decode"]).ids
        elif isinstance(labels, str) or len(labels) != len(doc) or not all(label in index for label in labels):
            raise ValueError(Errors.E178.format(n=len(doc), labels=labels, known=self.cfg["labels"]))
        else:
            ids = np.array([index[label] for label in labels], dtype=np.int64)
        return self.crf.explain(rows, ids, self._test_names())

    def explain_span(self, span: Span) -> List[Explanation]:
        """The Explanations of a span's tokens labelled as the span says (B- and I- of its label), the doc's
        other tokens as the component predicts them (ner / spans): what each tree added to the span, token by
        token; their potentials' sum is the span's share of the labelling's score."""
        if not self.task.bio:
            raise ValueError(Errors.E184.format(name=self.name, target=self.target))
        if not isinstance(span, Span) or len(span) == 0 or not span.label_:
            raise ValueError(Errors.E216.format(name=self.name, span=repr(span)))
        doc = span.doc
        labels = [self.cfg["labels"][k] for k in self.predict([doc])["ids"]]
        labels[span.start:span.end] = [f"B-{span.label_}"] + [f"I-{span.label_}"] * (len(span) - 1)
        if span.end < len(doc) and labels[span.end] == f"I-{span.label_}":  # the span ends where it says
            labels[span.end] = "O"
        return self.explain(doc, labels)[span.start:span.end]

    def _test_names(self) -> "ReadableTests":
        return ReadableTests(self.featurizer, self.crf.params.missing in INDICATOR_STRATEGIES)

    # ---- serialization ---------------------------------------------------------------------------------------
    def to_bytes(self, *, exclude=tuple()) -> bytes:
        self._check_initialized()
        settings = {key: value for key, value in self.cfg.items() if key not in ("labels", "rounds")}
        return self.crf.to_bytes("component", self.featurizer.to_dict(), settings)

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "TreeCRFComponent":
        """The learned state of a saved component: labels, rounds, the featurizer's columns, the trees and the
        missing-value strategy they were grown with (model.load, then this component's checks: read_component).
        Settings stay the ones this component was made with (its config, with whatever a user set at load time):
        decode, store_scores, overwrite, spans_key, token_attr, constrain_bio and the boosting settings; the
        file's are only checked. Everything is checked before anything is replaced: a refused model leaves the
        component as it was."""
        crf_model, featurizer, params, settings = read_component(self, bytes_data)
        self.featurizer, self.params = featurizer, params
        self.crf = crf_model.with_settings(self.task.allowed(crf_model.labels, self.cfg["constrain_bio"]), params)
        self.cfg.update(labels=list(crf_model.labels), rounds=crf_model.rounds,
                        corpus_size=settings.get("corpus_size", 0))
        self._forget_training()  # a pass begun on the old model is dropped
        self._warm_up()
        return self

    def _warm_up(self) -> None:
        """Ready the model as part of loading it, not in the first call: the lexeme tests of its known words and
        the compiled prediction kernels, by tagging a one-token doc (the small-batch kernels), and where numba's
        cache holds the partition kernel a doc of PARTITION_ROWS tokens (a load from the cache; compiling it is
        most of a cold start: benchmarks/results/cold_start.md). Where the cache lasts only as long as the process
        (engine.KERNEL_CACHE_PERSISTS), kernels are left to the first call."""
        if hasattr(self.featurizer, "prepare_known_words"):
            self.featurizer.prepare_known_words(self.vocab)
        if not engine.KERNEL_CACHE_PERSISTS:
            return
        self(Doc(self.vocab, words=["."]))
        if engine.in_kernel_cache(partition_potentials):
            self(Doc(self.vocab, words=["."] * PARTITION_ROWS))

    def to_disk(self, path, *, exclude=tuple()) -> None:
        path = util.ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "model.msgpack").write_bytes(self.to_bytes())

    def from_disk(self, path, *, exclude=tuple()) -> "TreeCRFComponent":
        """Read model.msgpack: only a regular file (a link to a device or a pipe would be read forever or
        block) of at most MAX_MODEL_BYTES."""
        path = util.ensure_path(path) / "model.msgpack"
        if not path.exists():
            raise ValueError(Errors.E109.format(path=path, name=self.name))
        if not path.is_file():
            raise ValueError(Errors.E162.format(path=path))
        if path.stat().st_size > MAX_MODEL_BYTES:
            raise ValueError(Errors.E163.format(path=path, size=path.stat().st_size, limit=MAX_MODEL_BYTES))
        try:
            return self.from_bytes(path.read_bytes())
        except ValueError as err:
            raise ValueError(Errors.E113.format(err=err, path=path)) from None


def read_component(component: TreeCRFComponent, data: bytes
                   ) -> Tuple[SequenceModel, object, BoostParams, Dict[str, object]]:
    """A component's model file, read by model.load and checked against ``component``: the same target, labels
    as its target checks them, settings as its constructor checks them, the featurizer state its featurizer
    reads. Returns the model, the featurizer, the boosting settings (this component's, with the file's missing
    strategy and kind of trees: what its trees were grown with) and the file's settings; W002 / W011 where they
    differ from the component's config."""
    def columns(payload: dict, params: BoostParams) -> Columns:
        featurizer = copy.copy(component.featurizer)  # from_dict replaces its state, never mutates it in place
        featurizer.from_dict(payload["features"])
        V = featurizer.n_variables
        n = featurizer.n_features + (V if params.missing in INDICATOR_STRATEGIES else 0)
        fill = None
        if "impute" in payload:  # (files from before the model's fill table: the imputation table)
            fill = serialize.check_array(payload, "impute", np.int32, (V,))
            if np.any((fill < -1) | (fill >= featurizer.n_features)):
                raise ValueError(Errors.E112)
            if params.missing in INDICATOR_STRATEGIES:
                fill = (featurizer.n_features + np.arange(V)).astype(np.int32)
        return Columns(n, numeric_index(n, *featurizer.numeric_columns()), V, featurizer, fill)

    loaded = load(data, "component", f"component '{component.name}'", columns)
    settings = loaded.settings
    component.task.check_saved(settings.get("target"), component.name)
    labels = loaded.model.labels
    if not all(isinstance(label, str) for label in labels):
        raise ValueError(Errors.E107.format(labels=labels))
    component.task.check_labels(labels, component.name)
    _check_loaded_cfg({key: settings[key] for key in component.cfg if key in settings})
    featurizer, trained = loaded.state, loaded.model.params
    if trained.missing != component.params.missing:
        warnings.warn(Warnings.W002.format(name=component.name, trained=trained.missing,
                                           configured=component.params.missing))
    asked, kept = component.featurizer.config(), featurizer.config()
    replaced = {f"features.{key}": (kept[key], asked[key]) for key in kept
                if key != "lexicons" and key in asked and kept[key] != asked[key]}  # (lexicons: see features.py)
    for key in ("shared_trees", "stack_window"):  # (what the trees are: the file's)
        if getattr(trained, key) != getattr(component.params, key):
            replaced[f"booster.{key}"] = (getattr(trained, key), getattr(component.params, key))
    if replaced:
        warnings.warn(Warnings.W011.format(name=component.name, settings=", ".join(
            f"{key} = {model!r} (configured: {configured!r})" for key, (model, configured) in replaced.items())))
    params = dataclasses.replace(component.params, missing=trained.missing, shared_trees=trained.shared_trees,
                                 stack_window=trained.stack_window)
    return loaded.model, featurizer, params, settings


def resume(component: TreeCRFComponent, examples: List[Example], resume_from, nlp: Optional[Language], labels
           ) -> None:
    """Initialize ``component`` from a trained model (initialize's ``resume_from``) to go on training it on
    ``examples``: its trees, labels, feature index and rounds, with the component's settings (as from_disk).
    Labels the examples bring (or ``labels`` names) that the model lacks join it, their trees starting from zero
    (SequenceModel.extended: the old trees keep their meaning); the feature index grows with the examples' words
    and labels (featurizer.extend: new columns after the old); a round is again one pass over these examples."""
    path = util.ensure_path(resume_from)
    component.from_disk(path if (path / "model.msgpack").exists() else path / component.name)
    old = component.cfg["labels"]
    wanted = list(labels) if labels is not None else component._found_labels(examples)
    labels = old + sorted(set(wanted) - set(old))
    component.task.check_labels(labels, component.name)
    if nlp is not None:
        check_score_weights(nlp, component)
    moved = component.featurizer.extend([eg.predicted for eg in examples],
                                        component._own_labels(examples).get("own_labels"))
    if component.params.missing in INDICATOR_STRATEGIES:  # the indicator columns come after the featurizer's
        added = component.featurizer.n_features - len(moved)
        moved = np.concatenate([moved, len(moved) + added + np.arange(component.featurizer.n_variables)])
    impute = component.crf.fill
    impute = np.where(impute >= 0, moved[np.maximum(impute, 0)], -1).astype(np.int32)
    component.crf = component.crf.extended(labels, moved, component.n_features, component._numeric(),
                                           component.task.allowed(labels, component.cfg["constrain_bio"]),
                                           component._fill(impute))
    component.cfg.update(labels=labels, corpus_size=len(examples))
    if nlp is not None and component.cfg["round_every"] == "corpus":
        check_pass_length(nlp, component, examples)
    component._forget_training()


def check_score_weights(nlp: Language, component: TreeCRFComponent) -> None:
    """Warn when [training.score_weights] weighs only scores that no component of nlp gives, as after `spacy
    init config` (whose weights are the factory's NER ones) and a change of target: spaCy would keep the
    untrained model of step 0 as model-best and stop when patience runs out."""
    weights = nlp.config.get("training", {}).get("score_weights") or {}
    weighted = {key for key, value in weights.items() if value}
    shown = {key for key, value in weights.items() if value is not None}  # the log's columns
    given = set(component.score_keys())
    for name in nlp.pipe_names:
        pipe = nlp.get_pipe(name)
        if pipe is not component:
            given |= set(pipe.score_keys() if isinstance(pipe, TreeCRFComponent)
                         else nlp.get_pipe_meta(name).default_score_weights)
    if weighted and not weighted & given:
        mine = component.score_keys()
        warnings.warn(Warnings.W005.format(name=component.name, weighted=sorted(weighted), target=component.target,
                                           keys=mine, key=mine[0], unset=" ".join(
                                               f"--training.score_weights.{key} null"
                                               for key in sorted(shown - given))))


def check_pass_length(nlp: Language, component: TreeCRFComponent, examples: List[Example]) -> None:
    """Warn when spaCy's loop, as nlp's [training] block configures it, would stop before the first round or
    between rounds: a round takes a pass over the corpus, as many steps as [training.batcher] makes of it
    (counted here on the first pass, whose batches are the smallest a size schedule makes)."""
    training = nlp.config.get("training", {})
    limits = {key: training.get(key) for key in ("patience", "max_steps")}
    limits = {key: value for key, value in limits.items() if isinstance(value, int) and value > 0}
    if not limits or not isinstance(training.get("batcher"), dict):
        return
    try:
        batcher = registry.resolve({"batcher": training["batcher"]})["batcher"]
        steps = sum(1 for _ in batcher(examples))
    except (ValueError, TypeError, KeyError):  # an unresolved reference or a batcher of other input: no estimate
        return
    for key, value in limits.items():
        if steps >= value:
            warnings.warn(Warnings.W004.format(name=component.name, docs=len(examples), words=sum(
                len(eg.predicted) for eg in examples), steps=steps, key=key, value=value, more=2 * steps + 1))


def _check_n_best(n_best) -> None:
    if isinstance(n_best, bool) or not isinstance(n_best, int) or not 0 <= n_best <= crf.MAX_NBEST:
        raise ValueError(Errors.E180.format(maximum=crf.MAX_NBEST, value=n_best))


def _check_rounds_per_pass(rounds) -> None:
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS_PER_PASS:
        raise ValueError(Errors.E200.format(maximum=MAX_ROUNDS_PER_PASS, value=rounds))


def _check_stacking(params: Optional[BoostParams], name: str, round_every: str) -> None:
    """E233 where a stacked model (its first stage fitted once, on the corpus) would fit a round per batch."""
    if params is not None and params.stack_window and round_every == "batch":
        raise ValueError(Errors.E233.format(name=name))


def _check_loaded_cfg(cfg: dict) -> None:
    """The settings a model file carries, checked as the constructor checks them."""
    kinds = {"spans_key": str, "token_attr": str, "decode": str, "constrain_bio": bool, "store_scores": bool,
             "n_best": int, "overwrite": bool, "preset_outside": bool, "round_every": str, "rounds_per_pass": int,
             "corpus_size": int}
    for key, typ in kinds.items():
        if key in cfg and (not isinstance(cfg[key], typ) or (typ is int and isinstance(cfg[key], bool))):
            raise ValueError(Errors.E110.format(key=key, type_name=typ.__name__, cfg=cfg[key]))
    if "decode" in cfg and cfg["decode"] not in DECODERS:
        raise ValueError(Errors.E104.format(decoders=DECODERS, cfg=cfg['decode']))
    if "round_every" in cfg and cfg["round_every"] not in ROUND_EVERY:
        raise ValueError(Errors.E171.format(choices=ROUND_EVERY, value=cfg["round_every"]))
    if "n_best" in cfg:
        _check_n_best(cfg["n_best"])
    if "rounds_per_pass" in cfg:
        _check_rounds_per_pass(cfg["rounds_per_pass"])
    if cfg.get("corpus_size", 0) < 0:  # (the rounds are the model's: model.load checks them)
        raise ValueError(Errors.E110.format(key="corpus_size", type_name="non-negative int", cfg=cfg["corpus_size"]))
    target_class(cfg["target"]).check_settings(cfg.get("spans_key", "x"), cfg.get("token_attr", "x"))
