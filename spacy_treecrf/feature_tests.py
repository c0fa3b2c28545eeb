"""The atomic tests of one token (features.py's module docstring): lexeme-level tests (word, lowercase, the 16
character patterns, affixes, shape, flags, single-word lexicon entries, the label dictionary), cached per lexeme,
and token-level ones (attributes, extensions, multi-word lexicon matches), read from the docs in one TokenTable. A
mixin of WindowFeaturizer: its methods read and grow the featurizer's atom vocabulary.
"""
import re
from collections import Counter
from itertools import chain, repeat
from pathlib import Path
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import spacy
from numba import njit
from spacy.attrs import DEP, ENT_IOB, ENT_TYPE, IDX, LEMMA, LENGTH, ORTH, POS, SENT_START, TAG
from spacy.matcher import PhraseMatcher
from spacy.strings import get_string_id
from spacy.tokens import Doc, Token
from spacy.vocab import Vocab
from .engine.sparse import pairs_to_rows
from .errors import Errors
from .word_classes import cluster_tests

# Token attributes the featurizer can read (besides "_.<extension>"), with their spaCy attribute ids.
ATTRS = {"tag_": TAG, "pos_": POS, "lemma_": LEMMA, "dep_": DEP, "ent_type_": ENT_TYPE}


# Token extension that marks a token's value unknown (missing input, paper Sec. 6), as missing_text does.
MISSING_EXT = "treecrf_missing"


if not Token.has_extension(MISSING_EXT):
    Token.set_extension(MISSING_EXT, default=False)


FLAGS = ("like_num", "is_punct", "is_digit", "is_title", "is_upper", "is_alpha", "like_url", "like_email")


FLAG_BITS = tuple(getattr(spacy.attrs, flag.upper()) for flag in FLAGS)  # each flag's bit in Lexeme.flags


# (test name, pattern over the class string); see the module docstring.
REGEXES: Tuple[Tuple[str, str], ...] = (
    ("A.*", r"A.*"),
    ("Aa+", r"Aa+"),
    ("A+", r"A+"),
    ("Aa+Aa*", r"Aa+A[Aa]*"),
    (".*D.*", r".*D.*"),
    ("D+", r"D+"),
    ("D.D", r"[-D]+[.,]+[D.,]+"),
    ("..+", r"\.\.+"),
    ("X.", r"[^.].*\."),
    ("X-X", r"[AaLD]+-[AaLD]*"),
    ("A.A.", r"(?=[A.]*\.)A[A.]*"),
    ("A.", r"A\."),
    ("L", r"[AaL]"),
    ("A", r"A"),
    ("P", r"[,.;:?!()]"),
    ("Q", r"[\"`']"),
)


_COMPILED = tuple((name, re.compile(pattern, re.DOTALL)) for name, pattern in REGEXES)


_CHUNK_TOKENS = 200_000


