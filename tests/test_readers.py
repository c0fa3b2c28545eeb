"""Column / NETtalk / protein readers, Doc building, the registered corpus reader; counts against the READMEs."""
import os
import re
import types
from collections import Counter
from pathlib import Path

import pytest
import spacy
from spacy.lang.en import English
from spacy.tokens import Doc
from spacy.vocab import create_vocab

from spacy_treecrf.readers import (NETTALK_SPLITS, ColumnCorpus, bio_to_spans, columns_to_docs,
                                   create_column_corpus, read_columns, read_nettalk, read_nettalk_entries,
                                   read_protein, sequences_to_docs)

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER


-DOCSTART- -X- -X- O

Hello UH B-INTJ O
"""
COLS = ["word", "pos", "chunk", "ner"]


@pytest.fixture(scope="module")
def vocab():
    return create_vocab("en", English.Defaults)


@pytest.fixture()
def conll(tmp_path):
    path = tmp_path / "mini.conll"
    path.write_text(CONLL, encoding="utf8")
    return path


def fake_nlp(vocab):
    # The corpus reader only uses nlp.vocab.
    return types.SimpleNamespace(vocab=vocab)


# ------------------------------------------------------------------------------------------ read_columns

def test_read_columns(conll):
    sents = list(read_columns(conll, COLS, "ner"))
    assert [len(s) for s in sents] == [5, 2, 1]
    assert sents[0][0] == ("EU", "NNP", "B-NP", "B-ORG")
    assert list(read_columns(conll, None)) == sents  # column count from the first line


def test_read_columns_errors(conll, tmp_path):
    with pytest.raises(ValueError, match=r"mini\.conll, line 3: expected 3 columns"):
        list(read_columns(conll, ["word", "pos", "chunk"]))
    with pytest.raises(ValueError, match="label column 'tag'"):
        list(read_columns(conll, COLS, "tag"))
    with pytest.raises(ValueError, match=r"nothere\.txt: file not found"):
        list(read_columns(tmp_path / "nothere.txt", COLS))
    bad = tmp_path / "bad.txt"
    bad.write_text("a B-NP\nb I-NP\n\nc\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"bad\.txt, line 4"):
        list(read_columns(bad, ["word", "chunk"]))
    tabbed = tmp_path / "tabs.txt"
    tabbed.write_text("New York\tB-LOC\n", encoding="utf8")
    assert list(read_columns(tabbed, ["word", "ner"], sep="\t")) == [[("New York", "B-LOC")]]


def test_bio_to_spans_and_repair():
    assert bio_to_spans(["B-NP", "I-NP", "O", "B-VP", "B-NP"]) == [(0, 2, "NP"), (3, 4, "VP"), (4, 5, "NP")]
    # I- without a valid start is read as B- (also the IOB1 reading)
    assert bio_to_spans(["I-NP", "I-NP", "O", "I-PP", "I-NP"]) == [(0, 2, "NP"), (3, 4, "PP"), (4, 5, "NP")]
    assert bio_to_spans(["O", "O"]) == []
    with pytest.raises(ValueError, match="invalid BIO label 'X-NP'"):
        bio_to_spans(["O", "X-NP"])


# ------------------------------------------------------------------------------------------ Doc building

def test_columns_to_docs_schemes(vocab, conll):
    docs = columns_to_docs(vocab, conll, "word", "ner", "bio_ents", {"pos": "tag_"}, columns=COLS)
    assert [d.text for d in docs] == ["EU rejects German call .", "Peter Blackburn", "Hello"]
    assert [(e.text, e.label_) for e in docs[0].ents] == [("EU", "ORG"), ("German", "MISC")]
    assert [t.tag_ for t in docs[0]] == ["NNP", "VBZ", "JJ", "NN", "."]
    assert [t.ent_iob_ for t in docs[0]] == ["B", "O", "B", "O", "O"]
    spans = columns_to_docs(vocab, conll, "word", "chunk", "bio_spans", {}, "chunks", columns=COLS)
    assert [(s.text, s.label_) for s in spans[0].spans["chunks"]] == [
        ("EU", "NP"), ("rejects", "VP"), ("German call", "NP")]
    assert not spans[0].ents
    tags = columns_to_docs(vocab, conll, 0, -1, "tag", None, limit=2)  # integer positions, no names
    assert len(tags) == 2 and [t.tag_ for t in tags[1]] == ["B-PER", "I-PER"]
    ext = columns_to_docs(vocab, conll, "word", "chunk", "token_attr", {"pos": "_.treecrf_test_pos"},
                          columns=COLS, token_attr="lemma_")
    assert [t.lemma_ for t in ext[1]] == ["B-NP", "I-NP"]
    assert [t._.treecrf_test_pos for t in ext[1]] == ["NNP", "NNP"]


def test_documents_keep_their_sentences(vocab, conll, tmp_path):
    docs = columns_to_docs(vocab, conll, "word", "ner", "bio_ents", {"pos": "tag_"}, columns=COLS, documents=True)
    assert [d.text for d in docs] == ["EU rejects German call . Peter Blackburn", "Hello"]
    assert [s.text for s in docs[0].sents] == ["EU rejects German call .", "Peter Blackburn"]
    assert [(e.text, e.label_) for e in docs[0].ents] == [("EU", "ORG"), ("German", "MISC"), ("Peter Blackburn", "PER")]
    # an I-X that starts a sentence starts a span: it does not continue the one that ends the sentence before
    running = tmp_path / "running.conll"
    running.write_text("-DOCSTART- -X- -X- O\n\nNew B-LOC\nYork I-LOC\n\nCity I-LOC\nhall O\n", encoding="utf8")
    doc, = columns_to_docs(vocab, running, 0, -1, "bio_ents", None, documents=True)
    assert [(e.text, e.start) for e in doc.ents] == [("New York", 0), ("City", 2)]
    # a file without -DOCSTART- lines is one document; the corpus reader reads the same Docs
    plain = tmp_path / "plain.conll"
    plain.write_text(CONLL.replace("-DOCSTART- -X- -X- O\n", ""), encoding="utf8")
    whole, = columns_to_docs(vocab, plain, "word", "ner", "bio_ents", None, columns=COLS, documents=True)
    assert len(list(whole.sents)) == 3
    read = [eg.reference for eg in ColumnCorpus(conll, format="conll2003", documents=True)(fake_nlp(vocab))]
    assert [d.text for d in read] == [d.text for d in docs]
    assert [[s.start for s in d.sents] for d in read] == [[0, 5], [0]]
    with pytest.raises(ValueError, match=r"E230.*format 'nettalk'"):
        ColumnCorpus(tmp_path, format="nettalk", documents=True)
    with pytest.raises(ValueError, match="E230"):
        ColumnCorpus(conll, format="conll2003", documents="yes")


def test_columns_to_docs_errors(vocab, conll, tmp_path):
    with pytest.raises(ValueError, match=r"mini\.conll, line 3: 'B-NP' is not a Universal POS tag"):
        columns_to_docs(vocab, conll, "word", "chunk", "pos", None, columns=COLS)
    with pytest.raises(ValueError, match="unknown column 'lemma'"):
        columns_to_docs(vocab, conll, "word", "lemma", "tag", None, columns=COLS)
    with pytest.raises(ValueError, match="label_scheme"):
        columns_to_docs(vocab, conll, "word", "ner", "bio", None, columns=COLS)
    with pytest.raises(ValueError, match="already holds the gold labels"):
        columns_to_docs(vocab, conll, "word", "ner", "tag", {"pos": "tag_"}, columns=COLS)
    with pytest.raises(ValueError, match="cannot set token attribute 'dep_'"):
        columns_to_docs(vocab, conll, "word", "ner", "tag", {"pos": "dep_"}, columns=COLS)
    bad = tmp_path / "bad.txt"
    bad.write_text("a B-NP\nb Q-NP\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"bad\.txt, line 2: invalid BIO label 'Q-NP'"):
        columns_to_docs(vocab, bad, "word", "chunk", "bio_spans", None, columns=["word", "chunk"])


def test_sequences_to_docs(vocab):
    docs = sequences_to_docs(vocab, [(list("abc"), list("1<0"))])
    assert docs[0].text == "abc" and [t.tag_ for t in docs[0]] == ["1", "<", "0"]
    with pytest.raises(ValueError, match="3 tokens but 2 labels"):
        sequences_to_docs(vocab, [(list("abc"), list("10"))])


# ------------------------------------------------------------------------------------------ corpus reader

def test_column_corpus_examples(vocab, conll):
    corpus = ColumnCorpus(conll, format="conll2003", keep_columns={"pos": "tag_"})
    egs = list(corpus(fake_nlp(vocab)))
    assert len(egs) == 3
    pred, ref = egs[0].predicted, egs[0].reference
    assert [t.text for t in pred] == [t.text for t in ref]
    assert [t.tag_ for t in pred] == [t.tag_ for t in ref] == ["NNP", "VBZ", "JJ", "NN", "."]
    assert not pred.ents and [e.label_ for e in ref.ents] == ["ORG", "MISC"]
    chunks = list(ColumnCorpus(conll, format="conll2003", label_column="chunk", target="spans",
                               spans_key="chunks", limit=1)(fake_nlp(vocab)))
    assert len(chunks) == 1 and len(chunks[0].reference.spans["chunks"]) == 3
    assert "chunks" not in chunks[0].predicted.spans
    generic = ColumnCorpus(conll, format="columns", columns=COLS, words_column="word", label_column="ner",
                           target="token_attr", token_attr="_.treecrf_test_ner")
    eg = next(iter(generic(fake_nlp(vocab))))
    assert [t._.treecrf_test_ner for t in eg.reference] == ["B-ORG", "O", "B-MISC", "O", "O"]
    assert [t._.treecrf_test_ner for t in eg.predicted] == [None] * 5


def test_column_corpus_registered_and_validated(conll):
    fn = spacy.registry.readers.get("spacy_treecrf.ColumnCorpus.v1")
    assert fn is create_column_corpus
    corpus = spacy.registry.resolve({"c": {"@readers": "spacy_treecrf.ColumnCorpus.v1", "path": str(conll),
                                           "format": "conll2003", "keep_columns": {"pos": "tag_"}}})["c"]
    assert isinstance(corpus, ColumnCorpus) and corpus.target == "ner"
    with pytest.raises(ValueError, match="format"):
        ColumnCorpus(conll, format="conllu")
    with pytest.raises(ValueError, match="target"):
        ColumnCorpus(conll, format="conll2000", target="chunks")
    with pytest.raises(ValueError, match=r"E142.*needs the column names"):
        ColumnCorpus(conll, format="columns")
    with pytest.raises(ValueError, match="split"):
        ColumnCorpus(conll, format="conll2000", split="train_1000")
    with pytest.raises(ValueError, match="token_attr"):
        ColumnCorpus(conll, format="conll2000", target="token_attr")
    missing = ColumnCorpus(Path(conll).parent / "gone.txt", format="conll2000")
    with pytest.raises(ValueError, match=r"gone\.txt: file not found"):
        list(missing(None))


def test_nettalk_and_protein_small(tmp_path, vocab):
    d = tmp_path / "nettalk"
    d.mkdir()
    (d / "nettalk.data").write_text(
        "  Title\n\n\t\tCopyright\n\n----\n\naback\txb@k-\t0>1<<\t0\nabacus\t@bxkxs\t1<0>0<\t0\n"
        "abacus\t@bxkxx\t1<0>0<\t0\ngunpowder\tg^npW-d-R\t0\t\n", encoding="ascii")
    (d / "split_train_1000.txt").write_text("abacus\n", encoding="ascii")
    (d / "split_test_1000.txt").write_text("aback\nnope\n", encoding="ascii")
    entries, skipped = read_nettalk_entries(d)
    assert [e[0] for e in entries] == ["aback", "abacus", "abacus"] and skipped == [10]
    assert read_nettalk(d, "train_1000") == [(list("abacus"), list("1<0>0<"))]
    assert read_nettalk(d, "train_1000", label="phonemes") == [(list("abacus"), list("@bxkxs"))]
    assert len(read_nettalk(d, "all")) == 3
    with pytest.raises(ValueError, match=r"split_test_1000\.txt, line 2: word 'nope'"):
        read_nettalk(d, "test_1000")
    with pytest.raises(ValueError, match="split"):
        read_nettalk(d, "dev")
    p = tmp_path / "prot.train"
    p.write_text("# header\n<>\nA h\nC e\n<>\nD _\nend\n<>\nE h\n<end>\n", encoding="ascii")
    assert read_protein(p) == [(["A", "C"], ["h", "e"]), (["D"], ["_"]), (["E"], ["h"])]
    assert read_protein(p, "protein") == [(["A", "C", "D"], ["h", "e", "_"]), (["E"], ["h"])]
    p.write_text("<>\nA x\n", encoding="ascii")
    with pytest.raises(ValueError, match=r"prot\.train, line 2"):
        read_protein(p)


# ------------------------------------------------------------------------------------------ real data

def data_dir():
    root = os.environ.get("TREECRF_DATA_DIR")
    if not root or not Path(root, "conll2000", "train.txt").is_file():
        pytest.skip("TREECRF_DATA_DIR not set: real-data test needs the CoNLL/NETtalk files")
    return Path(root)


def test_conll2000_counts(vocab):
    root = data_dir() / "conll2000"
    for split, n_sent, n_tok in (("train", 8936, 211727), ("test", 2012, 47377)):
        sents = list(read_columns(root / f"{split}.txt", ["word", "pos", "chunk"], "chunk"))
        assert (len(sents), sum(map(len, sents))) == (n_sent, n_tok)
    tags = Counter(r[1] for s in sents for r in s)
    assert len(tags) == 43
    egs = list(ColumnCorpus(root / "test.txt", format="conll2000", keep_columns={"pos": "tag_"},
                            spans_key="chunks")(fake_nlp(vocab)))
    assert len(egs) == 2012
    labels = Counter(s.label_ for eg in egs for s in eg.reference.spans["chunks"])
    # IOB2: one span per B- tag (README test counts)
    assert labels == Counter({"NP": 12422, "PP": 4811, "VP": 4658, "ADVP": 866, "SBAR": 535, "ADJP": 438,
                              "PRT": 106, "CONJP": 9, "LST": 5, "INTJ": 2})
    assert all(t.tag_ for eg in egs[:50] for t in eg.predicted)


def test_conll2003_counts(vocab):
    root = data_dir() / "conll2003"
    for split, n_sent, n_tok in (("train", 14041, 203621), ("valid", 3250, 51362), ("test", 3453, 46435)):
        sents = list(read_columns(root / f"{split}.txt", ["word", "pos", "chunk", "ner"], "ner"))
        assert (len(sents), sum(map(len, sents))) == (n_sent, n_tok)
    docs = columns_to_docs(vocab, root / "test.txt", "word", "ner", "bio_ents", {"pos": "tag_"},
                           columns=["word", "pos", "chunk", "ner"])
    assert Counter(e.label_ for d in docs for e in d.ents) == Counter(
        {"LOC": 1668, "ORG": 1661, "PER": 1617, "MISC": 702})  # = B- counts, 5,648 entities


def test_nettalk_counts(vocab):
    root = data_dir() / "nettalk"
    entries, skipped = read_nettalk_entries(root)
    assert len(entries) == 20007 and skipped == [7766]
    assert sum(len(e[0]) for e in entries) == 146934  # 146,943 letters minus the 9 of 'gunpowder'
    stress = Counter(c for e in entries for c in e[2])
    assert stress == Counter({"<": 50855, ">": 45271, "0": 24000, "1": 20354, "2": 6454})
    train, test = read_nettalk(root, "train_1000"), read_nettalk(root, "test_1000")
    assert len(train) == len(test) == 1000
    assert not {"".join(w) for w, _ in train} & {"".join(w) for w, _ in test}
    egs = list(ColumnCorpus(root, format="nettalk", split="test_1000")(fake_nlp(vocab)))
    assert len(egs) == 1000 and egs[0].reference.text == "".join(test[0][0])
    assert [t.tag_ for t in egs[0].reference] == test[0][1]
    assert "all" in NETTALK_SPLITS


def test_protein_counts(vocab):
    root = data_dir() / "protein_secondary_structure"
    expected = {"train": (111, 91, 18105, Counter({"_": 9868, "h": 4601, "e": 3636}), 11, 498),
                "test": (17, 15, 3520, Counter({"_": 1923, "h": 849, "e": 748}), 35, 461)}
    for split, (n_seg, n_prot, n_res, labels, lo, hi) in expected.items():
        seqs = read_protein(root / f"protein-secondary-structure.{split}")
        assert len(seqs) == n_seg and len(read_protein(root / f"protein-secondary-structure.{split}",
                                                       "protein")) == n_prot
        assert sum(len(r) for r, _ in seqs) == n_res
        assert Counter(c for _, lab in seqs for c in lab) == labels
        assert (min(len(r) for r, _ in seqs), max(len(r) for r, _ in seqs)) == (lo, hi)
    egs = list(ColumnCorpus(root / "protein-secondary-structure.test", format="protein")(fake_nlp(vocab)))
    assert len(egs) == 17 and sum(len(eg.reference) for eg in egs) == 3520


def test_column_corpus_reads_spacy_docbins_too(tmp_path):
    """The shipped configs' reader given a .spacy file (from `spacy convert`) used to fail with a raw
    UnicodeDecodeError; it reads the DocBin as spaCy's corpus does and puts the kept input attributes on the
    predicted docs, as it does with input columns."""
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    doc = Doc(nlp.vocab, words=["Alice", "lives", "in", "Paris"], tags=["NNP", "VBZ", "IN", "NNP"],
              ents=["B-PER", "O", "O", "B-LOC"])
    DocBin(docs=[doc, doc]).to_disk(tmp_path / "train.spacy")
    (tmp_path / "dir").mkdir()
    DocBin(docs=[doc]).to_disk(tmp_path / "dir" / "part.spacy")
    for path, n in ((tmp_path / "train.spacy", 2), (tmp_path / "dir", 1)):
        examples = list(ColumnCorpus(path, format="conll2003", keep_columns={"pos": "tag_"})(nlp))
        assert len(examples) == n
        for eg in examples:
            assert [t.tag_ for t in eg.predicted] == ["NNP", "VBZ", "IN", "NNP"]
            assert [(e.text, e.label_) for e in eg.reference.ents] == [("Alice", "PER"), ("Paris", "LOC")]
            assert not eg.predicted.ents


def test_column_files_a_long_line_undecodable_bytes_and_a_byte_order_mark(tmp_path):
    """A megabyte line with the wrong column count is shown cut, with its length; bytes that are not UTF-8 are an
    error naming the file and line; a UTF-8 byte-order mark is not part of the first token."""
    long = tmp_path / "long.txt"
    long.write_text("a B-X\n\n" + "x " * 500_000 + "\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"E133.*line 3.*\(1,000,000 characters\)") as caught:
        list(read_columns(long, ["word", "ner"]))
    assert len(str(caught.value)) < 500
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("a O\nb O\ncaf\u00e9 O\n".encode("latin-1"))
    with pytest.raises(ValueError, match=rf"E209.*{re.escape(str(bad))}, line 3: not utf8 text"):
        list(read_columns(bad, ["word", "ner"]))
    bom = tmp_path / "bom.txt"
    bom.write_bytes("\ufeffThe DT\ndog NN\n".encode("utf8"))
    assert list(read_columns(bom, ["word", "tag"])) == [[("The", "DT"), ("dog", "NN")]]
