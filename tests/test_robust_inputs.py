"""The treecrf component on odd inputs: empty, one-token, whitespace-only, non-Latin and very long docs; odd,
missing, misaligned and unseen labels; settings and lexicons refused with a message that names them."""
import warnings

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

from conftest import (LANG, NER_DATA, SMALL, WINDOW, assert_normalised, assert_valid_bio, component_config,
                      fresh_component, make_nlp, marginals, ner_examples, paper_crf, raw_labels, tag_examples, train)
import spacy_treecrf.pipe  # noqa: F401  (registers the factory)


def test_empty_docs_predict_train_and_evaluate(ner_model):
    nlp, _ = ner_model
    doc = nlp("")
    assert len(doc) == 0 and doc.ents == ()
    assert marginals(doc)[1].shape == (0, len(nlp.get_pipe("treecrf").labels))
    docs = list(nlp.pipe(["", "Alice lives in Rome .", "", ""]))
    assert [len(d) for d in docs] == [0, 5, 0, 0]
    assert [e.text for e in docs[1].ents] == ["Alice", "Rome"]
    # an empty doc in training and in evaluation
    nlp2, _ = make_nlp()
    examples = ner_examples(nlp2) + [Example.from_dict(nlp2.make_doc(""), {"entities": []})]
    losses = train(nlp2, examples, rounds=3)
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert nlp2.evaluate(examples)["ents_f"] > 0.5


def test_one_token_docs():
    nlp, crf = make_nlp()
    data = [("Alice", [(0, 5, "PER")]), ("Paris", [(0, 5, "LOC")]), ("runs", []), ("Bob", [(0, 3, "PER")])]
    train(nlp, ner_examples(nlp, data + [("New York", [(0, 8, "LOC")]), ("in New York", [(3, 11, "LOC")])]),
          rounds=6)
    assert "I-LOC" in crf.labels
    for text, ents in data:
        doc = nlp(text)
        assert len(doc) == 1
        assert [(e.start_char, e.end_char, e.label_) for e in doc.ents] == ents
        assert_normalised(doc)
    # "York" is only ever I-LOC in training; alone, the constrained decoder may not start with I-
    doc = nlp("York")
    assert raw_labels(crf, [doc])[0][0][0] in ("B-LOC", "B-PER", "O")
    assert marginals(doc)[1][0, crf.labels.index("I-LOC")] == 0.0


def test_whitespace_only_tokens_train_and_predict():
    nlp, crf = make_nlp(target="tag")
    sentences = [[("the", "DT"), (" ", "SP"), ("dog", "NN"), ("\n", "SP")],
                 [("\t", "SP"), ("a", "DT"), ("  ", "SP"), ("cat", "NN"), ("\u00a0", "SP")],
                 [("\n\n", "SP"), (" ", "SP")]]
    train(nlp, tag_examples(nlp, sentences), rounds=6)
    for s in sentences:
        doc = nlp(Doc(nlp.vocab, words=[w for w, _ in s], spaces=[False] * len(s)))
        assert [t.tag_ for t in doc] == [t for _, t in s]
        assert_normalised(doc)
    # the tokenizer's own whitespace tokens, and a doc of whitespace only
    doc = nlp("the  dog\n\nruns")
    assert any(t.is_space for t in doc) and all(t.tag_ in crf.labels for t in doc)
    for words in ([" ", "\t", "\n"], ["\u2003", "\r\n", "\u3000"], [" "]):  # seen and unseen whitespace
        doc = nlp(Doc(nlp.vocab, words=words, spaces=[False] * len(words)))
        assert len(doc) == len(words) and all(t.tag_ in crf.labels for t in doc)
        assert_normalised(doc)
    data = crf.to_bytes()
    assert fresh_component("tag", **SMALL).from_bytes(data).to_bytes() == data  # the same settings: the same bytes


