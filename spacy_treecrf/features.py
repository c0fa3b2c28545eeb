"""Window features: spaCy ``Doc`` objects -> sparse binary feature rows (CSR) for the TreeCRF engine.

The featurizer works in two layers:

1. *Atomic tests* of one token, e.g. ``w=Bank`` (word identity), ``lw=bank`` (lowercase), ``re=Aa+``
   (capitalisation / digit pattern), ``p3=Ban`` / ``s3=ank`` (prefix / suffix), ``sh=Xxxx`` (spaCy shape),
   ``f=is_title`` (lexical flag), ``a:tag_=NNP`` (an attribute set by the reader or an earlier component)
   ``lex=CITY`` (lexicon membership) and ``ld=NOUN`` (label dictionary: the word was seen with this gold label
   in the training docs).
2. *Columns*: every atomic test shifted over the offsets ``-window..+window``. Column ``w=Bank@-1`` of
   token t is on when token t-1 has test ``w=Bank``. Where t + offset falls outside the doc, token t gets
   the padding column ``pad@-1`` (BOS side) / ``pad@+1`` (EOS side) instead; padding columns exist only
   for non-zero offsets.

Tests that depend only on the token's text (word, lowercase, regexes, prefixes, suffixes, shape, flags,
single-word lexicon entries and the label dictionary) are *lexeme-level*: they are computed once per distinct
``orth`` and cached as a sorted ``np.int32`` array of atomic-test ids. Attributes and multi-word lexicon matches
are token-level and computed per doc (as is leaving a training doc's own labels out of the label dictionary). Merging and windowing run in small numba kernels.

The label dictionary
--------------------
A tree fits a rare word's label only by splitting on that word's identity test, which a greedy split search over
a few hundred frequent tests rarely picks; a linear CRF gives every word its own weight at once. The label
dictionary (``label_dictionary``, Ratnaparkhi's tag dictionary / an ambiguity class) turns "this word was seen as
NOUN" into one test shared by all such words. It is counted from the gold labels given to ``initialize``. Rows of
a training doc leave that doc's own labels out (``own_labels``: a word seen only in this doc with a label does not
get that label's test), so training sees the dictionary as unseen text does; without the leave-one-doc-out the
test would be right on every training token and the trees would learn to trust it blindly.

The 16 character-pattern tests
------------------------------
McCallum (UAI 2003, section 5) uses "16 character-level regular expressions, mostly concerning
capitalization and digit patterns, such as A, A+, Aa+, Aa+Aa*, A., D+, .*D.*" with A = [A-Z], a = [a-z],
D = [0-9]. The paper lists only these seven; the full set of 16 used here is the one in McCallum's CoNLL-2003
NER set-up in MALLET (``cc.mallet.share.mccallum.ner.TUI``), matched against the whole token
(``String.matches`` semantics). Each character of the token is first mapped to a class (upper-case letter
-> ``A``, lower-case letter -> ``a``, decimal digit -> ``D``, other letter -> ``L``, anything else kept),
so the patterns are Unicode-aware. Test names (``re=<name>``):

=========  ==============  ==========================================  ======================
name       MALLET name     pattern (over the original characters)       example
=========  ==============  ==========================================  ======================
``A.*``    INITCAP         ``[A-Z].*``                                 Bank, IBM, U.S.
``Aa+``    CAPITALIZED     ``[A-Z][a-z]+`` (paper's Aa+; MALLET: a*)   Bank
``A+``     ALLCAPS         ``[A-Z]+``                                  IBM, I
``Aa+Aa*`` MIXEDCAPS       ``[A-Z][a-z]+[A-Z][A-Za-z]*``               McDonald
``.*D.*``  CONTAINSDIGITS  ``.*[0-9].*``                               A4, 1990s
``D+``     ALLDIGITS       ``[0-9]+``                                  1990
``D.D``    NUMERICAL       ``[-0-9]+[.,]+[0-9.,]+``                    3.5, 1,000
``..+``    MULTIDOTS       ``\\.\\.+``                                   ...
``X.``     ENDSINDOT       ``[^.]+.*\\.``                               Inc., etc.
``X-X``    CONTAINSDASH    ``[A-Za-z0-9]+-[A-Za-z0-9]*``               well-known, 10-
``A.A.``   ACRO            ``[A-Z][A-Z.]*\\.[A-Z.]*``                   U.S., U.S
``A.``     LONELYINITIAL   ``[A-Z]\\.``                                 J.
``L``      SINGLECHAR      one letter                                  a, I
``A``      CAPLETTER       one upper-case letter                       I
``P``      PUNC            ``[,.;:?!()]``                              ",", (
``Q``      QUOTE           ``["`']``                                   '
=========  ==============  ==========================================  ======================

Two patterns are written in an equivalent form that the regular-expression engine matches in linear time: MALLET's
``[^.]+.*\\.`` and ``A[A.]*\\.[A.]*`` backtrack quadratically on a long token without a (final) dot (a
200,000-character token took 16.7 s), so they read ``[^.].*\\.`` (the rest of a run of non-dots is part of
``.*``) and ``(?=[A.]*\\.)A[A.]*`` (only A and dots, starting with A, with a dot somewhere).

Prefix / suffix tests of length k are produced only for tokens of at least k characters. Shape and the
lexical flags come from the Doc's ``Vocab`` (its language's lexical attribute getters), so a bare
``Vocab()`` without a language has no shapes and no ``like_num`` etc.

Vocabulary and columns
----------------------
``initialize(docs)`` counts atomic tests over the training docs (a test counts once per token that has it),
drops word / lowercase tests (``w=``, ``lw=``) seen on fewer than ``min_freq`` tokens (every other family
is kept as soon as it is seen) and freezes the column index: only (test, offset) pairs that actually occur
in the training docs get a column, and a padding column only if some training token needed it. After that,
unseen tests and unseen pairs are silently dropped. Columns are numbered offset-major (all columns of
offset -window first, the padding column first in its block, then tests in atomic-id order), so the indices
of every row come out sorted and unique without any sorting.

Numeric sources
---------------
Opt-in real values per token: ``numeric_attrs`` (``len``: characters; a numeric Token attribute such as
``rank``; an extension ``_.x``), ``vectors`` (every dimension of the token's row in the pipeline's vectors table)
and ``tensor`` (every dimension of ``doc.tensor``, an upstream tok2vec's output). Each source at each window
offset is a numeric column of the engine (engine/numeric.py): the source's values on the training docs (at most
NUMERIC_SAMPLE tokens of them, as LightGBM bins on a sample) set its bins, shared by its offsets; a token holds
the id of its value's bin at each offset, after all binary columns (offset, then source, then bin: rows stay
ascending). A token without a value (no vector, a None extension, a missing token, beyond the doc's edge) holds
none, and every threshold split learns which side such tokens take.
"""
import inspect
import re
from collections import Counter
from itertools import chain, repeat
from pathlib import Path
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import spacy
from numba import njit
from spacy.attrs import DEP, ENT_IOB, ENT_TYPE, IDX, LEMMA, LENGTH, ORTH, POS, TAG
from spacy.matcher import PhraseMatcher
from spacy.strings import get_string_id
from spacy.tokens import Doc, Token
from spacy.vocab import Vocab
from .engine.numeric import bin_uppers, bins_of
from .engine.sparse import pairs_to_rows, window_rows
from .errors import Errors

