"""Document tests (doc_context) and sentence-bounded windows (sentence_windows) of the WindowFeaturizer."""
import numpy as np
import pytest
from spacy.lang.en import English
from spacy.tokens import Doc
from spacy.vocab import create_vocab

from spacy_treecrf.feature_document import MAX_OTHERS, document_cues
from spacy_treecrf.features import WindowFeaturizer

SENTENCES = ["EU rejects German call .", "The European Union said so .", "Jordan met Michael Jordan in Paris .",
             "The ECB and the European Central Bank agree .", "In May they may meet ."]


@pytest.fixture(scope="module")
def vocab():
    return create_vocab("en", English.Defaults)


def sentence_doc(vocab, sentences=SENTENCES):
    words, starts = [], []
    for sentence in sentences:
        tokens = sentence.split()
        words += tokens
        starts += [True] + [False] * (len(tokens) - 1)
    return Doc(vocab, words=words, sent_starts=starts)


def cues(sentences=SENTENCES):
    words, starts = [], []
    for sentence in sentences:
        tokens = sentence.split()
        words += tokens
        starts += [True] + [False] * (len(tokens) - 1)
    tokens, names = document_cues(words, starts)
    found = {}
    for t, name in zip(tokens, names):
        found.setdefault((t, words[t]), set()).add(name)
    return words, found


def test_cues_of_the_other_mentions():
    words, found = cues()
    jordan = [t for t, w in enumerate(words) if w == "Jordan"]
    first, second = (found[(t, "Jordan")] for t in jordan)
    # the sentence-initial Jordan: title-case mid-sentence elsewhere, in a longer run there, after "michael" there
    assert {"dc=title", "dc=longer", "dc=first", "dp=michael", "dn=in"} <= first
    assert "dc=again" not in first
    # the second: the first mention is sentence-initial (no dp=), and not in a longer run
    assert {"dc=again", "dn=met"} <= second and "dc=longer" not in second and "dc=title" not in second
    may = words.index("May")
    assert {"dc=lower", "dc=first", "dp=they", "dn=meet"} <= found[(may, "May")]
    assert found[(words.index("ECB"), "ECB")] == {"dc=acronym"}  # European Central Bank
    assert "dc=acronym" in found[(0, "EU")]  # within the run "The European Union"
    # lowercase tokens and capitalised words seen once get nothing
    assert not any(w[0].islower() for _, w in found)
    assert (words.index("Paris"), "Paris") not in found and (words.index("German"), "German") not in found


def test_context_words_read_at_most_max_others_mentions():
    sentences = [f"said w{i} Smith ." for i in range(MAX_OTHERS + 5)]
    words, found = cues(sentences)
    last = max(t for t, w in enumerate(words) if w == "Smith")
    assert sum(name.startswith("dp=") for name in found[(last, "Smith")]) == MAX_OTHERS


def test_featurizer_columns_and_unseen_words(vocab):
    doc = sentence_doc(vocab)
    feat = WindowFeaturizer(doc_context=True, label_dictionary=False, min_freq=1, window=1)
    feat.initialize([doc])
    names = feat.feature_names()
    assert "dc=acronym@0" in names and "dp=michael@0" in names and "dc=longer@+1" in names
    indptr, indices, _ = feat([doc])
    t = [tok.text for tok in doc].index("ECB")
    row = {names[c] for c in indices[indptr[t]:indptr[t + 1]]}
    assert "dc=acronym@0" in row and "dc=again@-1" in row  # "The" before it: "The European Union" earlier
    # at tagging time, unseen context words give no column and nothing fails
    other = sentence_doc(vocab, ["Zorro met Zorro .", "Obscure Zorro said ."])
    indptr, indices, _ = feat([other])
    got = {names[c] for c in indices}
    assert "dc=longer@0" in got and not any(name.startswith("dp=zorro") for name in got)


def test_context_words_follow_min_freq(vocab):
    doc = sentence_doc(vocab)
    feat = WindowFeaturizer(doc_context=True, label_dictionary=False, min_freq=2, window=0)
    feat.initialize([doc])
    names = feat.feature_names()
    assert "dp=michael@0" not in names and "dn=in@0" not in names  # on one token each
    assert "dp=the@0" in names  # on both European tokens
    assert "dc=acronym@0" in names  # not a word test: kept once seen


