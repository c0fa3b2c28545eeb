"""WindowFeaturizer: atomic tests, window shift, padding, vocabulary freezing, caches, lexicons, serialization."""
import os
import time
from pathlib import Path

import numpy as np
import pytest
import spacy
import srsly
from spacy.lang.en import English
from spacy.tokens import Doc, Token
from spacy.training import Example
from spacy.vocab import create_vocab

from spacy_treecrf.engine.sparse import pairs_to_rows, segments_to_rows
from spacy_treecrf.features import (FLAGS, REGEXES, WindowFeaturizer, char_classes, readable_test, regex_tests,
                                    window_features)
from conftest import plain_featurizer

WORDS = [
    "The Bank of England said on Monday that U.S. rates rose 3.5 % .".split(),
    "McDonald 's opened in New York in 1990 .".split(),
    [],
    "Bank".split(),
    "IBM and the bank of New York talked ...".split(),
]


@pytest.fixture(scope="module")
def vocab():
    return create_vocab("en", English.Defaults)


def make_docs(vocab, sentences=WORDS, tags=False):
    docs = []
    for words in sentences:
        t = [("NNP" if w[:1].isupper() else "XX") for w in words] if tags else None
        docs.append(Doc(vocab, words=list(words), tags=t))
    return docs


def row_names(feat, indptr, indices, t):
    names = feat.feature_names()
    return [names[c] for c in indices[indptr[t]:indptr[t + 1]]]


def split_name(name):
    base, off = name.rsplit("@", 1)
    return base, int(off)


def by_offset(names):
    out = {}
    for name in names:
        base, off = split_name(name)
        out.setdefault(off, set()).add(base)
    return out


# ------------------------------------------------------------------------------------------ atomic tests

def test_sixteen_patterns_and_paper_examples():
    assert len(REGEXES) == 16 and len({n for n, _ in REGEXES}) == 16
    # The seven the paper names: A, A+, Aa+, Aa+Aa*, A., D+, .*D.*
    assert "A" in regex_tests("I") and "A+" in regex_tests("IBM") and "Aa+" in regex_tests("Bank")
    assert "Aa+Aa*" in regex_tests("McDonald") and "A." in regex_tests("J.")
    assert "D+" in regex_tests("1990") and ".*D.*" in regex_tests("A4")
    assert "Aa+" not in regex_tests("B")  # the paper's Aa+ needs a lower-case letter
    assert regex_tests("3.5") == (".*D.*", "D.D")
    assert regex_tests("...") == ("..+",)
    assert "A.A." in regex_tests("U.S.") and "X-X" in regex_tests("well-known")
    assert regex_tests(",") == ("P",) and regex_tests("'") == ("Q",) and regex_tests("a") == ("L",)
    assert "Aa+" in regex_tests("Éclair")  # Unicode upper / lower case
    assert regex_tests("hello") == ()


def test_pattern_tests_match_every_pattern_run_anew_and_their_cache_keeps_no_container(monkeypatch):
    """regex_tests caches a class string's patterns as an int (feature_tests._CLASS_BITS): the names of each set of
    patterns are one shared tuple, so the class strings of unseen words add no container for Python's collector
    to count (a tuple each set off a full collection inside spacy evaluate's timed pass). The cache stops
    growing at its bound, and what it returns is what running the sixteen patterns gives."""
    import gc
    import re
    from spacy_treecrf import feature_tests
    words = [prefix + "a" * n + suffix for n in range(1, 120) for prefix, suffix in (("Q", ""), ("x", "9"), ("", ".D"))]
    for word in words:
        assert regex_tests(word) == tuple(name for name, pattern in REGEXES
                                          if re.fullmatch(pattern, char_classes(word), re.DOTALL))
    fresh = ["Ab" + "c" * n for n in range(200, 500)]
    regex_tests(fresh[0])
    gc.collect()
    before = len(gc.get_objects())
    assert [regex_tests(word) for word in fresh[1:]] == [regex_tests(fresh[0])] * (len(fresh) - 1)
    assert len(gc.get_objects()) <= before + 1  # (the list just made)
    monkeypatch.setattr(feature_tests, "_CLASS_BITS", {})
    monkeypatch.setattr(feature_tests, "_CLASS_CACHE_SIZE", 10)
    assert [regex_tests(word) for word in words] == [regex_tests(word) for word in words[::-1]][::-1]
    assert len(feature_tests._CLASS_BITS) == 10


