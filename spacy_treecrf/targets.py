"""What a treecrf component labels: one small object per target, the one place that knows a target by its name.

A target reads the gold labels of a reference Doc (one label per token, None where the annotation is missing),
says which labels it accepts and which may follow which, writes predicted labels onto Docs and scores them:
- ``ner``: BIO labels of doc.ents;
- ``spans``: BIO labels of the non-overlapping spans in doc.spans[spans_key];
- ``tag`` / ``pos``: Token.tag_ / Token.pos_ (UPOS only), written as one token attribute array a doc;
- ``token_attr``: a custom Token extension's string values.
The component holds one (``make_target``) and never asks for the target's name; to add a target, add a class
here and its name to TARGET_CLASSES.
"""
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from spacy.attrs import ENT_IOB, ENT_TYPE, POS, TAG
from spacy.parts_of_speech import IDS as UPOS_IDS
from spacy.scorer import Scorer
from spacy.tokens import Doc, Span, SpanGroup, Token
from spacy.training import Example

from .engine.transitions import bio_allowed
from .errors import Errors, excerpt
from .model import Known, check_distinct


class Target:
    """The shared part: tag-like targets (a label per token, any label may follow any)."""
    name = ""
    bio = False  # labels are BIO tags and predictions spans
    reader_scheme = ""  # how readers.py stores such gold labels on a Doc (its label schemes)

    def __init__(self, spans_key: str = "chunks", token_attr: str = ""):
        self.check_settings(spans_key, token_attr)
        self.spans_key = spans_key
        self.token_attr = token_attr

    @classmethod
    def check_settings(cls, spans_key: str, token_attr: str) -> None:
        """Refuse settings the target cannot work without (E002, E003)."""

    # ---- gold ------------------------------------------------------------------------------------------------
    def reference_labels(self, doc: Doc) -> List[Optional[str]]:
        """The gold label of each reference token, None where the annotation is missing."""
        raise NotImplementedError

    def has_gold(self, doc: Doc) -> bool:
        """Whether the reference ``doc`` holds any gold annotation of this target."""
        return any(label is not None for label in self.reference_labels(doc))

    def gold_bytes(self, doc: Doc) -> bytes:
        """The reference doc's gold annotation as bytes (a training example's content key)."""
        return repr(self.reference_labels(doc)).encode("utf8")

    def found_labels(self, found: set) -> List[str]:
        """The label set of the gold labels ``found`` in a corpus, sorted."""
        return sorted(found)

    def check_labels(self, labels: Sequence[str], component: str) -> None:
        """The label set of a component, the same check whether it comes from initialize or from a model file:
        distinct labels (and what the target's own check asks)."""
        check_distinct(labels, f"component '{component}'")

    def check_saved(self, found, component: str) -> None:
        """E106 unless a model file's target (``found``) is this one."""
        if found != self.name:
            raise ValueError(Errors.E106.format(found=found, name=component, target=self.name))

    def allowed(self, labels: Sequence[str], constrain: bool) -> np.ndarray:
        """Which label may follow which ((labels + 1) x labels, row 0: the start): any, for tags."""
        return np.ones((len(labels) + 1, len(labels)), dtype=np.bool_)

    # ---- predictions -----------------------------------------------------------------------------------------
    def batch_known(self, docs: Sequence[Doc], labels: Sequence[str], outside: bool) -> Optional[Known]:
        """What the docs hold of the target already (``known``), for decoding around it; None if nothing."""
        per_doc = [self.known(doc, labels, outside) for doc in docs]
        if all(permitted is None for permitted in per_doc):
            return None
        permitted = np.concatenate([np.ones((len(doc), len(labels)), dtype=np.bool_) if p is None else p
                                    for doc, p in zip(docs, per_doc)])
        return Known(permitted, lambda q, i: f"doc {excerpt(docs[q].text, 60)}, token {i} ({docs[q][i].text!r})")

    def known(self, doc: Doc, labels: Sequence[str], outside: bool) -> Optional[np.ndarray]:
        """What ``doc`` already holds of this target, as the labels each token may take (tokens x labels, bool;
        model.Known), for decoding around it when a component does not overwrite; None where nothing is known.
        Tags: a token's tag is known where it has one the model knows (a tag it does not know is kept on the token
        and says nothing of the model's labels)."""
        index = {label: k for k, label in enumerate(labels)}
        ids = [index.get(label, -1) if label is not None else -1 for label in self.reference_labels(doc)]
        if all(k < 0 for k in ids):
            return None
        permitted = np.ones((len(doc), len(labels)), dtype=np.bool_)
        for i, k in enumerate(ids):
            if k >= 0:
                permitted[i] = np.arange(len(labels)) == k
        return permitted

    def tag_values(self, labels: Sequence[str], ids: np.ndarray, vocab):
        """The predicted labels of a batch (label ids ``ids``) in the form ``write`` takes them: label strings."""
        return [labels[k] for k in ids.tolist()]

    def write(self, doc: Doc, tags, overwrite: bool, component: str) -> None:
        """Write a doc's tags (its slice of tag_values) onto its tokens."""
        name = self.token_attr
        for token, tag in zip(doc, tags):
            if overwrite or token._.get(name) in (None, ""):
                token._.set(name, tag)

    def spans_key_of(self, component: str) -> str:
        """Where the spans of an n-best analysis or of scored predictions go in doc.spans."""
        return component

    # ---- scoring ---------------------------------------------------------------------------------------------
    def score_attr(self) -> str:
        """What the scorer names its scores after."""
        return self.name

    def score_keys(self) -> List[str]:
        """The scores the scorer gives (the keys [training.score_weights] can weigh)."""
        return [f"{self.score_attr()}_acc"]

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, object]:
        return Scorer.score_token_attr(examples, self.score_attr(), **kwargs)