def test_without_the_option_nothing_changes(vocab):
    doc = sentence_doc(vocab)
    plain = WindowFeaturizer(label_dictionary=False, min_freq=1, doc_context=False)
    plain.initialize([doc])
    assert not any(name.startswith(("dc=", "dp=", "dn=")) for name in plain.feature_names())


def test_sentence_windows_pad_at_sentence_starts(vocab):
    doc = sentence_doc(vocab, ["A b .", "C d ."])
    crossing = WindowFeaturizer(window=1, label_dictionary=False, min_freq=1)
    bounded = WindowFeaturizer(window=1, label_dictionary=False, min_freq=1, sentence_windows=True)
    for feat in (crossing, bounded):
        feat.initialize([doc])
    rows = {}
    for key, feat in (("crossing", crossing), ("bounded", bounded)):
        indptr, indices, starts = feat([doc])
        assert starts.tolist() == [0, 6]  # the Doc stays one sequence
        names = feat.feature_names()
        rows[key] = [{names[c] for c in indices[indptr[t]:indptr[t + 1]]} for t in range(6)]
    assert "w=C@+1" in rows["crossing"][2] and "pad@+1" not in rows["crossing"][2]
    assert "pad@+1" in rows["bounded"][2] and "w=C@+1" not in rows["bounded"][2]
    assert "pad@-1" in rows["bounded"][3] and "w=.@-1" not in rows["bounded"][3]
    assert rows["crossing"][1] == rows["bounded"][1]


def test_missing_rows_count_what_sentence_windows_see(vocab):
    doc = sentence_doc(vocab, ["A b .", "C d ."])
    feat = WindowFeaturizer(window=1, label_dictionary=False, min_freq=1, sentence_windows=True)
    feat.initialize([doc])
    _, _, applies = feat.missing_rows([doc])
    per_offset = applies.reshape(3, -1)[:, 0]
    assert per_offset.tolist() == [4, 6, 4]  # two sentences of 3: 2 + 2 tokens see a neighbour on each side


def test_options_survive_a_round_trip_and_old_states_load(vocab):
    doc = sentence_doc(vocab)
    feat = WindowFeaturizer(doc_context=True, sentence_windows=True, label_dictionary=False, min_freq=1)
    feat.initialize([doc])
    state = feat.to_dict()
    back = WindowFeaturizer()
    back.from_dict(state)
    assert back.doc_context and back.sentence_windows
    a, b = feat([doc]), back([doc])
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    plain = WindowFeaturizer(label_dictionary=False, min_freq=1, doc_context=False)
    plain.initialize([doc])
    old = plain.to_dict()
    for key in ("doc_context", "sentence_windows"):
        del old["config"][key]
    again = WindowFeaturizer(doc_context=True)
    again.from_dict(old)
    assert not again.doc_context and not again.sentence_windows


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="doc_context"):
        WindowFeaturizer(doc_context="yes")
    with pytest.raises(ValueError, match="sentence_windows"):
        WindowFeaturizer(sentence_windows=1)


def test_the_component_trains_and_tags_documents(tmp_path):
    """A Doc per document read by the column reader, its sentences marked, through the component with both
    options; the model file keeps them."""
    import spacy
    from spacy_treecrf.readers import ColumnCorpus
    from conftest import make_nlp, train

    conll = tmp_path / "docs.conll"
    blocks = ["-DOCSTART- -X- -X- O\n\nJordan NNP B-NP B-PER\nsaid VBD B-VP O\n.  . O O\n\n"
              "Michael NNP B-NP B-PER\nJordan NNP I-NP I-PER\nwon VBD B-VP O\n. . O O\n",
              "-DOCSTART- -X- -X- O\n\nJordan NNP B-NP B-LOC\nis VBZ B-VP O\nhot JJ B-ADJP O\n\n"
              "They PRP B-NP O\nlive VBP B-VP O\nin IN B-PP O\nJordan NNP B-NP B-LOC\n. . O O\n"]
    conll.write_text("\n".join(blocks * 3), encoding="utf8")
    nlp, crf = make_nlp(features={"doc_context": True, "sentence_windows": True, "min_freq": 1})
    examples = list(ColumnCorpus(conll, format="conll2003", documents=True)(nlp))
    assert len(examples) == 6 and len(list(examples[0].predicted.sents)) == 2
    train(nlp, examples, rounds=6)
    doc = nlp(examples[0].predicted.copy())
    assert [(e.text, e.label_) for e in doc.ents] == [("Jordan", "PER"), ("Michael Jordan", "PER")]
    assert {name.split("@")[0] for name in crf.featurizer.feature_names()} >= {"dc=longer", "dp=michael"}
    nlp.to_disk(tmp_path / "model")
    back = spacy.load(tmp_path / "model")
    features = back.get_pipe("treecrf").featurizer
    assert features.doc_context and features.sentence_windows
    again = back(examples[0].predicted.copy())
    assert [(e.text, e.label_) for e in again.ents] == [(e.text, e.label_) for e in doc.ents]