def test_char_classes_of_ascii_text_are_those_of_the_per_character_rule():
    """ASCII text takes str.translate; a non-ASCII first character sends the same text through the rule per
    character (A upper, a lower, D digit, L other letter, the rest kept)."""
    ascii_text = "".join(map(chr, range(128)))
    assert char_classes(ascii_text) == char_classes("\u00e9" + ascii_text)[1:]
    assert char_classes("McDonald's 1990s") == "AaAaaaaa'a DDDDa"
    assert char_classes("Ü-٣日") == "A-DL"


def test_lexeme_families(vocab):
    f = plain_featurizer(window=0)
    names = set(f.lexeme_tests("Bank", vocab))
    assert {"w=Bank", "lw=bank", "re=A.*", "re=Aa+", "p1=B", "p2=Ba", "p3=Ban", "s1=k", "s2=nk", "s3=ank",
            "sh=Xxxx", "f=is_title", "f=is_alpha"} == names
    assert "p3=a" not in f.lexeme_tests("a", vocab) and "p1=a" in f.lexeme_tests("a", vocab)
    assert "f=like_num" in f.lexeme_tests("42", vocab) and "f=is_punct" in f.lexeme_tests(",", vocab)
    off = plain_featurizer(window=0, word=False, lower=False, regexes=False, prefix=0, suffix=0, shape=False,
                           flags=False)
    assert off.lexeme_tests("Bank", vocab) == []


def test_lexeme_tests_of_many_words_at_once_are_each_words_lexeme(vocab):
    """The batched path (flags as bits, one Lexeme at a time) against each lexeme's own attributes."""
    words = ["Bank", "42", ",", "IBM", "http://x.org", "a@b.com", "ÉCOLE", "über", "U.S.", "3.5", "", "McDonald",
             "well-known", "'", "...", "Mr.", "1,000", "x"]
    f = plain_featurizer(window=0, prefix=0, suffix=0, regexes=False)
    which, names = f._lexeme_names(words, vocab)
    got = [set() for _ in words]
    for q, name in zip(which, names):
        got[q].add(name)
    for q, word in enumerate(words):
        lex = vocab[word]
        want = {"w=" + word, "lw=" + (lex.lower_ or word.lower())} | ({"sh=" + lex.shape_} if lex.shape_ else set())
        want |= {"f=" + flag for flag in FLAGS if getattr(lex, flag)}
        assert got[q] == want, word


@pytest.mark.parametrize("kwargs, setting", [
    ({"window": -1}, "window"), ({"min_freq": 0}, "min_freq"), ({"prefix": -1}, "prefix"),
    ({"suffix": -2}, "suffix"), ({"attrs": ["foo_"]}, "attrs"), ({"attrs": "tag_"}, "attrs"),
    ({"word": "yes"}, "word"), ({"window": 1.5}, "window"), ({"lexicons": ["x"]}, "lexicons"),
    ({"missing_text": 3}, "missing_text"), ({"attrs": ["tag_", "tag_"]}, "tag_"),
])
def test_options_are_validated(kwargs, setting):
    with pytest.raises(ValueError, match=setting):
        plain_featurizer(**kwargs)


def test_registered_factory():
    fn = spacy.registry.misc.get("spacy_treecrf.window_features.v1")
    assert fn is window_features
    resolved = spacy.registry.resolve({"f": {"@misc": "spacy_treecrf.window_features.v1", "window": 1,
                                             "attrs": ["tag_"], "min_freq": 2}})["f"]
    assert isinstance(resolved, WindowFeaturizer)
    assert (resolved.window, resolved.attrs, resolved.min_freq) == (1, ["tag_"], 2)


# ------------------------------------------------------------------------------------------ rows

def test_rows_shape_sorted_unique_and_empty_docs(vocab):
    docs = make_docs(vocab)
    f = plain_featurizer(window=2)
    f.initialize(docs)
    indptr, indices, seq_starts = f(docs)
    assert indptr.dtype == np.int64 and indices.dtype == np.int32 and seq_starts.dtype == np.int64
    lengths = [len(d) for d in docs]
    assert seq_starts.tolist() == np.concatenate([[0], np.cumsum(lengths)]).tolist()
    assert seq_starts[3] == seq_starts[2]  # the empty doc adds no row
    assert len(indptr) == sum(lengths) + 1 and indptr[-1] == len(indices)
    for t in range(len(indptr) - 1):
        row = indices[indptr[t]:indptr[t + 1]]
        assert np.all(np.diff(row) > 0)
    assert indices.min() >= 0 and indices.max() < f.n_features
    assert len(f.feature_names()) == f.n_features


