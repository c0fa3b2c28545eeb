"""Corpus reading: column files (CoNLL-2000, CoNLL-2003, any whitespace-separated columns), NETtalk and the
Qian & Sejnowski protein secondary-structure data, turned into spaCy ``Doc`` / ``Example`` objects.

Everything funnels through the same shape: a *sentence* is a list of rows (one tuple of column values per
token) plus the file line number of each row, so every error can name the file and the line.

Label schemes (how the label column is stored on a Doc):

- ``bio_ents``: BIO / IOB2 tags (``B-X``, ``I-X``, ``O``) -> ``doc.ents``.
- ``bio_spans``: the same tags -> ``doc.spans[spans_key]``.
- ``tag`` / ``pos``: the labels -> ``token.tag_`` / ``token.pos_`` (``pos`` labels must be Universal POS tags).
- ``token_attr``: the labels -> the token attribute named by ``token_attr`` (``tag_``, ``pos_``, ``lemma_`` or
  ``_.<extension>``).

BIO repair: an ``I-X`` that does not continue an ``X`` span (at the start of a sentence, after ``O`` or after
a span of another type) is read as ``B-X``, i.e. it starts a new span. This is also the correct reading of
IOB1 files, where ``B-`` only separates two adjacent spans of the same type. Any other label that is not
``O``, ``B-X`` or ``I-X`` is an error.

Extension attributes (``_.name``) that are not registered yet are registered on ``Token`` with
``default=None`` the first time a reader needs to set them.
"""
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import spacy
from spacy.language import Language
from spacy.parts_of_speech import IDS as POS_IDS
from spacy.tokens import Doc, Span, Token
from spacy.training import Corpus, Example
from spacy.vocab import Vocab
from .errors import Errors, excerpt
from .targets import READER_SCHEMES

ColumnRef = Union[str, int]
Row = Tuple[str, ...]

LABEL_SCHEMES = ("bio_ents", "bio_spans", "tag", "pos", "token_attr")
# How each scheme stores the labels on a Doc: BIO spans in doc.ents or doc.spans[spans_key], or each token's label
# in a token attribute (None: the reader's token_attr)
SPAN_SCHEMES = {"bio_ents": "ents", "bio_spans": "spans"}
TAG_SCHEMES = {"tag": "tag_", "pos": "pos_", "token_attr": None}
SETTABLE_ATTRS = ("tag_", "pos_", "lemma_")
UPOS = frozenset(tag for tag in POS_IDS if tag.isupper() and tag != "")

# Column layouts of the known formats: column names, words column, default label column, default target.
FORMATS = {
    "conll2000": (["word", "pos", "chunk"], "word", "chunk", "spans"),
    "conll2003": (["word", "pos", "chunk", "ner"], "word", "ner", "ner"),
    "nettalk": (["letter", "phoneme", "stress"], "letter", "stress", "tag"),
    "protein": (["residue", "structure"], "residue", "structure", "tag"),
}
NETTALK_SPLITS = ("train_1000", "test_1000", "all")


# ------------------------------------------------------------------------------------------ raw readers