NON_LATIN = [
    [("東京", "HAN"), ("は", "KANA"), ("大きい", "HAN"), ("😀", "EMO")],
    [("مرحبا", "ARAB"), ("بالعالم", "ARAB"), ("👍🏽", "EMO"), ("!", "PUNCT")],
    [("नमस्ते", "DEVA"), ("दुनिया", "DEVA"), ("👨‍👩‍👧‍👦", "EMO")],
    [("Привет", "CYR"), ("мир", "CYR"), ("🇫🇷", "EMO"), ("é", "LAT")],
    [("日本語", "HAN"), ("😀", "EMO"), ("мир", "CYR"), ("こんにちは", "KANA")],
]


def test_non_latin_scripts_and_emoji_train_and_predict():
    nlp, crf = make_nlp(target="tag")
    examples = tag_examples(nlp, NON_LATIN)
    train(nlp, examples, rounds=8)
    assert nlp.evaluate(examples)["tag_acc"] == 1.0
    assert any("👨‍👩‍👧‍👦" in name for name in crf.featurizer.feature_names())
    # the model survives a round trip with its non-Latin feature names, giving the same predictions
    nlp2, crf2 = make_nlp(target="tag")
    crf2.from_bytes(crf.to_bytes())
    for s in NON_LATIN:
        words = [w for w, _ in s]
        a, b = nlp(Doc(nlp.vocab, words=words)), nlp2(Doc(nlp2.vocab, words=words))
        assert [t.tag_ for t in a] == [t.tag_ for t in b] == [t for _, t in s]
        np.testing.assert_array_equal(marginals(a)[1], marginals(b)[1])
    # and an NER model over the same scripts
    nlp3, _ = make_nlp()
    data = [("東京 に 行く", [(0, 2, "LOC")]), ("مرحبا أحمد", [(6, 10, "PER")]), ("я 😀 Москва", [(4, 10, "LOC")])]
    train(nlp3, ner_examples(nlp3, data), rounds=8)
    for text, ents in data:
        doc = nlp3(text)
        assert [(e.start_char, e.end_char, e.label_) for e in doc.ents] == ents
        assert_normalised(doc)