def test_window_shift_and_padding(vocab):
    docs = make_docs(vocab, tags=True)
    f = plain_featurizer(window=2, attrs=["tag_"])
    f.initialize(docs)
    indptr, indices, seq_starts = f(docs)
    for q in range(len(docs)):
        a, b = int(seq_starts[q]), int(seq_starts[q + 1])
        rows = [by_offset(row_names(f, indptr, indices, t)) for t in range(a, b)]
        for i, row in enumerate(rows):
            for off in range(-2, 3):
                j = i + off
                if 0 <= j < b - a:
                    # the offset-`off` tests of token i are the offset-0 tests of token i + off
                    assert row.get(off, set()) == rows[j][0], (q, i, off)
                    assert "pad" not in row.get(off, set())
                else:
                    assert row[off] == {"pad"}, (q, i, off)
    assert not any(n.startswith("pad@0") for n in f.feature_names())
    first = by_offset(row_names(f, indptr, indices, 0))
    assert first[-1] == {"pad"} and first[-2] == {"pad"} and "w=Bank" in first[1]
    assert "a:tag_=NNP" in first[0] and "w=The" in first[0]


def test_min_freq_applies_to_word_families_only(vocab):
    docs = make_docs(vocab, [["Paris", "is", "big"], ["Rome", "is", "old"]])
    f = plain_featurizer(window=0, min_freq=2)
    f.initialize(docs)
    atoms = set(f.atom_names)
    assert "w=is" in atoms and "lw=is" in atoms
    assert "w=Paris" not in atoms and "lw=paris" not in atoms
    assert "p3=Par" in atoms and "sh=Xxxxx" in atoms and "s3=ome" in atoms
    g = plain_featurizer(window=0, min_freq=1)
    g.initialize(docs)
    assert "w=Paris" in g.atom_names


def test_unseen_tests_and_pairs_are_dropped(vocab):
    train = make_docs(vocab, [["Alpha", "beta"]])
    f = plain_featurizer(window=1)
    f.initialize(train)
    names = set(f.feature_names())
    assert "w=beta@-1" not in names  # beta is never followed by a token in training
    assert "w=Alpha@+1" not in names
    assert "w=Alpha@-1" in names and "w=beta@+1" in names
    indptr, indices, _ = f(make_docs(vocab, [["beta", "Alpha", "gamma"]]))
    got = [set(row_names(f, indptr, indices, t)) for t in range(3)]
    assert "w=beta@0" in got[0] and "w=Alpha@0" in got[1]
    assert "w=beta@-1" not in got[1]  # (test, offset) pair unseen in training
    assert not any(n.startswith("w=gamma") for n in got[2])  # unseen test
    assert "lw=beta@0" in got[0] and "p1=b@0" in got[0]
    # every emitted column exists
    assert all(set(g) <= names for g in got)


def test_lexeme_cache_computes_each_orth_once(vocab, monkeypatch):
    docs = make_docs(vocab, [["a", "b", "a"], ["b", "a", "c"], ["a"]])
    f = plain_featurizer(window=1)
    calls = []
    original = f._compute_lexemes
    monkeypatch.setattr(f, "_compute_lexemes", lambda orths, voc: calls.extend(orths) or original(orths, voc))
    f.initialize(docs)
    assert len(calls) == 3 and len(set(calls)) == 3
    f(docs)
    f(docs)
    assert len(calls) == 3  # warm cache: nothing recomputed
    f(make_docs(vocab, [["a", "d", "d"]]))
    assert len(calls) == 4


def test_unseen_words_get_the_same_tests_in_a_batch_or_alone(vocab):
    """A trained featurizer looks the tests of many new words up family by family, in no particular order: each
    word's row is the one it gets alone."""
    f = plain_featurizer(window=0, min_freq=1)
    f.initialize(make_docs(vocab, [["Alpha", "beta", "U.S.", "1990", "well-known", "Bank", "banks"]]))
    words = ["Gamma", "betas", "U.K.", "2024", "ill-known", "Alphabet", "Banker", "x"]
    indptr, indices, _ = f(make_docs(vocab, [words]))
    for t, word in enumerate(words):
        f._clear_caches()
        one_indptr, one_indices, _ = f(make_docs(vocab, [[word]]))
        assert row_names(f, one_indptr, one_indices, 0) == row_names(f, indptr, indices, t), word
        assert one_indptr[1] > 0, word  # some test of each word is known


