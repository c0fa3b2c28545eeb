"""`TreeCRF`: the engine as a small estimator over any sequence data, in sklearn-crfsuite's input format."""
import contextvars
import dataclasses
import functools
import inspect
import math
import warnings
from collections import Counter
from itertools import chain, repeat
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from .engine import serialize
from .engine.ensemble import Ensemble
from .engine.settings import BOOST_DEFAULTS as B, DECODERS, PAPER_SETTINGS, BoostParams
from .engine.crf import MAX_NBEST
from .engine.memory import check_training_memory
from .engine.missing import ENGINE_STRATEGIES, MissingRows
from .engine.numeric import NumericIndex, bin_uppers, bins_of, numeric_index
from .engine.rules import Explanation
from .engine.sparse import pairs_to_rows, segments_to_rows, window_rows
from .engine.transitions import transitions_allowed
from .engine import missing
from .crfsuite_api import CRFSUITE_SETTINGS, CRFsuiteMethods
from .model import (Columns, Confidence, EngineRows, Known, SequenceModel, Validation, is_label, load,
                    resolved_patience)
from .errors import Errors, Warnings, excerpt

Position = Union[Dict[str, object], Iterable[str]]
NUMBERS = (int, float, np.integer, np.floating)  # a dict value of these types (not bool) is a number
NO_FEATURE = -2  # FeatureIndex._item_table's column of an item that gives no feature (a False value)
NUMBER_TYPES = frozenset({int, float, np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                          np.uint8, np.uint16, np.uint32, np.uint64})  # the usual ones, for _known_rows
BOOST_SETTINGS = {f.name: f.default for f in dataclasses.fields(BoostParams)}
EARLY_STOPPING = ("auto", True, False)
SMALL_TREES_CHOICES = ("auto", True, False)


class Profile(NamedTuple):
    """One of small_trees' fits: the settings it gives the trees (over the estimator's) and its round budget, a
    multiple of n_rounds."""
    settings: dict
    rounds: int


# small_trees' fits (benchmarks/results/small_trees.md):
# - per_label: the paper's own model (Sec. 7: a tree per label and round of up to 100 leaves, lambda 200, the
#   lambda its grid chose on protein and NETtalk), which marginal decoding prefers on few labels and few positions
#   (PER_LABEL_LABELS, PER_LABEL_CELLS) to the default shared trees, with as many trees as they have at most
#   (round_budget: their 100 leaves then tag faster than the shared trees' 1000; protein's hold-out kept 255 trees,
#   which tagged at 0.6x). Viterbi decoding loses with them (protein's dev split: -2.8 points);
# - paper: the paper's tree size in shared trees, which Viterbi decoding prefers on the synthetic HMMs;
# - small: 16 leaves with Newton values and previous-label splits wherever they gain most, which marginal decoding
#   prefers on both synthetic HMMs;
# the two last up to 3 x n_rounds (their learning rate is about a third of the default's).
SMALL_TREES = {"per_label": Profile({**PAPER_SETTINGS, "max_leaves": 100, "shrinkage": 200.0}, 1),
               "paper": Profile({"max_leaves": 100, "min_samples_leaf": 5.0, "learning_rate": 0.3}, 3),
               "small": Profile({"max_leaves": 16, "min_samples_leaf": 5.0, "learning_rate": 0.3,
                                 "leaf_values": "newton", "label_splits": "best"}, 3)}
# The fits of a small fit, in order, by decoding (None: the estimator's own settings): the first is the model
# without validation data; with it, the others are fitted too below SMALL_DATA positions and the best validation
# accuracy is kept (a tie keeps the earlier). Marginal decoding's first fit is per_label only where the data has
# at most PER_LABEL_LABELS labels and PER_LABEL_CELLS positions x labels ("auto"), else the estimator's own: on the
# dev splits per_label gained on 2 and 3 labels (protein +0.34 points, the synthetic HMMs, hyphenation's first
# 18,000 positions +1.24) and lost on 5 (NETtalk stress -1.26), 9 to 19 (the CoNLL NER and chunk tags) and 54,000
# positions of 2 labels (-0.39). With per_label first, the shared 100-leaf trees only took the hold-out's vote
# from better models (the synthetic HMM's dev draws: median 0.81 points below Bayes-optimal against 0.48).
SMALL_TREE_FITS = {"viterbi": (None, "paper", "small"), "marginal": ("per_label", "small")}
PER_LABEL_LABELS, PER_LABEL_CELLS = 3, 100_000
SMALL_DATA = 15_000  # (shrinkage "auto"'s small-data bound; past it the extra fits cost more than they find: on
# 1,000 CoNLL-2000 sentences, 21,000 training positions of 23 labels, they took the fit from 6.1 to 24.8 s and the
# default trees were kept)
AUTO_MIN_VALIDATION = 1_000  # early_stopping="auto" holds out sequences that hold at least this many positions
MAX_WINDOW = 50  # the most positions either side a window reads (columns grow as 2 x window + 1)
PAD = "<pad>"  # a window column's name for the positions past a sequence's ends


_MISSED: contextvars.ContextVar = contextvars.ContextVar("missed")  # this thread's (key, value) items not found


class _ValueTable(dict):
    """One dict key's value -> column (FeatureIndex._item_table). A value it lacks reads as -1 and is logged with
    the key in the calling thread's _MISSED list, so the lookups of all items run at C speed and only the missed
    ones are looked at again in Python."""
    __slots__ = ("key",)

    def __init__(self, key):
        super().__init__()
        self.key = key

    def __missing__(self, value):
        _MISSED.get().append((self.key, value))
        return -1


class _KeyTable(dict):
    """dict key -> its _ValueTable (FeatureIndex._item_table); a key it lacks reads as an empty one (not kept)."""

    def __missing__(self, key):
        return _ValueTable(key)


