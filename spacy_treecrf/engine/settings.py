"""The boosting settings: BoostParams (every setting of a fit, written once: the estimator's keyword arguments and a
treecrf component's [booster] block are its fields), their bounds, and how the "auto" values resolve against the
size of the data.
"""
import dataclasses
from dataclasses import dataclass, field
import os
from typing import Union

import numpy as np

from . import missing
from .leaves import CELL_MEAN, NEWTON, POSITION_MEAN
from ..errors import Errors

LOSSES = ("crf", "pseudo_likelihood", "hamming", "rank")


DECODERS = ("viterbi", "marginal")


LEAF_VALUES = {"mean": CELL_MEAN, "newton": NEWTON, "position_mean": POSITION_MEAN}  # leaves.leaf_values' modes


# "best": a leaf splits on the previous label where that gains more than its best feature split (the paper's
# trees); "fallback": only where no feature split gains at all. Fewer label splits make tagging cheaper: a row
# goes down both sides of a label split that its previous labels straddle.
LABEL_SPLITS = ("best", "fallback")


# Bounds of what a config or a model file may ask for: larger trees than MAX_LEAVES leaves would allocate their
# node arrays (2 * max_leaves rows of S states) before growing anything; threads beyond MAX_THREADS only cost.
MAX_LEAVES = 100_000


MAX_THREADS = 256


MAX_STACK_WINDOW = 10  # first-stage labels this far either side; wider windows made no dev gain


TYPE_WORDS = {int: "an integer", float: "a finite number", str: "a string", bool: "true or false",
              Union[float, str]: 'a finite number or "auto"', Union[int, str]: 'an integer or "auto"'}


# shrinkage "auto" (resolved_shrinkage): lambda = AUTO_SHRINKAGE_POSITIONS / the training positions, within
# AUTO_SHRINKAGE_RANGE
AUTO_SHRINKAGE_POSITIONS = 150_000


AUTO_SHRINKAGE_RANGE = (1.0, 10.0)


# max_leaves "auto" (resolved_max_leaves): a leaf per AUTO_LEAF_POSITIONS training positions, within AUTO_LEAVES_RANGE
AUTO_LEAF_POSITIONS = 50


AUTO_LEAVES_RANGE = (1000, 3000)


# The paper's model (Dietterich, Hao & Ashenfelter 2008): a tree per label and round over every feature column, its
# mean leaves, label splits wherever they gain. Not the defaults (BoostParams: chosen on dev data across tasks), but
# what the paper's experiments and the engine's tests run: TreeCRF(max_leaves=100, **PAPER_SETTINGS).
PAPER_SETTINGS = {"shared_trees": False, "leaf_values": "mean", "l1": 0.0, "colsample": 1.0, "label_splits": "best"}


def setting(default, help: str):
    """A BoostParams field: its default and what it means (the README's settings table is made from these)."""
    return field(default=default, metadata={"help": help})