def test_attrs_pos_and_extension(vocab):
    Token.set_extension("treecrf_test_gaz", default=None, force=True)
    doc = Doc(vocab, words=["Kim", "runs"], pos=["PROPN", "VERB"], lemmas=["Kim", "run"])
    doc[0]._.treecrf_test_gaz = "PER"
    f = plain_featurizer(window=0, attrs=["pos_", "lemma_", "_.treecrf_test_gaz"], word=False, lower=False,
                         regexes=False, prefix=0, suffix=0, shape=False, flags=False)
    f.initialize([doc])
    indptr, indices, _ = f([doc])
    assert set(row_names(f, indptr, indices, 0)) == {"a:pos_=PROPN@0", "a:lemma_=Kim@0",
                                                    "a:_.treecrf_test_gaz=PER@0"}
    assert set(row_names(f, indptr, indices, 1)) == {"a:pos_=VERB@0", "a:lemma_=run@0"}
    g = plain_featurizer(attrs=["_.treecrf_no_such_extension"])
    with pytest.raises(ValueError, match="treecrf_no_such_extension"):
        g.initialize([doc])


def test_extension_attrs_read_stored_values_defaults_and_getters(vocab):
    """Attribute extensions are read from where spaCy keeps their values (default where a token has none),
    getter extensions per token; across docs of several lengths, an empty one among them."""
    Token.set_extension("treecrf_test_default", default="none", force=True)
    Token.set_extension("treecrf_test_getter", getter=lambda t: "long" if len(t) > 3 else None, force=True)
    docs = [Doc(vocab, words=["Kim", "runs"]), Doc(vocab, words=[]), Doc(vocab, words=["Sandy", "is", "here"]),
            Doc(vocab, words=["ok"])]  # (the last doc keeps no value at all)
    docs[0][1]._.treecrf_test_default = "VERB"
    docs[2][0]._.treecrf_test_default = ""  # empty: no test, as for None and False
    f = plain_featurizer(window=0, attrs=["_.treecrf_test_default", "_.treecrf_test_getter"], word=False,
                         lower=False, regexes=False, prefix=0, suffix=0, shape=False, flags=False)
    f.initialize(docs)
    indptr, indices, _ = f(docs)
    rows = [set(row_names(f, indptr, indices, t)) for t in range(len(indptr) - 1)]
    assert rows == [{"a:_.treecrf_test_default=none@0"},
                    {"a:_.treecrf_test_default=VERB@0", "a:_.treecrf_test_getter=long@0"},
                    {"a:_.treecrf_test_getter=long@0"},
                    {"a:_.treecrf_test_default=none@0"},
                    {"a:_.treecrf_test_default=none@0", "a:_.treecrf_test_getter=long@0"},
                    {"a:_.treecrf_test_default=none@0"}]

def test_pairs_to_rows_sorts_and_dedups_each_row():
    """Token-level atoms arrive in any order, with repeats (overlapping lexicon matches); rows may be empty."""
    rng = np.random.default_rng(0)
    for n_rows, n_pairs in ((1, 0), (3, 1), (5, 40), (50, 300)):
        rows = rng.integers(0, n_rows, n_pairs)
        ids = rng.integers(0, 12, n_pairs).astype(np.int32)
        indptr, out = pairs_to_rows(rows, ids, n_rows)
        assert len(indptr) == n_rows + 1
        for r in range(n_rows):
            assert out[indptr[r]:indptr[r + 1]].tolist() == sorted(set(ids[rows == r].tolist()))


def test_segments_to_rows_drops_negative_ids_and_sorts_and_dedups_each_row():
    """The estimator's dict items come position by position, -1 / -2 where an item gives no column."""
    rng = np.random.default_rng(1)
    for n_rows in (0, 1, 7, 60):
        lengths = rng.integers(0, 6, n_rows)
        ids = rng.integers(-2, 9, int(lengths.sum()))
        indptr, out = segments_to_rows(ids, lengths)
        row_of = np.repeat(np.arange(n_rows), lengths)
        for r in range(n_rows):
            want = sorted(set(ids[(row_of == r) & (ids >= 0)].tolist()))
            assert out[indptr[r]:indptr[r + 1]].tolist() == want
        assert len(indptr) == n_rows + 1 and out.dtype == np.int32


def test_lexicons_single_and_phrase(vocab, tmp_path):
    city = tmp_path / "city.txt"
    city.write_text("Paris\nnew  york\nNew York City\n\nrio de janeiro\n", encoding="utf8")
    docs = make_docs(vocab, [["I", "saw", "New", "York", "City", "and", "paris", "."],
                             ["Rio", "de", "Janeiro", "is", "new"]])
    f = plain_featurizer(window=1, lexicons={"CITY": str(city)})
    f.initialize(docs)
    indptr, indices, _ = f(docs)
    lex0 = [("lex=CITY" in by_offset(row_names(f, indptr, indices, t)).get(0, set())) for t in range(13)]
    assert lex0 == [False, False, True, True, True, False, True, False, True, True, True, False, False]
    # shifted like any other test
    assert "lex=CITY" in by_offset(row_names(f, indptr, indices, 1))[1]
    # case-sensitive lexicon: only the exact forms match
    g = plain_featurizer(window=0, lexicons={"CITY": str(city)}, lexicon_lowercase=False)
    g.initialize(docs)
    indptr, indices, _ = g(docs)
    lex0 = [("lex=CITY@0" in row_names(g, indptr, indices, t)) for t in range(13)]
    assert lex0 == [False, False, True, True, True] + [False] * 8