class TokenAttrTarget(Target):
    name = "token_attr"
    reader_scheme = "token_attr"

    def __init__(self, spans_key: str = "chunks", token_attr: str = ""):
        super().__init__(spans_key, token_attr)
        if not Token.has_extension(token_attr):
            Token.set_extension(token_attr, default=None)

    @classmethod
    def check_settings(cls, spans_key: str, token_attr: str) -> None:
        if not token_attr:
            raise ValueError(Errors.E003)

    def reference_labels(self, doc: Doc) -> List[Optional[str]]:
        name = self.token_attr
        return [None if t._.get(name) in (None, "") else str(t._.get(name)) for t in doc]

    def score_attr(self) -> str:
        return self.token_attr

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, object]:
        return Scorer.score_token_attr(examples, self.score_attr(), getter=lambda token, attr: token._.get(attr),
                                       missing_values={None, ""}, **kwargs)


class TagTarget(Target):
    """Token.tag_, written as TAG hashes, one Doc.from_array a doc (not a Token each)."""
    name = "tag"
    reader_scheme = "tag"
    attr = TAG

    def reference_labels(self, doc: Doc) -> List[Optional[str]]:
        return [t.tag_ or None for t in doc]

    def gold_bytes(self, doc: Doc) -> bytes:
        return doc.to_array([self.attr]).tobytes()

    def label_code(self, label: str, vocab) -> int:
        return vocab.strings.add(label)

    def tag_values(self, labels: Sequence[str], ids: np.ndarray, vocab) -> np.ndarray:
        """A batch's tags as the uint64 values Doc.from_array writes."""
        return np.array([self.label_code(label, vocab) for label in labels], dtype=np.uint64)[ids]

    def write(self, doc: Doc, tags: np.ndarray, overwrite: bool, component: str) -> None:
        if not overwrite:
            old = doc.to_array([self.attr]).reshape(-1)
            tags = np.where(old == 0, tags, old)
        doc.from_array([self.attr], tags)


class PosTarget(TagTarget):
    """Token.pos_: UPOS tags only, written as their ids."""
    name = "pos"
    reader_scheme = "pos"
    attr = POS

    def reference_labels(self, doc: Doc) -> List[Optional[str]]:
        return [t.pos_ or None for t in doc]

    def label_code(self, label: str, vocab) -> int:
        return UPOS_IDS[label]

    def check_labels(self, labels: Sequence[str], component: str) -> None:
        super().check_labels(labels, component)
        bad = [label for label in labels if label not in UPOS_IDS]
        if bad:
            raise ValueError(Errors.E006.format(labels=bad))