@dataclass
class BoostParams:
    """Tree and round settings, written once: the estimator's keyword arguments and a treecrf component's
    [components.treecrf.booster] block are these fields, with these defaults (chosen on dev data across tasks:
    benchmarks/results/defaults_candidates.md). Checked once here so every caller gets the same messages."""

    max_leaves: Union[int, str] = setting(
        "auto", 'leaves per regression tree (best-first growth); `"auto"`: 1000 up to 50,000 training positions, '
                '3000 from 150,000 (a leaf per 50 positions between)')
    shrinkage: Union[float, str] = setting(
        "auto", 'the paper\'s λ: a leaf\'s value is ΣΔ / (λ + N); `"auto"`: 10 up to 15,000 training positions, 1 '
                'from 150,000 (150,000 / positions between)')
    learning_rate: float = setting(1.0, "multiplies every tree (1.0 as in the paper)")
    min_samples_leaf: float = setting(1.0, "no child with less weight than this")
    min_gain: float = setting(0.0, "no split gaining this or less")
    subsample: float = setting(1.0, "fraction of positions each tree is fitted on (Friedman's stochastic boosting)")
    colsample: float = setting(0.5, "fraction of feature columns each tree may split on, drawn afresh per tree")
    trim: float = setting(
        0.0, "influence trimming: label k's tree is fitted only on the positions where some residual of label k "
             "reaches this magnitude (it still moves every position); 0.05 with 1000-leaf trees made CoNLL-2000 "
             "rounds about twice as cheap and more accurate from round 5 on "
             "([the run](benchmarks/results/speed_chunking_trim.md))")
    random_state: int = setting(0, "seed (subsampling, column draws, held-out sequences)")
    n_threads: int = setting(
        0, "threads (0: up to 8; never more than the machine's cores, at most 256; a shared tree of 100,000 or more "
           "positions grows on two, the same tree as on one)")
    loss: str = setting(
        "crf", "what the trees boost: `crf` (the paper's log-likelihood), `pseudo_likelihood`, `hamming` or `rank`; "
               "see [Choosing a loss](#choosing-a-loss)")
    missing: str = setting(
        "instance_weighting", "how missing inputs are handled: `instance_weighting`, `surrogate`, `imputation`, "
                              "`indicator` or `learned_direction` (see [Missing input values](#missing-input-values))")
    leaf_values: str = setting(
        "position_mean", "`position_mean`: ΣΔ / (λ + the leaf's positions), so a leaf that spans all previous "
                         "states moves each position by its gradient I(y = k) − P(y = k); `mean`: the paper's "
                         "ΣΔ / (λ + N) over the leaf's N (position, previous state) cells; `newton`: "
                         "ΣΔ / (λ + ΣP(1 − P)) clipped to [−1, 1], one Newton step on the CRF loss "
                         "(`loss = \"crf\"`)")
    label_splits: str = setting(
        "fallback", "`fallback`: a leaf splits on the previous label only where no feature split gains (a row goes "
                    "down both sides of a label split its previous labels straddle, so this tags much faster); "
                    "`best`: wherever that gains more than the best feature split (the paper's trees). Runs: "
                    "[docs/config_choices.md](docs/config_choices.md)")
    shared_trees: bool = setting(
        True, "one tree a round for all labels, a value per label in each leaf (`false`: a tree per label and "
              "round, the paper's; see [How it works](#how-it-works))")
    l1: float = setting(
        0.1, "an L1 penalty on leaf values: a label's residual sum in a leaf is shrunk by `l1` towards 0, so "
             "shared trees' leaves keep only the labels that matter there")
    stack_window: int = setting(
        0, "stacked sequential learning (Cohen & Carvalho 2005): with w > 0 a first model is fitted, its labels on "
           "the training data taken from two fold models (each labels the half the other was fitted on), and the "
           "trees then go on from those scores with tests on the first model's labels w positions either side and "
           "on its marginals; 0: one model. See [More context](#more-context)")

    def __post_init__(self):
        for f in dataclasses.fields(self):  # the type first: a string "10" must not reach a comparison
            value = getattr(self, f.name)
            if f.type is str:
                ok = isinstance(value, str)
            elif f.type is bool:
                ok = isinstance(value, (bool, np.bool_))
            elif isinstance(value, str):  # Union[float | int, str]: a number or "auto" (in: == on typing objects)
                ok = f.type in (Union[float, str], Union[int, str]) and value == "auto"
            elif f.type in (int, Union[int, str]):
                ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
            else:
                ok = (isinstance(value, (int, float, np.integer, np.floating))
                      and not isinstance(value, (bool, np.bool_)) and bool(np.isfinite(value)))
            if not ok:
                raise ValueError(Errors.E015.format(name=f.name, want=TYPE_WORDS[f.type], value=value))
        if self.loss not in LOSSES:
            raise ValueError(Errors.E010.format(losses=LOSSES, loss=self.loss))
        if self.leaf_values not in LEAF_VALUES:
            raise ValueError(Errors.E011.format(choices=tuple(LEAF_VALUES), leaf_values=self.leaf_values))
        if self.label_splits not in LABEL_SPLITS:
            raise ValueError(Errors.E012.format(choices=LABEL_SPLITS, label_splits=self.label_splits))
        if self.leaf_values == "newton" and self.loss != "crf":
            raise ValueError(Errors.E013.format(loss=self.loss))
        missing.check_strategy(self.missing, "TreeCRF")
        checks = [
            ("max_leaves", self.max_leaves == "auto" or 2 <= self.max_leaves <= MAX_LEAVES,
             f'an integer in [2, {MAX_LEAVES}] or "auto"'),
            ("shrinkage", self.shrinkage == "auto" or self.shrinkage >= 0, '>= 0 or "auto"'),
            ("l1", self.l1 >= 0, ">= 0"),
            ("learning_rate", 0 < self.learning_rate <= 10, "in (0, 10] (|leaf value| <= 1, so this keeps exp() "
                                                                  "of a round finite in the float32 cache)"),
            ("min_samples_leaf", self.min_samples_leaf >= 0, ">= 0"),
            ("min_gain", self.min_gain >= 0, ">= 0"),
            ("subsample", 0 < self.subsample <= 1, "in (0, 1]"),
            ("colsample", 0 < self.colsample <= 1, "in (0, 1]"),
            ("trim", 0 <= self.trim < 1, "in [0, 1)"),
            ("n_threads", 0 <= self.n_threads <= MAX_THREADS, f"in [0, {MAX_THREADS}] (0 = all cores)"),
            ("random_state", self.random_state >= 0, "an integer >= 0 (the seed)"),
            ("stack_window", 0 <= self.stack_window <= MAX_STACK_WINDOW, f"in [0, {MAX_STACK_WINDOW}]"),
        ]
        for name, ok, want in checks:
            if not ok:
                raise ValueError(Errors.E015.format(name=name, want=want, value=getattr(self, name)))
        if self.max_leaves != "auto":
            self.max_leaves = int(self.max_leaves)

    @property
    def threads(self) -> int:
        """Worker threads: n_threads (0: up to 8), never more than the machine's cores, which is all they
        could use."""
        return min(self.n_threads or 8, os.cpu_count() or 1)