@pytest.mark.parametrize("n_tokens", [10_000, 100_000])
def test_very_long_docs_have_finite_normalised_marginals(sharp_model, n_tokens):
    nlp = sharp_model
    period = ["Alice", "lives", "in", "Paris", "."]
    doc = nlp(Doc(nlp.vocab, words=(period * (n_tokens // 5 + 1))[:n_tokens]))
    assert len(doc) == n_tokens
    assert_normalised(doc)
    _, probs = marginals(doc)
    # far from both ends every period is labelled alike: no drift of the scaled forward-backward
    mid = probs[1000:n_tokens - 1000].reshape(-1, 5, probs.shape[1])
    assert np.abs(mid - mid[0]).max() < 1e-4
    tags = [t.ent_iob_ + ("-" + t.ent_type_ if t.ent_type_ else "") for t in doc]
    periods = np.array(tags[1000:n_tokens - 1000]).reshape(-1, 5)
    assert np.all(periods == periods[0]) and "B-PER" in periods[0]
    assert_valid_bio(tags)
    scores = np.array(doc.spans["treecrf"].attrs["scores"])
    assert len(scores) == len(doc.ents) and np.all(np.isfinite(scores))
    assert np.all((scores >= 0.0) & (scores <= 1.0 + 1e-6))


def test_learning_rate_is_capped_so_the_float32_cache_cannot_overflow():
    """|leaf value| <= 1, so learning_rate <= 10 bounds a round's factor by e^10; larger rates are refused."""
    with pytest.raises(ValueError, match="learning_rate"):
        make_nlp(max_leaves=4, shrinkage=0.0, learning_rate=300.0)
    nlp, crf = make_nlp(max_leaves=4, shrinkage=0.0, learning_rate=10.0)
    losses = train(nlp, ner_examples(nlp), rounds=3)
    assert np.all(np.isfinite(losses))
    assert np.all(np.isfinite(crf.ensemble.arrays()["value"]))
    assert np.abs(crf.ensemble.arrays()["value"]).max() <= 10.0 + 1e-9

def test_unseen_gold_label_in_evaluation_counts_as_error(ner_model):
    nlp, _ = ner_model
    dev = ner_examples(nlp, [("Alice lives in Paris .", [(0, 5, "PER"), (15, 20, "MISC")])])
    scores = nlp.evaluate(dev)
    assert scores["ents_per_type"]["MISC"]["r"] == 0.0
    assert scores["ents_per_type"]["PER"]["f"] == 1.0
    assert 0.0 < scores["ents_f"] < 1.0
    # tag target: an unseen tag is one wrong token
    nlp2, _ = make_nlp(target="tag")
    sentences = [[("the", "DT"), ("dog", "NN"), ("runs", "VBZ")], [("a", "DT"), ("cat", "NN")]]
    train(nlp2, tag_examples(nlp2, sentences), rounds=6)
    assert nlp2.evaluate(tag_examples(nlp2, sentences))["tag_acc"] == 1.0
    dev = tag_examples(nlp2, [[("the", "DT"), ("dog", "NN"), ("runs", "XYZ")], [("a", "DT"), ("cat", "NN")]])
    assert nlp2.evaluate(dev)["tag_acc"] == pytest.approx(0.8)


def test_gold_entities_misaligned_with_tokens_are_unknown_not_outside():
    nlp, crf = make_nlp()
    # "Ali" is not a token boundary of "Alice": spaCy cannot align it, so the whole token is unknown
    data = NER_DATA + [("Alice met Bob", [(0, 3, "PER"), (10, 13, "PER")])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        examples = ner_examples(nlp, data)
    losses = train(nlp, examples, rounds=3)
    assert np.all(np.isfinite(losses))
    assert crf._gold(examples[-1]) == [None, "O", "B-PER"]
    y = crf.feeder.trainer.y
    labels = crf.labels
    # the sorted-by-content trainer holds the sentence somewhere: find it by its gold
    rows = [y[a:b].tolist() for a, b in zip(crf.feeder.trainer.seq_starts[:-1], crf.feeder.trainer.seq_starts[1:])]
    assert [-1, labels.index("O"), labels.index("B-PER")] in rows
    # a tokenization that differs from the gold's: tokens that map to several gold tokens are unknown too
    pred = Doc(nlp.vocab, words=["New York", "is", "big"])
    ref = Doc(nlp.vocab, words=["New", "York", "is", "big"], spaces=[True, True, True, False])
    ref.set_ents([Span(ref, 0, 2, "LOC")], default="outside")
    assert crf._gold(Example(pred, ref)) == [None, "O", "O"]


def test_overlapping_gold_spans_name_the_doc():
    nlp, crf = make_nlp(target="spans", spans_key="chunks")
    words = ["the", "quick", "fox", "jumps"]
    good = Doc(nlp.vocab, words=words)
    good.spans["chunks"] = [Span(good, 0, 3, "NP"), Span(good, 3, 4, "VP")]
    bad = Doc(nlp.vocab, words=["overlap", "here", "now"])
    bad.spans["chunks"] = [Span(bad, 0, 2, "NP"), Span(bad, 1, 3, "VP")]
    ex_good = Example(Doc(nlp.vocab, words=words), good)
    ex_bad = Example(Doc(nlp.vocab, words=["overlap", "here", "now"]), bad)
    with pytest.raises(ValueError, match=r"overlap here now.*overlapping.*chunks"):
        nlp.initialize(lambda: [ex_good, ex_bad])
    nlp.initialize(lambda: [ex_good])
    with pytest.raises(ValueError, match=r"Doc 'overlap here now ?' has overlapping"):
        nlp.update([ex_good, ex_bad])


def test_label_absent_from_training_data_given_explicitly():
    labels = ["B-LOC", "B-MISC", "B-PER", "I-LOC", "I-MISC", "I-PER", "O"]
    nlp, crf = make_nlp()
    examples = ner_examples(nlp)
    losses = train(nlp, examples, rounds=6, labels=labels)
    assert crf.labels == tuple(labels)
    assert losses[-1] < losses[0]
    assert nlp.evaluate(examples)["ents_f"] == 1.0
    for doc in nlp.pipe([eg.reference.text for eg in examples]):
        assert all(e.label_ != "MISC" for e in doc.ents)
        assert_normalised(doc)
        assert marginals(doc)[1][:, labels.index("B-MISC")].max() < 0.5
    # the same through nlp.initialize and the [initialize.components] block
    nlp2, crf2 = make_nlp()
    nlp2.config["initialize"]["components"]["treecrf"] = {"labels": labels}
    nlp2.initialize(lambda: ner_examples(nlp2))
    assert crf2.labels == tuple(labels)
    # a reloaded model keeps the label it never saw
    assert fresh_component(**SMALL).from_bytes(crf.to_bytes()).labels == tuple(labels)


def test_docs_with_every_label_missing():
    nlp, crf = make_nlp()
    examples = ner_examples(nlp) + [Example.from_dict(nlp.make_doc("Dave walks to Oslo"), {})]
    assert [t.ent_iob_ for t in examples[-1].reference] == [""] * 4
    losses = train(nlp, examples, rounds=4)
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    y, starts = crf.feeder.trainer.y, crf.feeder.trainer.seq_starts
    assert sum(np.all(y[a:b] == -1) for a, b in zip(starts[:-1], starts[1:])) == 1
    assert_normalised(nlp("Dave walks to Oslo"))
    # tag target: a sentence with every tag missing
    nlp2, crf2 = make_nlp(target="tag")
    losses = train(nlp2, tag_examples(nlp2, [[("the", "DT"), ("dog", "NN")], [("a", ""), ("cat", "")]]),
                   rounds=3)
    assert np.all(np.isfinite(losses)) and nlp2(Doc(nlp2.vocab, words=["a", "cat"]))[1].tag_ in ("DT", "NN")


@pytest.mark.parametrize("target", ["ner", "spans", "tag"])
def test_training_data_without_any_annotation_is_a_clear_error(target):
    nlp, _ = make_nlp(target=target, spans_key="chunks")
    examples = [Example(nlp.make_doc("no gold here"), nlp.make_doc("no gold here"))]
    with pytest.raises(ValueError, match="No labels found"):
        nlp.initialize(lambda: examples)


def test_single_label_tasks():
    nlp, crf = make_nlp(target="tag")
    train(nlp, tag_examples(nlp, [[("a", "X"), ("b", "X")], [("c", "X")]]), rounds=2)
    assert crf.labels == ("X",)
    doc = nlp(Doc(nlp.vocab, words=["a", "unseen", "b"]))
    assert [t.tag_ for t in doc] == ["X"] * 3
    np.testing.assert_array_equal(marginals(doc)[1], np.ones((3, 1), dtype=np.float32))
    assert fresh_component("tag").from_bytes(crf.to_bytes()).labels == ("X",)
    # NER where nothing is an entity: the only label is O
    nlp2, crf2 = make_nlp()
    losses = train(nlp2, ner_examples(nlp2, [("nothing to see", []), ("at all", [])]), rounds=2)
    assert crf2.labels == ("O",) and np.all(np.isfinite(losses))
    doc = nlp2("nothing at Paris")
    assert doc.ents == () and len(doc.spans["treecrf"].attrs["scores"]) == 0
    assert_normalised(doc)


def test_fifty_five_tag_labels():
    nlp, crf = make_nlp(target="tag", max_leaves=4)
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(55)]
    order = np.concatenate([rng.permutation(55) for _ in range(4)])
    sentences = [[(words[i], f"T{i}") for i in order[j:j + 10]] for j in range(0, len(order), 10)]
    examples = tag_examples(nlp, sentences)
    losses = train(nlp, examples, rounds=3)
    assert len(crf.labels) == 55 and losses[-1] < losses[0]
    assert nlp.evaluate(examples)["tag_acc"] == 1.0
    doc = nlp(Doc(nlp.vocab, words=words + ["never", "seen"]))
    assert len(doc) == 57 and all(t.tag_ in crf.labels for t in doc)
    assert_normalised(doc)
    crf2 = fresh_component("tag", **{**SMALL, "max_leaves": 4}).from_bytes(crf.to_bytes())
    assert crf2.to_bytes() == crf.to_bytes()


@pytest.mark.parametrize("config,name", [
    ({"max_leaves": 1}, "max_leaves"),
    ({"max_leaves": 0}, "max_leaves"),
    ({"shrinkage": -0.5}, "shrinkage"),
    ({"learning_rate": 0.0}, "learning_rate"),
    ({"subsample": 0.0}, "subsample"),
    ({"subsample": 1.5}, "subsample"),
    ({"colsample": 0.0}, "colsample"),
    ({"trim": -1.0}, "trim"),
    ({"label_splits": "sometimes"}, "label_splits"),
    ({"n_threads": -1}, "n_threads"),
    ({"min_samples_leaf": -1.0}, "min_samples_leaf"),
    ({"target": "lemma"}, "target 'lemma'"),
    ({"target": "spans", "spans_key": ""}, "spans_key"),
    ({"target": "token_attr"}, "token_attr"),
    ({"decode": "beam"}, "decode"),
    ({"features": {**WINDOW, "window": -1}}, "window"),
    ({"features": {**WINDOW, "prefix": -2}}, "prefix"),
    ({"features": {**WINDOW, "attrs": ["nonsense_"]}}, "nonsense_"),
])
def test_invalid_settings_are_refused_at_add_pipe_naming_the_setting(config, name):
    nlp = spacy.blank(LANG)
    with pytest.raises(ValueError, match=name):
        nlp.add_pipe("treecrf", config=component_config(config))
    assert "treecrf" not in nlp.pipe_names


def test_missing_lexicon_file_is_refused_at_initialize_naming_the_file(tmp_path):
    missing = tmp_path / "no_such_cities.txt"
    nlp, _ = make_nlp(features={**WINDOW, "lexicons": {"cities": str(missing)}})  # not read yet
    with pytest.raises(ValueError, match="no_such_cities.txt"):
        nlp.initialize(lambda: ner_examples(nlp))
    nlp2, crf2 = make_nlp()
    with pytest.raises(ValueError, match="no_such_cities.txt"):
        crf2.initialize(lambda: ner_examples(nlp2), nlp=nlp2, lexicons={"cities": str(missing)})
    # with the file present the same settings work, and the entries travel inside the model
    missing.write_text("Paris\nNew York\n", encoding="utf8")
    nlp3, crf3 = make_nlp(features={**WINDOW, "lexicons": {"cities": str(missing)}})
    train(nlp3, ner_examples(nlp3), rounds=2)
    assert any(name.startswith("lex=cities") for name in crf3.featurizer.feature_names())
    data = crf3.to_bytes()
    missing.unlink()  # the same config loads the model without the file: the entries are inside
    same = fresh_component(**SMALL, features={**WINDOW, "lexicons": {"cities": str(missing)}})
    assert same.from_bytes(data).to_bytes() == data


def test_empty_sequences_anywhere_train_the_estimator_and_the_component():
    """An empty sequence last (or first, or between) used to raise IndexError in the trainer's per-sequence
    count of unknown labels."""
    for X, y, want in (([[{"w": "a"}, {"w": "b"}], []], [["A", "B"], []], [["A", "B"], []]),
                       ([[], [{"w": "a"}, {"w": "b"}], [], []], [[], ["A", None], [], []], [[], ["A", "A"], [], []])):
        model = paper_crf(n_rounds=2, max_leaves=2).fit(X, y)
        assert model.predict(X) == want
    nlp, crf = make_nlp(target="tag")
    examples = tag_examples(nlp, [[("a", "X"), ("b", "Y")], [], [("b", "Y")], []])
    train(nlp, examples, rounds=2)
    assert [t.tag_ for t in nlp(Doc(nlp.vocab, words=["a", "b"]))] == ["X", "Y"]



def test_numbers_beyond_a_floats_range_and_numpy_bools_are_read_as_the_docs_say():
    """An int too large for a float is the infinity on its side (not an OverflowError from inside), in training
    and at prediction, on the general path and the fast one; numpy's bools are bools."""
    from spacy_treecrf import TreeCRF
    model = TreeCRF(n_rounds=2, max_leaves=2, early_stopping=False).fit([[{"a": 10 ** 400}, {"a": 1.0}]] * 3,
                                                                         [["A", "B"]] * 3)
    assert model.predict([[{"a": -10 ** 400}, {"a": 10 ** 500}]]) == [["B", "A"]]
    assert model.predict([[{"a": -10 ** 400, "b": None}, {"a": 10 ** 500}]]) == [["B", "A"]]  # (general path)
    flags = TreeCRF(n_rounds=2, max_leaves=2, early_stopping=False).fit(
        [[{"f": np.True_}, {"f": np.False_}]] * 3, [["A", "B"]] * 3)
    assert flags.predict([[{"f": np.False_}, {"f": True}]]) == [["B", "A"]]


def test_an_extension_the_features_read_that_is_not_registered_is_named():
    nlp = spacy.blank(LANG)
    nlp.add_pipe("treecrf", config={"features": {"numeric_attrs": ["_.never_registered_anywhere"]}})
    examples = [Example.from_dict(Doc(nlp.vocab, words=["a", "B"]), {"entities": ["O", "U-X"]})]
    with pytest.raises(ValueError, match=r"E211.*'_.never_registered_anywhere'.*not registered"):
        nlp.initialize(lambda: examples)


def test_training_data_without_any_gold_of_the_target_is_refused_at_initialize():
    """Labels given, but no example holds gold of the target: training would reach loss 0 and tag every token
    alike, so initialize says so (E219)."""
    nlp = spacy.blank(LANG)
    crf = nlp.add_pipe("treecrf", config=component_config({"max_leaves": 4}))
    examples = [Example(Doc(nlp.vocab, words=["a", "B"]), Doc(nlp.vocab, words=["a", "B"]))]
    with pytest.raises(ValueError, match=r"E219.*none of the 1 training examples.*'ner'"):
        crf.initialize(lambda: examples, nlp=nlp, labels=["B-X", "I-X", "O"])


def test_more_labels_than_memory_allows_are_refused_before_any_label_sized_array():
    """300,000 distinct labels: a (K + 1) x K transition mask alone would be 84 GiB. Refused at once with E222
    by the estimator and the component, instead of numpy's MemoryError (or minutes of swapping) later."""
    from spacy_treecrf import TreeCRF
    n = 300_000
    with pytest.raises(ValueError, match=r"E222.*TreeCRF.fit: 300,000 labels over 300,000 positions"):
        TreeCRF(n_rounds=1).fit([["a"] * n], [[f"L{i}" for i in range(n)]])
    nlp = spacy.blank(LANG)
    crf = nlp.add_pipe("treecrf", config=component_config({"target": "tag"}))
    words = [f"w{i}" for i in range(n)]
    examples = [Example.from_dict(Doc(nlp.vocab, words=words), {"tags": [f"T{i}" for i in range(n)]})]
    with pytest.raises(ValueError, match=r"E222.*Component 'treecrf': 300,000 labels"):
        crf.initialize(lambda: examples, nlp=nlp)