def test_missing_lexicon_file_names_the_file(vocab, tmp_path):
    missing = tmp_path / "nope.txt"
    f = plain_featurizer(lexicons={"X": str(missing)})  # not read before initialize
    with pytest.raises(ValueError, match="nope.txt"):
        f.initialize(make_docs(vocab))


CLUSTER_LINES = ["0110\tParis", "0110\tRome", "0111\tLondon", "10\tsaw", "10\tvisited", "1101101\tthe"]


def test_brown_clusters_are_lexeme_tests_at_four_grains_read_from_a_file_or_learned(vocab, tmp_path):
    paths = tmp_path / "paths.txt"
    paths.write_text("\n".join(CLUSTER_LINES) + "\n", encoding="utf8")
    docs = make_docs(vocab, [["The", "man", "saw", "Rome", "."], ["I", "visited", "Paris"]])
    f = plain_featurizer(window=1, clusters=str(paths))
    f.initialize(docs)
    indptr, indices, _ = f(docs)
    own = [by_offset(row_names(f, indptr, indices, t)).get(0, set()) for t in range(8)]
    assert {n for n in own[0] if n.startswith("bc")} == {"bc4=1101", "bc6=110110", "bc10=1101101"}  # (lowercase)
    assert {n for n in own[1] if n.startswith("bc")} == set()  # a word without a cluster: none
    assert {n for n in own[2] if n.startswith("bc")} == {"bc4=10"}
    assert {n for n in own[3] if n.startswith("bc")} == {"bc4=0110"} == {n for n in own[7] if n.startswith("bc")}
    assert "bc4=10" in by_offset(row_names(f, indptr, indices, 3))[-1]  # shifted like every test
    assert readable_test("bc4=0110@-1") == "cluster4[-1] = 0110"
    # a model carries its clusters: the file is not needed to tag, nor to load a re-saved model
    state = srsly.msgpack_loads(srsly.msgpack_dumps(f.to_dict()))
    paths.unlink()
    g = plain_featurizer().from_dict(state)
    assert g.clusters == "" and g.uses_clusters
    h = plain_featurizer().from_dict(srsly.msgpack_loads(srsly.msgpack_dumps(g.to_dict())))
    for a, b, c in zip(f(docs), g(docs), h(docs)):
        assert np.array_equal(a, b) and np.array_equal(a, c)
    old = plain_featurizer(window=1)
    old.initialize(docs)
    old_state = old.to_dict()
    del old_state["cluster_entries"], old_state["config"]["clusters"], old_state["config"]["cluster_text"]
    assert plain_featurizer().from_dict(old_state).to_dict() == old.to_dict()
    # learned at initialize from a text: words in the same frames are nearer in the hierarchy (each word keeps a
    # cluster of its own here, with fewer words than the window's 256 clusters)
    text = tmp_path / "text.txt"
    text.write_text("".join(f"the {n} saw a {m} .\n" for n in ("man", "dog", "cat") for m in ("man", "dog", "cat")
                            ) * 3, encoding="utf8")
    learned = plain_featurizer(window=0, cluster_text=str(text))
    learned.initialize(docs)
    bits = learned._cluster_bits

    def shared(a, b):
        return len(os.path.commonprefix([bits[a], bits[b]]))
    assert shared("dog", "cat") > shared("dog", "saw") and shared("dog", "cat") > shared("dog", "the")


@pytest.mark.parametrize("settings, message", [
    ({"clusters": 3}, "'clusters' must be the path"), ({"cluster_text": None}, "'cluster_text' must be the path"),
    ({"clusters": "a", "cluster_text": "b"}, "not both")])
def test_bad_cluster_settings_name_themselves(settings, message):
    with pytest.raises(ValueError, match=message):
        plain_featurizer(**settings)


def test_cluster_files_missing_or_malformed_are_named(vocab, tmp_path):
    for settings, message in (({"clusters": str(tmp_path / "nope")}, "clusters file not found: .*nope"),
                              ({"cluster_text": str(tmp_path / "nope")}, "text file not found: .*nope")):
        with pytest.raises(ValueError, match=message):
            plain_featurizer(**settings).initialize(make_docs(vocab))
    bad = tmp_path / "bad.txt"
    bad.write_text("0110\tParis\nParis 0110\n", encoding="utf8")
    with pytest.raises(ValueError, match="bad.txt, line 2"):
        plain_featurizer(clusters=str(bad)).initialize(make_docs(vocab))