# char_classes of the ASCII letters and digits, for str.translate: most words are ASCII, and one translate is
# several times cheaper than a test per character in Python
_ASCII_CLASSES = str.maketrans({**{c: "A" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
                                **{c: "a" for c in "abcdefghijklmnopqrstuvwxyz"}, **{c: "D" for c in "0123456789"}})


def char_classes(text: str) -> str:
    """Map each character to its class for the pattern tests: A (upper), a (lower), D (digit), L (other
    letter); any other character is kept as it is. The result has the same length as ``text``."""
    if text.isascii():
        return text.translate(_ASCII_CLASSES)
    out = []
    for ch in text:
        if ch.isupper():
            out.append("A")
        elif ch.islower():
            out.append("a")
        elif ch.isdecimal():
            out.append("D")
        elif ch.isalpha():
            out.append("L")
        else:
            out.append(ch)
    return "".join(out)


def regex_tests(text: str) -> Tuple[str, ...]:
    """Names of the pattern tests (without the ``re=`` prefix) that the whole of ``text`` matches."""
    return _class_tests(char_classes(text))


# regex_tests' caches: a class string's patterns as bits (bit i: _COMPILED[i] matches), and the names of each set of
# bits met so far. Words share a few thousand class strings ("Aaaaa", "DD.DD"), so the patterns run once per class
# string. Ints, not a tuple per class string (as an lru_cache of the names kept): a cached tuple is a container
# kept alive, and the few hundred class strings of a test set's unseen words were enough of them to set off
# Python's collector, and with it a full collection, inside spacy evaluate's timed pass.
_CLASS_BITS: Dict[str, int] = {}


_BITS_TESTS: Dict[int, Tuple[str, ...]] = {}


_CLASS_CACHE_SIZE = 2 ** 16  # class strings kept (the rest are tested each time)


def _class_tests(classes: str) -> Tuple[str, ...]:
    """regex_tests of a class string."""
    bits = _CLASS_BITS.get(classes)
    if bits is None:
        bits = sum(1 << i for i, (_, rx) in enumerate(_COMPILED) if rx.fullmatch(classes))
        if len(_CLASS_BITS) < _CLASS_CACHE_SIZE:
            _CLASS_BITS[classes] = bits
    tests = _BITS_TESTS.get(bits)
    if tests is None:
        tests = _BITS_TESTS[bits] = tuple(name for i, (name, _) in enumerate(_COMPILED) if bits >> i & 1)
    return tests


def offset_name(offset: int) -> str:
    return "0" if offset == 0 else f"{offset:+d}"


@njit(cache=True, nogil=True)
def _merge_atoms(tok_lex, lex_indptr, lex_ids, x_indptr, x_ids):
    """Per-token sorted union of its lexeme's atoms and its token-level atoms -> CSR (indptr, ids)."""
    T = tok_lex.shape[0]
    bound = 0
    for t in range(T):
        lx = tok_lex[t]
        if lx >= 0:
            bound += lex_indptr[lx + 1] - lex_indptr[lx]
    bound += x_ids.shape[0]
    out = np.empty(bound, np.int32)
    indptr = np.zeros(T + 1, np.int64)
    w = 0
    for t in range(T):
        lx = tok_lex[t]
        i = 0
        iend = 0
        if lx >= 0:
            i = lex_indptr[lx]
            iend = lex_indptr[lx + 1]
        k = x_indptr[t]
        kend = x_indptr[t + 1]
        last = -1
        while i < iend or k < kend:
            if k >= kend or (i < iend and lex_ids[i] <= x_ids[k]):
                v = lex_ids[i]
                i += 1
            else:
                v = x_ids[k]
                k += 1
            if v != last:
                out[w] = v
                w += 1
                last = v
        indptr[t + 1] = w
    return indptr, out[:w]  # (a view: only repeated atoms make the bound larger)


def read_lexicon(path: str, lowercase: bool) -> List[str]:
    """Entries of a lexicon file (UTF-8, one entry per line; blank lines ignored, inner whitespace
    collapsed to single spaces, lowercased if ``lowercase``), sorted and unique."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(Errors.E067.format(path=path))
    entries = set()
    try:
        text = p.read_text(encoding="utf8")
    except UnicodeDecodeError as err:
        raise ValueError(Errors.E075.format(path=path, err=err)) from None
    for line in text.splitlines():
        entry = " ".join(line.split())
        if entry:
            entries.add(entry.lower() if lowercase else entry)
    return sorted(entries)


class TokenTable(NamedTuple):
    """What featurization reads from the non-empty docs of one call (``WindowFeaturizer._read_tokens``)."""
    codes: List[int]  # the spaCy attribute ids of the columns
    columns: np.ndarray  # (tokens, len(codes)) uint64, from Doc.to_array
    extensions: Dict[str, List[Any]]  # name -> the value of that extension (in attrs, numeric_attrs) per token
    missing: np.ndarray  # bool per token: its text is missing_text or it is marked missing (MISSING_EXT)

    def column(self, code: int) -> np.ndarray:
        return self.columns[:, self.codes.index(code)]


def stored_token_values(doc: Doc, names) -> List[Tuple[str, int, Any]]:
    """(name, character offset, value) of every value set on a token for the extensions ``names``, read in one
    pass over where spaCy keeps them (doc.user_data[("._.", name, token.idx, None)]) instead of building a Token
    and its Underscore for every token."""
    return [(k[1], k[2], v) for k, v in doc.user_data.items()
            if type(k) is tuple and len(k) == 4 and k[0] == "._." and k[1] in names and k[2] is not None
            and k[3] is None]


def _concat(parts):
    """One (indptr, indices, doc_starts) from those of consecutive chunks of docs."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(1, np.int64)
    indptrs, indices_list, starts = [np.zeros(1, np.int64)], [], [np.zeros(1, np.int64)]
    nnz = 0
    tokens = 0
    for indptr, indices, doc_starts in parts:
        indptrs.append(indptr[1:] + nnz)
        starts.append(doc_starts[1:] + tokens)
        indices_list.append(indices)
        nnz += int(indptr[-1])
        tokens += int(doc_starts[-1])
    return np.concatenate(indptrs), np.concatenate(indices_list), np.concatenate(starts)


def ambiguity_class(labels) -> str:
    """The test of a word's ambiguity class: the labels it carried in training, sorted (``ac=ADJ|NOUN``)."""
    return "ac=" + "|".join(sorted(labels))


def _count_labels(docs: List[Doc], labels: Sequence[Sequence[Optional[str]]]) -> Dict[str, Dict[str, int]]:
    """text -> gold label -> how many training tokens with that text carry it."""
    if len(labels) != len(docs):
        raise ValueError(Errors.E068.format(n_docs=len(docs), n_labels=len(labels)))
    counts: Dict[str, Counter] = {}
    for q, (doc, doc_labels) in enumerate(zip(docs, labels)):
        if len(doc_labels) != len(doc):
            raise ValueError(Errors.E090.format(q=q, text=doc.text[:40], n_doc=len(doc), n_doc_labels=len(doc_labels)))
        for token, label in zip(doc, doc_labels):
            if label is not None:
                counts.setdefault(token.text, Counter())[label] += 1
    return {word: dict(c) for word, c in counts.items()}


def _chunks_with_labels(docs: List[Doc], labels: Optional[Sequence[Sequence[Optional[str]]]]):
    """``_chunks`` of the docs, each with its slice of ``labels`` (None stays None)."""
    if labels is not None and len(labels) != len(docs):
        raise ValueError(Errors.E069.format(n_docs=len(docs), n_labels=len(labels)))
    start = 0
    for chunk in _chunks(docs):
        yield chunk, (None if labels is None else labels[start:start + len(chunk)])
        start += len(chunk)


def _chunks(docs: Iterable[Doc], max_tokens: int = _CHUNK_TOKENS):
    """Group docs into lists of about ``max_tokens`` tokens (bounds the temporary memory)."""
    chunk: List[Doc] = []
    n = 0
    for doc in docs:
        chunk.append(doc)
        n += len(doc)
        if n >= max_tokens:
            yield chunk
            chunk, n = [], 0
    if chunk:
        yield chunk



class AtomicTests:
    """Atomic tests of tokens as atom ids: interned while the featurizer grows its vocabulary, looked up once it
    is frozen (-1: unknown)."""

    def _intern_one(self, name: str) -> int:
        i = self._atom_ids.get(name)
        if i is None:
            if self._frozen:
                return -1
            i = self._atom_ids[name] = len(self._atom_names)
            self._atom_names.append(name)
        return i

    def lexeme_tests(self, text: str, vocab: Vocab) -> List[str]:
        """Names of the lexeme-level tests of a token with this text."""
        return self._lexeme_names([text], vocab)[1]

    def _lexeme_names(self, texts: List[str], vocab: Vocab, ordered: bool = True) -> Tuple[List[int], List[str]]:
        """The lexeme-level tests of each of ``texts`` as (which text, test name) pairs. The tests are made family
        by family over all texts at once (a few comprehensions, not a dozen calls per text). ``ordered``: the
        pairs list each text's tests in the order of the families here, text by text (the order new atoms get
        their ids in); else family by family (enough to look the names up)."""
        if self.missing_text is not None:
            texts = [None if text == self.missing_text else text for text in texts]
        kept = [q for q, text in enumerate(texts) if text is not None]
        lowers, shapes, flags = self._lexeme_attrs([texts[q] for q in kept], vocab)
        which: List[int] = []
        names: List[str] = []

        def add(qs: List[int], family_names: Iterable[str]) -> None:
            which.extend(qs)
            names.extend(family_names)

        def add_many(qs: List[int], per_text: List[Sequence[str]], prefix: str) -> None:
            """Several tests per text: per_text[i] are the names of text qs[i] (after prefix)."""
            which.extend(q for q, found in zip(qs, per_text) for _ in found)
            names.extend(prefix + name for found in per_text for name in found)
        # Lists of ints and strings only, no (text, name) pairs: tens of thousands of tuples alive at once would
        # set off Python's full garbage collections here (80-120 ms each, over every object of the process)
        if self.word:
            add(kept, ["w=" + texts[q] for q in kept])
        if self.lower:
            add(kept, ["lw=" + lower for lower in lowers])
        if self.regexes:
            add_many(kept, [regex_tests(texts[q]) for q in kept], "re=")
        for k in range(1, self.prefix + 1):
            qs = [q for q in kept if len(texts[q]) >= k]
            add(qs, [f"p{k}={texts[q][:k]}" for q in qs])
        for k in range(1, self.suffix + 1):
            qs = [q for q in kept if len(texts[q]) >= k]
            add(qs, [f"s{k}={texts[q][-k:]}" for q in qs])
        if self.shape:
            add([q for q, shape in zip(kept, shapes) if shape], ["sh=" + shape for shape in shapes if shape])
        if self.flags:
            for bit, flag in zip(FLAG_BITS, FLAGS):
                qs = [q for q, bits in zip(kept, flags) if bits >> bit & 1]
                add(qs, ["f=" + flag] * len(qs))
        if self._single_lex:
            keys = lowers if self.lexicon_lowercase else [texts[q] for q in kept]
            for name, entries in self._single_lex:
                qs = [q for q, key in zip(kept, keys) if key in entries]
                add(qs, ["lex=" + name] * len(qs))
        if self.label_dictionary:
            counts = self._label_counts  # (no new list for the many words it lacks)
            add_many(kept, [sorted(counts[texts[q]]) if texts[q] in counts else () for q in kept], "ld=")
            if self.ambiguity_class:
                qs = [q for q in kept if texts[q] in counts]
                add(qs, [ambiguity_class(counts[texts[q]]) for q in qs])
        if self._cluster_bits:  # the word's own form, else its lowercase form (a sentence's capitalised first word)
            bits = self._cluster_bits
            found = [bits.get(texts[q]) or bits.get(lower) for q, lower in zip(kept, lowers)]
            add_many(kept, [cluster_tests(b) if b else () for b in found], "")
        if not ordered or len(texts) == 1:
            return which, names
        order = sorted(range(len(which)), key=which.__getitem__)  # stable: per text, in family order
        return [which[i] for i in order], [names[i] for i in order]

    def _lexeme_attrs(self, texts: List[str], vocab: Vocab) -> Tuple[List[str], List[str], List[int]]:
        """Per text, its lexeme's lowercase form (the text's own where the lexeme has none), its shape_ (when
        ``shape``) and its Lexeme.flags (FLAGS[i] is bit FLAG_BITS[i], when ``flags``). One Lexeme at a time,
        freed before the next: thousands of them alive at once (new words in a batch) made Python's collector run
        a full collection over every object of the process (80-150 ms) in a first pass over unseen text."""
        shape, flags = self.shape, self.flags
        lowers: List[str] = []
        shapes: List[str] = []
        bits: List[int] = []
        for text in texts:
            lex = vocab[text]
            lowers.append(lex.lower_ or text.lower())
            if shape:
                shapes.append(lex.shape_)
            if flags:
                bits.append(lex.flags)
        return lowers, shapes, bits

    def prepare_known_words(self, vocab: Vocab) -> None:
        """Compute the lexeme tests of every word the frozen index has a word test for (the training words seen
        min_freq times) into the lexeme cache, so that a loaded model's first calls compute only unseen words."""
        orths = [vocab.strings.add(name[2:]) for name in self._atom_names if name.startswith("w=")]
        new = [orth for orth in orths if orth not in self._lexeme_cache]
        if new:
            self._lexeme_cache.update(zip(new, self._compute_lexemes(new, vocab)))

    def _compute_lexemes(self, orths: List[int], vocab: Vocab) -> List[np.ndarray]:
        """The sorted unique atom ids of each lexeme in ``orths`` (new names get new ids before the freeze, in the
        order the lexemes and their tests come)."""
        which, names = self._lexeme_names([vocab.strings[orth] for orth in orths], vocab, ordered=not self._frozen)
        table = self._atom_ids
        if self._frozen:  # look-ups only: their order does not matter (np.unique below sorts)
            ids = np.fromiter(map(table.get, names, repeat(-1, len(names))), np.int64, count=len(names))
        else:
            ids = np.empty(len(names), np.int64)
            for i, name in enumerate(names):
                atom = table.get(name)
                if atom is None:
                    atom = table[name] = len(self._atom_names)
                    self._atom_names.append(name)
                ids[i] = atom
        which = np.asarray(which, np.int64)
        keep = ids >= 0
        keys = np.unique(which[keep] * (len(self._atom_names) + 1) + ids[keep])  # sorted by lexeme, then atom
        lexeme, atom = np.divmod(keys, len(self._atom_names) + 1)
        bounds = np.searchsorted(lexeme, np.arange(len(orths) + 1))
        atom = atom.astype(np.int32)
        return [atom[bounds[q]:bounds[q + 1]] for q in range(len(orths))]

    def _matcher(self, vocab: Vocab):
        key = id(vocab)
        entry = self._matchers.get(key)
        if entry is None or entry[0] is not vocab:
            attr = "LOWER" if self.lexicon_lowercase else "ORTH"
            matcher = PhraseMatcher(vocab, attr=attr)
            names = {}
            for name, values in self._multi_lex.items():
                matcher.add(name, [Doc(vocab, words=value.split(" ")) for value in values])
                names[vocab.strings.add(name)] = name
            entry = self._matchers[key] = (vocab, matcher, names)
        return entry[1], entry[2]

    def _check_extensions(self) -> None:
        for attr in self.attrs:
            if attr.startswith("_.") and not Token.has_extension(attr[2:]):
                raise ValueError(Errors.E091.format(attr=attr, attr_2=attr[2:]))

    def _attr_atom(self, key: Tuple[str, Any], name: str) -> int:
        """The atom of attribute value ``key`` = (attr, value), named ``name`` when new (-1 once frozen)."""
        atom = self._attr_cache.get(key)
        if atom is None:
            atom = self._attr_cache[key] = self._intern_one(name)
        return atom

    def _token_level(self, docs: List[Doc], vocab: Vocab, doc_starts: np.ndarray, table: "TokenTable"):
        """Token-level atoms of the tokens in ``table`` (read from the non-empty ``docs``) as CSR (x_indptr,
        x_ids), each token's ids sorted and unique; missing tokens get none."""
        T = int(doc_starts[-1])
        rows: List[np.ndarray] = []
        atoms: List[np.ndarray] = []
        for attr in self.attrs:
            if attr in ATTRS:
                uniq, inv = np.unique(table.column(ATTRS[attr]), return_inverse=True)
                ids = np.array([-1 if value == 0 else self._attr_atom((attr, value), f"a:{attr}={vocab.strings[value]}")
                                for value in uniq.tolist()], dtype=np.int32)
                tok_ids = ids[inv.reshape(-1)]
            else:
                texts = [None if v is None or v is False or v == "" else str(v) for v in table.extensions[attr[2:]]]
                atom_of = {text: self._attr_atom((attr, text), f"a:{attr}={text}")
                           for text in dict.fromkeys(texts) if text is not None}
                atom_of[None] = -1
                tok_ids = np.fromiter(map(atom_of.__getitem__, texts), np.int32, count=len(texts))
            keep = np.flatnonzero(tok_ids >= 0)
            rows.append(keep)
            atoms.append(tok_ids[keep])
        if self._multi_lex:
            matcher, match_names = self._matcher(vocab)
            r, a = [], []
            for q, doc in enumerate(docs):
                if not len(doc):
                    continue
                base = int(doc_starts[q])
                for match_id, start, end in matcher(doc):
                    atom = self._intern_one("lex=" + match_names[match_id])
                    if atom >= 0:
                        r.extend(range(base + start, base + end))
                        a.extend([atom] * (end - start))
            rows.append(np.asarray(r, dtype=np.int64))
            atoms.append(np.asarray(a, dtype=np.int32))
        if self.doc_context:
            r, a = self._document_atoms(doc_starts, table, vocab)
            rows.append(r)
            atoms.append(a)
        if not rows:
            return np.zeros(T + 1, np.int64), np.zeros(0, np.int32)
        r = np.concatenate(rows)
        a = np.concatenate(atoms)
        keep = ~table.missing[r]
        return pairs_to_rows(r[keep], a[keep], T)

    def _leave_own_labels_out(self, docs, own_labels, doc_starts, a_indptr, a_ids):
        """Drop ``ld=LABEL`` from the tokens of a doc whose every (text, LABEL) occurrence in the training docs
        is in that doc; with ``ambiguity_class``, the word's class test becomes that of the labels left (none where
        no label is left)."""
        if len(own_labels) != len(docs):
            raise ValueError(Errors.E069.format(n_docs=len(docs), n_labels=len(own_labels)))
        rows, atoms, added_rows, added = [], [], [], []
        for q, (doc, labels) in enumerate(zip(docs, own_labels)):
            if len(labels) != len(doc):
                raise ValueError(Errors.E093.format(q=q, text=doc.text[:40], n_doc=len(doc), n_labels=len(labels)))
            words = [t.text for t in doc]
            pairs = Counter((w, label) for w, label in zip(words, labels) if label is not None)
            own_only: Dict[str, List[str]] = {}
            for (word, label), n in pairs.items():
                if self._label_counts.get(word, {}).get(label, 0) <= n:
                    own_only.setdefault(word, []).append(label)
            gone = {word: [a for a in (self._atom_ids.get("ld=" + label) for label in own) if a is not None]
                    for word, own in own_only.items()}
            swap = {word: self._class_swap(word, own) for word, own in own_only.items()} if self.ambiguity_class else {}
            base = int(doc_starts[q])
            for i, word in enumerate(words):
                for atom in gone.get(word, ()):
                    rows.append(base + i)
                    atoms.append(atom)
                old, new = swap.get(word, (-1, -1))
                if old >= 0:
                    rows.append(base + i)
                    atoms.append(old)
                if new >= 0:
                    added_rows.append(base + i)
                    added.append(new)
        if not rows and not added:
            return a_indptr, a_ids
        n_atoms = max(len(self._atom_names), 1)
        token = np.repeat(np.arange(len(a_indptr) - 1, dtype=np.int64), np.diff(a_indptr))
        keep = ~np.isin(token * n_atoms + a_ids, np.asarray(rows, np.int64) * n_atoms + np.asarray(atoms, np.int64))
        return pairs_to_rows(np.concatenate([token[keep], np.asarray(added_rows, np.int64)]),
                             np.concatenate([a_ids[keep], np.asarray(added, np.int32)]), len(a_indptr) - 1)

    def _class_swap(self, word: str, own: List[str]) -> Tuple[int, int]:
        """(the atom of the word's ambiguity class, that of its class without the labels ``own``: -1 where the
        class is empty or, frozen, unknown)."""
        counts = self._label_counts.get(word, {})
        left = {label: n for label, n in counts.items() if label not in own}
        return (self._atom_ids.get(ambiguity_class(counts), -1) if counts else -1,
                self._intern_one(ambiguity_class(left)) if left else -1)

    def _read_tokens(self, nonempty: List[Doc]) -> "TokenTable":
        """Everything featurization and missing_rows read from the docs, in one Doc.to_array per doc and one
        lookup per token and extension in the docs' user_data (where Token._.set keeps a value, under
        ("._.", name, token.idx, None)), rather than a Token and its Underscore per token."""
        codes = [ORTH, IDX] + [ATTRS[a] for a in self.attrs if a in ATTRS] + ([LENGTH] if "len" in
                                                                              self.numeric_attrs else [])
        if self.doc_context or self.sentence_windows:
            codes.append(SENT_START)
        if "ent_type_" in self.attrs:
            codes.append(ENT_IOB)  # an unset entity type is ENT_IOB 0 (ENT_TYPE is 0 outside entities too)
        codes = list(dict.fromkeys(codes))
        columns = np.concatenate([d.to_array(codes).reshape(len(d), len(codes)) for d in nonempty])
        idx = columns[:, 1].tolist()
        lengths = [len(d) for d in nonempty]
        user_data = [d.user_data for d in nonempty]

        def stored(name: str, default: Any):
            keys = zip(repeat("._."), repeat(name), idx, repeat(None))
            return map(dict.get, chain.from_iterable(map(repeat, user_data, lengths)), keys, repeat(default))

        extensions: Dict[str, List[Any]] = {}
        for attr in dict.fromkeys(self.attrs + self.numeric_attrs):  # the extensions both families read
            if attr.startswith("_."):
                name = attr[2:]
                if not Token.has_extension(name):
                    raise ValueError(Errors.E211.format(attr=attr, name=name))
                default, method, getter, _ = Token.get_extension(name)
                if getter is not None or method is not None:
                    extensions[name] = [token._.get(name) for doc in nonempty for token in doc]
                else:
                    extensions[name] = list(stored(name, default))
        if self.missing_text is not None:
            missing = columns[:, 0] == np.uint64(get_string_id(self.missing_text))
        else:
            missing = np.zeros(len(columns), bool)
        if any(stored(MISSING_EXT, False)):
            missing |= np.fromiter(map(bool, stored(MISSING_EXT, False)), bool, count=len(columns))
        return TokenTable(codes, columns, extensions, missing)
