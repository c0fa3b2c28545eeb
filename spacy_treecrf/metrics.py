"""Scores of label sequences under sklearn-crfsuite's names, so that a script written for it keeps its evaluation
when it switches (``from spacy_treecrf import metrics``), without scikit-learn.

The ``flat_*`` functions score every position of every sequence as one item, as sklearn-crfsuite's do (they hand
the flattened labels to scikit-learn): ``average`` is scikit-learn's (``"binary"``, the default, scores
``pos_label`` and refuses more than two labels; ``"micro"``, ``"macro"``, ``"weighted"``; None for one score per
label), ``labels`` the labels to score and their order, and a score whose denominator is 0 is ``zero_division``
(0.0 by default, as scikit-learn's "warn" gives, without its warning). ``sequence_accuracy_score`` counts whole
sequences; ``entity_f1_score`` scores BIO spans (CoNLL's conlleval: a span is right when its type and both ends
are).
"""
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .errors import Errors

AVERAGES = ("binary", "micro", "macro", "weighted", None)


def flatten(y) -> list:
    """Every position's label of every sequence, in order."""
    return [label for sequence in y for label in sequence]


def _flat(y_true, y_pred) -> Tuple[list, list]:
    true, pred = flatten(y_true), flatten(y_pred)
    if len(true) != len(pred):
        raise ValueError(Errors.E226.format(n_true=len(true), n_pred=len(pred)))
    return true, pred


def flat_accuracy_score(y_true, y_pred) -> float:
    """The share of positions whose predicted label is the true one."""
    true, pred = _flat(y_true, y_pred)
    return sum(t == p for t, p in zip(true, pred)) / len(true) if true else 0.0


def flat_precision_recall_fscore_support(y_true, y_pred, beta: float = 1.0, labels: Optional[Sequence] = None,
                                         pos_label=1, average: Optional[str] = None, zero_division: float = 0.0):
    """(precision, recall, F-beta, support) over positions, per label (``average`` None: arrays in the order of
    ``labels``, or of the sorted labels of both) or averaged (floats; support None), as scikit-learn's
    precision_recall_fscore_support of the flattened labels."""
    if average not in AVERAGES:
        raise ValueError(Errors.E227.format(average=average, averages=AVERAGES))
    true, pred = _flat(y_true, y_pred)
    present = sorted(set(true) | set(pred), key=_order)
    if average == "binary":
        if len(present) > 2:
            raise ValueError(Errors.E228.format(labels=present[:10], n=len(present)))
        if len(present) == 2 and pos_label not in present:
            raise ValueError(Errors.E229.format(pos_label=pos_label, labels=present))
        labels = [pos_label]
    elif labels is None:
        labels = present
    labels = list(labels)
    index = {label: i for i, label in enumerate(labels)}
    tp, n_pred, n_true = (np.zeros(len(labels)) for _ in range(3))
    for t, p in zip(true, pred):
        if t in index:
            n_true[index[t]] += 1
            if t == p:
                tp[index[t]] += 1
        if p in index:
            n_pred[index[p]] += 1
    if average == "micro":
        tp, n_pred, n_true = tp.sum(keepdims=True), n_pred.sum(keepdims=True), n_true.sum(keepdims=True)
    precision = _ratio(tp, n_pred, zero_division)
    recall = _ratio(tp, n_true, zero_division)
    b2 = beta * beta
    f = _ratio((1 + b2) * precision * recall, b2 * precision + recall, zero_division)
    if average is None:
        return precision, recall, f, n_true.astype(np.int64)
    if average == "weighted":
        weights = n_true if n_true.sum() else np.ones_like(n_true)
        if not n_true.sum():
            return (float(zero_division),) * 3 + (None,)
    else:
        weights = np.ones_like(n_true)
    if not len(weights):
        return (float(zero_division),) * 3 + (None,)
    return (float(np.average(precision, weights=weights)), float(np.average(recall, weights=weights)),
            float(np.average(f, weights=weights)), None)


def flat_precision_score(y_true, y_pred, labels=None, pos_label=1, average="binary", zero_division=0.0):
    """Precision over positions (flat_precision_recall_fscore_support)."""
    return flat_precision_recall_fscore_support(y_true, y_pred, 1.0, labels, pos_label, average, zero_division)[0]


def flat_recall_score(y_true, y_pred, labels=None, pos_label=1, average="binary", zero_division=0.0):
    """Recall over positions (flat_precision_recall_fscore_support)."""
    return flat_precision_recall_fscore_support(y_true, y_pred, 1.0, labels, pos_label, average, zero_division)[1]


def flat_fbeta_score(y_true, y_pred, beta, labels=None, pos_label=1, average="binary", zero_division=0.0):
    """F-beta over positions (flat_precision_recall_fscore_support)."""
    return flat_precision_recall_fscore_support(y_true, y_pred, beta, labels, pos_label, average, zero_division)[2]


