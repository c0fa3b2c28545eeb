"""Numeric sources of a WindowFeaturizer (features.py's module docstring): numeric token attributes and extensions,
word vectors and doc.tensor rows, binned on a sample of the training tokens and windowed as numeric columns after
the binary ones. A mixin of WindowFeaturizer.
"""
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from numba import njit
from spacy.attrs import LENGTH, ORTH
from spacy.tokens import Doc
from spacy.vocab import Vocab
from .engine.numeric import bin_uppers, bins_of
from .errors import Errors
from .feature_tests import TokenTable, _chunks, offset_name

NUMERIC_SAMPLE = 200_000  # at most this many training tokens set a numeric source's bins...


NUMERIC_SAMPLE_VALUES = 20_000_000  # ...and at most this many values over all sources (300-d vectors: 66,666 tokens)


def _check_numeric_state(state: Dict[str, Any], probe: "NumericSources", where: str):
    """A state's numeric sources and their bins, checked against its configuration (probe)."""
    sources = state.get("numeric_sources", [])
    uppers = state.get("numeric_uppers", [])
    if (not isinstance(sources, list) or not isinstance(uppers, list) or len(sources) != len(uppers)
            or sources[:len(probe.numeric_attrs)] != probe.numeric_attrs and sources):
        raise ValueError(Errors.E191.format(where=where, problem="sources that do not match 'numeric_attrs'"))
    extra = sources[len(probe.numeric_attrs):]
    kinds = [name.rstrip("0123456789") for name in extra]
    if any(k not in ("vector", "tensor") or (k == "vector" and not probe.vectors) or (k == "tensor" and not
                                                                                     probe.tensor) for k in kinds):
        raise ValueError(Errors.E191.format(where=where, problem=f"sources {extra[:3]} its settings do not give"))
    out = []
    for values in uppers:
        if not isinstance(values, list) or not all(isinstance(v, float) for v in values):
            raise ValueError(Errors.E191.format(where=where, problem="bin bounds must be lists of floats"))
        u = np.asarray(values, dtype=np.float64)
        if np.any(np.isnan(u)) or np.any(np.diff(u) <= 0):
            raise ValueError(Errors.E191.format(where=where, problem="bin bounds must ascend"))
        out.append(u)
    return list(sources), out


def _as_numbers(values: List[Any], attr: str, docs: List[Doc]) -> np.ndarray:
    """A numeric source's values as float64 (None: NaN); anything but a number (or bool) is refused, naming the
    attribute, the token and the value."""
    out = np.full(len(values), np.nan)
    for i, value in enumerate(values):
        if value is None:
            continue
        if isinstance(value, (int, float, np.integer, np.floating)):
            out[i] = float(value)
            continue
        tokens = [t for d in docs for t in d]
        raise ValueError(Errors.E187.format(attr=attr, token=tokens[i].text, i=tokens[i].i,
                                            doc=tokens[i].doc.text[:40], value=value))
    return out


def _vector_values(vocab: Vocab, orths: np.ndarray) -> np.ndarray:
    """Each token's row of the vocab's vectors table (NaN for a word the table lacks; floret tables have a row for
    every word)."""
    vectors = vocab.vectors
    if vectors.shape[0] == 0 or vectors.shape[1] == 0:
        raise ValueError(Errors.E186)
    keys = orths.astype(np.uint64)
    if getattr(vectors, "mode", "default") == "floret":
        data = vectors.get_batch(keys)
        return np.asarray(data if isinstance(data, np.ndarray) else data.get(), dtype=np.float64)
    rows = np.asarray(vectors.find(keys=keys))
    table = vectors.data if isinstance(vectors.data, np.ndarray) else vectors.data.get()
    out = np.asarray(table[np.maximum(rows, 0)], dtype=np.float64)
    out[rows < 0] = np.nan
    return out


@njit(cache=True, nogil=True)
def _numeric_window_rows(indptr, indices, bins, doc_starts, window, base):
    """The rows with, after each token's binary columns, the bin of every numeric source (bins: tokens x sources,
    -1 for none) at every offset inside its doc: id base[offset slot, source] + bin. Bases grow with the offset
    slot, then the source, all above the binary columns: rows stay ascending."""
    T = indptr.shape[0] - 1
    W = 2 * window + 1
    D = bins.shape[1]
    out_ptr = np.zeros(T + 1, np.int64)
    for q in range(doc_starts.shape[0] - 1):
        s = doc_starts[q]
        e = doc_starts[q + 1]
        for t in range(s, e):
            n = indptr[t + 1] - indptr[t]
            for j in range(W):
                u = t + j - window
                if s <= u < e:
                    for c in range(D):
                        if bins[u, c] >= 0:
                            n += 1
            out_ptr[t + 1] = n
    for t in range(T):
        out_ptr[t + 1] += out_ptr[t]
    out = np.empty(out_ptr[T], np.int32)
    for q in range(doc_starts.shape[0] - 1):
        s = doc_starts[q]
        e = doc_starts[q + 1]
        for t in range(s, e):
            w = out_ptr[t]
            for p in range(indptr[t], indptr[t + 1]):
                out[w] = indices[p]
                w += 1
            for j in range(W):
                u = t + j - window
                if s <= u < e:
                    for c in range(D):
                        if bins[u, c] >= 0:
                            out[w] = base[j, c] + bins[u, c]
                            w += 1
    return out_ptr, out