def _lines(path: Union[str, Path], encoding: str = "utf8") -> Iterator[Tuple[int, str]]:
    """(line number, line without its line break) of a text file, each line decoded on its own so that bytes
    that are not ``encoding`` are an error naming the file and line; a UTF-8 byte-order mark opening the file is
    not text (it would become part of the first token)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(Errors.E115.format(path=path))
    with p.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield lineno, raw.decode(encoding).rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise ValueError(Errors.E209.format(path=path, lineno=lineno, encoding=encoding, reason=err.reason,
                                                    position=err.start)) from None


def _iter_sentences(path: Union[str, Path], n_columns: Optional[int], sep: Optional[str]
                    ) -> Iterator[Tuple[List[Row], List[int]]]:
    """(rows, line numbers) per blank-line-separated sentence; ``-DOCSTART-`` lines are skipped (and end a
    sentence). With ``n_columns`` None the first data line fixes the column count."""
    for rows, linenos, _ in _iter_marked_sentences(path, n_columns, sep):
        yield rows, linenos


def _iter_documents(path: Union[str, Path], n_columns: Optional[int], sep: Optional[str]
                    ) -> Iterator[Tuple[List[Row], List[int], List[int]]]:
    """(rows, line numbers, where each sentence starts) per document: the sentences from one ``-DOCSTART-`` line
    to the next (a file without them is one document)."""
    rows: List[Row] = []
    linenos: List[int] = []
    starts: List[int] = []
    for sentence, lines, new_document in _iter_marked_sentences(path, n_columns, sep):
        if new_document and rows:
            yield rows, linenos, starts
            rows, linenos, starts = [], [], []
        starts.append(len(rows))
        rows += sentence
        linenos += lines
    if rows:
        yield rows, linenos, starts


def _iter_docs(path: Union[str, Path], n_columns: Optional[int], sep: Optional[str], documents: bool
               ) -> Iterator[Tuple[List[Row], List[int], Optional[List[int]]]]:
    """(rows, line numbers, sentence starts) per Doc to make: per document with ``documents``, else per sentence
    (its starts None)."""
    if documents:
        yield from _iter_documents(path, n_columns, sep)
    else:
        for rows, linenos in _iter_sentences(path, n_columns, sep):
            yield rows, linenos, None


def _iter_marked_sentences(path: Union[str, Path], n_columns: Optional[int], sep: Optional[str]
                           ) -> Iterator[Tuple[List[Row], List[int], bool]]:
    """_iter_sentences' sentences, each with whether a ``-DOCSTART-`` line came since the previous one."""
    rows: List[Row] = []
    linenos: List[int] = []
    new_document = after_docstart = False
    for lineno, line in _lines(path):
        if not line.strip():
            if rows:
                yield rows, linenos, new_document
                rows, linenos = [], []
            continue
        fields = line.split(sep) if sep is not None else line.split()
        if fields[0] == "-DOCSTART-":
            if rows:
                yield rows, linenos, new_document
                rows, linenos = [], []
            after_docstart = True
            continue
        if not rows:
            new_document, after_docstart = after_docstart, False
        if n_columns is None:
            n_columns = len(fields)
        if len(fields) != n_columns:
            raise ValueError(Errors.E133.format(path=path, lineno=lineno, n_columns=n_columns,
                                                n_fields=len(fields), line=excerpt(line)))
        rows.append(tuple(fields))
        linenos.append(lineno)
    if rows:
        yield rows, linenos, new_document


def read_columns(path: Union[str, Path], columns: Optional[Sequence[str]], label_column: Optional[str] = None,
                 sep: Optional[str] = None) -> Iterator[List[Row]]:
    """Sentences of a blank-line-separated column file, each a list of rows (tuples in file column order).

    ``columns`` names the file's columns (every line must have exactly that many fields; ``None``: as many as
    the first line). ``label_column``, if given, must be one of ``columns`` (checked up front so a typo
    fails before any reading). ``sep`` None splits on any whitespace, otherwise on exactly ``sep``. Lines
    whose first field is ``-DOCSTART-`` are skipped. A missing file or a line with the wrong number of
    fields raises ``ValueError`` naming the file (and line).
    """
    if columns is not None:
        columns = list(columns)
        if len(set(columns)) != len(columns):
            raise ValueError(Errors.E123.format(columns=columns))
        if label_column is not None and label_column not in columns:
            raise ValueError(Errors.E124.format(label_column=label_column, columns=columns))
    for rows, _ in _iter_sentences(path, None if columns is None else len(columns), sep):
        yield rows


