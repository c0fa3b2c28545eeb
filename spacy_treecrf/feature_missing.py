"""Missing values of a WindowFeaturizer (its class docstring): a variable is one test family at one offset;
missing_rows lists the variables missing at each position. A mixin of WindowFeaturizer.
"""
from typing import List, Optional, Sequence

import numpy as np
from spacy.attrs import ENT_IOB
from spacy.tokens import Doc
from .engine.sparse import pairs_to_rows, window_rows
from .feature_document import DOC_FAMILIES
from .word_classes import PREFIXES
from .feature_tests import ATTRS, TokenTable, _chunks, _concat, offset_name


class MissingVariables:
    """Which variables are missing where: family_names, variable_names, missing_rows (over the featurizer's
    families, window and columns)."""

    def family_names(self) -> List[str]:
        """The test families, in variable order (see the class docstring)."""
        names = (["w="] if self.word else []) + (["lw="] if self.lower else []) + (["re="] if self.regexes else [])
        names += [f"p{k}=" for k in range(1, self.prefix + 1)] + [f"s{k}=" for k in range(1, self.suffix + 1)]
        names += (["sh="] if self.shape else []) + (["f="] if self.flags else [])
        names += [f"a:{attr}=" for attr in self.attrs] + (["lex="] if self.lexicons else [])
        names += ["ld="] if self.label_dictionary else []
        names += ["ac="] if self.label_dictionary and self.ambiguity_class else []
        names += [f"bc{k}=" for k in PREFIXES] if self.uses_clusters else []
        return names + (list(DOC_FAMILIES) if self.doc_context else [])

    @property
    def n_variables(self) -> int:
        return len(self.family_names()) * (2 * self.window + 1)

    def variable_names(self) -> List[str]:
        """Variable v = (offset j - window, family v % n_families), j = v // n_families, e.g. ``w=@-1``."""
        return [f"{fam}@{offset_name(off)}" for off in self.offsets for fam in self.family_names()]

    def feature_variables(self) -> np.ndarray:
        """Each column's variable (-1 for padding columns); computed once per column index."""
        if self._col_var is None:
            self._col_var = self._column_variables()
        return self._col_var

    def _column_variables(self) -> np.ndarray:
        fams = self.family_names()
        index = {fam: i for i, fam in enumerate(fams)}
        atom_fam = np.array([index[name[:name.index("=") + 1]] for name in self._atom_names], dtype=np.int64)
        col_fam = atom_fam[np.maximum(self._col_atom, 0)] if len(atom_fam) else np.zeros(len(self._col_atom), int)
        var = (self._col_offset.astype(np.int64) + self.window) * len(fams) + col_fam
        binary = np.where(self._col_atom < 0, -1, var).astype(np.int32)
        return np.concatenate([binary, np.full(self.n_features - len(binary), -1, np.int32)])  # numeric: none

    def missing_rows(self, docs: Sequence[Doc]):
        """The missing variables of every token of ``docs`` (concatenated, as ``__call__``'s rows): CSR
        (indptr int64, sorted variable ids int32) and, per variable, at how many positions it has a value."""
        return self._missing_result([self._missing_chunk(chunk) for chunk in _chunks(list(docs))])

    def _missing_chunk(self, chunk: List[Doc], table: Optional["TokenTable"] = None):
        """missing_rows of one chunk of docs: (indptr, indices, doc_starts, how many tokens each offset sees);
        ``table``: the chunk's TokenTable if the caller has read it already."""
        fams = self.family_names()
        F = len(fams)
        W = 2 * self.window + 1
        # variable of (family f, offset slot j): window_rows maps a token's "atoms" (here: missing families)
        colmap = (np.arange(W, dtype=np.int32)[None, :] * F + np.arange(F, dtype=np.int32)[:, None]).astype(np.int32)
        lengths = np.array([len(d) for d in chunk], dtype=np.int64)
        doc_starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        nonempty = [d for d in chunk if len(d)]
        if nonempty and table is None:
            table = self._read_tokens(nonempty)
        bounds = self._window_starts(doc_starts, table)
        applies = np.array([np.maximum(np.diff(bounds) - abs(j - self.window), 0).sum() for j in range(W)])
        T = int(doc_starts[-1])
        rows, ids = [np.zeros(0, np.int64)], [np.zeros(0, np.int32)]
        if nonempty:
            whole = np.flatnonzero(table.missing)
            rows.append(np.repeat(whole, F))
            ids.append(np.tile(np.arange(F, dtype=np.int32), len(whole)))
            for attr in self.attrs:
                if attr in ATTRS:
                    absent = np.flatnonzero(table.column(ENT_IOB if attr == "ent_type_" else ATTRS[attr]) == 0)
                    rows.append(absent)
                    ids.append(np.full(len(absent), fams.index(f"a:{attr}="), np.int32))
        f_indptr, f_ids = pairs_to_rows(np.concatenate(rows), np.concatenate(ids), T)
        indptr, indices = window_rows(f_indptr, f_ids, bounds, self.window, colmap, np.full(W, -1, np.int32))
        return indptr, indices, doc_starts, applies

    def _missing_result(self, parts):
        """missing_rows' result from its chunks' (see _missing_chunk)."""
        F = len(self.family_names())
        W = 2 * self.window + 1
        applies = np.zeros(W, np.int64)
        for part in parts:
            applies += part[3]
        indptr, indices, _ = _concat([part[:3] for part in parts])
        missing = np.bincount(indices, minlength=W * F)
        return indptr, indices, np.repeat(applies, F) - missing