def test_missing_text_hook(vocab):
    docs = make_docs(vocab, [["Bank", "?", "rose"]])
    f = plain_featurizer(window=1, missing_text="?")
    f.initialize(docs)
    indptr, indices, _ = f(docs)
    rows = [by_offset(row_names(f, indptr, indices, t)) for t in range(3)]
    assert 0 not in rows[1]  # the missing token has no tests of its own
    assert -1 not in rows[2] and 1 not in rows[0]  # and its neighbours see nothing there (not padding)
    assert rows[1][-1] == rows[0][0] and rows[1][1] == rows[2][0]
    assert not any(n.startswith(("w=?", "lw=?", "re=Q")) for n in f.atom_names)


def test_uninitialized_call_raises(vocab):
    with pytest.raises(RuntimeError, match="initialize"):
        plain_featurizer()(make_docs(vocab))


def test_window_zero_and_no_docs(vocab):
    f = plain_featurizer(window=0)
    f.initialize([])
    indptr, indices, seq_starts = f(make_docs(vocab, [["x"], []]))
    assert indptr.tolist() == [0, 0] and len(indices) == 0 and seq_starts.tolist() == [0, 1, 1]
    indptr, indices, seq_starts = f([])
    assert indptr.tolist() == [0] and seq_starts.tolist() == [0]


def test_chunked_call_equals_single_call(vocab, monkeypatch):
    import spacy_treecrf.feature_tests as feature_tests
    docs = make_docs(vocab) * 3
    f = plain_featurizer(window=2)
    f.initialize(docs)
    whole = f(docs)
    monkeypatch.setattr(feature_tests._chunks, "__defaults__", (7,))
    parts = f(docs)
    for a, b in zip(whole, parts):
        assert np.array_equal(a, b)


LD_WORDS = ["the dog runs".split(), "the cat runs fast".split(), ["dog"]]
LD_LABELS = [["DET", "NOUN", "VERB"], ["DET", "NOUN", "VERB", "ADV"], ["VERB"]]


def ld_names(feat, rows, t):
    return sorted(name for name in row_names(feat, rows[0], rows[1], t) if name.startswith("ld="))


def test_label_dictionary_leaves_each_docs_own_labels_out(vocab):
    docs = make_docs(vocab, LD_WORDS)
    f = plain_featurizer(window=1, label_dictionary=True)
    f.initialize(docs, LD_LABELS)
    unseen = f(docs)  # as text outside the training docs sees the dictionary
    own = f(docs, own_labels=LD_LABELS)
    # "dog": NOUN in doc 0, VERB in doc 2; "cat": NOUN in doc 1 only; "the": DET twice; "fast": doc 1 only
    assert ld_names(f, unseen, 1) == ["ld=DET@-1", "ld=NOUN@0", "ld=VERB@+1", "ld=VERB@0"]
    assert ld_names(f, own, 1) == ["ld=DET@-1", "ld=VERB@+1", "ld=VERB@0"]
    assert ld_names(f, own, 4) == ["ld=DET@-1", "ld=VERB@+1"]  # cat: its only NOUN is its own
    assert ld_names(f, own, 0) == ld_names(f, unseen, 0) == ["ld=DET@0", "ld=VERB@+1"]
    assert ld_names(f, own, 7) == ["ld=NOUN@0"] and ld_names(f, unseen, 7) == ["ld=NOUN@0", "ld=VERB@0"]
    # columns come from the training rows: a (label, offset) seen only through a doc's own label gets none
    assert "ld=NOUN@-1" not in f.feature_names() and "ld=ADV@0" not in f.feature_names()
    # unlabelled tokens (None) neither count nor leave anything out
    g = plain_featurizer(window=0, label_dictionary=True)
    g.initialize(docs, [["DET", None, "VERB"], ["DET", "NOUN", "VERB", None], [None]])
    rows = g(docs, own_labels=[[None] * 3, [None] * 4, [None]])
    for a, b in zip(rows, g(docs)):
        assert np.array_equal(a, b)
    assert ld_names(g, rows, 0) == ["ld=DET@0"] and ld_names(g, rows, 1) == []  # "dog" is never labelled
    assert "ld=" in g.family_names() and "ld=" not in plain_featurizer().family_names()


