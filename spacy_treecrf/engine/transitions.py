"""Transition masks: which label may follow which (S x K bool; row 0 = labels allowed at a sequence start, row
j + 1 = labels allowed after label j)."""
from typing import Sequence

import numpy as np
from ..errors import Errors


def bio_allowed(labels: Sequence[str]) -> np.ndarray:
    """Allowed-transition mask for BIO (IOB2) labels: I-X only after B-X or I-X, never at the start. Labels of
    another scheme (BIOES' S-X / E-X, lower-case b-x, numbers) are refused (E215): the mask would constrain
    nothing of them."""
    for label in labels:
        if not (label == "O" or (isinstance(label, str) and label[:2] in ("B-", "I-") and len(label) > 2)):
            raise ValueError(Errors.E215.format(label=label, type_name=type(label).__name__))
    K = len(labels)
    allowed = np.ones((K + 1, K), dtype=np.bool_)
    for k, label in enumerate(labels):
        if label.startswith("I-"):
            kind = label[2:]
            allowed[0, k] = False
            for j, prev in enumerate(labels):
                allowed[j + 1, k] = prev in (f"B-{kind}", f"I-{kind}")
    return allowed


def transitions_allowed(labels: Sequence[str], transitions) -> np.ndarray:
    """The S x K mask from None (all allowed), "bio", or an iterable of (previous label or None, label) pairs."""
    K = len(labels)
    if transitions is None:
        return np.ones((K + 1, K), dtype=np.bool_)
    if isinstance(transitions, str):
        if transitions.lower() != "bio":
            raise ValueError(Errors.E048.format(transitions=transitions))
        return bio_allowed(labels)
    if not hasattr(transitions, "__iter__"):
        raise ValueError(Errors.E214.format(what=f"an object of type {type(transitions).__name__}"))
    index = {label: k for k, label in enumerate(labels)}
    allowed = np.zeros((K + 1, K), dtype=np.bool_)
    for pair in transitions:
        if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
            raise ValueError(Errors.E214.format(what=f"the item {pair!r}"))
        prev, label = pair
        if label not in index or (prev is not None and prev not in index):
            continue  # a pair over labels the data never shows constrains nothing
        allowed[0 if prev is None else index[prev] + 1, index[label]] = True
    return allowed


def first_forbidden(y: np.ndarray, seq_starts: np.ndarray, allowed: np.ndarray):
    """The first gold label the mask forbids where it stands, as (sequence, position in it, previous label id or -1
    at a sequence start, label id), or None. Only known labels next to known labels (or a sequence start) are
    checked: training on such a sequence has no path, so its loss would be infinite every round."""
    y = np.asarray(y)
    T = len(y)
    if T == 0:
        return None
    is_start = np.zeros(T, dtype=bool)
    is_start[seq_starts[:-1][seq_starts[:-1] < seq_starts[1:]]] = True
    prev = np.concatenate([[-1], y[:-1]])
    state = np.where(is_start, 0, prev + 1)  # 0: start; j + 1: after label j; 0 also where prev is unknown
    checked = (y >= 0) & (is_start | (prev >= 0))
    bad = np.flatnonzero(checked & ~allowed[state, np.maximum(y, 0)])
    if not len(bad):
        return None
    t = int(bad[0])
    q = int(np.searchsorted(seq_starts, t, side="right") - 1)
    return q, t - int(seq_starts[q]), -1 if is_start[t] else int(prev[t]), int(y[t])

