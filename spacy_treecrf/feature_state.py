"""A WindowFeaturizer's saved state: its options and what initialize learned (atoms, columns, lexicon entries, the
label dictionary, numeric bins), as plain data for the model file, and the checks that read it back. A mixin of
WindowFeaturizer.
"""
from typing import Any, Dict

import numpy as np
from spacy.tokens import Token
from .errors import Errors
from .feature_numeric import _check_numeric_state

STATE_VERSION = 1


class SavedState:
    """to_dict / from_dict of the featurizer (from_dict checks everything before it replaces anything)."""

    def to_dict(self) -> Dict[str, Any]:
        """The whole state as plain msgpack-able data (options, lexicon entries, vocabulary, columns)."""
        return {
            "version": STATE_VERSION,
            "config": self.config(),
            "initialized": self.initialized,
            "lexicon_entries": {name: list(values) for name, values in self._lexicon_entries.items()},
            "label_counts": {word: dict(counts) for word, counts in self._label_counts.items()},
            "cluster_entries": dict(self._cluster_bits),
            "atoms": list(self._atom_names),
            "column_offsets": self._col_offset.tolist(),
            "column_atoms": self._col_atom.tolist(),
            "numeric_sources": list(self._num_sources),
            "numeric_uppers": [u.tolist() for u in self._num_uppers],
        }

    def from_dict(self, state: Dict[str, Any]) -> "SavedState":
        """Restore a state made by ``to_dict``. Its options replace the current ones (the columns only make
        sense with the options they were built with), except the lexicon files: the state carries the lexicons'
        entries, and a path in it is never kept as one to read (a later ``initialize`` reads the files this
        featurizer was configured with, not whatever a model file names). Raises ``ValueError`` on malformed
        input."""
        where = "WindowFeaturizer.from_dict"
        if not isinstance(state, dict):
            raise ValueError(Errors.E079.format(where=where, type_name=type(state).__name__))
        for key in ("version", "config", "initialized", "lexicon_entries", "atoms", "column_offsets",
                    "column_atoms"):
            if key not in state:
                raise ValueError(Errors.E095.format(where=where, key=key))
        if state["version"] != STATE_VERSION:
            raise ValueError(Errors.E080.format(where=where, state=state['version'], state_version=STATE_VERSION))
        cfg = state["config"]
        if not isinstance(cfg, dict):
            raise ValueError(Errors.E081.format(where=where))
        # states written before the label dictionary, the numeric sources and the document tests existed
        cfg = {"label_dictionary": False, "numeric_attrs": [], "vectors": False, "tensor": False,
               "doc_context": False, "sentence_windows": False, "clusters": "", "cluster_text": "",
               "ambiguity_class": False, **cfg}
        expected = set(self.config())
        if set(cfg) != expected:
            raise ValueError(Errors.E082.format(where=where, cfg=sorted(cfg), expected=sorted(expected)))
        initialized = state["initialized"]
        if not isinstance(initialized, bool):
            raise ValueError(Errors.E083.format(where=where))
        entries = state["lexicon_entries"]
        if not isinstance(entries, dict) or not all(
                isinstance(k, str) and isinstance(v, list) and all(isinstance(e, str) for e in v)
                for k, v in entries.items()):
            raise ValueError(Errors.E084.format(where=where))
        label_counts = state.get("label_counts", {})
        if not isinstance(label_counts, dict) or not all(
                isinstance(word, str) and isinstance(counts, dict) and all(
                    isinstance(label, str) and isinstance(n, int) and not isinstance(n, bool) and n > 0
                    for label, n in counts.items())
                for word, counts in label_counts.items()):
            raise ValueError(Errors.E085.format(where=where))
        cluster_bits = state.get("cluster_entries", {})
        if not isinstance(cluster_bits, dict) or not all(
                isinstance(word, str) and isinstance(bits, str) and bits and not set(bits) - {"0", "1"}
                for word, bits in cluster_bits.items()):
            raise ValueError(Errors.E239.format(where=where))
        atoms = state["atoms"]
        if not isinstance(atoms, list) or not all(isinstance(a, str) for a in atoms):
            raise ValueError(Errors.E086.format(where=where))
        if len(set(atoms)) != len(atoms):
            raise ValueError(Errors.E087.format(where=where))
        offs, cols = state["column_offsets"], state["column_atoms"]
        for key, value in (("column_offsets", offs), ("column_atoms", cols)):
            if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                      for v in value):
                raise ValueError(Errors.E096.format(where=where, key=key))
        if len(offs) != len(cols):
            raise ValueError(Errors.E088.format(where=where, n_offs=len(offs), n_cols=len(cols)))
        # Validate the options before touching self.
        probe = type(self).__new__(type(self))
        try:
            probe._configure(cfg)
        except ValueError as err:
            raise ValueError(Errors.E097.format(where=where, err=err)) from None
        probe._cluster_bits = cluster_bits  # (its families: a re-saved model carries clusters without their file)
        window = probe.window
        families = set(probe.family_names())
        for name in atoms:
            if "=" not in name or name[:name.index("=") + 1] not in families:
                raise ValueError(Errors.E098.format(where=where, name=name))
        prev = (-window - 1, -2)
        for i, (off, atom) in enumerate(zip(offs, cols)):
            if not -window <= off <= window:
                raise ValueError(Errors.E099.format(where=where, i=i, off=off, window=window))
            if not -1 <= atom < len(atoms):
                raise ValueError(Errors.E100.format(where=where, i=i, atom=atom, n_atoms=len(atoms)))
            if atom == -1 and off == 0:
                raise ValueError(Errors.E101.format(where=where, i=i))
            if (off, atom) <= prev:
                raise ValueError(Errors.E102.format(where=where, i=i))
            prev = (off, atom)
        if not initialized and (atoms or offs):
            raise ValueError(Errors.E089.format(where=where))
        unused = set(range(len(atoms))) - set(cols)
        if unused:  # a frozen vocabulary keeps only atoms that have a column: the lookup table grows with the columns
            raise ValueError(Errors.E160.format(where=where, atom=atoms[min(unused)]))
        sources, uppers = _check_numeric_state(state, probe, where)
        own_lexicons, own_clusters = self._lexicons, (self.clusters, self.cluster_text)
        self._configure(cfg)
        # the state's lexicon names stay (they are test families), their files are this featurizer's ("": none);
        # so are the files of the clusters, whose entries the state carries
        self._lexicons = {name: own_lexicons.get(name, "") for name in self._lexicons}
        self.clusters, self.cluster_text = own_clusters if cluster_bits else ("", "")
        self._reset_state()
        self._set_lexicons(entries)
        self._cluster_bits = dict(cluster_bits)
        self._label_counts = {word: dict(counts) for word, counts in label_counts.items()}
        self._atom_names = list(atoms)
        self._atom_ids = {name: i for i, name in enumerate(atoms)}
        self._set_columns(np.asarray(offs, np.int32), np.asarray(cols, np.int32))
        self._num_sources, self._num_uppers = sources, uppers
        for attr in self.attrs if initialized else ():  # a trained model reads these: a new process may lack them
            if attr.startswith("_.") and not Token.has_extension(attr[2:]):
                Token.set_extension(attr[2:], default=None)  # unset values are missing, as on any token
        self._frozen = initialized
        self.initialized = initialized
        return self