def test_ambiguity_class_is_one_test_of_the_words_label_set_without_a_docs_own_labels(vocab):
    docs = make_docs(vocab, LD_WORDS)
    f = plain_featurizer(window=1, label_dictionary=True, ambiguity_class=True)
    f.initialize(docs, LD_LABELS)
    unseen, own = f(docs), f(docs, own_labels=LD_LABELS)

    def classes(rows, t):
        return sorted(name for name in row_names(f, rows[0], rows[1], t) if name.startswith("ac="))
    # "dog": NOUN in doc 0, VERB in doc 2; doc 0's own rows see only the VERB of doc 2, doc 2's the NOUN
    assert classes(own, 1) == ["ac=DET@-1", "ac=VERB@+1", "ac=VERB@0"]
    assert classes(own, 7) == ["ac=NOUN@0"]
    assert classes(own, 4) == ["ac=DET@-1", "ac=VERB@+1"]  # cat: nothing left
    # so no training row holds dog's whole class NOUN|VERB, and it gets no column (as an ld= test seen only
    # through a doc's own label); "the" (DET in two docs) and "runs" (VERB in two) keep theirs
    assert "ac=NOUN|VERB@0" not in f.feature_names() and "ac=DET@0" in f.feature_names()
    assert classes(unseen, 1) == ["ac=DET@-1", "ac=VERB@+1"] and classes(unseen, 7) == []
    assert readable_test("ac=NOUN|VERB@0") == "ambiguity_class[0] = NOUN|VERB"
    assert "ac=" in f.family_names() and "ac=" not in plain_featurizer(label_dictionary=True).family_names()
    g = plain_featurizer().from_dict(srsly.msgpack_loads(srsly.msgpack_dumps(f.to_dict())))
    for a, b in zip(f(docs, own_labels=LD_LABELS), g(docs, own_labels=LD_LABELS)):
        assert np.array_equal(a, b)


def test_label_dictionary_errors_name_the_problem(vocab):
    docs = make_docs(vocab, LD_WORDS)
    f = plain_featurizer(label_dictionary=True)
    with pytest.raises(ValueError, match="needs the gold labels"):
        f.initialize(docs)
    with pytest.raises(ValueError, match="training doc 1 .*the cat runs fast.* 4 tokens but 3 labels"):
        f.initialize(docs, [LD_LABELS[0], LD_LABELS[0], LD_LABELS[2]])
    f.initialize(docs, LD_LABELS)
    with pytest.raises(ValueError, match="3 docs but 2 lists of own labels"):
        f(docs, own_labels=LD_LABELS[:2])
    with pytest.raises(ValueError, match="doc 2 .*dog.* 1 tokens but 2 own labels"):
        f(docs, own_labels=LD_LABELS[:2] + [["VERB", "VERB"]])
    with pytest.raises(ValueError, match="label_dictionary"):
        plain_featurizer(label_dictionary="yes")

# ------------------------------------------------------------------------------------------ serialization

def test_to_dict_from_dict_round_trip(vocab, tmp_path):
    lex = tmp_path / "lex.txt"
    lex.write_text("new york\nbank\n", encoding="utf8")
    docs = make_docs(vocab, tags=True)
    f = plain_featurizer(window=2, attrs=["tag_"], min_freq=1, lexicons={"L": str(lex)})
    f.initialize(docs)
    state = f.to_dict()
    data = srsly.msgpack_dumps(state)  # plain data only
    lex.unlink()  # the trained state carries the lexicon entries itself
    g = plain_featurizer(window=5).from_dict(srsly.msgpack_loads(data))
    assert g.window == 2 and g.attrs == ["tag_"]
    assert g.feature_names() == f.feature_names()
    new_docs = make_docs(vocab, [["The", "new", "York", "bank", "zzz"]], tags=True)
    for a, b in zip(f(docs + new_docs), g(docs + new_docs)):
        assert np.array_equal(a, b)
    assert g.lexicons == {"L": ""}  # the entries came with the state; a path in it is never read
    assert g.to_dict() == {**state, "config": {**state["config"], "lexicons": {"L": ""}}}


def test_label_dictionary_round_trip_and_states_from_before_it(vocab):
    docs = make_docs(vocab, LD_WORDS)
    f = plain_featurizer(window=1, label_dictionary=True)
    f.initialize(docs, LD_LABELS)
    g = plain_featurizer().from_dict(srsly.msgpack_loads(srsly.msgpack_dumps(f.to_dict())))
    new_docs = make_docs(vocab, [["a", "dog", "and", "a", "cat"]])
    for a, b in zip(f(docs + new_docs), g(docs + new_docs)):
        assert np.array_equal(a, b)
    for a, b in zip(f(docs, own_labels=LD_LABELS), g(docs, own_labels=LD_LABELS)):
        assert np.array_equal(a, b)
    plain = plain_featurizer(window=1)
    plain.initialize(docs)
    old_state = plain.to_dict()
    del old_state["label_counts"], old_state["config"]["label_dictionary"]
    assert plain_featurizer().from_dict(old_state).to_dict() == plain.to_dict()