class FeatureIndex:
    """Feature name -> column id and dict key -> variable id, frozen after fitting; unknown names are dropped at
    prediction. ``feature_var``: each feature's variable (-1: from a list of names). ``impute`` / ``indicator``:
    per variable, the feature that stands in for it when it is missing (-1: none), set by the 'imputation' /
    'indicator' strategies (and 'learned_direction', for variables without a numeric column).

    A key with int or float values is a numeric column (engine/numeric.py): ``numeric_keys`` in the order their
    columns were made, each with its bins' upper bounds (``uppers``, from the first fit's values) and its
    consecutive ids from ``numeric_base``; those ids' names read as their tests ('key <= 0.5'; the last bin's
    'key present') and are no feature names (not in ``ids``)."""

    def __init__(self, names: Sequence[str] = (), variables: Sequence[str] = (), feature_var=None, impute=None,
                 indicator=None, numeric_keys: Sequence[str] = (), uppers=(), numeric_base=()):
        self.names = list(names)
        self.numeric_keys = list(numeric_keys)
        self.numeric_of = {key: c for c, key in enumerate(self.numeric_keys)}
        self.uppers = [np.asarray(u, dtype=np.float64) for u in uppers]
        self.numeric_base = [int(b) for b in numeric_base]
        bins = {a for b, u in zip(self.numeric_base, self.uppers) for a in range(b, b + len(u) + 1)}
        self.ids = {name: i for i, name in enumerate(self.names) if i not in bins}
        self.variables = list(variables)
        self.var_ids = {name: i for i, name in enumerate(self.variables)}
        V = len(self.variables)
        self.feature_var = [-1] * len(self.names) if feature_var is None else [int(v) for v in feature_var]
        self.impute = np.full(V, -1, dtype=np.int32) if impute is None else np.asarray(impute, dtype=np.int32)
        self.indicator = np.full(V, -1, dtype=np.int32) if indicator is None else np.asarray(indicator,
                                                                                             dtype=np.int32)
        self._items = _KeyTable()  # see _item_table
        self._items_of = -1  # the number of names _items was built from

    def _column(self, name: str, var: int) -> int:
        """A new column for ``name`` (of variable ``var``)."""
        savable(name, "feature name")
        col = self.ids[name] = len(self.names)
        self.names.append(name)
        self.feature_var.append(var)
        return col

    def numeric_index(self) -> NumericIndex:
        """The engine's view of the numeric columns (numeric.NumericIndex)."""
        return numeric_index(len(self.names), self.numeric_base,
                             [b + len(u) + 1 for b, u in zip(self.numeric_base, self.uppers)])

    def test_names(self) -> "TestNames":
        return TestNames(self)

    def rows(self, X, grow: bool):
        """CSR rows (indptr, indices), sequence offsets and the missing variables (MissingRows) of a list of
        sequences. A position is a dict, an iterable of feature names or a string (one feature name: a sequence of
        tokens reads as their identities). A dict key is a variable: a string value gives the feature 'key=value'
        (as sklearn-crfsuite does), True the feature 'key', False none, an int or float (not a bool) the key's
        numeric column, and None or NaN mark the variable missing. At prediction a number of a key without a
        numeric column is read as a truth value (the flag 'key' if nonzero), as True and 1 are one dict key to
        _known_rows' table. Names of an iterable or a string belong to no variable. While growing,
        ``known`` counts per variable the positions where it has a value (what imputation counts over), and keys
        with numbers get their column and bins. Dicts of string keys and string or bool values take a path at C
        speed: _known_rows at prediction (numbers too), _grown_rows while growing; sequences of strings (a string
        position is one feature name) _name_rows."""
        known_rows = self._name_rows(X, grow)
        if known_rows is None:
            known_rows = self._grown_rows(X) if grow else self._known_rows(X)
        if known_rows is not None:
            return known_rows
        ids = self.ids
        indptr = [0]
        indices: List[int] = []
        mindptr = [0]
        mindices: List[int] = []
        known = Counter()
        seq_starts = [0]
        numbers: List[Tuple[int, str, float]] = []  # (position, key, value) of numeric values
        for q, seq in enumerate(X):
            for t, position in enumerate(seq):
                row = set()
                gone = []
                if isinstance(position, dict):
                    for key, value in flat_items(position, q, t):
                        if isinstance(value, str):
                            name = f"{key}={value}"
                        elif value is None or (is_number(value) and value != value):  # None, NaN
                            var = self._variable(str(key), grow)
                            if var >= 0:
                                gone.append(var)
                            continue
                        elif is_number(value) and (grow or str(key) in self.numeric_of):
                            numbers.append((len(indptr) - 1, str(key), as_float(value)))
                            continue
                        else:
                            name = str(key)
                            if not value:
                                if grow:
                                    known[self._variable(name, grow)] += 1
                                continue
                        col = ids.get(name)
                        if col is None and grow:
                            col = self._column(name, self._variable(str(key), grow))
                        if grow:
                            known[self.feature_var[col]] += 1
                        if col is not None:
                            row.add(col)
                else:
                    if not isinstance(position, str) and not hasattr(position, "__iter__"):
                        raise TypeError(Errors.E213.format(q=q, t=t, kind=type(position).__name__))
                    for name in ([position] if isinstance(position, str) else position):
                        if isinstance(name, (dict, list, tuple, set, frozenset)):
                            raise TypeError(Errors.E218.format(q=q, t=t, kind=type(name).__name__))
                        name = str(name)
                        col = ids.get(name)
                        if col is None and grow:
                            col = self._column(name, -1)
                        if col is not None:
                            row.add(col)
                indices.extend(sorted(row))
                indptr.append(len(indices))
                if gone:
                    mindices.extend(sorted(set(gone)))
                mindptr.append(len(mindices))
            seq_starts.append(len(indptr) - 1)
        indptr, indices = np.array(indptr, dtype=np.int64), np.array(indices, dtype=np.int32)
        if numbers:
            indptr, indices = self._with_numbers(indptr, indices, numbers, grow, known)
        self._grow_tables()
        V = len(self.variables)
        missing_rows = MissingRows(np.array(mindptr), np.array(mindices), np.array(self.feature_var, dtype=np.int32),
                                   V, np.array([known[v] for v in range(V)], dtype=np.int64))
        return indptr, indices, np.array(seq_starts, dtype=np.int64), missing_rows

    def _with_numbers(self, indptr, indices, numbers, grow: bool, known: Counter):
        """The rows with each (position, key, value) of ``numbers`` as its bin's id in the key's numeric column;
        while growing, keys without a column get one, binned on these values (numeric.bin_uppers), except keys
        whose numbers are all 0 or 1 (sklearn-crfsuite's way of saying present, ``"bias": 1.0``): those are
        flags, the feature 'key' where the value is 1, as True gives it (a column of two bins would be the same
        test at the cost of a numeric column)."""
        position, keys, values = zip(*numbers)
        position, values = np.array(position, dtype=np.int64), np.array(values, dtype=np.float64)
        keys = np.array(keys, dtype=object)
        flag_rows, flag_ids = [], []
        for key in dict.fromkeys(keys.tolist()):
            if key not in self.numeric_of and grow:
                at = keys == key
                if np.isin(values[at], (0.0, 1.0)).all():
                    col = self.ids.get(key)
                    col = self._column(key, self._variable(key, True)) if col is None else col
                    flag_rows.append(position[at & (values == 1.0)])
                    flag_ids.append(np.full(len(flag_rows[-1]), col, dtype=np.int64))
                    known[self.feature_var[col]] += int(at.sum())
                    position, keys, values = position[~at], keys[~at], values[~at]
                    continue
                self._numeric_column(key, bin_uppers(values[at]))
        if flag_rows:
            row_of = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
            indptr, indices = pairs_to_rows(np.concatenate([row_of] + flag_rows),
                                            np.concatenate([indices] + flag_ids).astype(np.int32), len(indptr) - 1)
        if not len(keys):
            return indptr, indices
        column = np.array([self.numeric_of[key] for key in keys.tolist()], dtype=np.int64)
        if grow:
            known.update(self.feature_var[self.numeric_base[c]] for c in column.tolist())
        atoms = self._bin_ids(column, values)
        keep = atoms >= 0
        row_of = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        return pairs_to_rows(np.concatenate([row_of, position[keep]]),
                             np.concatenate([indices, atoms[keep]]).astype(np.int32), len(indptr) - 1)

    def _numeric_column(self, key: str, uppers: np.ndarray):
        """A numeric column for ``key``: one id per bin, named as its test."""
        var = self._variable(key, True)
        self.numeric_of[key] = len(self.numeric_keys)
        self.numeric_keys.append(key)
        self.uppers.append(uppers)
        self.numeric_base.append(len(self.names))
        self.names.extend([f"{key} <= {u:.6g}" for u in uppers.tolist()] + [f"{key} present"])
        self.feature_var.extend([var] * (len(uppers) + 1))

    def _item_table(self) -> _KeyTable:
        """key -> value -> column of every known name a dict item gives: 'key=value' under [key][value] for keys
        without '=' (then the name's first '=' ends the key, and no two items give one name), every name under
        [name][True] (a truthy non-string value's feature; 1 and 1.0 hash as True and give the same one), and
        NO_FEATURE under [key][False] for every variable without a numeric column (False, 0 and 0.0: known, no
        feature). Two levels rather than (key, value) pairs: a key is hashed once (its string's hash is cached)
        and a pair's tuple is never built, 10% of the lookups' time on sklearn-crfsuite's tutorial features.
        Rebuilt when the names have grown."""
        if self._items_of != len(self.names):
            table = _KeyTable()
            for key in self.variables:
                if key not in self.numeric_of:
                    table.setdefault(key, _ValueTable(key))[False] = NO_FEATURE
            for name, col in self.ids.items():
                key, eq, value = name.partition("=")
                if eq:
                    table.setdefault(key, _ValueTable(key))[value] = col
                table.setdefault(name, _ValueTable(name))[True] = col
            self._items, self._items_of = table, len(self.names)
        return self._items

    def _known_rows(self, X):
        """rows() at prediction in a few passes over all items at C speed (sklearn-crfsuite's input is mostly
        dicts of strings, and a per-position loop cost more than the trees): every position a dict, each item in
        _item_table or a name no tree knows (a string key without '=', a string or bool value: dropped, as rows()
        drops unknown names; False gives no feature), or a number (_numeric_pairs). None when a position needs
        rows()' general path (a list of names, a missing value, an unhashable value)."""
        table = self._item_table()
        positions = list(chain.from_iterable(X))
        token = _MISSED.set([])
        try:  # one item at a time (a list of all items would cost more than the lookups)
            cols = np.fromiter(map(dict.__getitem__, map(table.__getitem__, chain.from_iterable(map(
                dict.keys, positions))), chain.from_iterable(map(dict.values, positions))), dtype=np.int64)
        except TypeError:  # not a dict, or an unhashable key or value
            return None
        finally:
            missed = _MISSED.get()
            _MISSED.reset(token)
        lengths = np.fromiter(map(len, positions), dtype=np.int64, count=len(positions))
        is_number = np.zeros(len(cols), dtype=bool)
        readable = (str, bool, *NUMBER_TYPES)  # the values of an item the table lacks that rows() may drop too
        if self.numeric_keys:  # numbers go to their columns (1 and 1.0 would find a flag's entry): find them
            kinds = set(map(type, chain.from_iterable(map(dict.values, positions))))
            if kinds - {str, bool} - NUMBER_TYPES:
                return None  # None, or a value of another type
            if kinds & NUMBER_TYPES:
                is_number = np.fromiter(map(NUMBER_TYPES.__contains__, map(type, chain.from_iterable(map(
                    dict.values, positions)))), dtype=bool, count=len(cols))
                cols[is_number] = -1
        for key, value in missed:
            if self.numeric_keys and type(value) in NUMBER_TYPES:
                continue  # (_numeric_pairs)
            if type(key) is not str or type(value) not in readable or value != value or (
                    key in table and True in table[key] if type(value) is not str else "=" in key):
                return None  # (NaN is missing; a truthy number of a flag key that is not 1 is the flag)
        if is_number.any():
            row_of = np.repeat(np.arange(len(positions), dtype=np.int64), lengths)
            numeric = self._numeric_pairs(positions, row_of, is_number)
            if numeric is None:
                return None
            keep = cols >= 0
            indptr, indices = pairs_to_rows(np.concatenate([row_of[keep], numeric[0]]),
                                            np.concatenate([cols[keep], numeric[1]]).astype(np.int32), len(positions))
        else:  # the items in position order: no sort by row
            indptr, indices = segments_to_rows(cols, lengths)
        seq_starts = np.zeros(len(X) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, X), dtype=np.int64, count=len(X)), out=seq_starts[1:])
        V = len(self.variables)
        missing_rows = MissingRows(np.zeros(len(positions) + 1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                                   np.array(self.feature_var, dtype=np.int32), V, np.zeros(V, dtype=np.int64))
        return indptr, indices, seq_starts, missing_rows

    def _grown_rows(self, X):
        """rows(X, grow=True) where every position is a dict of string keys and string (under a key without '='),
        bool, or 0 / 1 number values (sklearn-crfsuite's usual input, ``"bias": 1.0`` included), in a few passes
        at C speed: the distinct items, in the order the general path meets them, give the new names and variables
        in the order it gives them (so the same ids: a number's flag comes after, as _with_numbers gives it), then
        _known_rows reads the rows, and ``known`` counts each variable's items (an item is one position's value
        of its key: a dict holds a key once). None when a position needs the general path (a list of names, another
        number, a missing value, a string under a key with '=', a key that is no string)."""
        positions = list(chain.from_iterable(X))
        try:
            items = dict.fromkeys(chain.from_iterable(map(dict.items, positions)))
        except TypeError:  # not a dict, or an unhashable value
            return None
        typed = [(key, type(value), value) for key, value in items]
        if {kind for _, kind, _ in typed} & NUMBER_TYPES:  # True and 1 are one dict key: tell them apart, in order
            values = chain.from_iterable(map(dict.values, positions))
            typed = list(dict.fromkeys(zip(chain.from_iterable(map(dict.keys, positions)), map(
                type, chain.from_iterable(map(dict.values, positions))), values)))
        for key, kind, value in typed:
            if type(key) is not str or not (kind is bool or (issubclass(kind, str) and "=" not in key) or (
                    kind in NUMBER_TYPES and value in (0, 1) and key not in self.numeric_of)):
                return None
        for key, kind, value in typed:  # as rows()' loop: a False value makes its key's variable, a new name its
            if kind in NUMBER_TYPES:    # column; numbers wait for _with_numbers
                continue
            if value is False:
                self._variable(key, True)
                continue
            name = key if value is True else f"{key}={value}"
            if name not in self.ids:
                self._column(name, self._variable(key, True))
        for key in dict.fromkeys(key for key, kind, _ in typed if kind in NUMBER_TYPES):  # flags, as _with_numbers
            if key not in self.ids:
                self._column(key, self._variable(key, True))
        self._grow_tables()
        indptr, indices, seq_starts, missing_rows = self._known_rows(X)
        V = len(self.variables)
        var = np.array(self.feature_var, dtype=np.int64)[indices]
        known = np.bincount(var[var >= 0], minlength=V)
        if any(not value for _, kind, value in typed if kind is bool or kind in NUMBER_TYPES):
            falses = Counter(key for key, value in chain.from_iterable(map(dict.items, positions))
                             if not value and type(value) is not str)  # known, no feature (False, 0)
            for key, n in falses.items():
                known[self.var_ids[key]] += n
        missing_rows.known = known
        return indptr, indices, seq_starts, missing_rows

    def _name_rows(self, X, grow: bool):
        """rows(X, grow) where every position is a string, the name of its one feature (belonging to no variable:
        a token's symbol, say, read through a window), at C speed; None when a position is something else."""
        positions = list(chain.from_iterable(X))
        if (positions and type(positions[0]) is not str) or set(map(type, positions)) - {str}:  # (dicts: at once)
            return None
        if grow:
            for name in dict.fromkeys(positions):
                if name not in self.ids:
                    self._column(name, -1)
            self._grow_tables()
        cols = np.fromiter(map(self.ids.get, positions, repeat(-1)), dtype=np.int64, count=len(positions))
        known = cols >= 0
        indptr = np.zeros(len(positions) + 1, dtype=np.int64)
        np.cumsum(known, out=indptr[1:])
        seq_starts = np.zeros(len(X) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, X), dtype=np.int64, count=len(X)), out=seq_starts[1:])
        V = len(self.variables)
        missing_rows = MissingRows(np.zeros(len(positions) + 1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                                   np.array(self.feature_var, dtype=np.int32), V, np.zeros(V, dtype=np.int64))
        return indptr, cols[known].astype(np.int32), seq_starts, missing_rows

    def _numeric_pairs(self, positions, row_of, is_number):
        """(row, id) of every number of _known_rows' items (``is_number``, in item order): its bin's where its key
        has a numeric column, else, where it is not 0, its key's flag (others are dropped, as rows() drops them);
        None if one is NaN (missing: rows())."""
        items = [item for item, number in zip(chain.from_iterable(map(dict.items, positions)), is_number.tolist())
                 if number]
        try:
            values = np.array([value for _, value in items], dtype=np.float64)
        except OverflowError:  # an int beyond a float's range
            values = np.array([as_float(value) for _, value in items], dtype=np.float64)
        if np.isnan(values).any():
            return None
        keys = [key for key, _ in items]
        column = np.fromiter(map(self.numeric_of.get, keys, repeat(-1)), dtype=np.int64, count=len(items))
        atoms = self._bin_ids(column, values)
        table = self._item_table()
        flags = np.fromiter(map(dict.get, map(table.__getitem__, keys), repeat(True), repeat(-1)), dtype=np.int64,
                            count=len(items))
        atoms = np.where((column < 0) & (values != 0), flags, atoms)
        rows = row_of[is_number]
        return rows[atoms >= 0], atoms[atoms >= 0]

    def _bin_ids(self, column, values) -> np.ndarray:
        """The id of each value's bin in its numeric column (column: -1 for none; the id then -1, as for NaN)."""
        atoms = np.full(len(column), -1, dtype=np.int64)
        for c in np.unique(column[column >= 0]).tolist():
            at = column == c
            bins = bins_of(values[at], self.uppers[c])
            atoms[at] = np.where(bins >= 0, self.numeric_base[c] + bins, -1)
        return atoms

    def _variable(self, key: str, grow: bool) -> int:
        var = self.var_ids.get(key, -1)
        if var < 0 and grow:
            savable(key, "feature key")
            var = self.var_ids[key] = len(self.variables)
            self.variables.append(key)
        return var

    def _grow_tables(self):
        V = len(self.variables)
        if len(self.impute) < V:
            self.impute = np.concatenate([self.impute, np.full(V - len(self.impute), -1, dtype=np.int32)])
            self.indicator = np.concatenate([self.indicator, np.full(V - len(self.indicator), -1, dtype=np.int32)])

    def learn_fill(self, indptr, indices, missing_rows: MissingRows, strategy: str):
        """From the training rows: the imputation table (missing.most_common_columns) or one indicator feature per
        variable ('<key> missing', belonging to no variable)."""
        if strategy == "imputation":  # a continued fit keeps the values its trees were grown with
            fresh = missing.most_common_columns(indptr, indices, missing_rows)
            kept = np.full(len(fresh), -1, dtype=fresh.dtype)
            kept[:min(len(fresh), len(self.impute))] = self.impute[:len(fresh)]
            self.impute = np.where(kept >= 0, kept, fresh)
        else:  # 'learned_direction': the trees choose where a numeric column's missing values go, no indicator
            numeric = {self.feature_var[b] for b in self.numeric_base} if strategy == "learned_direction" else set()
            names = [f"{key} missing" for key in self.variables]
            self.indicator = np.array([-1 if v in numeric else self.ids[n] if n in self.ids else self._column(n, -1)
                                       for v, n in enumerate(names)], dtype=np.int32)

    def check_window_input(self, indptr, indices, seq_starts, missing_rows, window: int):
        """E205 at the first position holding what a window does not read: a number (a numeric column's bin) or
        a variable missing under an engine strategy."""
        found = []
        if self.numeric_keys:  # (no mask and no pass over the input without numeric columns)
            is_bin = np.zeros(len(self.names), dtype=bool)
            for base, uppers in zip(self.numeric_base, self.uppers):
                is_bin[base:base + len(uppers) + 1] = True
            if is_bin[indices].any():
                p = int(np.argmax(is_bin[indices]))
                row = int(np.searchsorted(indptr, p, side="right")) - 1
                key = self.variables[self.feature_var[int(indices[p])]]
                found.append((row, key, "a number", "give it as strings (a bin's name)"))
        if missing_rows is not None and missing_rows.any:
            row = int(missing_rows.rows()[0])
            key = self.variables[int(missing_rows.indices[missing_rows.indptr[row]])]
            found.append((row, key, "missing (None or NaN)", "use missing='imputation' or 'indicator'"))
        if found:
            row, key, what, fix = min(found)
            q = int(np.searchsorted(seq_starts, row, side="right")) - 1
            raise ValueError(Errors.E205.format(window=window, q=q, t=row - int(seq_starts[q]), key=key,
                                                what=what, fix=fix))


@functools.lru_cache(maxsize=8)
def window_columns(n_features: int, window: int) -> Tuple[np.ndarray, np.ndarray]:
    """(colmap: token feature x window slot -> column, padcol: slot -> column or -1), sparse.window_rows' maps
    for ``n_features`` token features and a ``window`` either side. The columns go slot by slot (offsets -window
    .. +window), each slot's block a padding column (unused at offset 0) then the token features in their order:
    a windowed row comes out sorted, as the engine reads rows, and a column's (slot, feature) is arithmetic.
    Kept for the last few sizes, so the arrays are shared: read them, never write them. Every predict reads
    them, and they take features x slots int32s (2 MB for 100,000 features and a window of 2)."""
    W = 2 * window + 1
    block = np.arange(W, dtype=np.int64) * (n_features + 1)
    colmap = (block[None, :] + 1 + np.arange(n_features, dtype=np.int64)[:, None]).astype(np.int32)
    padcol = block.astype(np.int32)
    padcol[window] = -1
    return colmap, padcol


def window_names(names: Sequence[str], window: int) -> List[str]:
    """The names of window_columns' columns: 'name[-1]', and '<pad>[-1]' for the padding."""
    return [f"{name}[{d:+d}]" for d in range(-window, window + 1) for name in [PAD, *names]]


def window_moves(n_old: int, n_new: int, window: int) -> np.ndarray:
    """Each column of a window over ``n_old`` token features -> its column once there are ``n_new`` (a continued
    fit met new features: every slot's block grows)."""
    slot, g = np.divmod(np.arange((2 * window + 1) * (n_old + 1), dtype=np.int64), n_old + 1)
    return slot * (n_new + 1) + g


class TreeCRF(CRFsuiteMethods):
    """Linear-chain CRF whose potentials are sums of regression trees (Dietterich, Hao & Ashenfelter, JMLR 2008).

    ``n_rounds`` is the most rounds ``fit`` runs: with validation data it keeps the round with the best validation
    token accuracy and stops after ``patience`` rounds without a better one (None: resolved_patience). Validation
    data: ``fit``'s X_dev / y_dev if given; otherwise, with ``early_stopping`` True, a ``validation_fraction`` of
    the training sequences drawn with ``random_state`` is held out (and not trained on). "auto" (scikit-learn's
    HistGradientBoosting convention: only where the data is large enough) holds them out where they have at least
    1,000 positions (so the validation accuracy's standard error is at most 1.6 points), as from about 10,000
    training positions at the default fraction; otherwise every round is kept.
    ``shrinkage`` is the paper's lambda (a leaf's value is sum(residual) / (lambda + N)), or "auto": 10 for up to
    15,000 training positions, 1 from 150,000, 150,000 / positions between (engine/booster.resolved_shrinkage,
    chosen on dev data across tasks). ``max_leaves``: a tree's most leaves (best-first growth), or "auto": 1000 up
    to 50,000 training positions, 3000 from 150,000, a leaf per 50 positions between (resolved_max_leaves, chosen
    the same way). ``learning_rate``
    multiplies every tree (1.0 as in the paper). ``loss``: what the trees boost, "crf" (the
    paper's log-likelihood), "pseudo_likelihood", "hamming" or "rank" (losses.py; README "Choosing a loss").
    ``subsample``: share of positions each round's trees are fitted on; ``colsample``: share of feature columns
    each tree may split on (a fresh draw per tree). ``leaf_values``: "mean" (the paper's), "newton"
    (sum(residual) / (lambda + sum of P(1 - P)), clipped to [-1, 1]: a Newton step, loss "crf" only) or
    "position_mean" (sum(residual) / (lambda + the leaf's positions): a leaf spanning all previous states moves a
    position's score by its gradient I(y = k) - P(y = k), not by that over the number of states).
    ``label_splits``: "best" (a leaf splits on the previous label where that beats its best feature split, as in
    the paper) or "fallback" (only where no feature split gains; cheaper to tag). ``shared_trees``: one tree a
    round for all labels, a value per label in each leaf (for large label sets). ``l1``: an L1 penalty on leaf
    values (each leaf sum of residuals shrunk by l1 towards 0: shared trees' leaves keep the labels that matter).
    A Dask cluster is given to ``fit`` (``scheduler=``), not to the estimator: where a fit runs is not a setting.

    Input: a position is a dict, an iterable of feature names, or a string: the name of its one feature (so a
    list of tokens reads as their identities; with a ``window`` also their neighbours').
    Input values: a dict value that is a string gives the feature 'key=value' (as sklearn-crfsuite does), True
    the feature 'key' and False none; python-crfsuite's nested forms read as there: a dict value's items go under
    'key:inner', a list, tuple or set of strings gives the features 'key:string' (other value types: an error);
    an int or float (not a bool) is a number, and the key a numeric column
    (engine/numeric.py): its training values are binned once (at most 255 bins, one per value where there are
    fewer distinct ones) and the trees learn thresholds on it ('key <= 0.37'). sklearn-crfsuite instead multiplies
    the feature's weight by the value, so there a number can only push one way, in proportion to its size; here a
    tree can single out a range of values whatever their order.

    Missing inputs: a dict value None (or NaN) marks that key (the variable: all features it can give) missing at
    that position. ``missing`` chooses how they are handled (paper Sec. 6, 7.4): "instance_weighting" (C4.5's
    proportional distribution, in training and prediction), "surrogate" (CART's surrogate splits),
    "imputation" (the variable's most common training value), "indicator" (a '<key> missing' feature) or
    "learned_direction" (a numeric column's missing values go to whichever side of each threshold gains more,
    as in XGBoost and LightGBM; other keys get an indicator).

    ``window``: with w > 0 a position also reads the features of the w positions either side of it, each under
    its offset ('key=value[-1]'; '<pad>[-1]' past a sequence's ends), as if every dict held its neighbours'
    items: give each position its own features only (a letter, its classes), and the window is made in compiled
    code rather than in Python dicts (sklearn-crfsuite users build it by hand), the same features at a fraction of
    the cost. A window reads flags and strings: numbers, and missing values under the "instance_weighting" and
    "surrogate" strategies, raise an error ("imputation" and "indicator" fill them in first).

    ``small_trees``: on small data the trees the paper's small tasks want (SMALL_TREES, SMALL_TREE_FITS). With
    ``decode="marginal"`` and at most 3 labels over fewer than 100,000 positions x labels ("auto"; True: any size),
    a fresh fit whose tree settings (shared_trees, max_leaves, shrinkage, leaf_values, l1, colsample, label_splits)
    are the defaults grows the paper's own model, a tree per label and round of up to 100 leaves with lambda 200
    (and ``n_rounds`` trees at most), in place of the default shared trees. With validation data (held out or
    given), a fresh fit below 15,000 training positions ("auto"), or any (True), also fits smaller trees (16 leaves;
    with Viterbi decoding 100 leaves too) on the same data and keeps whichever model has the best validation
    accuracy (``small_trees_``: the kept model's profile, None for the estimator's own settings; the file holds the
    kept model's settings): noisy labels want them, labels that depend on many tests together the default trees
    (benchmarks/results/small_trees.md). False: the estimator's settings as given. Not with another loss than "crf"
    or a ``stack_window``.

    ``warm_start`` (scikit-learn's sense): ``fit`` on a fitted model continues it, on the data it is given,
    rather than starting over: ``n_rounds`` stays the total (raise it to add rounds), labels y brings that the
    model has not seen join it (their trees start from zero; the old trees keep their meaning), and so do new
    feature names. With validation data it keeps only the new rounds that beat the model as it was.
    """

    def __init__(self, n_rounds: int = 100, decode: str = "viterbi", allowed_transitions=None,
                 patience: Optional[int] = None, early_stopping: Union[str, bool] = "auto",
                 validation_fraction: float = 0.1, verbose: bool = False, warm_start: bool = False, window: int = 0,
                 small_trees: Union[str, bool] = "auto", *, max_leaves: Union[int, str] = B.max_leaves,
                 shrinkage: Union[float, str] = B.shrinkage, learning_rate: float = B.learning_rate,
                 min_samples_leaf: float = B.min_samples_leaf,
                 min_gain: float = B.min_gain, subsample: float = B.subsample, colsample: float = B.colsample,
                 trim: float = B.trim, random_state: int = B.random_state, n_threads: int = B.n_threads,
                 loss: str = B.loss, missing: str = B.missing, leaf_values: str = B.leaf_values,
                 label_splits: str = B.label_splits, shared_trees: bool = B.shared_trees, l1: float = B.l1,
                 stack_window: int = B.stack_window,
                 **unknown):
        """The keyword arguments from ``max_leaves`` on are the boosting settings: BoostParams' fields with its
        defaults (B: engine/settings.py's BOOST_DEFAULTS, where each is defined and described once; a treecrf
        component's [booster] block takes the same). Every argument is stored as given (scikit-learn's
        convention: ``clone`` and ``set_params`` rebuild an estimator from ``get_params``) and checked here and at
        ``set_params``. ``unknown``: only for a clear error (E049; E207 for a ``scheduler``, which goes to fit)."""
        if "scheduler" in unknown:
            raise TypeError(Errors.E207.format(where="TreeCRF(scheduler=...)", how="TreeCRF().fit(X, y, "
                                                                                   "scheduler=...)"))
        if unknown:
            raise TypeError(Errors.E049.format(unknown=sorted(unknown), param_names=list(PARAM_NAMES)))
        given = locals()
        for name in PARAM_NAMES:
            setattr(self, name, given[name])
        check_settings(self)
        self.crf_: Optional[SequenceModel] = None  # the fitted model (model.py)
        self.features = FeatureIndex()
        self.history_: List[dict] = []
        self.window_: int = 0  # the fitted model's window (``window`` may change after fitting)
        self.small_trees_: Optional[str] = None  # the SMALL_TREES profile of the fitted model (None: the default)

    @property
    def classes_(self) -> list:
        """The fitted model's labels, in its label ids' order."""
        return [] if self.crf_ is None else self.crf_.labels

    @property
    def best_round_(self) -> int:
        """The boosting rounds the fitted model's trees come from (with validation data: the best round)."""
        return 0 if self.crf_ is None else self.crf_.rounds

    @property
    def ensemble(self) -> Optional[Ensemble]:
        return None if self.crf_ is None else self.crf_.ensemble

    @property
    def allowed(self) -> Optional[np.ndarray]:
        """Which label may follow which ((labels + 1) x labels, row 0: the start)."""
        return None if self.crf_ is None else self.crf_.allowed

    @property
    def params(self) -> BoostParams:
        """The boosting settings as the engine takes them."""
        return BoostParams(**{name: getattr(self, name) for name in BOOST_SETTINGS})

    # ---- scikit-learn's estimator protocol (duck-typed: no dependency) ---------------------------------------
    def get_params(self, deep: bool = True) -> Dict[str, object]:
        return {name: getattr(self, name) for name in PARAM_NAMES}

    def set_params(self, **params) -> "TreeCRF":
        unknown = sorted(set(params) - set(PARAM_NAMES))
        if unknown:
            raise ValueError(Errors.E053.format(unknown=unknown, param_names=list(PARAM_NAMES)))
        old = self.get_params()
        for name, value in params.items():
            setattr(self, name, value)
        try:
            check_settings(self)
        except (TypeError, ValueError):
            for name, value in old.items():  # a refused setting leaves the estimator as it was
                setattr(self, name, value)
            raise
        return self

    def __sklearn_tags__(self):
        """scikit-learn's tags (only scikit-learn calls this, so it can be imported here): a supervised estimator
        over lists of sequences (no numeric arrays, no estimator type, so that cross-validation splits the
        sequences as they are), which validates its own input."""
        from sklearn.utils import InputTags, Tags, TargetTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=True), no_validation=True,
                    input_tags=InputTags(two_d_array=False, dict=True, string=True))

    def __repr__(self) -> str:
        changed = [f"{name}={value!r}" for name, value in self.get_params().items() if value != DEFAULTS[name]]
        return f"TreeCRF({', '.join(changed)})"

    # ---- training -------------------------------------------------------------------------------------------
    def fit(self, X, y, X_dev=None, y_dev=None, scheduler=None):
        """Fit on sequences X with labels y (None: unknown); with validation data (X_dev / y_dev, or sequences held
        out of X as early_stopping says), keep the round with the best validation token accuracy (a label never
        seen in training counts as an error) and stop after patience rounds without a better one. The data is
        checked before the estimator changes: a refused call leaves a fitted model as it was.

        ``scheduler``: a Dask scheduler's address ("tcp://host:8786") or a distributed.Client, whose workers then
        hold the training rows and run each round's data side (engine/cluster.py; the 'dask' extra). The trees are
        the same as in this process; each round's ``history_`` entry then counts the requests made to the
        workers (``cluster_calls``). Where a fit runs is not part of the model: it is kept neither on the
        estimator nor in its file."""
        X, y = as_sequences(X, "X"), as_sequences(y, "y")
        check_sequences(X, y, "X", "y")
        if (X_dev is None) != (y_dev is None):
            raise ValueError(Errors.E151)
        if X_dev is not None:
            X_dev, y_dev = as_sequences(X_dev, "X_dev"), as_sequences(y_dev, "y_dev")
            check_sequences(X_dev, y_dev, "X_dev", "y_dev")
        classes = label_set(y)
        if not classes:
            raise ValueError(Errors.E055)
        if scheduler is None:  # (on a cluster the positions' rows live on the workers)
            check_training_memory(sum(map(len, X)), len(classes), "TreeCRF.fit")
        if X_dev is None and self.early_stopping is not False:
            split = held_out(self, X, y)
            if split is not None:
                X, y, X_dev, y_dev = split
        before = dict(vars(self))
        try:
            return self._fit(classes, X, y, X_dev, y_dev, scheduler)
        except Exception:
            vars(self).clear()
            vars(self).update(before)  # a refused fit leaves the estimator as it was
            raise

    def _fit(self, classes, X, y, X_dev, y_dev, scheduler) -> "TreeCRF":
        warm = self.warm_start and self.crf_ is not None and self.crf_.n_trees > 0
        fitted = profile_of(self.small_trees_)  # (a continued model's)
        if warm:
            if fitted.settings.get("shared_trees", self.params.shared_trees) != self.ensemble.shared:
                raise ValueError(Errors.E183.format(setting=self.params.shared_trees,
                                                    kind="shared" if self.ensemble.shared else "per-label"))
            classes = self.classes_ + [label for label in classes if label not in self.classes_]
            if self.window != self.window_:
                raise ValueError(Errors.E204.format(window=self.window, fitted=self.window_))
        else:
            self.features = FeatureIndex()
            self.window_ = int(self.window)
        n_before = len(self.features.names)
        raw = self.features.rows(X, grow=True)
        if self.params.missing not in ENGINE_STRATEGIES:
            self.features.learn_fill(*raw[:2], raw[3], self.params.missing)
        allowed = transitions_allowed(classes, self.allowed_transitions)
        if warm:
            moved = None
            if self.window_ and len(self.features.names) > n_before:
                moved = window_moves(n_before, len(self.features.names), self.window_)
            self.crf_ = self.crf_.extended(classes, moved, self._n_columns(), self._numeric_index(), allowed,
                                           self._fill())
            self._boost(self.crf_.trainer(*training_rows(self, raw, y), scheduler), X_dev, y_dev, warm,
                        round_budget(fitted, self.n_rounds, len(classes)))  # (a profile's model keeps its budget)
            return self
        fit_small_trees(self, classes, allowed, raw, y, X_dev, y_dev, scheduler)
        return self

    def _boost(self, trainer, X_dev, y_dev, warm: bool, n_rounds: int) -> None:
        """Fit rounds up to n_rounds; with validation data keep the best round and stop after patience rounds
        without a better one (fit's docstring; SequenceModel.fit_rounds)."""
        crf_ = self.crf_
        validation = None
        if X_dev is not None:  # unseen labels (-2) count as errors
            validation = Validation(crf_.dev_cache(self._rows(X_dev)), np.array(
                [self._label_index(label) for ys in y_dev for label in ys], dtype=np.int64), self.decode)
        patience = self.patience or (resolved_patience(int((validation.gold != -1).sum())) if validation is not None
                                     else 0)  # (no validation: every round is kept)
        self.history_ = []
        if warm and n_rounds <= crf_.rounds:
            warnings.warn(Warnings.W006.format(rounds=crf_.rounds, n_rounds=n_rounds))

        def report(entry: dict) -> None:
            self.history_.append(entry)
            if self.verbose:
                print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in entry.items()))
        crf_.fit_rounds(trainer, n_rounds - crf_.rounds, validation, patience, report)

    def _fill(self) -> np.ndarray:
        """The model's fill table (model.py): the imputed or indicator feature of each variable (-1: none)."""
        return self.features.impute if self.params.missing == "imputation" else self.features.indicator

    def _rows(self, X) -> EngineRows:
        """The fitted model's rows of sequences X: their features (unknown names dropped), missing values as the
        model's strategy handles them, over the fitted window's columns if there is one."""
        return self._windowed(self.crf_.engine_rows(*self.features.rows(X, grow=False)))

    def _windowed(self, rows: EngineRows) -> EngineRows:
        """The rows over the window's columns (sparse.window_rows), where the model has a window."""
        if not self.window_:
            return rows
        self.features.check_window_input(*rows, self.window_)
        colmap, padcol = window_columns(len(self.features.names), self.window_)
        return EngineRows(*window_rows(rows.indptr, rows.indices, rows.seq_starts, self.window_, colmap, padcol),
                          rows.seq_starts, None)

    def _n_columns(self) -> int:
        """The engine's feature columns: the token features, or (their number + 1) per slot of a window."""
        n = len(self.features.names)
        return (2 * self.window_ + 1) * (n + 1) if self.window_ else n

    def _numeric_index(self) -> NumericIndex:
        return numeric_index(self._n_columns(), [], []) if self.window_ else self.features.numeric_index()

    def _test_names(self):
        """The trees' tests by id, readable (TestNames, or window_names' list)."""
        return window_names(self.features.names, self.window_) if self.window_ else self.features.test_names()

    def _label_index(self, label) -> int:
        if label is None:
            return -1
        try:
            return self.classes_.index(label)
        except ValueError:
            return -2  # unseen label: never predicted, counts as an error

    # ---- prediction -----------------------------------------------------------------------------------------
    def _check_fitted(self):
        if self.crf_ is None:
            raise ValueError(Errors.E056)

    def _decoded(self, X, method: str, n_best: int = 0, known=None, scores: bool = False):
        """SequenceModel.decode of sequences X (given the ``known`` labels), and their sequence offsets."""
        self._check_fitted()
        X = as_sequences(X, "X")
        rows = self._rows(X)
        return (self.crf_.decode(rows, method, scores, n_best, known_labels(self.crf_, X, known)),
                rows.seq_starts.tolist())

    def predict(self, X, known=None) -> List[List[str]]:
        """The labels of each sequence of X (``decode``: the most probable labelling, or each position's most
        probable label). ``known``: a label or None per position of X, one list per sequence: the labelling is
        the best among those that agree with the known labels (E223 where the allowed transitions leave none)."""
        decoded, bounds = self._decoded(X, self.decode, known=known)
        classes = self.classes_
        labels = [classes[k] for k in decoded.ids.tolist()]  # (python ints: indexing with numpy's costs 3x)
        return [labels[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def predict_marginals(self, X, known=None) -> List[List[Dict[str, float]]]:
        """Per position, each label's marginal probability P(y_t = label | X), given the ``known`` labels (as
        ``predict``'s) where there are some."""
        decoded, bounds = self._decoded(X, "marginal", known=known)
        return [[dict(zip(self.classes_, map(float, row))) for row in decoded.gamma[a:b]]
                for a, b in zip(bounds[:-1], bounds[1:])]

    def predict_confidence(self, X, known=None) -> Confidence:
        """How sure the model is of each sequence's predicted labelling (``predict``'s), for choosing what to
        annotate next: a Confidence of arrays with one value per sequence (model.py): ``probability`` of the
        labelling, ``least_marginal`` (the weakest position's marginal of its predicted label) and
        ``mean_entropy`` (nats per position); all given the ``known`` labels where there are some. The least
        probable sequences are the ones to label first: ``np.argsort(conf.probability)[:n]``."""
        return self._decoded(X, self.decode, known=known, scores=True)[0].confidence

    def predict_nbest(self, X, n: int = 5, known=None) -> List[List[Tuple[List, float]]]:
        """Per sequence, its n most probable label sequences with their probabilities P(Y | X), best first (exact:
        k-best Viterbi and the forward pass's Z; fewer where the transition constraints allow fewer paths). Given
        ``known`` labels, the n most probable of the labellings that agree with them, with P(Y | X, known)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= MAX_NBEST:
            raise ValueError(Errors.E165.format(n=n, maximum=MAX_NBEST))
        decoded, bounds = self._decoded(X, "viterbi", n_best=int(n), known=known)
        paths, logp = decoded.nbest
        return [[([self.classes_[k] for k in paths[r, a:b]], float(np.exp(logp[q, r])))
                 for r in range(int(n)) if np.isfinite(logp[q, r])]
                for q, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]

    def score(self, X, y) -> float:
        """Token accuracy over the known labels of y."""
        X, y = as_sequences(X, "X"), as_sequences(y, "y")
        check_sequences(X, y, "X", "y", call="score")
        pred = self.predict(X)
        pairs = [(p, g) for ps, gs in zip(pred, y) for p, g in zip(ps, gs) if g is not None]
        return sum(p == g for p, g in pairs) / len(pairs) if pairs else 0.0

    # ---- inspection -----------------------------------------------------------------------------------------
    def rules(self, top: int = 10, min_support: float = 5.0) -> List[Tuple[str, str, float, float]]:
        """The strongest root-to-leaf paths as (label, readable conjunction, value, support), by |value|, of the
        leaves that hold at least ``min_support`` examples (W009 where none does); none that the transition
        constraints forbid."""
        self._check_fitted()
        return self.crf_.rules(self._test_names(), top, min_support)

    def explain(self, x, labels=None) -> List[Explanation]:
        """Why each position of the sequence ``x`` (one item of predict's X) gets its label: per position an
        Explanation (label, previous label, the potential of that transition, and the trees' leaves that make it
        up, each with its path and contribution; the contributions add up to the potential). ``labels``: the
        labelling to explain (default: the predicted one), e.g. a gold labelling, to see why not."""
        self._check_fitted()
        if isinstance(x, (str, dict)) or not isinstance(x, Sequence):
            raise TypeError(Errors.E175.format(kind=type(x).__name__))
        rows = self._rows([x])
        if labels is None:
            ids = self.crf_.decode(rows, self.decode).ids
        else:
            index = {label: k for k, label in enumerate(self.classes_)}
            if isinstance(labels, str) or not isinstance(labels, Sequence) or len(labels) != len(x):
                raise ValueError(Errors.E176.format(n=len(x), t="-", label=labels))
            for t, label in enumerate(labels):
                if not is_label(label) or label not in index:
                    raise ValueError(Errors.E176.format(n=len(x), t=t, label=label))
            ids = np.array([index[label] for label in labels], dtype=np.int64)
        return self.crf_.explain(rows, ids, self._test_names())

    # ---- serialization --------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The model file (model.py's schema): the model, the feature map and the estimator's settings."""
        self._check_fitted()
        features = {"names": self.features.names, "variables": self.features.variables,
                    "feature_var": np.array(self.features.feature_var, dtype=np.int32),
                    "impute": self.features.impute, "indicator": self.features.indicator,
                    "numeric_keys": self.features.numeric_keys, "numeric_uppers": self.features.uppers,
                    "numeric_base": np.array(self.features.numeric_base, dtype=np.int64), "window": self.window_}
        settings = {name: getattr(self, name) for name in SAVED_SETTINGS}
        if self.small_trees_:  # (the model's own settings are a SMALL_TREES profile's, and so is its round budget)
            settings["n_rounds"] = round_budget(SMALL_TREES[self.small_trees_], self.n_rounds, len(self.classes_))
        return self.crf_.to_bytes("estimator", features, settings)

    def from_bytes(self, data: bytes) -> "TreeCRF":
        """Load a model file (model.load, then read_estimator's checks of the feature map and settings); a
        refused file leaves the estimator as it was."""
        crf_, features, window, loaded = read_estimator(data, self)
        for name, value in loaded.get_params().items():
            setattr(self, name, value)
        self.crf_, self.features, self.window_ = crf_, features, window
        self.small_trees_ = None  # (the file's settings are its model's own)
        return self


def CRF(**settings) -> "TreeCRF":  # noqa: N802  (sklearn_crfsuite.CRF's name)
    """A TreeCRF for a script written for sklearn_crfsuite.CRF: CRFsuite's own settings (CRFSUITE_SETTINGS) are
    accepted and left unused with one warning naming them (W012; ``verbose`` is TreeCRF's too), TreeCRF's are
    applied. Its defaults, not CRFsuite's optimiser settings, decide the fit."""
    unused = sorted(key for key in settings if key in CRFSUITE_SETTINGS and settings[key] not in (None, False))
    if unused:
        warnings.warn(Warnings.W012.format(settings=unused), stacklevel=2)
    return TreeCRF(**{key: value for key, value in settings.items() if key not in CRFSUITE_SETTINGS})


def known_labels(crf_: SequenceModel, X: list, known) -> Optional[Known]:
    """The Known of ``known`` labels for sequences X (a label or None per position; None: nothing is known), its
    errors naming ``known[q][t]``."""
    if known is None:
        return None
    known = as_sequences(known, "known")
    check_sequences(X, known, "X", "known", call="predict")

    def where(q: int, t: int) -> str:
        return f"known[{q}][{t}]"
    permitted = crf_.permitted(known, where)
    return None if permitted is None else Known(permitted, where)


def check_settings(est: "TreeCRF") -> None:
    """TreeCRF's own settings, checked where they are set (the constructor, set_params); BoostParams checks the
    boosting settings."""
    if est.decode not in DECODERS:
        raise ValueError(Errors.E050.format(decoders=DECODERS, decode=est.decode))
    if isinstance(est.n_rounds, bool) or not isinstance(est.n_rounds, (int, np.integer)) or est.n_rounds < 0:
        raise ValueError(Errors.E051.format(n_rounds=est.n_rounds))
    if est.patience is not None and (isinstance(est.patience, bool) or not isinstance(
            est.patience, (int, np.integer)) or est.patience < 1):
        raise ValueError(Errors.E052.format(patience=est.patience))
    if not is_choice(est.early_stopping, EARLY_STOPPING):
        raise ValueError(Errors.E172.format(choices=EARLY_STOPPING, value=est.early_stopping))
    if not isinstance(est.warm_start, (bool, np.bool_)):
        raise ValueError(Errors.E182.format(value=est.warm_start))
    fraction = est.validation_fraction
    if (isinstance(fraction, (bool, np.bool_)) or not isinstance(fraction, (int, float, np.integer, np.floating))
            or not 0 < fraction < 1):
        raise ValueError(Errors.E173.format(value=fraction))
    if not is_choice(est.small_trees, SMALL_TREES_CHOICES):
        raise ValueError(Errors.E234.format(choices=SMALL_TREES_CHOICES, value=est.small_trees))
    if (isinstance(est.window, (bool, np.bool_)) or not isinstance(est.window, (int, np.integer))
            or not 0 <= est.window <= MAX_WINDOW):
        raise ValueError(Errors.E203.format(maximum=MAX_WINDOW, value=est.window))
    _ = est.params


def is_choice(value, choices) -> bool:
    """Whether a setting is one of ``choices`` ("auto", True, False): True and False themselves, not 1 or 0."""
    return any(value is choice or (isinstance(choice, str) and value == choice) for choice in choices)


def training_rows(est: TreeCRF, raw, y) -> Tuple[EngineRows, np.ndarray]:
    """The training rows (windowed) of ``est``'s fit and their label ids, checked against its model's allowed
    transitions."""
    rows = est._windowed(est.crf_.engine_rows(*raw))
    label_ids = est.crf_.label_ids(y)
    est.crf_.check_gold(label_ids, rows.seq_starts, lambda q, t: f"sequence {q}, position {t} of y",
                        fix="allowed_transitions")
    return rows, label_ids


def fit_small_trees(est: TreeCRF, classes, allowed, raw, y, X_dev, y_dev, scheduler) -> None:
    """``est``'s fresh fit: each of small_tree_fits' fits in turn on the same rows and validation data, keeping the
    model with the best validation accuracy (ties: the earlier) in est.crf_, its history_ and its profile's name in
    small_trees_."""
    kept, rows = None, None
    for name in small_tree_fits(est, sum(map(len, y)), len(classes), X_dev is not None):
        profile = profile_of(name)
        est.crf_ = SequenceModel(classes, allowed, dataclasses.replace(est.params, **profile.settings),
                                 est._n_columns(), est._numeric_index(), est._fill())
        rows = rows or training_rows(est, raw, y)
        est._boost(est.crf_.trainer(*rows, scheduler), X_dev, y_dev, False,
                   round_budget(profile, est.n_rounds, len(classes)))
        score = best_validation(est.history_) if X_dev is not None and est.history_ else 0.0
        if kept is None or score > kept[0]:
            kept = (score, name, est.crf_, est.history_)
    _, est.small_trees_, est.crf_, est.history_ = kept


def profile_of(name: Optional[str]) -> Profile:
    """A small_trees fit's Profile by its SMALL_TREE_FITS name (None: the estimator's own settings, n_rounds)."""
    return SMALL_TREES[name] if name else Profile({}, 1)


def round_budget(profile: Profile, n_rounds: int, n_labels: int) -> int:
    """A small_trees fit's most rounds: profile.rounds x n_rounds, counted in trees where the profile grows a tree
    per label and round (so many rounds that they grow as many trees as the default fit at most: tagging costs no
    more, per_label's reason in SMALL_TREES)."""
    trees = profile.rounds * n_rounds
    return -(-trees // n_labels) if profile.settings.get("shared_trees") is False else trees


def small_tree_fits(est: TreeCRF, n_positions: int, n_labels: int, validation: bool) -> tuple:
    """The fits of ``est``'s fresh fit of n_positions (y's, unknown labels included) over n_labels labels, in
    order, as SMALL_TREE_FITS' names (None: the estimator's own settings; TreeCRF's docstring): the first alone
    without validation data or where small_trees does not apply."""
    if est.small_trees is False or est.loss != "crf" or est.stack_window:
        return (None,)
    fits = SMALL_TREE_FITS[est.decode]
    given = any(getattr(est, name) != getattr(B, name) for name in SMALL_TREES["per_label"].settings)
    too_large = n_positions * n_labels >= PER_LABEL_CELLS and est.small_trees is not True  # (True: any size)
    if fits[0] == "per_label" and (given or n_labels > PER_LABEL_LABELS or too_large):
        fits = (None,) + SMALL_TREE_FITS["viterbi"][1:]  # (the estimator's own trees first, then the profiles)
    if not validation or (est.small_trees is not True and n_positions >= SMALL_DATA):
        return fits[:1]
    return fits


def best_validation(history: List[dict]) -> float:
    """A fit's best validation accuracy, from its history_."""
    return max(entry["dev_accuracy"] for entry in history)


def held_out(est: "TreeCRF", X, y) -> Optional[tuple]:
    """For ``est``'s fit: (X, y) without the validation sequences, then the validation sequences: a
    validation_fraction of them (at least one, and one fewer than all), drawn with random_state, in their original
    order; None where early_stopping "auto" finds them too small (see the class docstring) or there are fewer than
    2 sequences."""
    n = len(y)
    if n < 2:
        if est.early_stopping is True:
            raise ValueError(Errors.E174.format(n=n))
        return None
    n_val = min(n - 1, max(1, int(round(est.validation_fraction * n))))
    held = np.zeros(n, dtype=bool)
    held[np.random.default_rng(est.random_state).choice(n, n_val, replace=False)] = True
    if est.early_stopping == "auto" and sum(len(ys) for ys, h in zip(y, held) if h) < AUTO_MIN_VALIDATION:
        return None
    return tuple([seq for seq, h in zip(data, held) if h == flag] for flag in (False, True) for data in (X, y))


def read_estimator(data: bytes, est: TreeCRF) -> Tuple[SequenceModel, FeatureIndex, int, TreeCRF]:
    """An estimator's model file, read by model.load: the feature map (distinct names, numeric columns, missing
    tables, window) and the settings, checked as TreeCRF(...) checks them. Returns the model, the feature map, the
    window and an estimator with the file's settings (``est``'s for what a file does not hold)."""
    def columns(payload: dict, params: BoostParams) -> Columns:
        state = payload["features"]
        names = serialize.field(state, "names", list)
        numeric = serialize.check_numeric(state, len(names))
        window = state.get("window", 0)  # (files from before windows have none)
        if isinstance(window, bool) or not isinstance(window, int) or not 0 <= window <= MAX_WINDOW or (
                window and numeric["keys"]):
            raise ValueError(Errors.E060.format(err=Errors.E203.format(maximum=MAX_WINDOW, value=window)))
        n_columns = (2 * window + 1) * (len(names) + 1) if window else len(names)
        index = numeric_index(n_columns, numeric["base"], numeric["end"])
        bins = set(np.flatnonzero(index.column >= 0).tolist())
        seen = set()
        for f, name in enumerate(names):
            if not isinstance(name, str) or (name in seen and f not in bins):
                raise ValueError(Errors.E153.format(name=name))
            if f not in bins:
                seen.add(name)
        table = serialize.check_missing_table(state, len(names))
        features = FeatureIndex(names, table["variables"], table["feature_var"], table["impute"], table["indicator"],
                                numeric["keys"], numeric["uppers"], numeric["base"])
        fill = table["impute"] if params.missing == "imputation" else table["indicator"]
        return Columns(n_columns, index, len(table["variables"]), (features, window), fill)

    loaded = load(data, "estimator", "the TreeCRF model", columns)
    settings, params = loaded.settings, loaded.model.params
    try:  # the file's settings, checked as TreeCRF(...) checks them
        est = TreeCRF(n_rounds=serialize.field(settings, "n_rounds", int),
                      decode=serialize.field(settings, "decode", str), patience=settings.get("patience"),
                      early_stopping=settings.get("early_stopping", "auto"),
                      validation_fraction=settings.get("validation_fraction", 0.1),
                      small_trees=settings.get("small_trees", "auto"),
                      allowed_transitions=est.allowed_transitions, verbose=est.verbose, warm_start=est.warm_start,
                      window=loaded.state[1], **vars(params))
    except (TypeError, ValueError) as err:
        raise ValueError(Errors.E060.format(err=err)) from None
    if not loaded.model.rounds <= est.n_rounds:
        raise ValueError(Errors.E154.format(best_round=loaded.model.rounds))
    return loaded.model, loaded.state[0], loaded.state[1], est


def savable(text: str, what: str) -> None:
    """Refuse (E212) a string a model file cannot hold, before the model is fitted rather than when it is saved:
    model files are msgpack, whose strings are UTF-8, and a lone surrogate ('\\ud800', as from a badly decoded
    file) has no UTF-8 form."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(Errors.E212.format(what=what, text=excerpt(text), position=err.start)) from None


def as_float(value) -> float:
    """A number as the trees compare it: an int beyond a float's range is the infinity on its side (as a float
    that large would be; thresholds order it past every finite value)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def is_number(value) -> bool:
    return isinstance(value, NUMBERS) and not isinstance(value, (bool, np.bool_))


def flat_items(position: dict, q: int, t: int):
    """Position t of sequence q's (key, value) items, python-crfsuite's nested forms read as it reads them: a dict
    value {"prefix": {...}} gives its items under 'prefix:key' (at any depth), a list, tuple or set of strings
    {"prefix": [...]} the flags 'prefix:string'. Values of any other type than a string, a bool, a number or None
    raise E201: read as a flag, an object would be a feature that says nothing of it."""
    for key, value in position.items():
        if isinstance(value, dict):
            yield from flat_items({f"{key}:{inner}": v for inner, v in value.items()}, q, t)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                if not isinstance(item, str):
                    raise TypeError(Errors.E201.format(q=q, t=t, key=key, value=item, kind=type(item).__name__,
                                                       where=" inside its collection"))
                yield f"{key}:{item}", True
        elif value is None or isinstance(value, (str, bool, np.bool_)) or is_number(value):
            yield key, value
        else:
            raise TypeError(Errors.E201.format(q=q, t=t, key=key, value=value, kind=type(value).__name__, where=""))


class TestNames:
    """Readable names of the tests trees make, by test id (engine/numeric.py): a feature's name, a numeric
    column's bin as 'key <= u' ('key present' for its last), and past every id 'key > u'."""

    def __init__(self, features: FeatureIndex):
        self.features = features
        self.numeric = features.numeric_index()

    def __getitem__(self, f: int) -> str:
        names = self.features.names
        if f < len(names):
            return names[f]
        a = f - len(names)
        c = int(self.numeric.column[a])
        return f"{self.features.numeric_keys[c]} > {self.features.uppers[c][a - self.numeric.base[c]]:.6g}"


def as_sequences(X, name: str) -> list:
    """X as a list of sequences, each a list or tuple (any iterable of iterables is read, generators included);
    a string, a dict or something that is no iterable raises E202 (a string would read as letters)."""
    if isinstance(X, (str, bytes, dict)) or not hasattr(X, "__iter__"):
        raise TypeError(Errors.E202.format(name=name, kind=type(X).__name__, where=""))
    sequences = X if isinstance(X, list) and all(isinstance(seq, (list, tuple)) for seq in X) else list(X)
    for q, seq in enumerate(sequences):
        if isinstance(seq, (str, bytes, dict)) or not hasattr(seq, "__iter__"):
            raise TypeError(Errors.E202.format(name=name, kind=type(seq).__name__, where=f"'s sequence {q}"))
        if not isinstance(seq, (list, tuple)):
            sequences[q] = list(seq)
    return sequences


def check_sequences(X, y, x_name: str, y_name: str, call: str = "fit"):
    """Equal numbers of sequences and of positions per sequence; labels that are strings, integers or None."""
    if len(X) != len(y):
        raise ValueError(Errors.E054.format(call=call, x_name=x_name, n_x=len(X), y_name=y_name, n_y=len(y)))
    for q, (xs, ys) in enumerate(zip(X, y)):
        if len(xs) != len(ys):
            raise ValueError(Errors.E059.format(call=call, q=q, x_name=x_name, n_xs=len(xs), y_name=y_name,
                                                n_ys=len(ys)))
        for t, label in enumerate(ys):
            if label is not None and not is_label(label):
                raise ValueError(Errors.E149.format(call=call, label=label, type_name=type(label).__name__, q=q,
                                                    t=t, y_name=y_name))


def label_set(y) -> list:
    """The distinct known labels of y in text order; two labels that read the same as text are refused (a saved
    model keeps each label's type, but a label must be one label whatever reads it)."""
    by_text = {}
    for ys in y:
        for label in ys:
            if label is not None:
                label = label.item() if isinstance(label, np.integer) else label
                savable(str(label), "label")
                other = by_text.setdefault(str(label), label)
                if other != label or type(other) is not type(label):
                    raise ValueError(Errors.E150.format(a=other, b=label))
    return [by_text[text] for text in sorted(by_text)]


DEFAULTS = {name: p.default for name, p in list(inspect.signature(TreeCRF.__init__).parameters.items())[1:]
            if p.kind != p.VAR_KEYWORD}
PARAM_NAMES = tuple(DEFAULTS)
SAVED_SETTINGS = ("n_rounds", "decode", "patience", "early_stopping", "validation_fraction",
                  "small_trees")  # (with the model's)