class NumericSources:
    """The numeric sources' values, bins and windowed columns (after the featurizer's binary columns)."""

    def numeric_columns(self) -> Tuple[np.ndarray, np.ndarray]:
        """(base, end): the first id and one past the last of every numeric column, offset-major, then source,
        after the binary columns (engine/numeric.py's NumericIndex; empty without numeric sources)."""
        counts = np.array([len(u) + 1 for u in self._num_uppers], dtype=np.int64)
        per = np.tile(counts, 2 * self.window + 1)
        end = len(self._col_atom) + np.cumsum(per)
        return end - per, end

    def threshold_name(self, atom: int, above: bool) -> str:
        """The test of numeric bin ``atom``: "x <= u" or, ``above``, "x > u" (engine/numeric.py)."""
        base, _ = self.numeric_columns()
        i = int(np.searchsorted(base, atom, side="right")) - 1
        offset, source = divmod(i, len(self._num_sources))
        b = atom - int(base[i])
        uppers = self._num_uppers[source]
        test = ">" if above else "<="
        value = "present" if b == len(uppers) and not above else f"{test} {uppers[b]:.4g}"
        return f"num:{self._num_sources[source]} {value}@{offset_name(offset - self.window)}"

    def _numeric_values(self, nonempty: List[Doc], table: "TokenTable") -> np.ndarray:
        """The numeric sources' values of every token of the non-empty docs (tokens x sources, float64; NaN: no
        value), in the order of ``numeric_source_names``."""
        T = len(table.columns)
        parts = []
        for attr in self.numeric_attrs:
            if attr == "len":
                parts.append(table.column(LENGTH).astype(np.float64)[:, None])
                continue
            if attr.startswith("_."):
                values = table.extensions[attr[2:]]
            else:
                values = [getattr(t, attr) for d in nonempty for t in d]
            parts.append(_as_numbers(values, attr, nonempty)[:, None])
        if self.vectors:
            parts.append(_vector_values(nonempty[0].vocab, table.column(ORTH)))
        if self.tensor:
            parts.append(self._tensor_values(nonempty))
        values = np.concatenate(parts, axis=1) if parts else np.zeros((T, 0))
        values[table.missing] = np.nan
        return values

    def _tensor_values(self, nonempty: List[Doc]) -> np.ndarray:
        """Each token's row of doc.tensor (NaN rows for a doc without one); its width is fixed by initialize."""
        width = sum(name.startswith("tensor") for name in self._num_sources) if self._num_sources else None
        rows = []
        for doc in nonempty:
            tensor = doc.tensor
            if not hasattr(tensor, "shape") or tensor.size == 0:
                rows.append(None)
                continue
            tensor = tensor if isinstance(tensor, np.ndarray) else tensor.get()  # cupy on a GPU
            if tensor.ndim != 2 or tensor.shape[0] != len(doc) or (width is not None and tensor.shape[1] != width):
                raise ValueError(Errors.E188.format(text=doc.text[:40], shape=tuple(tensor.shape), n=len(doc),
                                                    width=width))
            width = tensor.shape[1]
            rows.append(tensor.astype(np.float64))
        if width is None:
            raise ValueError(Errors.E189)
        return np.concatenate([np.full((len(doc), width), np.nan) if r is None else r
                               for doc, r in zip(nonempty, rows)])

    def numeric_source_names(self, widths: Tuple[int, int]) -> List[str]:
        """Source names: the numeric_attrs, then vector0.. and tensor0.. (``widths``: of the vectors and of the
        tensor, as the training docs show them)."""
        n_vectors, n_tensor = widths
        return (list(self.numeric_attrs) + [f"vector{i}" for i in range(n_vectors if self.vectors else 0)]
                + [f"tensor{i}" for i in range(n_tensor if self.tensor else 0)])

    def _learn_bins(self, docs: List[Doc]) -> None:
        """The numeric sources' bins (engine/numeric.bin_uppers) from the values of a seeded sample of the
        training tokens (NUMERIC_SAMPLE, NUMERIC_SAMPLE_VALUES)."""
        self._num_sources, self._num_uppers = [], []
        if not (self.numeric_attrs or self.vectors or self.tensor):
            return
        nonempty = [d for d in docs if len(d)]
        if not nonempty:
            return
        T = sum(len(d) for d in nonempty)
        sample, widths = [], None
        rng = np.random.default_rng(0)
        for chunk in _chunks(nonempty):
            values = self._numeric_values(chunk, self._read_tokens(chunk))
            keep = min(NUMERIC_SAMPLE, NUMERIC_SAMPLE_VALUES // max(values.shape[1], 1)) / T
            sample.append(values[rng.random(len(values)) < keep])
            if widths is None:  # the vectors' width is the table's; the tensor's is the rest
                n_vectors = chunk[0].vocab.vectors.shape[1] if self.vectors else 0
                widths = (n_vectors, values.shape[1] - len(self.numeric_attrs) - n_vectors)
        values = np.concatenate(sample)
        self._num_sources = self.numeric_source_names(widths)
        self._num_uppers = [bin_uppers(values[:, i]) for i in range(values.shape[1])]

    def _with_numeric(self, indptr, indices, doc_starts, nonempty: List[Doc], table: Optional["TokenTable"]):
        """The rows with each token's numeric bins at every offset (see the module docstring)."""
        if not self._num_sources:
            return indptr, indices
        T = len(indptr) - 1
        bins = np.full((T, len(self._num_sources)), -1, np.int32)
        if table is not None:
            values = self._numeric_values(nonempty, table)
            if values.shape[1] != len(self._num_sources):
                raise ValueError(Errors.E190.format(found=values.shape[1], sources=len(self._num_sources)))
            for i, uppers in enumerate(self._num_uppers):
                bins[:, i] = bins_of(values[:, i], uppers)
        base, _ = self.numeric_columns()
        window = (self._colmap.shape[1] - 1) // 2
        return _numeric_window_rows(indptr, indices, bins, doc_starts, window,
                                    base.reshape(2 * window + 1, -1).astype(np.int64))
