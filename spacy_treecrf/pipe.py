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
import hashlib
import inspect
import os
import warnings
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from spacy import util
from spacy.language import Language
from spacy.parts_of_speech import IDS as UPOS_IDS
from spacy.pipeline import TrainablePipe
from spacy.scorer import Scorer
from spacy.attrs import DEP, ENT_IOB, ENT_TYPE, IDX, LEMMA, LENGTH, ORTH, POS, TAG
from spacy.tokens import Doc, Span, SpanGroup, Token
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import registry
from spacy.vocab import Vocab
from thinc.api import Model

from . import engine
from .engine import booster as boost
from .engine import crf, missing, serialize
from .engine.booster import DECODERS, BoostParams, Ensemble
from .engine.missing import ENGINE_STRATEGIES, INDICATOR_STRATEGIES, N_SURROGATES, MissingRows
from .engine.numeric import NumericIndex, numeric_index
from .engine.predict_partition import partition_potentials
from .engine.memory import check_training_memory
from .engine.rules import Explanation, ensemble_rules, explain_sequence
from .engine.transitions import bio_allowed, first_forbidden
from .engine.trees import no_missing
from .features import (MISSING_EXT, readable_test, stored_token_values,  # noqa: F401 (registers the features)
                       window_features)
from .errors import Errors, Warnings

TARGETS = ("ner", "spans", "tag", "pos", "token_attr")
BIO_TARGETS = ("ner", "spans")
TOKEN_ARRAY_ATTRS = {"tag": TAG, "pos": POS}  # targets written as a token attribute array
ROUND_EVERY = ("corpus", "batch")
MAX_ROUNDS_PER_PASS = 100  # beyond this a pass is the estimator's whole fit: a typo more likely than a plan
MARGINALS_EXT = "treecrf_marginals"
SPAN_PROB_EXT = "treecrf_prob"
NBEST_EXT = "treecrf_nbest"
# doc.user_data[SCORES_KEY]: {component name: (labels, marginals (tokens x labels, float32), and for ner / spans the
# predicted spans' start_char, end_char, label and probability as arrays (else None each), then the tokenization
# the marginals are of (token_key))}, from store_scores
SCORES_KEY, NBEST_KEY = ("treecrf", "scores"), ("treecrf", "nbest")
MAX_MODEL_BYTES = 2 ** 32  # a model file larger than this is refused before it is read
INPUT_ATTRS = [ORTH, TAG, POS, LEMMA, DEP, ENT_IOB, ENT_TYPE]  # what the featurizer may read from a predicted doc


@registry.architectures("spacy_treecrf.NoParams.v1")
def build_no_params_model() -> Model:
    """The trees live in the component, not in Thinc: a parameter-free model keeps spaCy's loop and
    `use_params` (averaging) harmless."""
    return Model("treecrf_no_params", lambda model, X, is_train: (X, lambda dY: dY))


@registry.scorers("spacy_treecrf.scorer.v1")
def make_treecrf_scorer() -> Callable:
    return treecrf_score


def score_attr(target: str, spans_key: str, token_attr: str) -> str:
    """What treecrf_score names its scores after: <attr>_p/r/f for BIO targets, <attr>_acc for the others."""
    return {"ner": "ents", "spans": f"spans_{spans_key}", "token_attr": token_attr}.get(target, target)


def treecrf_score(examples: Iterable[Example], *, target: str = "ner", spans_key: str = "chunks",
                  token_attr: str = "", **kwargs) -> Dict[str, object]:
    """ents_p/r/f (+ per type), spans_<key>_p/r/f, tag_acc, pos_acc or <extension>_acc, by target."""
    attr = score_attr(target, spans_key, token_attr)
    if target == "ner":
        return Scorer.score_spans(examples, attr, **kwargs)
    if target == "spans":
        return Scorer.score_spans(examples, attr, getter=lambda doc, attr: doc.spans.get(spans_key, []),
                                  has_annotation=lambda doc: spans_key in doc.spans, allow_overlap=True, **kwargs)
    if target in ("tag", "pos"):
        return Scorer.score_token_attr(examples, attr, **kwargs)
    return Scorer.score_token_attr(examples, attr, getter=lambda token, attr: token._.get(attr),
                                   missing_values={None, ""}, **kwargs)


# Where `spacy train` sends a treecrf component's rounds: a Dask scheduler's address, read when a training pass
# starts. An environment variable, not a setting: where a pipeline trained is not part of it (its config.cfg and
# model files never hold the address).
SCHEDULER_ENV = "SPACY_TREECRF_SCHEDULER"


def _booster_signature() -> inspect.Signature:
    """make_booster's parameters: BoostParams' fields, their types and defaults (the settings are written once,
    there), and the legacy ``scheduler`` key that configs written before it moved to SCHEDULER_ENV hold."""
    return inspect.Signature([inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                                annotation=f.type) for f in dataclasses.fields(BoostParams)]
                             + [inspect.Parameter("scheduler", inspect.Parameter.KEYWORD_ONLY, default="",
                                                  annotation=str)],
                             return_annotation=BoostParams)


@registry.misc("spacy_treecrf.booster.v1")
def make_booster(scheduler: str = "", **settings) -> BoostParams:
    """The boosting settings of a treecrf component ([components.treecrf.booster]), the same as TreeCRF's. A
    ``scheduler`` there (configs and pipelines from before SCHEDULER_ENV) is ignored, with W008 when it names
    one: a pipeline trained on a cluster loads anywhere."""
    if scheduler:
        warnings.warn(Warnings.W008.format(scheduler=scheduler, env=SCHEDULER_ENV))
    return BoostParams(**settings)


make_booster.__signature__ = _booster_signature()


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
    "round_every": "corpus",
    "rounds_per_pass": 1,
    "scorer": {"@scorers": "spacy_treecrf.scorer.v1"},
}


def make_treecrf(nlp: Language, name: str, model: Model, features, booster: BoostParams, target: str,
                 spans_key: str, token_attr: str, decode: str, constrain_bio: bool, store_scores: bool,
                 n_best: int, overwrite: bool, round_every: str, rounds_per_pass: int, scorer: Optional[Callable],
                 **moved) -> "TreeCRFComponent":
    """A sequence labeller trained by gradient tree boosting. Score weights default to NER's; set
    [training.score_weights] for other targets (the configs/ files do). ``moved``: boosting settings written
    directly under [components.treecrf], as configs and saved pipelines from before the [booster] block have
    them (None: not given)."""
    moved = {key: value for key, value in moved.items() if value is not None}
    if type(getattr(nlp, "_pipe_configs", None)) is dict:
        nlp._pipe_configs = PipeConfigs(nlp._pipe_configs)
    if moved:
        booster = with_moved_settings(booster, moved, name)
    return TreeCRFComponent(nlp.vocab, model, name, features=features, target=target, spans_key=spans_key,
                            token_attr=token_attr, params=booster, decode=decode, constrain_bio=constrain_bio,
                            store_scores=store_scores, n_best=n_best, overwrite=overwrite, round_every=round_every,
                            rounds_per_pass=rounds_per_pass, scorer=scorer)


LEGACY_KEYS = tuple(_booster_signature().parameters)  # the boosting settings' old place, and scheduler's
# the factory's parameters: its own, then every boosting setting in its old place (default None: not given)
make_treecrf.__signature__ = inspect.signature(make_treecrf).replace(parameters=[
    p for p in inspect.signature(make_treecrf).parameters.values() if p.kind != p.VAR_KEYWORD] + [
    p.replace(default=None, annotation=Optional[p.annotation]) for p in _booster_signature().parameters.values()])
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