STATE_VERSION = 1

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

# Families subject to the min_freq cut-off.
_FREQ_FAMILIES = ("w=", "lw=")
_CHUNK_TOKENS = 200_000
NUMERIC_SAMPLE = 200_000  # at most this many training tokens set a numeric source's bins...
NUMERIC_SAMPLE_VALUES = 20_000_000  # ...and at most this many values over all sources (300-d vectors: 66,666 tokens)
# Bounds of what a config or a model file may ask for. Columns are looked up in an atoms x (2 window + 1) table,
# and every affix length is a test per token: a window of 25 (51 tokens of context) or affixes of 30 characters are
# beyond any use, and larger values would let a few bytes of config allocate gigabytes.
MAX_WINDOW = 25
MAX_AFFIX = 30


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


# family prefix of a test name -> (what the family reads, whether its value is text to quote)
READABLE_FAMILIES = {"w=": ("word", True), "lw=": ("lower", True), "re=": ("pattern", False),
                     "sh=": ("shape", False), "lex=": ("lexicon", False), "ld=": ("seen_as", False)}


def readable_test(name: str) -> str:
    """A column's name (feature_names) or a variable's missing indicator (``missing:<variable>``) in words, for
    rules and explanations: ``w=Mr.@-1`` -> ``word[-1] = "Mr."``, ``s3=ing@+1`` -> ``suffix3[+1] = "ing"``,
    ``sh=Xxxxx@0`` -> ``shape[0] = Xxxxx``, ``re=Aa+@0`` -> ``pattern[0] = Aa+`` (the regex tests of the
    module docstring), ``f=is_title@0`` -> ``is_title[0]``, ``a:tag_=NNP@-1`` -> ``tag_[-1] = "NNP"``,
    ``lex=CITY@0`` -> ``lexicon[0] = CITY``, ``ld=B-PER@0`` -> ``seen_as[0] = B-PER`` (the word carried that
    gold label in training), ``pad@+2`` -> ``outside[+2]`` (the offset lies beyond the doc's edge),
    ``missing:w=@0`` -> ``word[0] missing``, ``num:vector3 <= 0.25@-1`` -> ``vector3[-1] <= 0.25``."""
    if name.startswith("missing:"):
        family, _, offset = name[len("missing:"):].rpartition("@")
        return f"{_family_word(family.rstrip('='))}[{offset}] missing"
    if name.startswith("num:"):  # num:vector3 <= 0.25@-1 -> vector3[-1] <= 0.25
        test, _, offset = name[len("num:"):].rpartition("@")
        source, _, rest = test.partition(" ")
        return f"{source}[{offset}] {rest}"
    test, _, offset = name.rpartition("@")
    if test == "pad":
        return f"outside[{offset}]"
    family, eq, value = test.partition("=")
    if not eq:
        return name
    if family == "f":
        return f"{value}[{offset}]"
    word, quoted = READABLE_FAMILIES.get(family + "=", (_family_word(family), True))
    return f'{word}[{offset}] = "{value}"' if quoted else f"{word}[{offset}] = {value}"