def read_nettalk_entries(path_dir: Union[str, Path]) -> Tuple[List[Tuple[str, str, str, int]], List[int]]:
    """All aligned entries of ``nettalk.data`` in file order as (letters, phonemes, stress, line number), and
    the line numbers of the entries that were skipped because their three fields differ in length (the
    original file has one: ``gunpowder``, whose stress field is ``0``). The header (the lines before the first
    line of at least three tab-separated fields starting with a word) is skipped; after it, a line with fewer
    than three tab-separated fields is an error."""
    path = Path(path_dir) / "nettalk.data"
    entries: List[Tuple[str, str, str, int]] = []
    skipped: List[int] = []
    in_header = True
    for lineno, line in _lines(path, encoding="ascii"):
        if not line.strip():
            continue
        fields = [x.strip() for x in line.split("\t")]
        if in_header:
            if len(fields) < 3 or not fields[0].isalpha():
                continue
            in_header = False
        if len(fields) < 3:
            raise ValueError(Errors.E134.format(path=path, lineno=lineno, n_fields=len(fields), line=excerpt(line)))
        word, phonemes, stress = fields[:3]
        if not word or not len(word) == len(phonemes) == len(stress):
            skipped.append(lineno)
            continue
        entries.append((word, phonemes, stress, lineno))
    return entries, skipped


def _nettalk_selection(path_dir: Union[str, Path], split: str) -> List[Tuple[str, str, str, int]]:
    entries, _ = read_nettalk_entries(path_dir)
    if split == "all":
        return entries
    if split not in NETTALK_SPLITS:
        raise ValueError(Errors.E116.format(nettalk_splits=list(NETTALK_SPLITS), split=split))
    first: Dict[str, Tuple[str, str, str, int]] = {}
    for entry in entries:
        first.setdefault(entry[0], entry)
    split_path = Path(path_dir) / f"split_{split}.txt"
    out = []
    for lineno, line in _lines(split_path, encoding="ascii"):
        word = line.strip()
        if not word:
            continue
        if word not in first:
            raise ValueError(Errors.E135.format(split_path=split_path, lineno=lineno, word=excerpt(word)))
        out.append(first[word])
    return out


def read_nettalk(path_dir: Union[str, Path], split: str = "train_1000", label: str = "stress"
                 ) -> List[Tuple[List[str], List[str]]]:
    """NETtalk words as (letters, labels) pairs of equal-length lists of one-character strings.

    ``split``: ``train_1000`` / ``test_1000`` (the word lists ``split_<split>.txt``; a word with several
    entries uses its first entry in file order) or ``all`` (every aligned entry, duplicates included, in file
    order). ``label``: ``stress`` (5 symbols ``< > 0 1 2``) or ``phonemes``.
    """
    if label not in ("stress", "phonemes"):
        raise ValueError(Errors.E117.format(label=label))
    col = 2 if label == "stress" else 1
    return [(list(e[0]), list(e[col])) for e in _nettalk_selection(path_dir, split)]


def read_protein(path: Union[str, Path], split_at: str = "segment") -> List[Tuple[List[str], List[str]]]:
    """Protein secondary-structure sequences as (residues, labels) pairs (labels ``h``, ``e``, ``_``).

    Lines starting with ``#`` and blank lines are ignored; data lines are ``<residue> <label>``. Marker lines:
    ``end`` / ``<end>`` always close a sequence; ``<>`` starts a new segment, and also closes the current
    sequence when ``split_at="segment"`` (the usual count: 111 train / 17 test sequences). With
    ``split_at="protein"`` only the end markers split (91 / 15 proteins).
    """
    return [([r[0] for r in rows], [r[1] for r in rows]) for rows, _ in _protein_sentences(path, split_at)]