def with_moved_settings(booster: BoostParams, moved: dict, name: str) -> BoostParams:
    """The booster with settings given in the old place (directly under [components.<name>]) applied, with a
    warning that says where they go now."""
    warnings.warn(Warnings.W001.format(name=name, settings=sorted(moved)), stacklevel=3)
    return dataclasses.replace(booster, **moved)


def token_key(doc: Doc) -> np.ndarray:
    """The tokenization scores are stored with (uint64, (tokens + 1) x 3): the doc's text length, then each
    token's start character, length and text (ORTH). A retokenized doc (merge_entities, a split) or another doc
    given the same user_data (Span.as_doc(copy_user_data=True)) no longer matches it token for token."""
    return np.concatenate([np.array([[len(doc.text), 0, 0]], dtype=np.uint64),
                           doc.to_array([IDX, LENGTH, ORTH]).reshape(len(doc), 3)])


def stored_row(entry: tuple, token: Token) -> Optional[int]:
    """The row of ``token`` in a stored marginals array: the token with the same start, length and text in a doc
    of the same text length as when they were stored; None where there is none (a token merged or split since,
    a doc the scores were copied to), so no token is given another token's scores. (Entries without a
    token_key, from before it: the index.)"""
    if len(entry) < 7:
        return token.i if token.i < len(entry[1]) else None
    key = entry[6]
    if len(key) == 0 or int(key[0, 0]) != len(token.doc.text):
        return None
    want = (token.idx, len(token), token.orth)
    i = token.i + 1
    if i < len(key) and tuple(key[i].tolist()) == want:  # an unchanged tokenization: the same index
        return token.i
    j = int(np.searchsorted(key[1:, 0], token.idx))
    return j if j < len(key) - 1 and tuple(key[j + 1].tolist()) == want else None


def marginals_getter(token: Token) -> Optional[Dict[str, Dict[str, float]]]:
    """Token._.treecrf_marginals: {component name: {label: probability}} from every treecrf that stored scores
    for this token (stored_row: not for a token retokenized since)."""
    stored = token.doc.user_data.get(SCORES_KEY)
    if not stored:
        return None
    out = {}
    for name, entry in stored.items():
        row = stored_row(entry, token)
        if row is not None:
            out[name] = dict(zip(entry[0], map(float, entry[1][row])))
    return out or None


def span_prob_getter(span: Span) -> Optional[float]:
    """Span._.treecrf_prob: the probability under the CRF that exactly this span carries exactly this label
    (the label over exactly these tokens, closed by a label other than its I-), as the treecrf component that
    predicted it stored it (store_scores); None for a span no treecrf predicted. The values live in
    doc.user_data (per component: the spans' character offsets, labels and probabilities), so they travel with
    Doc.to_bytes / DocBin and nlp.pipe(n_process=...), and a span is matched by its characters and label, not by
    the object: doc.ents, doc.spans[key] and doc.char_span(...) of the same span give the same value. Where two
    treecrf components predicted the same span with the same label, the first in the pipeline answers."""
    stored = span.doc.user_data.get(SCORES_KEY)
    if not stored:
        return None
    start, end, label = span.start_char, span.end_char, span.label_
    for entry in stored.values():
        starts, ends, labels, probs = entry[2:6]
        if starts is None or (len(entry) > 6 and int(entry[6][0, 0]) != len(span.doc.text)):
            continue  # (no spans stored, or the scores of another doc's text: copied user_data)
        hits = np.flatnonzero((np.asarray(starts) == start) & (np.asarray(ends) == end))
        for i in hits.tolist():
            if labels[i] == label:
                return float(probs[i])
    return None


def nbest_getter(doc: Doc) -> Optional[Dict[str, List[dict]]]:
    """Doc._.treecrf_nbest: {component name: its n most probable analyses of the doc, best first}, from every
    treecrf with n_best > 0. An analysis is {"tags": one label per token, "probability": P(tags | doc) under the
    CRF (exact: k-best Viterbi and the forward pass's Z), "spans": for ner / spans a SpanGroup of its spans
    (named after the component, or spans_key), else None}. Fewer than n where the transition constraints allow
    fewer. Kept in doc.user_data, so they travel with Doc.to_bytes, DocBin and n_process."""
    stored = doc.user_data.get(NBEST_KEY)
    if not stored:
        return None
    out = {}
    for name, (target, key, analyses, probs) in stored.items():
        out[name] = [{"tags": list(tags), "probability": p,
                      "spans": SpanGroup(doc, name=key, attrs={"probability": p},
                                         spans=[Span(doc, a, b, label) for a, b, label in bio_spans(tags)])
                      if target in BIO_TARGETS else None}
                     for tags, p in zip(analyses, probs)]
    return out


if not Token.has_extension(MARGINALS_EXT):
    Token.set_extension(MARGINALS_EXT, getter=marginals_getter)
if not Span.has_extension(SPAN_PROB_EXT):
    Span.set_extension(SPAN_PROB_EXT, getter=span_prob_getter)