class NerTarget(Target):
    """BIO labels of doc.ents; predictions are entities (and, with scores, also doc.spans[component])."""
    name = "ner"
    bio = True
    reader_scheme = "bio_ents"

    def reference_labels(self, doc: Doc) -> List[Optional[str]]:
        return [None if t.ent_iob_ == "" else ("O" if t.ent_iob_ == "O" else f"{t.ent_iob_}-{t.ent_type_}")
                for t in doc]

    def gold_bytes(self, doc: Doc) -> bytes:
        return doc.to_array([ENT_IOB, ENT_TYPE]).tobytes()

    def found_labels(self, found: set) -> List[str]:
        """With O and the B- of every I- (no annotation at all stays no label: E005)."""
        if found:
            found = found | {"O"} | {"B-" + lab[2:] for lab in found if lab.startswith("I-")}
        return sorted(found)

    def check_labels(self, labels: Sequence[str], component: str) -> None:
        super().check_labels(labels, component)
        for label in labels:
            if label != "O" and not (label[:2] in ("B-", "I-") and len(label) > 2):
                raise ValueError(Errors.E009.format(label=label, name=component))

    def allowed(self, labels: Sequence[str], constrain: bool) -> np.ndarray:
        """BIO's rules with ``constrain`` (constrain_bio), else anything."""
        return bio_allowed(labels) if constrain else super().allowed(labels, constrain)

    def known(self, doc: Doc, labels: Sequence[str], outside: bool) -> Optional[np.ndarray]:
        """Preset entities: their tokens take the B- and I- of their label, and the token after one cannot be its
        I- (it would lengthen the entity); an entity of a type the model cannot label whole is O to the model (and
        stays on the doc). With ``outside`` (preset_outside) tokens preset outside every entity are O; without, they
        are free, as spaCy's ner treats them: doc.ents = [...] (the entity_ruler's way) sets every token outside
        its spans to O."""
        return bio_known(len(doc), self.preset_spans(doc), labels,
                         [t.i for t in doc if t.ent_iob_ == "O"] if outside else [])

    def preset_spans(self, doc: Doc) -> List[Span]:
        """The spans a doc holds of this target already."""
        return list(doc.ents)

    def tag_values(self, labels, ids, vocab):
        return None  # (spans are written, from the batch's spans)

    def span_label_ids(self, labels: Sequence[str], kinds: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """Per span type: the label id a span of it opens with (its B-, else its I-) and continues with (its I-,
        -1 where there is none), for SequenceModel.span_probabilities."""
        index = {lab: k for k, lab in enumerate(labels)}
        first = np.array([index.get("B-" + lab, index.get("I-" + lab, 0)) for lab in kinds], dtype=np.int64)
        inside = np.array([index.get("I-" + lab, -1) for lab in kinds], dtype=np.int64)
        return first, inside

    def write_spans(self, doc: Doc, offsets: List[Tuple[int, int, str]], probs: Optional[np.ndarray],
                    overwrite: bool, component: str) -> List[Span]:
        """Write the predicted spans (start, end, type) onto the doc; with ``probs`` (their probabilities) the
        entities also go to doc.spans[component] with them (doc.ents has no attrs). Returns the spans."""
        spans = [Span(doc, s, e, label=lab) for s, e, lab in offsets]
        if overwrite:
            doc.set_ents(spans, default="outside")
        else:
            doc.set_ents(filter_new(spans, list(doc.ents)), default="unmodified")
        if probs is not None:
            doc.spans[component] = SpanGroup(doc, name=component, spans=spans, attrs={"scores": probs})
        return spans

    def score_attr(self) -> str:
        return "ents"

    def score_keys(self) -> List[str]:
        return [f"{self.score_attr()}_{m}" for m in ("f", "p", "r")]

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, object]:
        return Scorer.score_spans(examples, self.score_attr(), **kwargs)


