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
are token-level and computed per doc (as is leaving a training doc's own labels out of the label dictionary).
Merging and windowing run in small numba kernels.

The featurizer is one class over four modules, by source family: feature_tests.py (atomic tests: lexeme-level
and token-level), feature_numeric.py (numeric sources), feature_missing.py (missing variables) and this one (the
options, the column index over the window, training-time vocabulary and rows); feature_state.py saves and
restores its state.

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
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import spacy
from spacy.attrs import ORTH
from spacy.matcher import PhraseMatcher
from spacy.tokens import Doc, Token
from spacy.vocab import Vocab
from .engine.sparse import window_rows
from .errors import Errors
from .feature_document import DocumentContext
from .feature_missing import MissingVariables
from .feature_numeric import NumericSources
from .feature_state import SavedState
from .word_classes import PREFIXES, brown_clusters, read_clusters, read_text
from .feature_tests import (ATTRS, AtomicTests, _chunks_with_labels, _concat, _count_labels, _merge_atoms,
                            offset_name, read_lexicon)
from .feature_tests import FLAGS, MISSING_EXT, REGEXES, char_classes, regex_tests  # noqa: F401 (the package's API)


# Families subject to the min_freq cut-off.
_FREQ_FAMILIES = ("w=", "lw=", "dp=", "dn=")
# Bounds of what a config or a model file may ask for. Columns are looked up in an atoms x (2 window + 1) table,
# and every affix length is a test per token: a window of 25 (51 tokens of context) or affixes of 30 characters are
# beyond any use, and larger values would let a few bytes of config allocate gigabytes.
MAX_WINDOW = 25
MAX_AFFIX = 30


# family prefix of a test name -> (what the family reads, whether its value is text to quote)
READABLE_FAMILIES = {"w=": ("word", True), "lw=": ("lower", True), "re=": ("pattern", False),
                     "sh=": ("shape", False), "lex=": ("lexicon", False), "ld=": ("seen_as", False),
                     "dc=": ("in_doc", False), "dp=": ("before_other_mention", True),
                     "dn=": ("after_other_mention", True), "ac=": ("ambiguity_class", False),
                     **{f"bc{k}=": (f"cluster{k}", False) for k in PREFIXES}}


def readable_test(name: str) -> str:
    """A column's name (feature_names) or a variable's missing indicator (``missing:<variable>``) in words, for
    rules and explanations: ``w=Mr.@-1`` -> ``word[-1] = "Mr."``, ``s3=ing@+1`` -> ``suffix3[+1] = "ing"``,
    ``sh=Xxxxx@0`` -> ``shape[0] = Xxxxx``, ``re=Aa+@0`` -> ``pattern[0] = Aa+`` (the regex tests of the
    module docstring), ``f=is_title@0`` -> ``is_title[0]``, ``a:tag_=NNP@-1`` -> ``tag_[-1] = "NNP"``,
    ``lex=CITY@0`` -> ``lexicon[0] = CITY``, ``ld=B-PER@0`` -> ``seen_as[0] = B-PER`` (the word carried that
    gold label in training), ``dc=longer@0`` -> ``in_doc[0] = longer``, ``dp=mr.@0`` ->
    ``before_other_mention[0] = "mr."``, ``pad@+2`` -> ``outside[+2]`` (the offset lies beyond the doc's edge),
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


# ---------------------------------------------------------------------------------------- featurizer


class WindowFeaturizer(AtomicTests, DocumentContext, NumericSources, MissingVariables, SavedState):
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
      own_labels)``, see the module docstring). ``ambiguity_class`` (with it): also the test ``ac=NOUN|VERB`` of
      the set of labels the word carried, one test where the ``ld=`` tests take a conjunction (a training doc's
      rows: the set without the labels only it gave the word).
    - ``numeric_attrs`` / ``vectors`` / ``tensor``: real-valued sources, windowed as numeric columns (see the
      module docstring); ``len`` (characters), a numeric Token attribute (``rank``, ...) or ``_.<extension>``
      holding numbers; the token's vector; its row of ``doc.tensor`` (put the tok2vec that sets it in
      ``[training] annotating_components``, frozen, so its values mean the same in training and tagging).
    - ``doc_context``: document tests ``dc=``, ``dp=``, ``dn=`` of a capitalised token from the other
      occurrences of its word in the same Doc (feature_document.py). ``sentence_windows``: window offsets stop at
      the Doc's sentence boundaries (padding there as at its edges); the Doc stays one sequence.
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
                 attrs: List[str] = [], lexicons: Dict[str, str] = {},
                 lexicon_lowercase: bool = True, missing_text: Optional[str] = None,
                 label_dictionary: bool = True, numeric_attrs: List[str] = [], vectors: bool = False,
                 tensor: bool = False, doc_context: bool = False, sentence_windows: bool = False,
                 clusters: str = "", cluster_text: str = "", ambiguity_class: bool = False):
        """The options of the class docstring, checked (a bad one: ValueError naming it). This signature is the
        config block's too (spacy_treecrf.window_features.v1 is this class): the empty ``attrs``,
        ``numeric_attrs`` and ``lexicons`` defaults are a list and a dict, as a config shows them; never
        mutated (the checks copy every option)."""
        self._configure(dict(window=window, word=word, lower=lower, min_freq=min_freq, regexes=regexes,
                             prefix=prefix, suffix=suffix, shape=shape, flags=flags, attrs=attrs,
                             lexicons={} if lexicons is None else lexicons, lexicon_lowercase=lexicon_lowercase,
                             missing_text=missing_text, label_dictionary=label_dictionary,
                             numeric_attrs=numeric_attrs, vectors=vectors, tensor=tensor,
                             doc_context=doc_context, sentence_windows=sentence_windows, clusters=clusters,
                             cluster_text=cluster_text, ambiguity_class=ambiguity_class))
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
        self.ambiguity_class = _check_bool("ambiguity_class", cfg["ambiguity_class"])
        self.numeric_attrs = _check_numeric_attrs(cfg["numeric_attrs"])
        self.vectors = _check_bool("vectors", cfg["vectors"])
        self.tensor = _check_bool("tensor", cfg["tensor"])
        self.doc_context = _check_bool("doc_context", cfg["doc_context"])
        self.sentence_windows = _check_bool("sentence_windows", cfg["sentence_windows"])
        for name in ("clusters", "cluster_text"):
            if not isinstance(cfg[name], str):
                raise ValueError(Errors.E237.format(name=name, value=cfg[name]))
        if cfg["clusters"] and cfg["cluster_text"]:
            raise ValueError(Errors.E238)
        self.clusters, self.cluster_text = cfg["clusters"], cfg["cluster_text"]

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
                "vectors": self.vectors, "tensor": self.tensor, "doc_context": self.doc_context,
                "sentence_windows": self.sentence_windows, "clusters": self.clusters,
                "cluster_text": self.cluster_text, "ambiguity_class": self.ambiguity_class}

    @property
    def uses_clusters(self) -> bool:
        """Whether the tokens get Brown cluster tests ``bc4=`` .. ``bc20=``: a clusters file or text is configured,
        or a loaded model carries the clusters."""
        return bool(self.clusters or self.cluster_text or self._cluster_bits)

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
        self._cluster_bits: Dict[str, str] = {}  # word -> its Brown cluster's bit string (word_classes.py)
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

    # ---- atomic tests


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

    # ---- numeric sources


    # ---- training-time vocabulary

    def initialize(self, docs: Iterable[Doc], labels: Optional[Sequence[Sequence[Optional[str]]]] = None) -> None:
        """Read the lexicons, count the label dictionary from ``labels`` (the gold label or None of every token
        of every doc; needed with ``label_dictionary``), count the atomic tests over ``docs`` and freeze the
        column index."""
        carried = self._lexicon_entries  # lexicons without a file ("") keep the entries a loaded model carries
        carried_bits = self._cluster_bits
        self._reset_state()
        self._cluster_bits = (read_clusters(self.clusters) if self.clusters else
                              brown_clusters(read_text(self.cluster_text)) if self.cluster_text else carried_bits)
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
            a_indptr, a_ids, doc_starts, table = self.token_atoms(chunk, own)
            A = len(self._atom_names)
            if A > len(counts):
                counts = np.concatenate([counts, np.zeros(A - len(counts), np.int64)])
                seen = np.concatenate([seen, np.zeros((A - len(seen), W), bool)])
            counts += np.bincount(a_ids, minlength=A)
            # the (atom, offset) pairs and padded offsets that occur: windowed rows whose columns are the pairs' ids
            ids = np.arange((A + 1) * W, dtype=np.int32)
            _, pairs = window_rows(a_indptr, a_ids, self._window_starts(doc_starts, table), self.window,
                                   ids[:A * W].reshape(A, W), ids[A * W:])
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
            bounds = self._window_starts(doc_starts, table)
            indptr, indices = window_rows(a_indptr, a_ids, bounds, window, self._colmap, self._padcol)
            indptr, indices = self._with_numeric(indptr, indices, bounds, [d for d in chunk if len(d)], table)
            parts.append((indptr, indices, doc_starts))
            if with_missing:
                missing_parts.append(self._missing_chunk(chunk, table))
        rows = _concat(parts)
        return rows + (self._missing_result(missing_parts),) if with_missing else rows


# The config entry point: the class itself, so its constructor's signature is the block's.
window_features = spacy.registry.misc("spacy_treecrf.window_features.v1")(WindowFeaturizer)
