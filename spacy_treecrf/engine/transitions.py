"""Transition masks: which label may follow which (S x K bool; row 0 = labels allowed at a sequence start, row
j + 1 = labels allowed after label j)."""
from typing import Sequence

import numpy as np
from ..errors import Errors


def bio_allowed(labels: Sequence[str]) -> np.ndarray:
    """Allowed-transition mask for BIO (IOB2) labels: I-X only after B-X or I-X, never at the start."""
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
    index = {label: k for k, label in enumerate(labels)}
    allowed = np.zeros((K + 1, K), dtype=np.bool_)
    for pair in transitions:
        prev, label = pair
        if label not in index or (prev is not None and prev not in index):
            continue  # a pair over labels the data never shows constrains nothing
        allowed[0 if prev is None else index[prev] + 1, index[label]] = True
    return allowed