if not Doc.has_extension(NBEST_EXT):
    Doc.set_extension(NBEST_EXT, getter=nbest_getter)


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
    def __init__(self, vocab: Vocab, model: Model, name: str = "treecrf", *, features, target: str = "ner",
                 spans_key: str = "chunks", token_attr: str = "", params: Optional[BoostParams] = None,
                 decode: str = "viterbi", constrain_bio: bool = True, store_scores: bool = False, n_best: int = 0,
                 overwrite: bool = True, round_every: str = "corpus", rounds_per_pass: int = 1,
                 scorer: Optional[Callable] = treecrf_score):
        if target not in TARGETS:
            raise ValueError(Errors.E001.format(target=target, targets=TARGETS))
        if target == "spans" and not spans_key:
            raise ValueError(Errors.E002)
        if target == "token_attr" and not token_attr:
            raise ValueError(Errors.E003)
        if decode not in DECODERS:
            raise ValueError(Errors.E004.format(decoders=DECODERS, decode=decode))
        if round_every not in ROUND_EVERY:
            raise ValueError(Errors.E171.format(choices=ROUND_EVERY, value=round_every))
        _check_n_best(n_best)
        _check_rounds_per_pass(rounds_per_pass)
        self.vocab = vocab
        self.model = model
        self.name = name
        self.featurizer = features
        self.params = params or BoostParams()
        self.scorer = scorer
        self.cfg = {"target": target, "spans_key": spans_key, "token_attr": token_attr, "decode": decode,
                    "constrain_bio": constrain_bio, "store_scores": store_scores, "n_best": n_best,
                    "overwrite": overwrite, "round_every": round_every,
                    "rounds_per_pass": rounds_per_pass, "labels": [], "rounds": 0, "corpus_size": 0}
        if target == "token_attr" and not Token.has_extension(token_attr):
            Token.set_extension(token_attr, default=None)
        self.ensemble: Optional[Ensemble] = None
        self.allowed: Optional[np.ndarray] = None
        self.impute: Optional[np.ndarray] = None  # per featurizer variable: the imputed column (-1: none)
        self._trainer: Optional[boost.Trainer] = None
        self._trainer_key: Optional[tuple] = None
        self._trainer_seqs: Dict[bytes, int] = {}  # the trainer's sequence of each content digest
        self._pending: List[Tuple[bytes, Optional[Example]]] = []  # this pass's _entries so far
        self._primed: List[Tuple[bytes, Optional[Example]]] = []  # initialize()'s corpus, for the first round
        self._next_pass: List[Tuple[bytes, Optional[Example]]] = []  # the first round's batch, which opens pass 2
        self._steps, self._eval_every, self._fresh_round = 0, 0, False  # (_forget_training)
        self._passes = None
        self._unseen_warned: set = set()  # gold labels outside cfg["labels"] already warned about

    # ---- labels -------------------------------------------------------------------------------------------
    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        return list(self.cfg["labels"])

    def add_label(self, label: str) -> int:
        if self.ensemble is not None and self.ensemble.n_trees:
            raise ValueError(Errors.E105.format(label=label, name=self.name))
        if label in self.cfg["labels"]:
            return 0
        self.cfg["labels"].append(label)
        return 1

    @property
    def target(self) -> str:
        return self.cfg["target"]

    def _reference_labels(self, doc: Doc) -> List[Optional[str]]:
        """The gold label of each reference token, None where the annotation is missing."""
        target = self.target
        if target == "ner":
            return [None if t.ent_iob_ == "" else ("O" if t.ent_iob_ == "O" else f"{t.ent_iob_}-{t.ent_type_}")
                    for t in doc]
        if target == "spans":
            key = self.cfg["spans_key"]
            if key not in doc.spans:
                return [None] * len(doc)
            labels: List[Optional[str]] = ["O"] * len(doc)
            owner: List[Optional[Span]] = [None] * len(doc)
            for span in doc.spans[key]:
                for i in range(span.start, span.end):
                    if owner[i] is not None:
                        raise ValueError(Errors.E007.format(doc=repr(doc.text[:60]), a=repr(owner[i]),
                                                            b=repr(span), where=f"doc.spans[{key!r}]"))
                    owner[i] = span
                    labels[i] = ("B-" if i == span.start else "I-") + span.label_
            return labels
        if target == "tag":
            return [t.tag_ or None for t in doc]
        if target == "pos":
            return [t.pos_ or None for t in doc]
        name = self.cfg["token_attr"]
        return [None if t._.get(name) in (None, "") else str(t._.get(name)) for t in doc]

    def has_gold(self, doc: Doc) -> bool:
        """Whether the reference ``doc`` holds any gold annotation of this component's target (a scorer gives 0
        or nothing where none does)."""
        if self.target == "spans":
            return self.cfg["spans_key"] in doc.spans
        return any(label is not None for label in self._reference_labels(doc))

    def _gold(self, eg: Example) -> List[Optional[str]]:
        """Reference labels moved onto the predicted tokens; misaligned tokens are unknown (summed over)."""
        ref = self._reference_labels(eg.reference)
        if len(eg.predicted) == len(eg.reference) and all(
                a.text == b.text for a, b in zip(eg.predicted, eg.reference)):
            return ref
        x2y = eg.alignment.x2y
        y2x = eg.alignment.y2x
        gold: List[Optional[str]] = []
        for i, n in enumerate(x2y.lengths):
            j = int(x2y[i][0]) if n == 1 else -1
            gold.append(ref[j] if j >= 0 and y2x.lengths[j] == 1 else None)
        return gold

    # ---- initialize / update ---------------------------------------------------------------------------------
    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None,
                   labels: Optional[Sequence[str]] = None, lexicons: Optional[Dict[str, str]] = None,
                   resume_from: Optional[str] = None):
        """Collect the labels and freeze the feature index; no boosting happens here. ``resume_from`` (a trained
        pipeline's directory holding a component of this name, or that component's own directory): go on
        training that model instead of starting over (see _resume)."""
        validate_get_examples(get_examples, "TreeCRFComponent.initialize")
        examples = list(get_examples())
        if resume_from is not None:
            self._resume(examples, resume_from, nlp, labels)
            return
        labels = labels if labels is not None else self._found_labels(examples)
        if not labels:
            raise ValueError(Errors.E005.format(target=self.target))
        if not any(self.has_gold(eg.reference) for eg in examples):
            raise ValueError(Errors.E219.format(name=self.name, n=len(examples), target=self.target))
        if not os.environ.get(SCHEDULER_ENV):  # (on a cluster the positions' rows live on the workers)
            check_training_memory(sum(len(eg.predicted) for eg in examples), len(labels), f"Component '{self.name}'")
        check_labels(self.target, labels, self.name)
        self.cfg["labels"] = list(labels)
        self.cfg["rounds"] = 0
        self.cfg["corpus_size"] = len(examples)
        # spaCy's training docs are these, unless components before it annotate them during training
        in_spacy_loop = self.cfg["round_every"] == "corpus" and nlp is not None and \
            not nlp.config.get("training", {}).get("annotating_components")
        if nlp is not None:
            self._check_score_weights(nlp)
            if self.cfg["round_every"] == "corpus" and not in_spacy_loop:
                self._check_pass_length(nlp, examples)
        if lexicons:
            self.featurizer.lexicons = {**self.featurizer.lexicons, **lexicons}
        docs = [eg.predicted for eg in examples]
        own = self._own_labels(examples)
        self.featurizer.initialize(docs, **({"labels": own["own_labels"]} if own else {}))
        self.impute = np.full(self.featurizer.n_variables, -1, dtype=np.int32)
        if self.params.missing == "imputation":
            indptr, indices, _, found = self.featurizer(docs, with_missing=True, **own)
            self.impute = missing.most_common_columns(indptr, indices, self._missing_rows(found))
        self.allowed = self._transition_mask(labels)
        K = len(labels)
        self.ensemble = Ensemble(K + 1, K, N_SURROGATES if self.params.missing == "surrogate" else 0,
                                 shared=self.params.shared_trees)
        self.ensemble.set_numeric(self._numeric())
        self._forget_training()
        if in_spacy_loop:
            self._primed = self._entries(examples)
            self._eval_every = max(0, int(nlp.config["training"].get("eval_frequency") or 0))

    def score_keys(self) -> List[str]:
        """The scores this component's scorer gives, by target (the keys [training.score_weights] can weigh)."""
        attr = score_attr(self.target, self.cfg["spans_key"], self.cfg["token_attr"])
        return [f"{attr}_{m}" for m in ("f", "p", "r")] if self.target in BIO_TARGETS else [f"{attr}_acc"]

    def _check_score_weights(self, nlp: Language) -> None:
        """Warn when [training.score_weights] weighs only scores that no component of nlp gives, as after `spacy
        init config` (whose weights are the factory's NER ones) and a change of target: spaCy would keep the
        untrained model of step 0 as model-best and stop when patience runs out."""
        weights = nlp.config.get("training", {}).get("score_weights") or {}
        weighted = {key for key, value in weights.items() if value}
        shown = {key for key, value in weights.items() if value is not None}  # the log's columns
        given = set(self.score_keys())
        for name in nlp.pipe_names:
            pipe = nlp.get_pipe(name)
            if pipe is not self:
                given |= set(pipe.score_keys() if isinstance(pipe, TreeCRFComponent)
                             else nlp.get_pipe_meta(name).default_score_weights)
        if weighted and not weighted & given:
            mine = self.score_keys()
            warnings.warn(Warnings.W005.format(name=self.name, weighted=sorted(weighted), target=self.target,
                                               keys=mine, key=mine[0], unset=" ".join(
                                                   f"--training.score_weights.{key} null"
                                                   for key in sorted(shown - given))))

    def _check_pass_length(self, nlp: Language, examples: List[Example]) -> None:
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
                warnings.warn(Warnings.W004.format(name=self.name, docs=len(examples), words=sum(
                    len(eg.predicted) for eg in examples), steps=steps, key=key, value=value, more=2 * steps + 1))

    def _transition_mask(self, labels: Sequence[str]) -> np.ndarray:
        """Which label may follow which: BIO's rules for BIO targets with constrain_bio, else anything."""
        if self.target in BIO_TARGETS and self.cfg["constrain_bio"]:
            return bio_allowed(labels)
        return np.ones((len(labels) + 1, len(labels)), dtype=np.bool_)

    @property
    def n_features(self) -> int:
        """The featurizer's columns, plus one indicator column per variable with missing='indicator'."""
        extra = self.featurizer.n_variables if self.params.missing in INDICATOR_STRATEGIES else 0
        return self.featurizer.n_features + extra

    def _numeric(self) -> NumericIndex:
        """The engine's view of the featurizer's numeric columns (engine/numeric.py), among all n_features."""
        return numeric_index(self.n_features, *self.featurizer.numeric_columns())

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

    def _rows(self, docs: List[Doc], own: Optional[Dict[str, List[List[Optional[str]]]]] = None):
        """Feature rows, doc offsets and the missing variables for the engine (None once the strategy has put
        imputed or indicator columns in their place); ``own``: ``_own_labels`` of training docs."""
        indptr, indices, seq_starts, found = self.featurizer(docs, with_missing=True, **(own or {}))
        missing_rows = self._missing_rows(found)
        strategy = self.params.missing
        if strategy in ENGINE_STRATEGIES:
            return indptr, indices, seq_starts, missing_rows
        if missing_rows.any:
            n = self.featurizer.n_features
            table = self.impute if strategy == "imputation" else n + np.arange(missing_rows.n_vars, dtype=np.int32)
            indptr, indices = missing.fill_rows(indptr, indices, missing_rows, table, self.n_features)
        return indptr, indices, seq_starts, None

    def _check_initialized(self):
        if self.ensemble is None:
            raise ValueError(Errors.E008.format(name=self.name))

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """Keep the examples (_entries: only the content of those the trainer does not hold already); once a
        round's worth is kept (round_every "corpus": as many examples as the training corpus initialize() saw;
        "batch": this batch) run the gradient pass over all of them for the next finish_update() (for loss="crf"
        the loss is the NLL; it is reported by the update that completes a round). A batch with a gold label the
        transition constraints forbid is refused here and nothing of it is kept.

        In spaCy's loop (initialize() was given its nlp, round_every "corpus", and no [training]
        annotating_components change the docs), every row of spaCy's training log is a new round:
        - the first update fits the first round at once, on the corpus initialize() read (its batch then opens
          the first pass, so that passes stay spaCy's epochs), so spaCy's evaluation of step 0 scores a round;
        - an update of a step that spaCy evaluates after ([training] eval_frequency) runs the gradient pass of a
          round on the corpus of the last pass when no round has been fitted since the last evaluation (a pass of
          small batches can take longer than eval_frequency steps). Every round is a full-gradient round over
          the whole corpus either way."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "TreeCRFComponent.update")
        self._check_initialized()
        batch = self._entries(examples)
        pending = self._pending + batch
        if self._primed and len(batch) < self.cfg["corpus_size"]:
            # the first round: on the corpus initialize() saw (and what this batch adds to it); this batch begins
            # the next pass, so that passes stay spaCy's epochs
            primed = {digest for digest, _ in self._primed}
            pending = self._primed + [entry for entry in batch if entry[0] not in primed]
            self._next_pass = batch
        self._primed = []
        if self.cfg["round_every"] == "corpus" and len(pending) < self.cfg["corpus_size"]:
            self._checked_labels(examples)
            self._pending = pending
            if (self._evaluation_follows() and not self._fresh_round and self._passes is None
                    and self._trainer is not None):
                self._passes = self._trainer.gradient_pass()  # the corpus of the last pass
                losses[self.name] += -self._passes.objective
            return losses
        trainer = self._trainer_for(pending)
        self._passes = trainer.gradient_pass()
        self._pending = pending
        losses[self.name] += -self._passes.objective
        return losses

    def _evaluation_follows(self) -> bool:
        """Whether spaCy's loop evaluates after this step's finish_update ([training] eval_frequency)."""
        return self._eval_every > 0 and self._steps % self._eval_every == 0

    def finish_update(self, sgd=None) -> None:
        """rounds_per_pass boosting rounds on what update() kept, once it has run the first one's gradient pass;
        each later one runs its own over the trainer's potentials, which every round moves. Counts spaCy's steps
        (one finish_update each), for update()'s rounds before an evaluation."""
        if self._passes is not None:
            passes = self._passes
            ends_pass = self.cfg["round_every"] == "batch" or len(self._pending) >= self.cfg["corpus_size"]
            # the trainer holds all the rounds need, so what a finished pass kept of its examples goes first; an
            # evaluation's round leaves the pass under way as it is
            going_on = [] if ends_pass else self._pending
            self._pending = []
            self._passes = None
            for _ in range(self.cfg["rounds_per_pass"]):
                self._trainer.fit_round(self.ensemble, passes=passes)
                self.cfg["rounds"] += 1
                passes = None
            self._pending = self._next_pass if ends_pass else going_on
            self._next_pass = []
            self._fresh_round = True
        if self._evaluation_follows():
            self._fresh_round = False
        self._steps += 1

    def _digest(self, eg: Example, stored: Tuple[str, ...], computed: List[str], salt: bytes) -> bytes:
        """A content key of one example: spaCy copies examples every step, so identity cannot key the cache.
        Extension values kept in user_data (``stored``) are hashed from one pass over it; only ``computed``
        extensions (getters, methods) are read token by token. ``salt``: the extensions read and their
        defaults, which the rows depend on too."""
        h = hashlib.blake2b(salt, digest_size=16)
        h.update(eg.predicted.to_array(INPUT_ATTRS).tobytes())
        ref = eg.reference
        h.update(ref.to_array([ORTH]).tobytes())
        if self.target == "ner":
            h.update(ref.to_array([ENT_IOB, ENT_TYPE]).tobytes())
        elif self.target == "tag":
            h.update(ref.to_array([TAG]).tobytes())
        elif self.target == "pos":
            h.update(ref.to_array([POS]).tobytes())
        else:
            h.update(repr(self._reference_labels(ref)).encode("utf8"))
        h.update(repr(stored_token_values(eg.predicted, stored)).encode("utf8"))
        if computed:
            h.update(repr([[t._.get(name) for name in computed] for t in eg.predicted]).encode("utf8"))
        tensor = eg.predicted.tensor
        if getattr(self.featurizer, "tensor", False) and getattr(tensor, "size", 0):  # a numeric source then
            h.update(np.ascontiguousarray(tensor if isinstance(tensor, np.ndarray) else tensor.get()).tobytes())
        return h.digest()

    def _extensions_read(self) -> Tuple[Tuple[str, ...], List[str], list]:
        """The Token extensions the featurizer reads (and the missing marker), split into those whose values
        spaCy stores in user_data and those it computes, plus their defaults (part of the content too)."""
        read = list(getattr(self.featurizer, "attrs", [])) + list(getattr(self.featurizer, "numeric_attrs", []))
        names = [MISSING_EXT] + list(dict.fromkeys(a[2:] for a in read if a.startswith("_.")))
        specs = {name: Token.get_extension(name) for name in names if Token.has_extension(name)}
        stored = tuple(name for name, (_, method, getter, _) in specs.items() if method is None and getter is None)
        computed = [name for name in specs if name not in stored]
        return stored, computed, [repr(specs[name][0]) for name in stored]

    def _forget_training(self) -> None:
        """No trainer and no pass under way: the next update() starts a pass that makes its trainer anew."""
        self._trainer = self._trainer_key = self._passes = None
        self._trainer_seqs = {}
        self._pending = []
        self._primed = []
        self._next_pass = []
        self._steps = 0  # finish_update() calls: spaCy's training steps
        self._eval_every = 0  # spaCy's eval_frequency where initialize() was given its nlp (see update)
        self._fresh_round = False  # a round fitted since spaCy's last evaluation

    def _entries(self, examples: List[Example]) -> List[Tuple[bytes, Optional[Example]]]:
        """(content digest, example) per example, the example None where the trainer holds a sequence with that
        content: its rows are then taken from the trainer, not made again, and a pass over an unchanged corpus
        keeps no copy of it (spaCy's loop hands update() copies of its examples: a whole second corpus). A
        trainer on a cluster keeps its rows on the workers, so there every example is kept."""
        stored, computed, defaults = self._extensions_read()
        salt = repr((stored, computed, defaults)).encode("utf8")
        held = {} if os.environ.get(SCHEDULER_ENV) else self._trainer_seqs
        digests = [self._digest(eg, stored, computed, salt) for eg in examples]
        return [(d, None if d in held else eg) for d, eg in zip(digests, examples)]

    def _trainer_for(self, entries: List[Tuple[bytes, Optional[Example]]]) -> boost.Trainer:
        """The Trainer over the _entries' examples, in the order of their digests: the same contents as the
        trainer's reuse its cached potentials; others start from the ensemble's potentials."""
        order = sorted(range(len(entries)), key=lambda i: entries[i][0])
        key = tuple(entries[i][0] for i in order)
        if key == self._trainer_key:
            return self._trainer
        fresh = [entries[i][1] for i in order if entries[i][1] is not None]
        is_held = np.array([entries[i][1] is None for i in order], dtype=bool)
        parts, pick = [], np.empty(len(order), dtype=np.int64)  # pick: the sequences of the parts, in key order
        if is_held.any():
            parts.append(self._trainer.training_set())
            pick[is_held] = [self._trainer_seqs[entries[i][0]] for i in order if entries[i][1] is None]
        if fresh or not parts:
            gold, y = self._checked_labels(fresh)
            indptr, indices, seq_starts, missing_rows = self._rows([eg.predicted for eg in fresh],
                                                                   self._own_labels(fresh, gold))
            pick[~is_held] = sum(len(part.seq_starts) - 1 for part in parts) + np.arange(len(fresh))
            parts.append(boost.TrainingSet(indptr, indices, y, seq_starts, missing_rows))
        rows = boost.picked_sequences(parts, pick) if is_held.any() else parts[0]
        initial = None
        if self.ensemble.n_trees:
            initial = self.ensemble.scaled_potentials(rows.indptr, rows.indices, self.allowed, rows.seq_starts,
                                                      self.params.threads, rows.missing_rows)
        if self._trainer is not None:
            self._trainer.close()
        try:
            self._trainer = boost.new_trainer(rows.indptr, rows.indices, self.n_features, rows.y, rows.seq_starts,
                                              self.allowed, self.params, os.environ.get(SCHEDULER_ENV) or None,
                                              initial=initial,
                                              missing_rows=rows.missing_rows, numeric=self._numeric())
        except Exception:  # the old trainer is closed: a pass that kept only digests of its rows cannot go on
            self._forget_training()
            raise
        self._trainer_key = key
        self._trainer_seqs = {digest: q for q, digest in enumerate(key)}
        return self._trainer

    def _found_labels(self, examples: List[Example]) -> List[str]:
        """The labels the examples' gold annotation holds (BIO targets: with O and the B- of every I-)."""
        found = {label for eg in examples for label in self._reference_labels(eg.reference) if label}
        if self.target in BIO_TARGETS and found:  # no annotation at all stays an error (E005)
            found |= {"O"} | {"B-" + lab[2:] for lab in found if lab.startswith("I-")}
        return sorted(found)

    def _resume(self, examples: List[Example], resume_from, nlp: Optional[Language], labels) -> None:
        """Initialize from a trained model to go on training it on ``examples``: its trees, labels, feature
        index and rounds, with this component's settings (as from_disk). Labels the examples bring (or
        ``labels`` names) that the model lacks join it, their trees starting from zero (Ensemble.with_labels:
        the old trees keep their meaning); the feature index grows with the examples' words and labels
        (featurizer.extend: new columns after the old); a round is again one pass over these examples."""
        path = util.ensure_path(resume_from)
        self.from_disk(path if (path / "model.msgpack").exists() else path / self.name)
        old = self.cfg["labels"]
        wanted = list(labels) if labels is not None else self._found_labels(examples)
        new = sorted(set(wanted) - set(old))
        check_labels(self.target, old + new, self.name)
        if nlp is not None:
            self._check_score_weights(nlp)
        docs = [eg.predicted for eg in examples]
        moved = self.featurizer.extend(docs, self._own_labels(examples).get("own_labels"))
        if self.params.missing in INDICATOR_STRATEGIES:  # the indicator columns come after the featurizer's
            added = self.featurizer.n_features - len(moved)
            moved = np.concatenate([moved, len(moved) + added + np.arange(self.featurizer.n_variables)])
        ensemble = self.ensemble.with_labels(len(old) + len(new)) if new else self.ensemble
        self.ensemble = ensemble.with_feature_map(moved, self._numeric())
        self.impute = np.where(self.impute >= 0, moved[np.maximum(self.impute, 0)], -1).astype(np.int32)
        self.cfg["labels"] = old + new
        self.allowed = self._transition_mask(self.cfg["labels"])
        self.cfg["corpus_size"] = len(examples)
        if nlp is not None and self.cfg["round_every"] == "corpus":
            self._check_pass_length(nlp, examples)
        self._forget_training()

    def _checked_labels(self, examples: List[Example]) -> Tuple[List[List[Optional[str]]], np.ndarray]:
        """The gold labels of the examples (per example, on the predicted tokens) and their label ids, one array
        (-1: unknown); a label that follows one the transition constraints forbid is an error naming the doc."""
        index = {label: k for k, label in enumerate(self.cfg["labels"])}
        gold = [self._gold(eg) for eg in examples]
        y = np.array([index.get(label, -1) if label is not None else -1 for labels in gold for label in labels],
                     dtype=np.int32)
        unseen = {label for labels in gold for label in labels if label is not None and label not in index}
        if unseen - self._unseen_warned:  # trained as unknown; once per label
            self._unseen_warned |= unseen
            warnings.warn(Warnings.W007.format(name=self.name, labels=sorted(unseen), known=self.cfg["labels"]))
        seq_starts = np.cumsum([0] + [len(labels) for labels in gold], dtype=np.int64)
        bad = first_forbidden(y, seq_starts, self.allowed)
        if bad is not None:
            q, i, prev, k = bad
            labels = self.cfg["labels"]
            doc = examples[q].predicted
            raise ValueError(Errors.E157.format(doc=doc.text[:60], label=labels[k], i=i, token=doc[i].text, prev=(
                "the start of the doc" if prev < 0 else repr(labels[prev])), name=self.name))
        return gold, y

    def get_loss(self, examples, scores):
        raise NotImplementedError(Errors.E103)

    # ---- prediction ------------------------------------------------------------------------------------------
    def predict(self, docs: Iterable[Doc]):
        """Label ids per token, the per-token marginals and the forward-backward pieces for span scores."""
        docs = list(docs)
        self._check_initialized()
        indptr, indices, seq_starts, missing_rows = self._rows(docs)
        threads = self.params.threads
        P = self.ensemble.scaled_potentials(indptr, indices, self.allowed, seq_starts, threads, missing_rows)
        need_fb = self.cfg["decode"] == "marginal" or self.cfg["store_scores"] or self.cfg["n_best"]
        fb = None
        if need_fb:
            y = np.full(len(P.c), -1, dtype=np.int32)
            fb = boost.forward_backward(P, seq_starts, y, False, threads)
            gamma = crf.marginals(fb[0], fb[1])
        if self.cfg["decode"] == "viterbi":
            ids = boost.viterbi(P, seq_starts, threads)
        else:
            ids = gamma.argmax(axis=1).astype(np.int32)
        nbest = crf.nbest(P, seq_starts, fb[3], self.cfg["n_best"]) if self.cfg["n_best"] else None
        return {"ids": ids, "seq_starts": seq_starts, "potentials": P, "fb": fb,
                "gamma": gamma if need_fb else None, "nbest": nbest}

    def set_annotations(self, docs: Iterable[Doc], scores) -> None:
        docs = list(docs)
        labels = self.cfg["labels"]
        starts = np.asarray(scores["seq_starts"], dtype=np.int64)
        bounds = starts.tolist()
        ids = scores["ids"]
        offsets = tags = span_p = None  # (sliced per doc in the loop below: see BatchSpans)
        if self.target in BIO_TARGETS:
            spans = bio_span_arrays(ids, starts, labels)
            offsets = spans_per_sequence(spans, starts)
            if scores["fb"] and self.cfg["store_scores"]:  # (marginal decoding runs forward-backward too)
                span_p = per_sequence(spans[0], self._span_probabilities(spans, scores), len(docs))
        elif self.target in TOKEN_ARRAY_ATTRS:  # a doc's tags as the hashes / ids Doc.from_array writes
            attr = TOKEN_ARRAY_ATTRS[self.target]
            tags = np.array([self.vocab.strings.add(label) if attr == TAG else UPOS_IDS[label] for label in labels],
                            dtype=np.uint64)[ids]
        else:
            tags = [labels[k] for k in ids.tolist()]
        gamma = None
        if self.cfg["store_scores"] and scores["gamma"] is not None:
            gamma = scores["gamma"].astype(np.float32)
        # What a doc keeps is one dict and one tuple of arrays per component (and the SpanGroup with its attrs):
        # every container a doc keeps is walked by each of the process's full garbage collections, and enough of
        # them set one off. A tuple per span field and a dict per extension made 12 a doc, and a full collection
        # (~120 ms) in most passes of spacy evaluate over CoNLL-2003 test; 5 now.
        label_tuple = tuple(labels)
        for q, doc in enumerate(docs):
            if scores.get("nbest") is not None:  # Doc._.treecrf_nbest's analyses (nbest_getter)
                paths, logp = scores["nbest"]
                kept = np.flatnonzero(np.isfinite(logp[q])).tolist()
                doc.user_data.setdefault(NBEST_KEY, {})[self.name] = (
                    self.target, self.cfg["spans_key"] if self.target == "spans" else self.name,
                    [[labels[k] for k in paths[r, bounds[q]:bounds[q + 1]].tolist()] for r in kept],
                    np.exp(logp[q, kept]).tolist())
            spans = self._write(doc, None if tags is None else tags[bounds[q]:bounds[q + 1]],
                                None if offsets is None else offsets.of(q), None if span_p is None else span_p[q])
            if gamma is not None:  # Token._.treecrf_marginals' and Span._.treecrf_prob's values (SCORES_KEY)
                span_fields = (None,) * 4 if span_p is None else (
                    np.array([span.start_char for span in spans], np.int64),
                    np.array([span.end_char for span in spans], np.int64),
                    np.array([span.label_ for span in spans], np.str_), span_p[q].copy())  # (not the SpanGroup's)
                doc.user_data.setdefault(SCORES_KEY, {})[self.name] = (
                    label_tuple, gamma[bounds[q]:bounds[q + 1]].copy(), *span_fields, token_key(doc))

    def _write(self, doc: Doc, tags, offsets, probs: Optional[np.ndarray]):
        """Write tags (tag / pos: a uint64 array of TAG hashes / UPOS ids; token_attr: label strings; for BIO
        targets, the spans at ``offsets``, from sequence_bio_spans) onto the doc. Returns the predicted spans
        (BIO targets; None for tags)."""
        target = self.target
        overwrite = self.cfg["overwrite"]
        if target in BIO_TARGETS:
            spans = [Span(doc, s, e, label=lab) for s, e, lab in offsets]
            if target == "ner":
                if overwrite:
                    doc.set_ents(spans, default="outside")
                else:
                    doc.set_ents(filter_new(spans, list(doc.ents)), default="unmodified")
                if probs is None:  # doc.ents has no attrs: with scores, the entities also go to doc.spans[name]
                    return spans
                key = self.name
            else:
                key = self.cfg["spans_key"]
                if not overwrite and key in doc.spans:
                    return spans
            doc.spans[key] = SpanGroup(doc, name=key, spans=spans,
                                       attrs={"scores": probs if probs is not None else np.zeros(0)})
            return spans
        if target in TOKEN_ARRAY_ATTRS:  # tags: their hashes / UPOS ids, one Doc.from_array, not a Token each
            attr = TOKEN_ARRAY_ATTRS[target]
            if not overwrite:
                old = doc.to_array([attr]).reshape(-1)
                tags = np.where(old == 0, tags, old)
            doc.from_array([attr], tags)
            return
        name = self.cfg["token_attr"]
        for token, tag in zip(doc, tags):
            if overwrite or token._.get(name) in (None, ""):
                token._.set(name, tag)

    def _span_probabilities(self, spans, scores) -> np.ndarray:
        """Each predicted span's probability of being labelled exactly so under the CRF (``spans``: the
        bio_span_arrays of the predicted tags)."""
        owner, start, end, kind, kinds = spans
        if not len(start):
            return np.zeros(0)
        index = {lab: k for k, lab in enumerate(self.cfg["labels"])}
        first = np.array([index.get("B-" + lab, index.get("I-" + lab, 0)) for lab in kinds], dtype=np.int64)
        inside = np.array([index.get("I-" + lab, -1) for lab in kinds], dtype=np.int64)
        seq_starts = np.asarray(scores["seq_starts"], dtype=np.int64)
        alpha, beta, scale, _ = scores["fb"]
        return crf.span_probs(scores["potentials"], alpha, beta, scale, seq_starts[owner + 1], start, end, first[kind],
                              inside[kind])

    # ---- inspection ------------------------------------------------------------------------------------------
    def rules(self, top: int = 10, min_support: float = 5.0) -> List[Tuple[str, str, float, float]]:
        """The strongest root-to-leaf paths as (label, conjunction of tests in words, value, support), none that
        the transition constraints forbid (engine/rules.py)."""
        self._check_initialized()
        return ensemble_rules(self.ensemble, self._test_names(), self.cfg["labels"], top, min_support, self.allowed)

    def explain(self, doc: Doc, labels: Optional[List[str]] = None) -> List[Explanation]:
        """Why each token of ``doc`` gets its label: per token an Explanation (label, previous label, the
        potential of that transition, and the trees' leaves that make it up, each with its path in words and its
        contribution; the contributions add up to the potential). ``labels``: the labels to explain, one per
        token (default: what the component predicts for the doc; for ner / spans the BIO labels)."""
        self._check_initialized()
        if not isinstance(doc, Doc):
            raise TypeError(Errors.E177.format(kind=type(doc).__name__))
        indptr, indices, _, missing_rows = self._rows([doc])
        index = {label: k for k, label in enumerate(self.cfg["labels"])}
        if labels is None:
            ids = self.predict([doc])["ids"]
        elif isinstance(labels, str) or len(labels) != len(doc) or not all(label in index for label in labels):
            raise ValueError(Errors.E178.format(n=len(doc), labels=labels, known=self.cfg["labels"]))
        else:
            ids = np.array([index[label] for label in labels], dtype=np.int64)
        route = missing_rows.index() if missing_rows is not None and missing_rows.any else no_missing()
        return explain_sequence(self.ensemble.forest(), self.ensemble.kernel_rows(indptr, indices), route, 0, ids,
                                self._test_names(), self.cfg["labels"], self.allowed, self.ensemble.path_tables())

    def explain_span(self, span: Span) -> List[Explanation]:
        """The Explanations of a span's tokens labelled as the span says (B- and I- of its label), the doc's
        other tokens as the component predicts them (ner / spans): what each tree added to the span, token by
        token; their potentials' sum is the span's share of the labelling's score."""
        if self.target not in BIO_TARGETS:
            raise ValueError(Errors.E184.format(name=self.name, target=self.target))
        if not isinstance(span, Span) or len(span) == 0 or not span.label_:
            raise ValueError(Errors.E216.format(name=self.name, span=repr(span)))
        doc = span.doc
        labels = [self.cfg["labels"][k] for k in self.predict([doc])["ids"]]
        inside = [f"B-{span.label_}"] + [f"I-{span.label_}"] * (len(span) - 1)
        labels[span.start:span.end] = inside
        if span.end < len(doc) and labels[span.end] == f"I-{span.label_}":  # the span ends where it says
            labels[span.end] = "O"
        return self.explain(doc, labels)[span.start:span.end]

    def _test_names(self) -> "ReadableTests":
        return ReadableTests(self.featurizer, self.params.missing in INDICATOR_STRATEGIES)

    # ---- serialization ---------------------------------------------------------------------------------------
    def to_bytes(self, *, exclude=tuple()) -> bytes:
        self._check_initialized()
        return serialize.dumps("treecrf", {
            "cfg": self.cfg, "params": vars(self.params), "features": self.featurizer.to_dict(),
            "allowed": self.allowed, "ensemble": self.ensemble.arrays(), "impute": self.impute,
        })

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "TreeCRFComponent":
        """The learned state of a saved component: labels, rounds, the featurizer's columns, the trees and the
        missing-value strategy they were grown with. Settings stay the ones this component was made with (its
        config, with whatever a user set at load time): decode, store_scores, overwrite, spans_key, token_attr,
        constrain_bio and the boosting settings; the file's are only checked. Everything is checked before
        anything is replaced: a refused model leaves the component as it was."""
        msg = serialize.loads("treecrf", bytes_data)
        cfg = serialize.field(msg, "cfg", dict)
        if cfg.get("target") != self.target:
            raise ValueError(Errors.E106.format(found=cfg.get('target'), name=self.name, target=self.target))
        labels = cfg.get("labels")
        if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
            raise ValueError(Errors.E107)
        check_labels(self.target, labels, self.name)
        _check_loaded_cfg({key: cfg[key] for key in self.cfg if key in cfg})
        rounds = cfg.get("rounds", 0)
        featurizer = copy.copy(self.featurizer)  # from_dict replaces its state, never mutates it in place
        featurizer.from_dict(serialize.field(msg, "features", dict))
        asked, kept = self.featurizer.config(), featurizer.config()
        K = len(labels)
        serialize.check_array(msg, "allowed", np.bool_, (K + 1, K))  # the mask is this component's (constrain_bio)
        params = serialize.field(msg, "params", dict)
        try:
            params = BoostParams(**{k: v for k, v in params.items() if k in BoostParams.__dataclass_fields__})
        except (TypeError, ValueError) as err:
            raise ValueError(Errors.E111.format(err=err)) from None
        if params.missing != self.params.missing:
            warnings.warn(Warnings.W002.format(name=self.name, trained=params.missing, configured=self.params.missing))
        params = dataclasses.replace(self.params, missing=params.missing)
        V = featurizer.n_variables
        n_features = featurizer.n_features + (V if params.missing in INDICATOR_STRATEGIES else 0)
        ensemble = serialize.load_ensemble(serialize.field(msg, "ensemble", dict), K, n_features,
                                           numeric_index(n_features, *featurizer.numeric_columns()))
        if (params.missing == "surrogate") != (ensemble.n_surrogates > 0):
            raise ValueError(Errors.E108.format(missing=params.missing, n_surrogates=ensemble.n_surrogates))
        replaced = {f"features.{key}": (kept[key], asked[key]) for key in kept
                    if key != "lexicons" and key in asked and kept[key] != asked[key]}  # (lexicons: see features.py)
        if ensemble.shared != self.params.shared_trees:
            replaced["booster.shared_trees"] = (ensemble.shared, self.params.shared_trees)
        if replaced:
            warnings.warn(Warnings.W011.format(name=self.name, settings=", ".join(
                f"{key} = {model!r} (configured: {configured!r})" for key, (model, configured) in replaced.items())))
        params = dataclasses.replace(params, shared_trees=ensemble.shared)  # the trees' kind is the model's
        impute = np.full(V, -1, dtype=np.int32)  # files from before missing values have no table
        if "impute" in msg:
            impute = serialize.check_array(msg, "impute", np.int32, (V,))
            if np.any((impute < -1) | (impute >= featurizer.n_features)):
                raise ValueError(Errors.E112)
        self.featurizer, self.ensemble, self.params = featurizer, ensemble, params
        self.allowed = self._transition_mask(labels)
        self.impute = impute
        self.cfg.update(labels=list(labels), rounds=rounds, corpus_size=cfg.get("corpus_size", 0))
        self._forget_training()  # a pass begun on the old model is dropped
        self._warm_up()
        return self

    def _warm_up(self) -> None:
        """Ready the model as part of loading it, not in the first call: the lexeme tests of the words it has word
        tests for, and the compiled prediction kernels. One doc of one token goes through the small-batch kernels
        with this component's decoding and scores (shared trees: the partition kernel serves every batch);
        where numba's cache holds the partition kernel, one doc of PARTITION_ROWS tokens readies it too (a load
        from the cache). Where it does not (the first processes after an install or an upgrade), a model whose
        small batches take the bit-mask kernel leaves it to the first batch that large: compiling it is the
        largest part of a cold start (benchmarks/results/cold_start.md). Where numba's cache lasts only as long
        as the process (engine.KERNEL_CACHE_PERSISTS), the kernels would be compiled at every load, also those a
        process never uses: they are all left to the first call then."""
        if hasattr(self.featurizer, "prepare_known_words"):
            self.featurizer.prepare_known_words(self.vocab)
        if not engine.KERNEL_CACHE_PERSISTS:
            return
        self(Doc(self.vocab, words=["."]))
        if engine.in_kernel_cache(partition_potentials):
            self(Doc(self.vocab, words=["."] * boost.PARTITION_ROWS))

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