class SpansTarget(NerTarget):
    """BIO labels of the non-overlapping spans in doc.spans[spans_key]; predictions replace that group."""
    name = "spans"
    reader_scheme = "bio_spans"

    @classmethod
    def check_settings(cls, spans_key: str, token_attr: str) -> None:
        if not spans_key:
            raise ValueError(Errors.E002)

    def reference_labels(self, doc: Doc) -> List[Optional[str]]:
        key = self.spans_key
        if key not in doc.spans:
            return [None] * len(doc)
        labels: List[Optional[str]] = ["O"] * len(doc)
        owner: List[Optional[Span]] = [None] * len(doc)
        for span in doc.spans[key]:
            for i in range(span.start, span.end):
                if owner[i] is not None:
                    raise ValueError(Errors.E007.format(doc=repr(doc.text[:60]), a=repr(owner[i]), b=repr(span),
                                                        where=f"doc.spans[{key!r}]"))
                owner[i] = span
                labels[i] = ("B-" if i == span.start else "I-") + span.label_
        return labels

    def has_gold(self, doc: Doc) -> bool:
        return self.spans_key in doc.spans

    def gold_bytes(self, doc: Doc) -> bytes:
        return Target.gold_bytes(self, doc)

    def preset_spans(self, doc: Doc) -> List[Span]:
        """The group's spans, each that overlaps none before it (a group may overlap; a labelling cannot)."""
        taken: set = set()
        kept = []
        for span in doc.spans.get(self.spans_key, []):
            if not taken.intersection(range(span.start, span.end)):
                taken.update(range(span.start, span.end))
                kept.append(span)
        return kept

    def write_spans(self, doc, offsets, probs, overwrite, component):
        """The predicted spans replace the group; without ``overwrite`` the group keeps its spans and gains the
        predicted ones that overlap none of them (decoding kept to the preset spans predicts them as they are)."""
        spans = [Span(doc, s, e, label=lab) for s, e, lab in offsets]
        key = self.spans_key
        group = spans if overwrite or key not in doc.spans else filter_new(spans, list(doc.spans[key]))
        scores = np.zeros(0)
        if probs is not None:  # (a preset span the model could not label is given: 1)
            found = {(span.start, span.end, span.label_): p for span, p in zip(spans, probs)}
            scores = np.array([found.get((span.start, span.end, span.label_), 1.0) for span in group])
        doc.spans[key] = SpanGroup(doc, name=key, spans=group, attrs={"scores": scores})
        return spans

    def spans_key_of(self, component: str) -> str:
        return self.spans_key

    def score_attr(self) -> str:
        return f"spans_{self.spans_key}"

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, object]:
        key = self.spans_key
        return Scorer.score_spans(examples, self.score_attr(), getter=lambda doc, attr: doc.spans.get(key, []),
                                  has_annotation=lambda doc: key in doc.spans, allow_overlap=True, **kwargs)


TARGET_CLASSES = {cls.name: cls for cls in (NerTarget, SpansTarget, TagTarget, PosTarget, TokenAttrTarget)}
TARGETS = tuple(TARGET_CLASSES)
READER_SCHEMES = {name: cls.reader_scheme for name, cls in TARGET_CLASSES.items()}  # readers.py's label schemes


def make_target(name: str, spans_key: str = "chunks", token_attr: str = "") -> Target:
    """The Target of a component's ``target`` setting (E001 for an unknown name)."""
    return target_class(name)(spans_key, token_attr)


def target_class(name: str) -> type:
    """The Target class of a target's name (E001 for an unknown one)."""
    if name not in TARGET_CLASSES:
        raise ValueError(Errors.E001.format(target=name, targets=TARGETS))
    return TARGET_CLASSES[name]


def bio_known(n_tokens: int, spans: Sequence[Span], labels: Sequence[str], outside: Sequence[int]
              ) -> Optional[np.ndarray]:
    """The labels each of ``n_tokens`` tokens may take (NerTarget.known) given non-overlapping preset ``spans``
    and the tokens known to be ``outside`` every span; None where nothing is known."""
    if not spans and not outside:
        return None
    index = {label: k for k, label in enumerate(labels)}
    permitted = np.ones((n_tokens, len(labels)), dtype=np.bool_)
    inside = np.zeros(n_tokens, dtype=bool)

    def only(i: int, label: str) -> None:
        if label in index:
            permitted[i] = False
            permitted[i, index[label]] = True
    for i in outside:
        only(i, "O")
    for span in spans:
        inside[span.start:span.end] = True
        begin, cont = f"B-{span.label_}", f"I-{span.label_}"
        whole = begin in index and (len(span) == 1 or cont in index)
        for i in range(span.start, span.end):
            only(i, (begin if i == span.start else cont) if whole else "O")
    for span in spans:  # the token after a span does not continue it
        after = span.end
        if after < n_tokens and not inside[after] and f"I-{span.label_}" in index:
            permitted[after, index[f"I-{span.label_}"]] = False
    return permitted


def filter_new(new: List[Span], old: List[Span]) -> List[Span]:
    """New spans that overlap no existing entity (overwrite=False keeps what was there)."""
    taken = {i for span in old for i in range(span.start, span.end)}
    return old + [s for s in new if not any(i in taken for i in range(s.start, s.end))]