def _protein_sentences(path: Union[str, Path], split_at: str = "segment") -> List[Tuple[List[Row], List[int]]]:
    if split_at not in ("segment", "protein"):
        raise ValueError(Errors.E118.format(split_at=split_at))
    out: List[Tuple[List[Row], List[int]]] = []
    rows: List[Row] = []
    linenos: List[int] = []
    for lineno, line in _lines(path, encoding="ascii"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line in ("end", "<end>") or (line == "<>" and split_at == "segment"):
            if rows:
                out.append((rows, linenos))
            rows, linenos = [], []
            continue
        if line == "<>":
            continue
        fields = line.split()
        if len(fields) != 2 or len(fields[0]) != 1 or fields[1] not in ("h", "e", "_"):
            raise ValueError(Errors.E136.format(path=path, lineno=lineno, line=excerpt(line)))
        rows.append((fields[0], fields[1]))
        linenos.append(lineno)
    if rows:
        out.append((rows, linenos))
    return out


# ------------------------------------------------------------------------------------------ Doc building

def bio_to_spans(labels: Sequence[str], where: Callable[[int], str] = lambda i: f"token {i}",
                 sent_starts: Sequence[int] = ()) -> List[Tuple[int, int, str]]:
    """(start, end, label) spans of a BIO / IOB2 tag sequence, repairing a dangling ``I-X`` into ``B-X``; no span
    runs on past a position of ``sent_starts`` (an ``I-X`` there starts one, as at a sentence's first token)."""
    spans: List[Tuple[int, int, str]] = []
    start, cur = -1, None
    breaks = set(sent_starts)
    for i, tag in enumerate(labels):
        if tag == "O":
            kind, typ = "O", None
        elif len(tag) > 2 and tag[1] == "-" and tag[0] in "BI":
            kind, typ = tag[0], tag[2:]
        else:
            raise ValueError(Errors.E137.format(where=where(i), tag=excerpt(tag)))
        if kind == "I" and cur == typ and i not in breaks:
            continue
        if cur is not None:
            spans.append((start, i, cur))
        start, cur = (i, typ) if kind != "O" else (-1, None)
    if cur is not None:
        spans.append((start, len(labels), cur))
    return spans


def _check_attr(attr: str, setting: str) -> str:
    if attr in SETTABLE_ATTRS or (attr.startswith("_.") and len(attr) > 2):
        return attr
    raise ValueError(Errors.E114.format(setting=setting, attr=attr, settable_attrs=list(SETTABLE_ATTRS)))


def _ensure_extension(attr: str) -> None:
    if attr.startswith("_.") and not Token.has_extension(attr[2:]):
        Token.set_extension(attr[2:], default=None)


def make_doc(vocab: Vocab, words: List[str], attrs: Optional[Dict[str, List[str]]] = None,
             spaces: Optional[List[bool]] = None, where: Callable[[int], str] = lambda i: f"token {i}",
             sent_starts: Optional[List[int]] = None) -> Doc:
    """A Doc of ``words`` with token attributes (attr -> values: ``tag_``, ``pos_``, ``lemma_``, ``_.ext``).
    ``spaces`` defaults to True after every token but the last; ``sent_starts``: the tokens that start a sentence
    (every other token does not)."""
    if spaces is None:
        spaces = [True] * len(words)
        if words:
            spaces[-1] = False
    kwargs = {}
    ext: Dict[str, List[str]] = {}
    for attr, values in (attrs or {}).items():
        if attr == "tag_":
            kwargs["tags"] = values
        elif attr == "pos_":
            for i, v in enumerate(values):
                if v not in UPOS:
                    raise ValueError(Errors.E146.format(where=where(i), value=excerpt(v)))
            kwargs["pos"] = values
        elif attr == "lemma_":
            kwargs["lemmas"] = values
        else:
            ext[attr[2:]] = values
    if sent_starts is not None:
        kwargs["sent_starts"] = [False] * len(words)
        for i in sent_starts:
            kwargs["sent_starts"][i] = True
    doc = Doc(vocab, words=words, spaces=spaces, **kwargs)
    for name, values in ext.items():
        _ensure_extension("_." + name)
        for token, value in zip(doc, values):
            token._.set(name, value)
    return doc


def set_gold(doc: Doc, labels: List[str], label_scheme: str, spans_key: str = "sc",
             token_attr: Optional[str] = None, where: Callable[[int], str] = lambda i: f"token {i}",
             sent_starts: Sequence[int] = ()) -> Doc:
    """Store the labels on ``doc`` following ``label_scheme`` (see the module docstring); BIO spans stop at
    ``sent_starts``."""
    if label_scheme in SPAN_SCHEMES:
        spans = [Span(doc, s, e, label=lab) for s, e, lab in bio_to_spans(labels, where, sent_starts)]
        if SPAN_SCHEMES[label_scheme] == "ents":
            doc.ents = spans
        else:
            doc.spans[spans_key] = spans
    elif label_scheme in TAG_SCHEMES:
        attr = TAG_SCHEMES[label_scheme] or token_attr
        if attr is None:
            raise ValueError(Errors.E138)
        _check_attr(attr, "token_attr")
        if attr.startswith("_."):
            _ensure_extension(attr)
            for token, value in zip(doc, labels):
                token._.set(attr[2:], value)
        else:
            for i, (token, value) in enumerate(zip(doc, labels)):
                if attr == "pos_" and value not in UPOS:
                    raise ValueError(Errors.E146.format(where=where(i), value=excerpt(value)))
                setattr(token, attr, value)
    else:
        raise ValueError(Errors.E125.format(label_scheme=label_scheme, label_schemes=list(LABEL_SCHEMES)))
    return doc


def _column_index(ref: ColumnRef, names: Optional[List[str]], setting: str) -> int:
    if isinstance(ref, int) and not isinstance(ref, bool):
        if names is not None and not -len(names) <= ref < len(names):
            raise ValueError(Errors.E126.format(setting=setting, ref=ref, names=names))
        return ref
    if names is None:
        raise ValueError(Errors.E119.format(setting=setting, ref=ref))
    if ref not in names:
        raise ValueError(Errors.E120.format(setting=setting, ref=ref, names=names))
    return names.index(ref)


class _Layout:
    """Resolved column roles: words, labels and input columns (attr per column), all as indices."""

    def __init__(self, names: Optional[List[str]], words_column: ColumnRef, label_column: Optional[ColumnRef],
                 label_scheme: Optional[str], input_columns: Optional[Dict[ColumnRef, str]], token_attr=None):
        self.names = names
        self.words = _column_index(words_column, names, "words_column")
        self.label = None if label_column is None else _column_index(label_column, names, "label_column")
        if label_scheme is not None and label_scheme not in LABEL_SCHEMES:
            raise ValueError(Errors.E127.format(label_schemes=list(LABEL_SCHEMES), label_scheme=label_scheme))
        self.scheme = label_scheme
        if label_scheme in TAG_SCHEMES and TAG_SCHEMES[label_scheme] is None:
            if token_attr is None:
                raise ValueError(Errors.E139)
            _check_attr(token_attr, "token_attr")
        self.token_attr = token_attr
        gold_attr = (TAG_SCHEMES[label_scheme] or token_attr) if label_scheme in TAG_SCHEMES else None
        self.inputs: List[Tuple[int, str]] = []
        seen_attrs = set()
        for col, attr in (input_columns or {}).items():
            _check_attr(attr, "input columns")
            if attr in seen_attrs:
                raise ValueError(Errors.E140.format(attr=attr))
            if attr == gold_attr:
                raise ValueError(Errors.E141.format(attr=attr))
            seen_attrs.add(attr)
            self.inputs.append((_column_index(col, names, "input columns"), attr))

    @property
    def max_index(self) -> int:
        """Smallest column count the rows need (a negative index -k needs k columns)."""
        refs = [self.words] + ([] if self.label is None else [self.label]) + [c for c, _ in self.inputs]
        return max(i if i >= 0 else -i - 1 for i in refs)

    def words_of(self, rows: List[Row]) -> List[str]:
        return [r[self.words] for r in rows]

    def inputs_of(self, rows: List[Row]) -> Dict[str, List[str]]:
        return {attr: [r[i] for r in rows] for i, attr in self.inputs}

    def labels_of(self, rows: List[Row]) -> List[str]:
        return [r[self.label] for r in rows]


def _where(path, linenos: List[int]) -> Callable[[int], str]:
    return lambda i: f"{path}, line {linenos[i]}"


def columns_to_docs(vocab: Vocab, path: Union[str, Path], words_column: ColumnRef,
                    label_column: Optional[ColumnRef], label_scheme: Optional[str],
                    input_columns: Optional[Dict[ColumnRef, str]] = None, spans_key: str = "sc", *,
                    columns: Optional[Sequence[str]] = None, token_attr: Optional[str] = None,
                    sep: Optional[str] = None, limit: int = 0, documents: bool = False) -> List[Doc]:
    """Docs (one per sentence; with ``documents``, one per document: the sentences between ``-DOCSTART-`` lines,
    their starts marked) of a column file, with the gold labels stored following ``label_scheme``
    (``None``: no labels) and input columns copied onto token attributes (``input_columns``: column ->
    ``tag_`` / ``pos_`` / ``lemma_`` / ``_.ext``).

    Columns are referred to by name (``columns`` gives the file's column names) or by integer position
    (negative counts from the end). ``limit`` > 0 stops after that many Docs. For CoNLL-2000 chunking:
    ``columns_to_docs(vocab, path, "word", "chunk", "bio_spans", {"pos": "tag_"}, "chunks",
    columns=["word", "pos", "chunk"])``.
    """
    names = list(columns) if columns is not None else None
    layout = _Layout(names, words_column, label_column, label_scheme, input_columns, token_attr)
    if label_scheme is not None and layout.label is None:
        raise ValueError(Errors.E121.format(label_scheme=label_scheme))
    docs = []
    for rows, linenos, starts in _iter_docs(path, None if names is None else len(names), sep, documents):
        if limit and len(docs) >= limit:
            break
        docs.append(_sentence_doc(vocab, layout, rows, linenos, path, gold=True, spans_key=spans_key,
                                  sent_starts=starts))
    return docs


def _sentence_doc(vocab, layout: _Layout, rows, linenos, path, gold: bool, spans_key: str,
                  spaces: Optional[List[bool]] = None, sent_starts: Optional[List[int]] = None) -> Doc:
    """The Doc of one sentence, or of a document's sentences (``sent_starts``: where each starts; a span never
    runs on into the next sentence: set_gold)."""
    where = _where(path, linenos)
    if layout.max_index >= len(rows[0]):  # every row of a file has the same number of columns
        raise ValueError(Errors.E122.format(where=where(0), value=layout.max_index + 1, n_rows=len(rows[0])))
    doc = make_doc(vocab, layout.words_of(rows), layout.inputs_of(rows), spaces=spaces, where=where,
                   sent_starts=sent_starts)
    if gold and layout.scheme is not None:
        set_gold(doc, layout.labels_of(rows), layout.scheme, spans_key, layout.token_attr, where, sent_starts or ())
    return doc


def sequences_to_docs(vocab: Vocab, sequences: Iterable[Tuple[List[str], List[str]]],
                      label_scheme: Optional[str] = "tag", token_attr: Optional[str] = None,
                      spans_key: str = "sc", spaces: bool = False) -> List[Doc]:
    """Docs of (tokens, labels) pairs such as ``read_nettalk`` / ``read_protein`` return: one token per
    element; ``spaces=False`` makes ``doc.text`` the concatenation (the word, the residue string)."""
    docs = []
    for q, (tokens, labels) in enumerate(sequences):
        if len(tokens) != len(labels):
            raise ValueError(Errors.E128.format(q=q, n_tokens=len(tokens), n_labels=len(labels)))
        where = (lambda q: (lambda i: f"sequence {q}, token {i}"))(q)
        doc = make_doc(vocab, list(tokens), spaces=[spaces] * len(tokens), where=where)
        if label_scheme is not None:
            set_gold(doc, list(labels), label_scheme, spans_key, token_attr, where)
        docs.append(doc)
    return docs


def nettalk_docs(vocab: Vocab, path_dir: Union[str, Path], split: str = "train_1000", label: str = "stress",
                 label_scheme: str = "tag", token_attr: Optional[str] = None) -> List[Doc]:
    """One Doc per NETtalk word (one token per letter, no spaces), labels per ``label_scheme``."""
    return sequences_to_docs(vocab, read_nettalk(path_dir, split, label), label_scheme, token_attr)


# ------------------------------------------------------------------------------------------ corpus reader

class ColumnCorpus:
    """Callable ``nlp -> Iterator[Example]`` over a column corpus (see ``create_column_corpus``)."""

    def __init__(self, path: Optional[Union[str, Path]], format: str = "columns", target: Optional[str] = None,
                 spans_key: str = "sc", keep_columns: Optional[Dict[str, str]] = None,
                 token_attr: Optional[str] = None, limit: int = 0, split: Optional[str] = None,
                 columns: Optional[Sequence[str]] = None, words_column: Optional[str] = None,
                 label_column: Optional[str] = None, sep: Optional[str] = None, documents: bool = False):
        if format not in FORMATS and format != "columns":
            raise ValueError(Errors.E129.format(value=list(FORMATS) + ['columns'], format=format))
        if format == "columns":
            if not columns or target is None:
                raise ValueError(Errors.E142)
            names, default_target = list(columns), target
            words = columns[0] if words_column is None else words_column
            label = columns[-1] if label_column is None else label_column
        else:
            if columns:
                raise ValueError(Errors.E143.format(format=format, formats=FORMATS[format][0]))
            names, words, label, default_target = FORMATS[format]
            names = list(names)
            words = words_column or words
            label = label_column or label
        target = target or default_target
        if target not in READER_SCHEMES:
            raise ValueError(Errors.E130.format(targets=list(READER_SCHEMES), target=target))
        if format == "nettalk":
            split = split or "train_1000"
            if split not in NETTALK_SPLITS:
                raise ValueError(Errors.E144.format(nettalk_splits=list(NETTALK_SPLITS), split=split))
        elif split is not None:
            raise ValueError(Errors.E145)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(Errors.E131.format(limit=limit))
        if not isinstance(documents, bool) or (documents and format in ("nettalk", "protein")):
            raise ValueError(Errors.E230.format(documents=documents, format=f"format {format!r}"))
        self.documents = documents
        self.path = None if path is None else Path(path)
        self.format = format
        self.target = target
        self.spans_key = spans_key
        self.limit = limit
        self.split = split
        self.sep = sep
        self.layout = _Layout(names, words, label, READER_SCHEMES[target], keep_columns, token_attr)
        self.spans_opened_by_inside = 0  # read so far: spans whose first tag is I- (module docstring, BIO repair)

    def _sentences(self) -> Iterator[Tuple[List[Row], List[int], object, Optional[List[int]]]]:
        """(rows, line numbers, file, sentence starts: None but for a document) of each Doc to read."""
        if self.path is None:
            raise ValueError(Errors.E132)
        if self.format == "nettalk":
            for word, phon, stress, lineno in _nettalk_selection(self.path, self.split):
                yield list(zip(word, phon, stress)), [lineno] * len(word), self.path / "nettalk.data", None
        elif self.format == "protein":
            for rows, linenos in _protein_sentences(self.path):
                yield rows, linenos, self.path, None
        else:
            for rows, linenos, starts in _iter_docs(self.path, len(self.layout.names), self.sep, self.documents):
                yield rows, linenos, self.path, starts

    def _is_docbin(self) -> bool:
        """A .spacy file, or a directory of them (spaCy's own corpus format, e.g. from `spacy convert`)."""
        path = self.path
        return path is not None and (path.suffix == ".spacy" or (path.is_dir() and any(path.glob("*.spacy"))))

    def _docbin_examples(self, nlp: Language) -> Iterator[Example]:
        """Examples of a .spacy corpus, tokenized as stored; the kept input attributes (keep_columns' values:
        tag_, pos_, lemma_, extensions) are copied from each reference doc onto its predicted doc, as the column
        reader puts input columns there."""
        attrs = [attr for _, attr in self.layout.inputs]
        for attr in attrs:
            _ensure_extension(attr)
        for eg in Corpus(self.path, gold_preproc=True, limit=self.limit)(nlp):
            for attr in attrs:
                for pred, ref in zip(eg.predicted, eg.reference):
                    if attr.startswith("_."):
                        pred._.set(attr[2:], ref._.get(attr[2:]))
                    else:
                        setattr(pred, attr, getattr(ref, attr))
            yield eg

    def __call__(self, nlp: Language) -> Iterator[Example]:
        if self._is_docbin():
            if self.documents:  # a .spacy file's Docs are what its converter made them
                raise ValueError(Errors.E230.format(documents=True, format=f"the .spacy corpus {self.path}"))
            yield from self._docbin_examples(nlp)
            return
        spaces = self.format not in ("nettalk", "protein")
        n = 0
        for rows, linenos, path, starts in self._sentences():
            if self.limit and n >= self.limit:
                break
            sp = None if spaces else [False] * len(rows)
            predicted = _sentence_doc(nlp.vocab, self.layout, rows, linenos, path, False, self.spans_key, sp, starts)
            reference = _sentence_doc(nlp.vocab, self.layout, rows, linenos, path, True, self.spans_key, sp, starts)
            if self.layout.scheme in SPAN_SCHEMES:
                labels = self.layout.labels_of(rows)
                spans = reference.ents if SPAN_SCHEMES[self.layout.scheme] == "ents" else reference.spans[
                    self.spans_key]
                self.spans_opened_by_inside += sum(labels[span.start].startswith("I-") for span in spans)
            n += 1
            yield Example(predicted, reference)


@spacy.registry.readers("spacy_treecrf.ColumnCorpus.v1")
def create_column_corpus(path: Optional[Union[str, Path]], format: str = "columns", target: Optional[str] = None,
                         spans_key: str = "sc", keep_columns: Dict[str, str] = {}, token_attr: Optional[str] = None,
                         limit: int = 0, split: Optional[str] = None, columns: List[str] = [],
                         words_column: Optional[str] = None, label_column: Optional[str] = None,
                         sep: Optional[str] = None, documents: bool = False) -> Callable[[Language], Iterator[Example]]:
    """Corpus reader for ``[corpora]`` blocks.

    - ``path``: the file (for ``nettalk``: the directory holding ``nettalk.data`` and the split files).
    - ``format``: ``conll2000`` (word POS chunk; default target ``spans`` from the chunk column),
      ``conll2003`` (word POS chunk NER; default target ``ner``), ``nettalk`` (letter phoneme stress, one
      Doc per word; default target ``tag`` from the stress column), ``protein`` (residue structure, one Doc
      per ``<>`` segment; default target ``tag``) or ``columns`` (give ``columns`` and ``target``; the words
      are the first column and the labels the last unless ``words_column`` / ``label_column`` say otherwise;
      ``sep`` optional).
    - ``target``: where the gold labels go on the reference doc: ``ner`` (doc.ents), ``spans``
      (doc.spans[spans_key]), ``tag``, ``pos`` or ``token_attr`` (the attribute ``token_attr``).
    - ``keep_columns``: input columns copied onto BOTH the predicted and the reference doc, column name ->
      attribute (``tag_``, ``pos_``, ``lemma_``, ``_.ext``), e.g. ``{"pos": "tag_"}`` for the CoNLL POS column.
    - ``label_column`` / ``words_column`` override the format's default columns (e.g. ``chunk`` for CoNLL-2003).
    - ``limit``: stop after that many Docs (0: all). ``split`` (NETtalk only): ``train_1000``
      (default), ``test_1000`` or ``all``.
    - ``documents`` (column formats): one Doc per document, the sentences between ``-DOCSTART-`` lines with their
      starts marked (``doc.sents``), instead of one per sentence: what the featurizer's ``doc_context`` reads.

    Words are separated by spaces in column formats; NETtalk and protein docs have no spaces (``doc.text`` is
    the word / residue string). Gold annotation is set on the reference doc only.
    """
    return ColumnCorpus(path, format=format, target=target, spans_key=spans_key, keep_columns=dict(keep_columns),
                        token_attr=token_attr, limit=limit, split=split, columns=list(columns) or None,
                        words_column=words_column, label_column=label_column, sep=sep, documents=documents)