@pytest.mark.parametrize("mutate, message", [
    (lambda s: s.pop("atoms"), "atoms"),
    (lambda s: s.update(version=99), "version"),
    (lambda s: s.update(atoms="w=a"), "atoms"),
    (lambda s: s["column_atoms"].append(10 ** 6), "column"),
    (lambda s: s["column_offsets"].append(0), "differ in length"),
    (lambda s: s["config"].update(window=-3), "window"),
    (lambda s: s["config"].update(bogus=1), "config"),
    (lambda s: s.update(lexicon_entries={"L": "abc"}), "lexicon_entries"),
    (lambda s: s["column_atoms"].reverse(), "ordered"),
    (lambda s: s.update(label_counts={"dog": {"NOUN": 0}}), "label_counts"),
    (lambda s: s.update(atoms=s["atoms"] + ["ld=NOUN"]), "no test family"),
    (lambda s: s.update(cluster_entries={"dog": "01a"}), "cluster_entries"),
    (lambda s: s.update(atoms=s["atoms"] + ["bc4=0110"]), "no test family"),
])
def test_from_dict_rejects_bad_input(vocab, mutate, message):
    f = plain_featurizer(window=1)
    f.initialize(make_docs(vocab))
    state = f.to_dict()
    mutate(state)
    with pytest.raises(ValueError, match=message):
        plain_featurizer().from_dict(state)
    with pytest.raises(ValueError, match="dict"):
        plain_featurizer().from_dict([1, 2])


# ------------------------------------------------------------------------------------------ real data

def data_dir():
    root = os.environ.get("TREECRF_DATA_DIR")
    if not root or not Path(root, "conll2000", "test.txt").is_file():
        pytest.skip("TREECRF_DATA_DIR not set: real-data test needs the CoNLL/NETtalk files")
    return Path(root)


def test_conll2000_features(vocab):
    from spacy_treecrf.readers import columns_to_docs
    path = data_dir() / "conll2000" / "test.txt"
    docs = columns_to_docs(vocab, path, "word", "chunk", "bio_spans", {"pos": "tag_"},
                           columns=["word", "pos", "chunk"])
    f = plain_featurizer(window=2, attrs=["tag_"], min_freq=2)
    f.initialize(docs)
    f(docs)  # warm
    start = time.perf_counter()
    indptr, indices, seq_starts = f(docs)
    elapsed = time.perf_counter() - start
    assert len(indptr) - 1 == 47377 and len(seq_starts) - 1 == 2012
    assert elapsed < 5.0
    rows = np.split(indices, indptr[1:-1])
    assert all(np.all(np.diff(r) > 0) for r in rows[:2000])
    # the shift property on the first sentence
    a, b = int(seq_starts[0]), int(seq_starts[1])
    sets = [by_offset(row_names(f, indptr, indices, t)) for t in range(a, b)]
    for i in range(1, b - a):
        assert sets[i][-1] == sets[i - 1][0]
    assert {"w=Rockwell", "a:tag_=NNP"} <= sets[0][0]


def test_rewritten_patterns_match_mallets_on_every_short_class_string():
    """'X.' and 'A.A.' are written so that matching is linear in the token's length; on every class string of up
    to 7 characters over the classes that matter they accept exactly what MALLET's patterns accept."""
    import itertools
    import re

    mallet = {"X.": r"[^.]+.*\.", "A.A.": r"A[A.]*\.[A.]*"}
    ours = dict(REGEXES)
    for n in range(8):
        for chars in itertools.product("Aa.D-", repeat=n):
            text = "".join(chars)
            for name, pattern in mallet.items():
                assert bool(re.fullmatch(pattern, text, re.DOTALL)) == bool(re.fullmatch(ours[name], text, re.DOTALL))


@pytest.mark.parametrize("token", ["a" * 200_000, "A." * 100_000 + "a", "1" * 200_000])
def test_a_200000_character_token_is_tagged_without_quadratic_matching(token):
    """The quadratic patterns took 16.7 s on such a token; linear matching takes milliseconds (the bound here is
    loose so that a slow machine passes, a quadratic pattern does not)."""
    import time

    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config={"target": "tag", "booster": {"max_leaves": 2}})
    nlp.initialize(lambda: [Example.from_dict(Doc(nlp.vocab, words=["a", "b"]), {"tags": ["X", "Y"]})])
    doc = Doc(nlp.vocab, words=["before", token, "after"])
    start = time.perf_counter()
    nlp(doc)
    assert time.perf_counter() - start < 1.0