def test_unset_sentences_start_after_full_stops(vocab):
    """A Doc made from text has no sentences: the tests then take a token after ".", "?" or "!" as their start."""
    words = "Jordan won . Jordan met Michael Jordan .".split()
    feat = WindowFeaturizer(doc_context=True, label_dictionary=False, min_freq=1, window=0)
    unset = Doc(vocab, words=words)
    set_ = Doc(vocab, words=words, sent_starts=[True] + [False] * (len(words) - 1))  # one sentence, set
    feat.initialize([unset, set_])
    indptr, indices, _ = feat([unset])
    names = feat.feature_names()
    first = {names[c] for c in indices[indptr[0]:indptr[1]]}
    assert "dp=michael@0" in first and "dp=.@0" not in first  # the Jordan after "." starts a sentence
    indptr, indices, _ = feat([set_])
    first = {names[c] for c in indices[indptr[0]:indptr[1]]}
    assert "dp=.@0" in first


def test_only_docs_that_can_have_a_test_are_read_and_nothing_is_lost(vocab):
    """_document_atoms skips Docs without a repeated capitalised word or an ALL-CAPS one; the tests it finds
    are exactly document_cues' over every Doc."""
    from spacy_treecrf.feature_document import SENTENCE_ENDS
    sentences = SENTENCES + ["Smith and smith .", "A A", "x"]
    docs = [sentence_doc(vocab, SENTENCES[:3]), Doc(vocab, words="nothing here .".split()),
            Doc(vocab, words="NATO met . NATO left".split()), sentence_doc(vocab, sentences[-3:]),
            Doc(vocab, words=[]), sentence_doc(vocab, SENTENCES[3:])]
    feat = WindowFeaturizer(doc_context=True, label_dictionary=False, min_freq=1, window=0)
    feat.initialize(docs)
    nonempty = [d for d in docs if len(d)]
    table = feat._read_tokens(nonempty)
    starts = np.cumsum([0] + [len(d) for d in docs])
    rows, atoms = feat._document_atoms(starts, table, vocab)
    found = sorted((int(r), feat._atom_names[a]) for r, a in zip(rows, atoms))
    expected = []
    for q, doc in enumerate(docs):
        words = [t.text for t in doc]
        if len(words) < 2:
            continue
        marks = [t.is_sent_start for t in doc] if doc.has_annotation("SENT_START") else None
        first = [True] + ([bool(m) for m in marks[1:]] if marks else [w in SENTENCE_ENDS for w in words[:-1]])
        tokens, names = document_cues(words, first)
        expected += [(int(starts[q]) + t, name) for t, name in zip(tokens, names)]
    assert found == sorted(expected) and len(found) > 20


def test_an_entity_never_runs_into_the_next_sentence(vocab):
    """Where a Doc's sentences are set, a span the labels run across a sentence start is cut there; a Doc
    without sentences keeps the span whole."""
    import numpy as np
    from spacy_treecrf.doc_scores import bio_span_arrays, sentence_starts
    labels = ["O", "B-X", "I-X"]
    ids = np.array([1, 2, 2, 0, 0, 1, 2, 2])  # one span over positions 0-2 of each doc
    set_ = Doc(vocab, words="a b c d".split(), sent_starts=[True, False, True, False])
    unset = Doc(vocab, words="a b c d".split())
    starts = np.array([0, 4, 8])
    cut = sentence_starts([set_, unset], starts)
    assert cut.tolist() == [0, 2]
    owner, start, end, _, _ = bio_span_arrays(ids, starts, labels, cut)
    assert list(zip(owner.tolist(), start.tolist(), end.tolist())) == [(0, 0, 2), (0, 2, 3), (1, 5, 8)]
    owner, start, end, _, _ = bio_span_arrays(ids, starts, labels)
    assert list(zip(start.tolist(), end.tolist())) == [(0, 3), (5, 8)]