def _family_word(family: str) -> str:
    """``p3`` -> prefix3, ``s2`` -> suffix2, ``a:tag_`` -> tag_, ``w`` -> word (READABLE_FAMILIES)."""
    if family[:1] in ("p", "s") and family[1:].isdigit():
        return ("prefix" if family[0] == "p" else "suffix") + family[1:]
    if family.startswith("a:"):
        return family[2:]
    return READABLE_FAMILIES.get(family + "=", (family, True))[0]


# --------------------------------------------------------------------------------------------- kernels

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


# ---------------------------------------------------------------------------------------- validation

def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(Errors.E062.format(name=name, value=value))
    return bool(value)


def _check_int(name: str, value: Any, minimum: int, maximum: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(Errors.E063.format(name=name, value=value))
    if value < minimum:
        raise ValueError(Errors.E064.format(name=name, minimum=minimum, value=value))
    if maximum is not None and value > maximum:
        raise ValueError(Errors.E159.format(name=name, maximum=maximum, value=value))
    return int(value)


def _check_attrs(attrs: Any) -> List[str]:
    if isinstance(attrs, str) or not isinstance(attrs, (list, tuple)):
        raise ValueError(Errors.E065.format(attrs=attrs))
    out = []
    for attr in attrs:
        if not isinstance(attr, str):
            raise ValueError(Errors.E070.format(attr=attr))
        if attr not in ATTRS and not (attr.startswith("_.") and len(attr) > 2):
            allowed = ", ".join(repr(a) for a in ATTRS)
            raise ValueError(Errors.E071.format(attr=attr, allowed=allowed))
        if attr in out:
            raise ValueError(Errors.E072.format(attr=attr))
        out.append(attr)
    return out


def _check_numeric_attrs(attrs: Any) -> List[str]:
    """numeric_attrs: 'len', a Token attribute or '_.<extension>', each once."""
    if isinstance(attrs, str) or not isinstance(attrs, (list, tuple)):
        raise ValueError(Errors.E192.format(attrs=attrs))
    out = []
    for attr in attrs:
        ok = isinstance(attr, str) and (attr == "len" or (attr.startswith("_.") and len(attr) > 2) or (
            not attr.startswith("_") and hasattr(Token, attr)))
        if not ok or attr in out:
            raise ValueError(Errors.E193.format(attr=attr))
        out.append(attr)
    return out


def _check_lexicons(lexicons: Any) -> Dict[str, str]:
    if not isinstance(lexicons, dict):
        raise ValueError(Errors.E066.format(lexicons=lexicons))
    out = {}
    for name, path in lexicons.items():
        if not isinstance(name, str) or not name or any(ch.isspace() for ch in name):
            raise ValueError(Errors.E073.format(name=name))
        if not isinstance(path, (str, Path)):
            raise ValueError(Errors.E074.format(name=name, path=path))
        out[name] = str(path)
    return out


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


# ---------------------------------------------------------------------------------------- featurizer

class TokenTable(NamedTuple):
    """What featurization reads from the non-empty docs of one call (``WindowFeaturizer._read_tokens``)."""
    codes: List[int]  # the spaCy attribute ids of the columns
    columns: np.ndarray  # (tokens, len(codes)) uint64, from Doc.to_array
    extensions: Dict[str, List[Any]]  # name -> the value of that extension (in attrs, numeric_attrs) per token
    missing: np.ndarray  # bool per token: its text is missing_text or it is marked missing (MISSING_EXT)

    def column(self, code: int) -> np.ndarray:
        return self.columns[:, self.codes.index(code)]


class WindowFeaturizer:
    """Docs -> sparse binary rows over windowed atomic tests (see the module docstring).

    Options (all validated at construction; a bad value raises ``ValueError`` naming the setting):

    - ``window`` (>= 0): tests are shifted over offsets ``-window..+window``.
    - ``word`` / ``lower``: word identity ``w=`` / lowercase ``lw=`` tests.
    - ``min_freq`` (>= 1): word / lowercase tests seen on fewer training tokens are dropped.
    - ``regexes``: the 16 character-pattern tests ``re=``.
    - ``prefix`` / ``suffix`` (>= 0): prefixes ``p1=``..``pN=`` / suffixes ``s1=``..``sN=``.
    - ``shape``: spaCy's ``shape_`` (``sh=``). ``flags``: the lexical flags in ``FLAGS`` (``f=is_title``).
    - ``attrs``: token attributes set by the reader or an earlier component: any of ``tag_``, ``pos_``,
      ``lemma_``, ``dep_``, ``ent_type_`` or ``_.<extension>``; tests ``a:tag_=NN``. Empty values (and
      ``None`` / ``False`` for extensions) give no test.
    - ``lexicons``: lexicon name -> path of a UTF-8 file with one entry per line. Entries without whitespace
      are lexeme tests; entries with whitespace are split on whitespace and matched as token sequences with
      spaCy's ``PhraseMatcher``; both give the test ``lex=NAME`` on every token they cover. The files are
      read by ``initialize`` and their entries kept in the featurizer's state, so a trained model does not
      need them.
    - ``lexicon_lowercase``: compare lexicon entries case-insensitively (``LOWER``) rather than on ``ORTH``.
    - ``label_dictionary``: test ``ld=LABEL`` when the token's text carried gold label LABEL in the training docs
      (``initialize(docs, labels)``); a training doc's rows leave its own labels out (``__call__(docs,
      own_labels)``, see the module docstring).
    - ``numeric_attrs`` / ``vectors`` / ``tensor``: real-valued sources, windowed as numeric columns (see the
      module docstring); ``len`` (characters), a numeric Token attribute (``rank``, ...) or ``_.<extension>``
      holding numbers; the token's vector; its row of ``doc.tensor`` (put the tok2vec that sets it in
      ``[training] annotating_components``, frozen, so its values mean the same in training and tagging).
    - ``missing_text``: tokens whose value is unknown. A token whose text equals this string (or with
      ``token._.treecrf_missing`` set True) produces no atomic tests at all (no lexeme tests, no attributes, no
      lexicon matches), and ``missing_rows`` reports every variable it feeds as missing. ``None`` disables the
      text hook (the extension always works).

    Missing values: a *variable* is one test family (``w=``, ``lw=``, ``re=``, ``p1=``, ..., ``sh=``, ``f=``,
    ``a:tag_=``, ``lex=``) at one offset (``family_names``). ``missing_rows(docs)`` lists the variables missing
    at each position: all of a missing token's families at every offset that sees it, and ``a:X=`` where the
    reader left attribute X unset (an empty ``tag_`` / ``pos_`` / ``lemma_`` / ``dep_``, an entity IOB of "";
    extensions are never missing: None is their "no value").
    """

    def __init__(self, window: int = 2, word: bool = True, lower: bool = True, min_freq: int = 2,
                 regexes: bool = True, prefix: int = 3, suffix: int = 4, shape: bool = True, flags: bool = True,
                 attrs: Sequence[str] = (), lexicons: Optional[Dict[str, str]] = None,
                 lexicon_lowercase: bool = True, missing_text: Optional[str] = None,
                 label_dictionary: bool = True, numeric_attrs: Sequence[str] = (), vectors: bool = False,
                 tensor: bool = False):
        self._configure(dict(window=window, word=word, lower=lower, min_freq=min_freq, regexes=regexes,
                             prefix=prefix, suffix=suffix, shape=shape, flags=flags, attrs=attrs,
                             lexicons={} if lexicons is None else lexicons, lexicon_lowercase=lexicon_lowercase,
                             missing_text=missing_text, label_dictionary=label_dictionary,
                             numeric_attrs=numeric_attrs, vectors=vectors, tensor=tensor))
        self._reset_state()

    # ---- configuration

    def _configure(self, cfg: Dict[str, Any]) -> None:
        self.window = _check_int("window", cfg["window"], 0, MAX_WINDOW)
        self.word = _check_bool("word", cfg["word"])
        self.lower = _check_bool("lower", cfg["lower"])
        self.min_freq = _check_int("min_freq", cfg["min_freq"], 1)
        self.regexes = _check_bool("regexes", cfg["regexes"])
        self.prefix = _check_int("prefix", cfg["prefix"], 0, MAX_AFFIX)
        self.suffix = _check_int("suffix", cfg["suffix"], 0, MAX_AFFIX)
        self.shape = _check_bool("shape", cfg["shape"])
        self.flags = _check_bool("flags", cfg["flags"])
        self.attrs = _check_attrs(cfg["attrs"])
        self.lexicons = cfg["lexicons"]
        self.lexicon_lowercase = _check_bool("lexicon_lowercase", cfg["lexicon_lowercase"])
        missing = cfg["missing_text"]
        if missing is not None and not isinstance(missing, str):
            raise ValueError(Errors.E076.format(missing=missing))
        self.missing_text = missing
        self.label_dictionary = _check_bool("label_dictionary", cfg["label_dictionary"])
        self.numeric_attrs = _check_numeric_attrs(cfg["numeric_attrs"])
        self.vectors = _check_bool("vectors", cfg["vectors"])
        self.tensor = _check_bool("tensor", cfg["tensor"])

    @property
    def lexicons(self) -> Dict[str, str]:
        """Lexicon name -> file path (read by ``initialize``; "" for a lexicon whose entries a loaded model
        carries, with no file to read). Assigning validates like the constructor."""
        return self._lexicons

    @lexicons.setter
    def lexicons(self, value: Dict[str, str]) -> None:
        self._lexicons = _check_lexicons(value)

    def config(self) -> Dict[str, Any]:
        """The options, as plain data."""
        return {"window": self.window, "word": self.word, "lower": self.lower, "min_freq": self.min_freq,
                "regexes": self.regexes, "prefix": self.prefix, "suffix": self.suffix, "shape": self.shape,
                "flags": self.flags, "attrs": list(self.attrs), "lexicons": dict(self.lexicons),
                "lexicon_lowercase": self.lexicon_lowercase, "missing_text": self.missing_text,
                "label_dictionary": self.label_dictionary, "numeric_attrs": list(self.numeric_attrs),
                "vectors": self.vectors, "tensor": self.tensor}

    @property
    def offsets(self) -> List[int]:
        return list(range(-self.window, self.window + 1))

    # ---- state

    def _reset_state(self) -> None:
        self.initialized = False
        self._frozen = False
        self._atom_names: List[str] = []
        self._atom_ids: Dict[str, int] = {}
        self._lexicon_entries: Dict[str, List[str]] = {}
        self._single_lex: List[Tuple[str, frozenset]] = []
        self._multi_lex: Dict[str, List[str]] = {}
        self._label_counts: Dict[str, Dict[str, int]] = {}  # text -> gold label -> training tokens
        self._matchers: Dict[int, Tuple[Vocab, PhraseMatcher, Dict[int, str]]] = {}
        self._clear_caches()
        self._col_offset = np.zeros(0, np.int32)
        self._col_atom = np.zeros(0, np.int32)
        self._col_var: Optional[np.ndarray] = None
        self._colmap = np.full((0, 2 * self.window + 1), -1, np.int32)
        self._padcol = np.full(2 * self.window + 1, -1, np.int32)
        self._num_sources: List[str] = []  # numeric sources (see the module docstring), after initialize
        self._num_uppers: List[np.ndarray] = []  # their bins' upper bounds

    def _clear_caches(self) -> None:
        self._lexeme_cache: Dict[int, np.ndarray] = {}
        self._attr_cache: Dict[Tuple[str, Any], int] = {}

    def _set_lexicons(self, entries: Dict[str, List[str]]) -> None:
        self._lexicon_entries = {name: list(values) for name, values in entries.items()}
        self._single_lex = [(name, frozenset(e for e in values if " " not in e))
                            for name, values in self._lexicon_entries.items()]
        self._single_lex = [(name, values) for name, values in self._single_lex if values]
        self._multi_lex = {name: [e for e in values if " " in e] for name, values in self._lexicon_entries.items()}
        self._multi_lex = {name: values for name, values in self._multi_lex.items() if values}
        self._matchers = {}
        self._clear_caches()

    @property
    def n_features(self) -> int:
        """Binary columns, then the numeric columns' bins."""
        _, end = self.numeric_columns()
        return int(end[-1]) if len(end) else int(len(self._col_atom))

    def numeric_columns(self) -> Tuple[np.ndarray, np.ndarray]:
        """(base, end): the first id and one past the last of every numeric column, offset-major, then source,
        after the binary columns (engine/numeric.py's NumericIndex; empty without numeric sources)."""
        counts = np.array([len(u) + 1 for u in self._num_uppers], dtype=np.int64)
        per = np.tile(counts, 2 * self.window + 1)
        end = len(self._col_atom) + np.cumsum(per)
        return end - per, end

    @property
    def atom_names(self) -> List[str]:
        """Atomic tests by id (after ``initialize``: the frozen vocabulary)."""
        return list(self._atom_names)

    def feature_names(self) -> List[str]:
        """Readable name of every column, by column id, e.g. ``w=Bank@-1`` or ``pad@+2``."""
        return [self.feature_name(col) for col in range(len(self._col_atom))]

    def feature_name(self, col: int) -> str:
        """Column ``col``'s name (see feature_names); a numeric column's bin reads as its test,
        ``num:vector3 <= 0.25@-1`` (the last bin: ``num:vector3 present@-1``)."""
        if col >= len(self._col_atom):
            return self.threshold_name(col, above=False)
        atom = int(self._col_atom[col])
        return f"{'pad' if atom < 0 else self._atom_names[atom]}@{offset_name(int(self._col_offset[col]))}"

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

    # ---- atomic tests

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
        if not rows:
            return np.zeros(T + 1, np.int64), np.zeros(0, np.int32)
        r = np.concatenate(rows)
        a = np.concatenate(atoms)
        keep = ~table.missing[r]
        return pairs_to_rows(r[keep], a[keep], T)

    def token_atoms(self, docs: List[Doc], own_labels: Optional[Sequence[Sequence[Optional[str]]]] = None):
        """Atomic tests of every token of ``docs`` (concatenated) as CSR: (indptr int64 (T+1), atom ids
        int32, doc_starts int64 (n_docs+1)), and the TokenTable they were read from (None without tokens), which
        missing_rows can use too. Each token's ids are sorted and unique. ``own_labels`` (one label or None per
        token of each doc) are left out of the label dictionary."""
        lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
        doc_starts = np.zeros(len(docs) + 1, np.int64)
        np.cumsum(lengths, out=doc_starts[1:])
        T = int(doc_starts[-1])
        if T == 0:
            return np.zeros(1, np.int64), np.zeros(0, np.int32), doc_starts, None
        nonempty = [d for d in docs if len(d)]
        vocab = nonempty[0].vocab
        for d in nonempty:
            if d.vocab is not vocab:
                raise ValueError(Errors.E092)
        self._check_extensions()
        table = self._read_tokens(nonempty)
        uniq, tok_lex = np.unique(table.column(ORTH), return_inverse=True)
        tok_lex = tok_lex.reshape(-1).astype(np.int64)
        cache = self._lexeme_cache
        orths = uniq.tolist()
        new = [orth for orth in orths if orth not in cache]
        if new:
            cache.update(zip(new, self._compute_lexemes(new, vocab)))
        arrays = [cache[orth] for orth in orths]
        lex_indptr = np.zeros(len(arrays) + 1, np.int64)
        np.cumsum([len(a) for a in arrays], out=lex_indptr[1:])
        lex_ids = np.concatenate(arrays).astype(np.int32) if arrays else np.zeros(0, np.int32)
        tok_lex[table.missing] = -1
        x_indptr, x_ids = self._token_level(docs, vocab, doc_starts, table)
        a_indptr, a_ids = _merge_atoms(tok_lex, lex_indptr, lex_ids, x_indptr, x_ids)
        if self.label_dictionary and own_labels is not None:
            a_indptr, a_ids = self._leave_own_labels_out(docs, own_labels, doc_starts, a_indptr, a_ids)
        return a_indptr, a_ids, doc_starts, table

    def _leave_own_labels_out(self, docs, own_labels, doc_starts, a_indptr, a_ids):
        """Drop ``ld=LABEL`` from the tokens of a doc whose every (text, LABEL) occurrence in the training docs
        is in that doc."""
        if len(own_labels) != len(docs):
            raise ValueError(Errors.E069.format(n_docs=len(docs), n_labels=len(own_labels)))
        rows, atoms = [], []
        for q, (doc, labels) in enumerate(zip(docs, own_labels)):
            if len(labels) != len(doc):
                raise ValueError(Errors.E093.format(q=q, text=doc.text[:40], n_doc=len(doc), n_labels=len(labels)))
            words = [t.text for t in doc]
            pairs = Counter((w, label) for w, label in zip(words, labels) if label is not None)
            own_only: Dict[str, List[int]] = {}
            for (word, label), n in pairs.items():
                atom = self._atom_ids.get("ld=" + label)
                if atom is not None and self._label_counts.get(word, {}).get(label, 0) <= n:
                    own_only.setdefault(word, []).append(atom)
            if own_only:
                base = int(doc_starts[q])
                for i, word in enumerate(words):
                    for atom in own_only.get(word, ()):
                        rows.append(base + i)
                        atoms.append(atom)
        if not rows:
            return a_indptr, a_ids
        n_atoms = max(len(self._atom_names), 1)
        token = np.repeat(np.arange(len(a_indptr) - 1, dtype=np.int64), np.diff(a_indptr))
        keep = ~np.isin(token * n_atoms + a_ids, np.asarray(rows, np.int64) * n_atoms + np.asarray(atoms))
        indptr = np.zeros_like(a_indptr)
        np.cumsum(np.bincount(token[keep], minlength=len(a_indptr) - 1), out=indptr[1:])
        return indptr, a_ids[keep]

    def _read_tokens(self, nonempty: List[Doc]) -> "TokenTable":
        """Everything featurization and missing_rows read from the docs, in one Doc.to_array per doc and one
        lookup per token and extension in the docs' user_data (where Token._.set keeps a value, under
        ("._.", name, token.idx, None)), rather than a Token and its Underscore per token."""
        codes = [ORTH, IDX] + [ATTRS[a] for a in self.attrs if a in ATTRS] + ([LENGTH] if "len" in
                                                                              self.numeric_attrs else [])
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

    def family_names(self) -> List[str]:
        """The test families, in variable order (see the class docstring)."""
        names = (["w="] if self.word else []) + (["lw="] if self.lower else []) + (["re="] if self.regexes else [])
        names += [f"p{k}=" for k in range(1, self.prefix + 1)] + [f"s{k}=" for k in range(1, self.suffix + 1)]
        names += (["sh="] if self.shape else []) + (["f="] if self.flags else [])
        names += [f"a:{attr}=" for attr in self.attrs] + (["lex="] if self.lexicons else [])
        return names + (["ld="] if self.label_dictionary else [])

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
        applies = np.array([np.maximum(lengths - abs(j - self.window), 0).sum() for j in range(W)])
        nonempty = [d for d in chunk if len(d)]
        T = int(doc_starts[-1])
        rows, ids = [np.zeros(0, np.int64)], [np.zeros(0, np.int32)]
        if nonempty:
            if table is None:
                table = self._read_tokens(nonempty)
            whole = np.flatnonzero(table.missing)
            rows.append(np.repeat(whole, F))
            ids.append(np.tile(np.arange(F, dtype=np.int32), len(whole)))
            for attr in self.attrs:
                if attr in ATTRS:
                    absent = np.flatnonzero(table.column(ENT_IOB if attr == "ent_type_" else ATTRS[attr]) == 0)
                    rows.append(absent)
                    ids.append(np.full(len(absent), fams.index(f"a:{attr}="), np.int32))
        f_indptr, f_ids = pairs_to_rows(np.concatenate(rows), np.concatenate(ids), T)
        indptr, indices = window_rows(f_indptr, f_ids, doc_starts, self.window, colmap, np.full(W, -1, np.int32))
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

    # ---- numeric sources

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

    # ---- training-time vocabulary

    def initialize(self, docs: Iterable[Doc], labels: Optional[Sequence[Sequence[Optional[str]]]] = None) -> None:
        """Read the lexicons, count the label dictionary from ``labels`` (the gold label or None of every token
        of every doc; needed with ``label_dictionary``), count the atomic tests over ``docs`` and freeze the
        column index."""
        carried = self._lexicon_entries  # lexicons without a file ("") keep the entries a loaded model carries
        self._reset_state()
        for name, path in self.lexicons.items():
            if not path and name not in carried:
                raise ValueError(Errors.E161.format(name=name))
        self._set_lexicons({name: read_lexicon(path, self.lexicon_lowercase) if path else carried[name]
                            for name, path in self.lexicons.items()})
        docs = list(docs)
        if self.label_dictionary:
            if labels is None:
                raise ValueError(Errors.E094)
            self._label_counts = _count_labels(docs, labels)
        mapping, seen, pad_seen = self._count_atoms(docs, labels, first_new=0)
        col_offset, col_atom = self._new_columns(seen, pad_seen)
        self._set_columns(np.asarray(col_offset, np.int32), np.asarray(col_atom, np.int32))
        self._learn_bins(docs)
        # Keep the caches, renumbered to the frozen vocabulary (monotone, so arrays stay sorted).
        for orth, arr in self._lexeme_cache.items():
            new = mapping[arr]
            self._lexeme_cache[orth] = new[new >= 0]
        self._attr_cache = {key: (int(mapping[v]) if v >= 0 else -1) for key, v in self._attr_cache.items()}
        self._frozen = True
        self.initialized = True

    def extend(self, docs: Iterable[Doc], labels: Optional[Sequence[Sequence[Optional[str]]]] = None) -> np.ndarray:
        """Grow an initialized index with what more training docs bring, for a model that goes on training: their
        gold ``labels`` join the label dictionary, the atomic tests they have that the index lacks join it (word
        tests that occur min_freq times in them), and every (test, offset) they show without a column gets one.
        Old atoms keep their ids, and old columns their tests: the new columns go, in the order of the columns
        (offset, then atom: a row's columns stay ascending), and the numeric bins (whose bins stay) after them.
        Returns where each old column and bin went (ids, old id -> new id) for whatever reads them by id (trees).

        A word's dictionary count of a label becomes the larger of the old and the new docs' (not their sum): the
        new docs often hold the old ones (more data, or the same data with a new label), and a summed count would
        let a word seen once keep its own label in its training rows (token_atoms leaves a doc's own labels out
        only where the doc holds every occurrence): the trees would learn to trust the dictionary too much."""
        docs = list(docs)
        if self.label_dictionary:
            if labels is None:
                raise ValueError(Errors.E094)
            for word, counts in _count_labels(docs, labels).items():
                known = self._label_counts.setdefault(word, {})
                for label, n in counts.items():
                    known[label] = max(known.get(label, 0), n)
        first_new = len(self._atom_names)
        self._frozen = False
        self._clear_caches()  # cached lexeme tests lack the new dictionary labels
        try:
            _, seen, pad_seen = self._count_atoms(docs, labels, first_new)
        finally:
            self._frozen = True
            self._clear_caches()  # counting cached atoms that were not kept
        seen[:first_new] &= self._colmap[:first_new] < 0  # (test, offset) pairs that have a column already
        pad_seen &= self._padcol < 0
        col_offset, col_atom = self._new_columns(seen, pad_seen)
        offsets = np.concatenate([self._col_offset, np.asarray(col_offset, np.int32)])
        atoms = np.concatenate([self._col_atom, np.asarray(col_atom, np.int32)])
        order = np.lexsort((atoms, offsets))  # padding (atom -1) first within an offset, as _new_columns
        moved = np.empty(len(order), np.int64)
        moved[order] = np.arange(len(order))
        numeric = self.n_features - len(self._col_atom)  # the numeric bins keep their order, after the columns
        self._set_columns(offsets[order], atoms[order])
        return np.concatenate([moved[:len(offsets) - len(col_atom)], len(offsets) + np.arange(numeric)])

    def _count_atoms(self, docs: List[Doc], labels, first_new: int):
        """Count the atomic tests of ``docs`` (interning new ones: the index must not be frozen) and keep, of the
        atoms from ``first_new`` on, those that occur (word tests: min_freq times); the others are dropped and
        the kept ones renumbered after ``first_new``. Returns (mapping: old id -> kept id or -1, seen: kept atom x
        window offset where it occurs, pad_seen: window offsets where padding occurs)."""
        W = 2 * self.window + 1
        counts = np.zeros(0, np.int64)
        seen = np.zeros((0, W), bool)
        pad_seen = np.zeros(W, bool)
        for chunk, own in _chunks_with_labels(docs, labels if self.label_dictionary else None):
            a_indptr, a_ids, doc_starts, _ = self.token_atoms(chunk, own)
            A = len(self._atom_names)
            if A > len(counts):
                counts = np.concatenate([counts, np.zeros(A - len(counts), np.int64)])
                seen = np.concatenate([seen, np.zeros((A - len(seen), W), bool)])
            counts += np.bincount(a_ids, minlength=A)
            # the (atom, offset) pairs and padded offsets that occur: windowed rows whose columns are the pairs' ids
            ids = np.arange((A + 1) * W, dtype=np.int32)
            _, pairs = window_rows(a_indptr, a_ids, doc_starts, self.window, ids[:A * W].reshape(A, W), ids[A * W:])
            pad = pairs >= A * W
            seen[pairs[~pad] // W, pairs[~pad] % W] = True
            pad_seen[pairs[pad] - A * W] = True
        A = len(self._atom_names)
        counts = np.concatenate([counts, np.zeros(A - len(counts), np.int64)])
        seen = np.concatenate([seen, np.zeros((A - len(seen), W), bool)])
        keep = counts >= 1
        keep[:first_new] = True
        if self.min_freq > 1:
            for i in range(first_new, A):
                if self._atom_names[i].startswith(_FREQ_FAMILIES) and counts[i] < self.min_freq:
                    keep[i] = False
        mapping = np.full(len(keep), -1, np.int32)
        mapping[keep] = np.arange(int(keep.sum()), dtype=np.int32)
        self._atom_names = [name for name, k in zip(self._atom_names, keep.tolist()) if k]
        self._atom_ids = {name: i for i, name in enumerate(self._atom_names)}
        return mapping, seen[keep], pad_seen

    def _new_columns(self, seen: np.ndarray, pad_seen: np.ndarray) -> Tuple[List[int], List[int]]:
        """(offsets, atoms) of the columns of ``seen`` (atom x window offset) and ``pad_seen``, offset by offset
        (padding first), atoms ascending."""
        col_offset, col_atom = [], []
        for j in range(2 * self.window + 1):
            off = j - self.window
            if off != 0 and pad_seen[j]:
                col_offset.append(off)
                col_atom.append(-1)
            atoms = np.flatnonzero(seen[:, j])
            col_offset.extend([off] * len(atoms))
            col_atom.extend(atoms.tolist())
        return col_offset, col_atom

    def _set_columns(self, col_offset: np.ndarray, col_atom: np.ndarray) -> None:
        W = 2 * self.window + 1
        self._col_offset = col_offset
        self._col_atom = col_atom
        self._col_var = None
        self._colmap = np.full((len(self._atom_names), W), -1, np.int32)
        self._padcol = np.full(W, -1, np.int32)
        cols = np.arange(len(col_atom), dtype=np.int32)
        is_pad = col_atom < 0
        self._padcol[col_offset[is_pad] + self.window] = cols[is_pad]
        self._colmap[col_atom[~is_pad], col_offset[~is_pad] + self.window] = cols[~is_pad]

    # ---- featurization

    def __call__(self, docs: Sequence[Doc], own_labels: Optional[Sequence[Sequence[Optional[str]]]] = None,
                 with_missing: bool = False):
        """Feature rows for the concatenation of all tokens of ``docs``; ``own_labels`` (for training docs: each
        token's gold label or None) are left out of the label dictionary.

        Returns ``(indptr int64 (T+1), indices int32, seq_starts int64 (n_docs+1))``; the indices of each row
        are sorted ascending and unique; an empty doc gives no rows (``seq_starts`` repeats). ``with_missing``:
        also ``missing_rows(docs)``, as a fourth item, from the same pass over the docs.
        """
        if not self.initialized:
            raise RuntimeError(Errors.E078)
        docs = list(docs)
        window = (self._colmap.shape[1] - 1) // 2  # the frozen window, whatever self.window says now
        parts, missing_parts = [], []
        for chunk, own in _chunks_with_labels(docs, own_labels):
            a_indptr, a_ids, doc_starts, table = self.token_atoms(chunk, own)
            indptr, indices = window_rows(a_indptr, a_ids, doc_starts, window, self._colmap, self._padcol)
            indptr, indices = self._with_numeric(indptr, indices, doc_starts, [d for d in chunk if len(d)], table)
            parts.append((indptr, indices, doc_starts))
            if with_missing:
                missing_parts.append(self._missing_chunk(chunk, table))
        rows = _concat(parts)
        return rows + (self._missing_result(missing_parts),) if with_missing else rows

    # ---- serialization

    def to_dict(self) -> Dict[str, Any]:
        """The whole state as plain msgpack-able data (options, lexicon entries, vocabulary, columns)."""
        return {
            "version": STATE_VERSION,
            "config": self.config(),
            "initialized": self.initialized,
            "lexicon_entries": {name: list(values) for name, values in self._lexicon_entries.items()},
            "label_counts": {word: dict(counts) for word, counts in self._label_counts.items()},
            "atoms": list(self._atom_names),
            "column_offsets": self._col_offset.tolist(),
            "column_atoms": self._col_atom.tolist(),
            "numeric_sources": list(self._num_sources),
            "numeric_uppers": [u.tolist() for u in self._num_uppers],
        }

    def from_dict(self, state: Dict[str, Any]) -> "WindowFeaturizer":
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
        # states written before the label dictionary and the numeric sources existed
        cfg = {"label_dictionary": False, "numeric_attrs": [], "vectors": False, "tensor": False, **cfg}
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
        probe = WindowFeaturizer.__new__(WindowFeaturizer)
        try:
            probe._configure(cfg)
        except ValueError as err:
            raise ValueError(Errors.E097.format(where=where, err=err)) from None
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
        own_lexicons = self._lexicons
        self._configure(cfg)
        # the state's lexicon names stay (they are test families), their files are this featurizer's ("": none)
        self._lexicons = {name: own_lexicons.get(name, "") for name in self._lexicons}
        self._reset_state()
        self._set_lexicons(entries)
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


def _check_numeric_state(state: Dict[str, Any], probe: "WindowFeaturizer", where: str):
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


@spacy.registry.misc("spacy_treecrf.window_features.v1")
def window_features(**settings) -> WindowFeaturizer:
    """Config entry point for :class:`WindowFeaturizer` (see its docstring for the options)."""
    return WindowFeaturizer(**settings)


def _window_features_signature() -> inspect.Signature:
    """window_features' parameters: WindowFeaturizer's, with their defaults (the settings are written once,
    there); a config shows the empty ``attrs`` and ``lexicons`` as a list and a section, as it validates them."""
    config_form = {"attrs": (List[str], []), "lexicons": (Dict[str, str], {}), "numeric_attrs": (List[str], [])}
    params = []
    for p in list(inspect.signature(WindowFeaturizer.__init__).parameters.values())[1:]:
        annotation, default = config_form.get(p.name, (p.annotation, p.default))
        params.append(inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=annotation))
    return inspect.Signature(params, return_annotation=WindowFeaturizer)


window_features.__signature__ = _window_features_signature()