def resolved_shrinkage(shrinkage: Union[float, str], n_positions: int) -> float:
    """The paper's lambda for a fit over ``n_positions`` training positions: the setting itself, or for "auto"
    AUTO_SHRINKAGE_POSITIONS / n_positions within AUTO_SHRINKAGE_RANGE (10 up to 15,000 positions, 1 from
    150,000). Chosen on dev data across tasks (benchmarks/results/defaults_candidates.md): the tasks with 5,000 to
    15,000 training positions (NETtalk, protein, the synthetic HMM) scored best with 10, those with 134,000 to
    223,000 (CoNLL-2003, CoNLL-2000, EWT UPOS, XPOS and cross-genre, Moby hyphenation) with 1. A leaf's value is
    its residual sum over (lambda + its positions): where the data is small, most leaves hold a few positions and
    lambda keeps them from fitting noise; where it is large, the small leaves are its rare words and patterns,
    which lambda = 10 held back (the XPOS runs there)."""
    if shrinkage != "auto":
        return float(shrinkage)
    low, high = AUTO_SHRINKAGE_RANGE
    return float(min(high, max(low, AUTO_SHRINKAGE_POSITIONS / max(n_positions, 1))))


def resolved_max_leaves(max_leaves: Union[int, str], n_positions: int) -> int:
    """A tree's most leaves for a fit over ``n_positions`` training positions: the setting itself, or for "auto"
    a leaf per AUTO_LEAF_POSITIONS positions within AUTO_LEAVES_RANGE (1000 up to 50,000 positions, 3000 from
    150,000). Chosen on dev data across tasks (benchmarks/results/defaults_candidates.md, "Leaves by the size of
    the data"): on the large corpora a 3000-leaf tree does the work of two or three 1000-leaf ones (EWT XPOS),
    while on a few thousand positions more leaves only fit noise (NETtalk phoneme+stress)."""
    if max_leaves != "auto":
        return int(max_leaves)
    low, high = AUTO_LEAVES_RANGE
    return int(min(high, max(low, n_positions // AUTO_LEAF_POSITIONS)))


BOOST_DEFAULTS = BoostParams()  # every setting's default, for the signatures that name them (TreeCRF, make_booster)


def settings_table() -> str:
    """The README's table of the boosting settings (markdown rows), made from BoostParams' fields."""
    def shown(value) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        return f'`"{value}"`' if isinstance(value, str) else str(value)
    rows = ["| setting | default | meaning |", "|---|---|---|"]
    rows += [f"| `{f.name}` | {shown(f.default)} | {f.metadata['help']} |" for f in dataclasses.fields(BoostParams)]
    return "\n".join(rows)