def check_labels(target: str, labels: Sequence[str], name: str) -> None:
    """The label set of a component, the same check whether it comes from initialize or from a model file:
    distinct labels; UPOS tags for target pos; O, B-X or I-X with a non-empty X for BIO targets."""
    seen = set()
    for label in labels:
        if label in seen:
            raise ValueError(Errors.E155.format(label=label, name=name))
        seen.add(label)
    if target == "pos":
        bad = [label for label in labels if label not in UPOS_IDS]
        if bad:
            raise ValueError(Errors.E006.format(labels=bad))
    if target in BIO_TARGETS:
        for label in labels:
            if label != "O" and not (label[:2] in ("B-", "I-") and len(label) > 2):
                raise ValueError(Errors.E009.format(label=label, name=name))


def _check_n_best(n_best) -> None:
    if isinstance(n_best, bool) or not isinstance(n_best, int) or not 0 <= n_best <= crf.MAX_NBEST:
        raise ValueError(Errors.E180.format(maximum=crf.MAX_NBEST, value=n_best))


def _check_rounds_per_pass(rounds) -> None:
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS_PER_PASS:
        raise ValueError(Errors.E200.format(maximum=MAX_ROUNDS_PER_PASS, value=rounds))


def _check_loaded_cfg(cfg: dict) -> None:
    """The settings a model file carries, checked as the constructor checks them."""
    kinds = {"spans_key": str, "token_attr": str, "decode": str, "constrain_bio": bool, "store_scores": bool,
             "n_best": int, "overwrite": bool, "round_every": str, "rounds_per_pass": int, "rounds": int,
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
    for key in ("rounds", "corpus_size"):
        if key in cfg and cfg[key] < 0:
            raise ValueError(Errors.E110.format(key=key, type_name="non-negative int", cfg=cfg[key]))
    if cfg["target"] == "spans" and not cfg.get("spans_key", "x"):
        raise ValueError(Errors.E002)
    if cfg["target"] == "token_attr" and not cfg.get("token_attr", "x"):
        raise ValueError(Errors.E003)


def bio_spans(tags: Sequence[str]) -> List[Tuple[int, int, str]]:
    """(start, end, type) of BIO tags; an I-X that does not continue an X span opens one (as CoNLL's eval)."""
    labels = list(dict.fromkeys(tags))
    index = {label: k for k, label in enumerate(labels)}
    ids = np.array([index[tag] for tag in tags], dtype=np.int64)
    return sequence_bio_spans(ids, np.array([0, len(ids)], dtype=np.int64), labels)[0]


def bio_span_arrays(ids: np.ndarray, seq_starts: np.ndarray, labels: Sequence[str]):
    """The BIO spans of every sequence of label ids at once, in array operations over all tokens: (owner, start,
    end, kind, kinds), span i covering positions start[i]:end[i] of the batch in sequence owner[i] with type
    kinds[kind[i]], in order of position."""
    parts = [label.partition("-") for label in labels]
    kinds = sorted({kind for _, _, kind in parts})
    kind_id = {kind: i for i, kind in enumerate(kinds)}
    prefix = np.array([{"B": 1, "I": 2}.get(pre, 0) for pre, _, _ in parts] + [0], dtype=np.int8)[ids]
    kind = np.array([kind_id[k] for _, _, k in parts] + [0], dtype=np.int64)[ids]
    T = len(ids)
    first = np.zeros(T, dtype=bool)
    first[seq_starts[:-1][seq_starts[:-1] < seq_starts[1:]]] = True
    cont = np.zeros(T, dtype=bool)  # an I-X right after a B-X or I-X of the same sequence
    cont[1:] = (prefix[1:] == 2) & ~first[1:] & (prefix[:-1] > 0) & (kind[1:] == kind[:-1])
    begins = np.flatnonzero((prefix > 0) & ~cont)
    breaks = np.append(np.flatnonzero(~cont), T)
    ends = breaks[np.searchsorted(breaks, begins, side="right")]
    owners = np.searchsorted(seq_starts, begins, side="right") - 1
    return owners, begins, ends, kind[begins], kinds


def per_sequence(owner: np.ndarray, values, n_sequences: int) -> list:
    """``values`` (a list or an array, one per span, in order of position) grouped by the sequence that owns
    each (slices of it)."""
    bounds = np.searchsorted(owner, np.arange(n_sequences + 1)).tolist()
    return [values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


class BatchSpans(NamedTuple):
    """The BIO spans of a batch of sequences as flat lists: span i covers start[i]:end[i] of its sequence (offsets
    within it) with type label[i], and sequence q's spans are i in bounds[q]:bounds[q + 1]. Flat lists of ints and
    strings rather than a list of (start, end, type) tuples per sequence: those are thousands of containers alive
    at once (a batch's entities), which set off Python's collector inside ``spacy evaluate``'s timed section, and
    with it, every few passes, a full collection over every object of the process (about 130 ms on CoNLL-2003
    test, a quarter of the pass). Sliced one sequence at a time (``of``), they never are."""
    bounds: List[int]
    start: List[int]
    end: List[int]
    label: List[str]

    def of(self, q: int) -> List[Tuple[int, int, str]]:
        """Sequence q's spans as (start, end, type)."""
        a, b = self.bounds[q], self.bounds[q + 1]
        return list(zip(self.start[a:b], self.end[a:b], self.label[a:b]))


def spans_per_sequence(spans, seq_starts: np.ndarray) -> BatchSpans:
    """bio_span_arrays as BatchSpans (offsets within each sequence)."""
    owner, start, end, kind, kinds = spans
    base = seq_starts[owner]
    bounds = np.searchsorted(owner, np.arange(len(seq_starts))).tolist()
    return BatchSpans(bounds, (start - base).tolist(), (end - base).tolist(), [kinds[k] for k in kind.tolist()])


def sequence_bio_spans(ids: np.ndarray, seq_starts: np.ndarray, labels: Sequence[str]
                       ) -> List[List[Tuple[int, int, str]]]:
    """bio_spans of every sequence of label ids at once (offsets within each sequence)."""
    spans = spans_per_sequence(bio_span_arrays(ids, seq_starts, labels), seq_starts)
    return [spans.of(q) for q in range(len(seq_starts) - 1)]


def filter_new(new: List[Span], old: List[Span]) -> List[Span]:
    """New spans that overlap no existing entity (overwrite=False keeps what was there)."""
    taken = {i for span in old for i in range(span.start, span.end)}
    return old + [s for s in new if not any(i in taken for i in range(s.start, s.end))]
