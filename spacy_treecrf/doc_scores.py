"""What a treecrf component leaves on a Doc besides its labels, and the BIO span arithmetic its predictions use.

Scores live in doc.user_data, so they travel with Doc.to_bytes, DocBin and nlp.pipe(n_process=...):
- user_data[SCORES_KEY]: {component name: (labels, marginals (tokens x labels, float32), and for ner / spans the
  predicted spans' start_char, end_char, label and probability as arrays (else None each), then the tokenization
  the marginals are of (token_key), then the doc's confidence (the probability of its labelling, the least
  marginal of a predicted label, the mean entropy: model.Confidence))}, read by Token._.treecrf_marginals,
  Span._.treecrf_prob and Doc._.treecrf_confidence;
- user_data[NBEST_KEY]: {component name: (target, spans key, analyses, probabilities)}, read by
  Doc._.treecrf_nbest.
"""
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from spacy.attrs import IDX, LENGTH, ORTH, SENT_START
from spacy.tokens import Doc, Span, SpanGroup, Token

from .targets import TARGET_CLASSES

MARGINALS_EXT = "treecrf_marginals"
SPAN_PROB_EXT = "treecrf_prob"
NBEST_EXT = "treecrf_nbest"
CONFIDENCE_EXT = "treecrf_confidence"
CONFIDENCE_FIELDS = ("probability", "least_marginal", "mean_entropy")
SCORES_KEY, NBEST_KEY = ("treecrf", "scores"), ("treecrf", "nbest")


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


def confidence_getter(doc: Doc) -> Optional[Dict[str, Dict[str, float]]]:
    """Doc._.treecrf_confidence: {component name: {"probability": P(the doc's predicted labelling | the doc and
    what it held already), "least_marginal": the smallest marginal probability of a predicted label,
    "mean_entropy": the marginals' entropy per token (nats)}} from every treecrf that stored scores
    (store_scores): for choosing which docs to annotate next (the least probable first)."""
    stored = doc.user_data.get(SCORES_KEY)
    if not stored:
        return None
    out = {name: dict(zip(CONFIDENCE_FIELDS, entry[7])) for name, entry in stored.items() if len(entry) > 7}
    return out or None


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
                      if TARGET_CLASSES[target].bio else None}
                     for tags, p in zip(analyses, probs)]
    return out


if not Token.has_extension(MARGINALS_EXT):
    Token.set_extension(MARGINALS_EXT, getter=marginals_getter)
if not Span.has_extension(SPAN_PROB_EXT):
    Span.set_extension(SPAN_PROB_EXT, getter=span_prob_getter)
if not Doc.has_extension(NBEST_EXT):
    Doc.set_extension(NBEST_EXT, getter=nbest_getter)
if not Doc.has_extension(CONFIDENCE_EXT):
    Doc.set_extension(CONFIDENCE_EXT, getter=confidence_getter)


def bio_spans(tags: Sequence[str]) -> List[Tuple[int, int, str]]:
    """(start, end, type) of BIO tags; an I-X that does not continue an X span opens one (as CoNLL's eval)."""
    labels = list(dict.fromkeys(tags))
    index = {label: k for k, label in enumerate(labels)}
    ids = np.array([index[tag] for tag in tags], dtype=np.int64)
    return sequence_bio_spans(ids, np.array([0, len(ids)], dtype=np.int64), labels)[0]


def sentence_starts(docs: Sequence[Doc], seq_starts: np.ndarray) -> np.ndarray:
    """The batch positions where a sentence starts, in the docs whose sentences are set (by a reader, a
    sentencizer, a parser: some token after the first is marked 1 or -1); none in the others. One to_array a doc
    (Doc.has_annotation walks the tokens in Python)."""
    found = []
    for q, doc in enumerate(docs):
        marks = doc.to_array(SENT_START)
        if marks[1:].any():
            found.append(int(seq_starts[q]) + np.flatnonzero(marks == 1))
    return np.concatenate(found).astype(np.int64) if found else np.zeros(0, np.int64)


def bio_span_arrays(ids: np.ndarray, seq_starts: np.ndarray, labels: Sequence[str],
                    cut: Optional[np.ndarray] = None):
    """The BIO spans of every sequence of label ids at once, in array operations over all tokens: (owner, start,
    end, kind, kinds), span i covering positions start[i]:end[i] of the batch in sequence owner[i] with type
    kinds[kind[i]], in order of position. ``cut``: positions where no span continues (sentence starts: an entity
    never runs from one sentence into the next, though the model may label the two as one)."""
    parts = [label.partition("-") for label in labels]
    kinds = sorted({kind for _, _, kind in parts})
    kind_id = {kind: i for i, kind in enumerate(kinds)}
    prefix = np.array([{"B": 1, "I": 2}.get(pre, 0) for pre, _, _ in parts] + [0], dtype=np.int8)[ids]
    kind = np.array([kind_id[k] for _, _, k in parts] + [0], dtype=np.int64)[ids]
    T = len(ids)
    first = np.zeros(T, dtype=bool)
    first[seq_starts[:-1][seq_starts[:-1] < seq_starts[1:]]] = True
    if cut is not None:
        first[cut] = True
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