def flat_f1_score(y_true, y_pred, labels=None, pos_label=1, average="binary", zero_division=0.0):
    """F1 over positions (flat_precision_recall_fscore_support)."""
    return flat_precision_recall_fscore_support(y_true, y_pred, 1.0, labels, pos_label, average, zero_division)[2]


def flat_classification_report(y_true, y_pred, labels=None, target_names=None, digits: int = 2,
                               output_dict: bool = False, zero_division=0.0):
    """scikit-learn's classification_report of the flattened labels: per label precision, recall, F1 and support,
    then "accuracy" (or, where ``labels`` leave some out, "micro avg"), "macro avg" and "weighted avg"; the text
    table, or with ``output_dict`` the same as a dict."""
    true, pred = _flat(y_true, y_pred)
    all_labels = sorted(set(true) | set(pred), key=_order)
    labels = all_labels if labels is None else list(labels)
    names = [str(label) for label in labels] if target_names is None else list(target_names)
    per_label = flat_precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=zero_division)
    rows: Dict[str, object] = {}
    for i, name in enumerate(names):
        rows[name] = {"precision": float(per_label[0][i]), "recall": float(per_label[1][i]),
                      "f1-score": float(per_label[2][i]), "support": int(per_label[3][i])}
    support = int(per_label[3].sum())
    micro = not set(labels) >= set(all_labels)  # (scikit-learn's rule: accuracy only when every label is scored)
    for average in ("micro", "macro", "weighted"):
        if average == "micro" and not micro:
            rows["accuracy"] = flat_accuracy_score(y_true, y_pred)
            continue
        p, r, f, _ = flat_precision_recall_fscore_support(y_true, y_pred, labels=labels, average=average,
                                                          zero_division=zero_division)
        rows[f"{average} avg"] = {"precision": p, "recall": r, "f1-score": f, "support": support}
    return rows if output_dict else _report_text(rows, names, digits, support)


def _report_text(rows: Dict[str, object], names: List[str], digits: int, support: int) -> str:
    """classification_report's text layout, column for column."""
    width = max([len(name) for name in names] + [len("weighted avg"), digits])
    fields = ("precision", "recall", "f1-score")
    row_fmt = "{:>{width}s} " + " {:>9.{digits}f}" * 3 + " {:>9}\n"
    text = ("{:>{width}s} " + " {:>9}" * 4).format("", *fields, "support", width=width) + "\n\n"
    for name in names:
        text += row_fmt.format(name, *(rows[name][k] for k in fields), rows[name]["support"], width=width,
                               digits=digits)
    text += "\n"
    for key, row in rows.items():
        if key == "accuracy":
            text += ("{:>{width}s} " + " {:>9}" * 2 + " {:>9.{digits}f} {:>9}\n").format(
                key, "", "", row, support, width=width, digits=digits)
        elif key not in names:
            text += row_fmt.format(key, *(row[k] for k in fields), row["support"], width=width, digits=digits)
    return text


def sequence_accuracy_score(y_true, y_pred) -> float:
    """The share of sequences predicted whole (0 for none)."""
    if len(y_true) != len(y_pred):
        raise ValueError(Errors.E226.format(n_true=len(y_true), n_pred=len(y_pred)))
    if not len(y_true):
        return 0
    return sum(list(t) == list(p) for t, p in zip(y_true, y_pred)) / len(y_true)


def bio_entities(y) -> set:
    """The (sequence, start, end, type) of every BIO span of sequences of labels (an I-X that continues no X span
    opens one, as conlleval reads it)."""
    spans = set()
    for q, labels in enumerate(y):
        start, kind = None, None
        for i, label in enumerate(list(labels) + ["O"]):
            prefix, _, this = str(label).partition("-")
            continues = prefix == "I" and kind == this
            if start is not None and not continues:
                spans.add((q, start, i, kind))
                start, kind = None, None
            if prefix in ("B", "I") and this and not continues:
                start, kind = i, this
    return spans


def entity_f1_score(y_true, y_pred) -> float:
    """F1 of the BIO spans (types and both ends exact), micro-averaged over types as conlleval does."""
    return entity_precision_recall_f1(y_true, y_pred)[2]


def entity_precision_recall_f1(y_true, y_pred) -> Tuple[float, float, float]:
    """Precision, recall and F1 of the BIO spans (entity_f1_score)."""
    if len(y_true) != len(y_pred):
        raise ValueError(Errors.E226.format(n_true=len(y_true), n_pred=len(y_pred)))
    true, pred = bio_entities(y_true), bio_entities(y_pred)
    hits = len(true & pred)
    p = hits / len(pred) if pred else 0.0
    r = hits / len(true) if true else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def _ratio(num: np.ndarray, den: np.ndarray, zero_division: float) -> np.ndarray:
    out = np.full(np.shape(num), float(zero_division))
    np.divide(num, den, out=out, where=den != 0)
    return out


def _order(label):
    """Sort key of labels of mixed types (scikit-learn sorts them as numpy does: numbers before strings)."""
    return (isinstance(label, str), label)
