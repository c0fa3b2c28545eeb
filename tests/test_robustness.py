"""Robustness of the treecrf component: odd documents, odd labels, bad settings, damaged or hostile model
files, determinism, concurrent use, interrupted training, and property-based round trips."""
import builtins
import copy
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest
import spacy
import srsly
from hypothesis import HealthCheck, given, settings, strategies as st
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example
from srsly.msgpack.ext import Timestamp

from conftest import component_config
import spacy_treecrf.pipe  # noqa: F401  (registers the factory)
from spacy_treecrf import TreeCRF
from spacy_treecrf.engine import serialize
from spacy_treecrf.pipe import bio_spans

from test_pipe import NER_DATA  # the same tiny NER corpus as the component tests
SMALL = {"max_leaves": 6, "shrinkage": 1.0}
LANG = "xx"  # spaCy's multi-language tokenizer: the same splits here, and three times faster to build


def make_nlp(**config):
    nlp = spacy.blank(LANG)
    crf = nlp.add_pipe("treecrf", config=component_config({**SMALL, **config}))
    return nlp, crf


def ner_examples(nlp, data=NER_DATA):
    return [Example.from_dict(nlp.make_doc(text), {"entities": ents}) for text, ents in data]


def tag_examples(nlp, sentences):
    """sentences: lists of (word, tag); an empty tag is missing gold."""
    return [Example.from_dict(Doc(nlp.vocab, words=[w for w, _ in s]), {"tags": [t for _, t in s]})
            for s in sentences]


def train(nlp, examples, rounds=4, **init):
    if init:
        nlp.get_pipe("treecrf").initialize(lambda: examples, nlp=nlp, **init)
    else:
        nlp.initialize(lambda: examples)
    losses = [nlp.update(examples, losses={})["treecrf"] for _ in range(rounds)]
    return losses


def marginals(doc, name="treecrf"):
    labels, probs = doc.user_data[("treecrf", "marginals")][name]
    return labels, probs


def assert_normalised(doc, tol=1e-4):
    _, probs = marginals(doc)
    assert probs.shape[0] == len(doc)
    assert np.all(np.isfinite(probs))
    assert np.all(probs >= -1e-6)
    if len(doc):
        assert np.abs(probs.sum(axis=1) - 1.0).max() < tol


def raw_labels(crf, docs):
    scores = crf.predict(docs)
    labels = crf.labels
    starts = scores["seq_starts"]
    return ([[labels[k] for k in scores["ids"][a:b]] for a, b in zip(starts[:-1], starts[1:])],
            scores["gamma"])


def assert_valid_bio(tags):
    prev = "O"
    for i, tag in enumerate(tags):
        assert tag == "O" or tag[:2] in ("B-", "I-"), tags
        if tag.startswith("I-"):
            assert i > 0, f"I- at the start: {tags}"
            assert prev[2:] == tag[2:] and prev != "O", f"invalid transition {prev} -> {tag}: {tags}"
        prev = tag


@pytest.fixture(scope="module")
def ner_model():
    nlp, crf = make_nlp()
    train(nlp, ner_examples(nlp), rounds=8)
    return nlp, crf.to_bytes()


def fresh_component(target="ner", **config):
    return spacy.blank(LANG).add_pipe("treecrf", config=component_config({"target": target, **config}))


# ------------------------------------------------------------------------------------------------ documents

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
    assert fresh_component("tag").from_bytes(data).to_bytes() == data


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


@pytest.fixture(scope="module")
def sharp_model():
    """A small model with very large potentials, the hardest case for overflow: trained, then every leaf value
    multiplied by 100 (as a long-trained, unshrunk model would have)."""
    nlp, crf = make_nlp(max_leaves=4, shrinkage=0.0)
    train(nlp, ner_examples(nlp), rounds=4)
    crf.ensemble.arrays()
    crf.ensemble.nodes = crf.ensemble.nodes._replace(value=crf.ensemble.nodes.value * 100.0)
    phi = crf.ensemble.potentials(*crf.featurizer([nlp.make_doc("Alice lives in Paris .")])[:2])
    assert np.abs(phi).max() > 200  # exp() of these overflows float32 without the per-position scaling
    return nlp


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


# ------------------------------------------------------------------------------------------------ labels

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
    y = crf._trainer.y
    labels = crf.labels
    # the sorted-by-content trainer holds the sentence somewhere: find it by its gold
    rows = [y[a:b].tolist() for a, b in zip(crf._trainer.seq_starts[:-1], crf._trainer.seq_starts[1:])]
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
    y, starts = crf._trainer.y, crf._trainer.seq_starts
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
    assert doc.ents == () and doc.spans["treecrf"].attrs["scores"] == []
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
    crf2 = fresh_component("tag").from_bytes(crf.to_bytes())
    assert crf2.to_bytes() == crf.to_bytes()


# ------------------------------------------------------------------------------------------------ config

WINDOW = {"@misc": "spacy_treecrf.window_features.v1"}


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
    missing.unlink()
    assert fresh_component().from_bytes(data).to_bytes() == data


# ------------------------------------------------------------------------------------------------ model files

def _arr(d):
    return np.frombuffer(d["data"], dtype=np.dtype(d["dtype"]).newbyteorder("<")).reshape(d["shape"]).copy()


def _put(d, a):
    d.update(serialize._encode(np.ascontiguousarray(a)))


def _reencode(msg):
    return srsly.msgpack_dumps(msg)


_UNLOADED = {}


def assert_refused(data, match=None, target="ner"):
    """The bytes are refused with a ValueError, and the component is left as it was (never initialized)."""
    if target not in _UNLOADED:
        _UNLOADED[target] = fresh_component(target)
    comp = _UNLOADED[target]
    try:
        with pytest.raises(ValueError, match=match):
            comp.from_bytes(data)
        assert comp.ensemble is None and not comp.labels  # nothing half-loaded
    finally:
        if comp.ensemble is not None or comp.labels:
            del _UNLOADED[target]  # a failure here must not spill into the next case


@pytest.fixture(scope="module")
def model_msg(ner_model):
    _, data = ner_model
    return srsly.msgpack_loads(data)


def test_truncated_model_bytes(ner_model, tmp_path):
    _, data = ner_model
    cuts = sorted(set(range(0, 40)) | set(range(len(data) - 40, len(data)))
                  | set(np.linspace(0, len(data) - 1, 60).astype(int).tolist()))
    for cut in cuts:
        assert_refused(data[:cut])
    # from disk, the message names the file
    nlp, crf = make_nlp()
    train(nlp, ner_examples(nlp), rounds=2)
    nlp.to_disk(tmp_path / "model")
    path = tmp_path / "model" / "treecrf" / "model.msgpack"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="model.msgpack"):
        spacy.load(tmp_path / "model")


def test_random_bytes_and_bit_flips(ner_model):
    _, data = ner_model
    rng = np.random.default_rng(0)
    for n in [1, 2, 7, 100, len(data)]:
        for _ in range(5):
            assert_refused(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
    assert_refused(b"")
    assert_refused(srsly.msgpack_dumps([1, 2, 3]), match="not a spacy_treecrf model")
    # single bit flips anywhere: either refused with a ValueError, or a model that still predicts
    nlp = spacy.blank(LANG)
    comp = nlp.add_pipe("treecrf")
    refused = 0
    for pos in rng.choice(len(data), 250, replace=False):
        flipped = bytearray(data)
        flipped[pos] ^= 1 << int(rng.integers(0, 8))
        try:
            comp.from_bytes(bytes(flipped))
        except ValueError:
            refused += 1
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # absurd leaf values may overflow: no crash is the claim
            doc = nlp("Alice lives in Paris .")
        assert len(doc) == 5
    assert refused > 0


def test_model_from_another_target_or_kind(ner_model):
    _, data = ner_model
    assert_refused(data, match="target 'ner'", target="tag")
    est = TreeCRF(n_rounds=1, max_leaves=2).fit([[{"w": "a"}, {"w": "b"}]], [["X", "Y"]])
    assert_refused(est.to_bytes(), match="'TreeCRF', expected 'treecrf'")
    with pytest.raises(ValueError, match="'treecrf', expected 'TreeCRF'"):
        TreeCRF().from_bytes(data)


def test_model_from_a_newer_format_version(ner_model, model_msg, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(serialize, "FORMAT_VERSION", serialize.FORMAT_VERSION + 1)
        newer = serialize.dumps("treecrf", model_msg["payload"])
    assert_refused(newer, match=f"format version {serialize.FORMAT_VERSION + 1}.*upgrade")
    msg = copy.deepcopy(model_msg)
    msg["version"] = "1"
    assert_refused(_reencode(msg), match="format version")
    msg = copy.deepcopy(model_msg)
    msg["payload"]["features"]["version"] = 99
    assert_refused(_reencode(msg), match="state version 99")


def _mutated(msg, path, fn):
    msg = copy.deepcopy(msg)
    node = msg
    for key in path[:-1]:
        node = node[key]
    fn(node, path[-1])
    return _reencode(msg)


def _set_array(name, make, where="ensemble"):
    def fn(node, key):
        arrays = {k: _arr(v) for k, v in node.items()}
        _put(node[key], make(arrays))
    return ["payload", where, name], fn


DTYPE_SHAPE_CASES = {
    "value float32": (_set_array("value", lambda a: a["value"].astype(np.float32)), "dtype"),
    "kind int32": (_set_array("kind", lambda a: a["kind"].astype(np.int32)), "dtype"),
    "roots int32": (_set_array("roots", lambda a: a["roots"].astype(np.int32)), "dtype"),
    "states extra column": (_set_array("states", lambda a: np.ones((len(a["kind"]), a["states"].shape[1] + 1), bool)),
                            "shape"),
    "states 1-d": (_set_array("states", lambda a: a["states"][:, 0].copy()), "shape"),
    "yes too short": (_set_array("yes", lambda a: a["yes"][:-1]), "shape"),
    "labels too long": (_set_array("labels", lambda a: np.append(a["labels"], 0).astype(np.int32)), "shape"),
    "value as a list": ((["payload", "ensemble", "value"], lambda n, k: n.__setitem__(k, [0.0])), "ndarray"),
    "allowed wrong shape": ((["payload", "allowed"], lambda n, k: _put(n[k], np.ones((2, 2), bool))), "shape"),
    "allowed wrong dtype": ((["payload", "allowed"], lambda n, k: _put(n[k], _arr(n[k]).astype(np.uint8))), "dtype"),
    "array byte count": ((["payload", "ensemble", "count", "data"], lambda n, k: n.__setitem__(k, n[k][:-3])),
                         "bytes"),
    "negative shape": ((["payload", "ensemble", "count", "shape"], lambda n, k: n.__setitem__(k, [-1])),
                       "malformed"),
    "no ensemble": ((["payload", "ensemble"], lambda n, k: n.pop(k)), "ensemble"),
    "labels not strings": ((["payload", "cfg", "labels"], lambda n, k: n.__setitem__(k, [1, 2, 3, 4])), "label"),
    "decode unknown": ((["payload", "cfg", "decode"], lambda n, k: n.__setitem__(k, "beam")), "decode"),
    "store_scores not bool": ((["payload", "cfg", "store_scores"], lambda n, k: n.__setitem__(k, "yes")),
                              "store_scores"),
    "max_leaves not a number": ((["payload", "params", "max_leaves"], lambda n, k: n.__setitem__(k, "many")),
                                "settings"),
    "feature column out of window": ((["payload", "features", "column_offsets"],
                                      lambda n, k: n.__setitem__(k, [99] + n[k][1:])), "window"),
}


@pytest.mark.parametrize("case", sorted(DTYPE_SHAPE_CASES))
def test_model_with_wrong_types_dtypes_or_shapes(model_msg, case):
    (path, fn), match = DTYPE_SHAPE_CASES[case]
    assert_refused(_mutated(model_msg, path, fn), match=match)


def _tree_case(mutate):
    """Mutate the ensemble arrays (a dict of numpy arrays, plus the model's feature and label counts) in place."""
    def fn(node, key):
        arrays = {k: _arr(v) for k, v in node[key].items()}
        counts = {"n_features": len(node["features"]["column_atoms"]), "n_labels": len(node["cfg"]["labels"])}
        mutate({**arrays, **counts})
        for k, v in arrays.items():
            _put(node[key][k], v)
    return ["payload", "ensemble"], fn


def _first_inner(a, kind=None):
    return int(np.flatnonzero(a["kind"] != 0 if kind is None else a["kind"] == kind)[0])


def _share_a_child(a):
    """Give a node of the first tree a second parent (a DAG, not a tree): the root's 'no' child becomes the
    'no' child of the root's 'yes' child as well. Every index stays in range and points forwards."""
    root_yes, root_no = int(a["yes"][0]), int(a["no"][0])
    assert a["kind"][0] != 0 and a["kind"][root_yes] != 0 and root_no > root_yes
    a["no"][root_yes] = root_no


TREE_CASES = {
    "child past its tree": (lambda a: a["yes"].__setitem__(_first_inner(a), a["roots"][1]), "'yes' child"),
    "child far out of range": (lambda a: a["no"].__setitem__(_first_inner(a), 2 ** 31 - 1), "'no' child"),
    "child pointing backwards": (lambda a: a["yes"].__setitem__(_first_inner(a), 0), "'yes' child"),
    "negative child": (lambda a: a["no"].__setitem__(_first_inner(a), -5), "'no' child"),
    "leaf with children": (lambda a: a["yes"].__setitem__(int(np.flatnonzero(a["kind"] == 0)[-1]), 2 ** 20),
                           "leaf has children"),
    "shared child": (_share_a_child, "exactly one path"),
    "feature id = n_features": (lambda a: a["feature"].__setitem__(_first_inner(a, 1), a["n_features"]),
                                "feature id"),
    "feature id far out": (lambda a: a["feature"].__setitem__(_first_inner(a, 1), 2 ** 31 - 1), "feature id"),
    "negative feature id": (lambda a: a["feature"].__setitem__(_first_inner(a, 1), -1), "feature id"),
    "label id = K": (lambda a: a["labels"].__setitem__(0, a["n_labels"]), "label out of range"),
    "negative label id": (lambda a: a["labels"].__setitem__(-1, -1), "label out of range"),
    "unknown node kind": (lambda a: a["kind"].__setitem__(0, 7), "node kind"),
    "roots not from 0": (lambda a: a["roots"].__setitem__(0, 1), "tree offsets"),
    "roots past the nodes": (lambda a: a["roots"].__setitem__(-1, a["roots"][-1] + 5), "tree offsets"),
    "empty tree": (lambda a: a["roots"].__setitem__(1, 0), "tree offsets"),
    "infinite leaf value": (lambda a: a["value"].__setitem__(int(np.flatnonzero(a["kind"] == 0)[0]), np.inf),
                            "non-finite"),
    "NaN leaf value": (lambda a: a["value"].__setitem__(int(np.flatnonzero(a["kind"] == 0)[0]), np.nan),
                       "non-finite"),
}


@pytest.mark.parametrize("case", sorted(TREE_CASES))
def test_model_with_tree_indices_out_of_range(model_msg, case):
    mutate, match = TREE_CASES[case]
    assert_refused(_mutated(model_msg, *_tree_case(mutate)), match=match)


def test_deep_shared_subtree_is_refused_not_run(model_msg):
    """A chain of state splits reached by a long and by a short path: before the loader checked that every
    node has one parent, the traversal stack was sized by the short path and the kernel wrote past it."""
    S = len(model_msg["payload"]["cfg"]["labels"]) + 1
    chain, tail = 150, 150
    X, J = chain + 1, chain + 2
    n_inner = J + tail
    yes, no = [], []
    next_leaf = iter(range(n_inner, 10 ** 6))
    for i in range(n_inner):
        if i == 0:
            yes.append(1), no.append(X)
        elif i in (chain, X):
            yes.append(J), no.append(next(next_leaf))
        elif i == n_inner - 1:
            yes.append(next(next_leaf)), no.append(next(next_leaf))
        else:
            yes.append(i + 1), no.append(next(next_leaf))
    n = next(next_leaf)
    arrays = {"kind": np.array([2] * n_inner + [0] * (n - n_inner), np.int8),
              "feature": np.full(n, -1, np.int32), "yes": np.array(yes + [-1] * (n - n_inner), np.int32),
              "no": np.array(no + [-1] * (n - n_inner), np.int32), "value": np.full(n, 0.01),
              "count": np.ones(n), "states": np.ones((n, S), bool), "roots": np.array([0, n], np.int64),
              "labels": np.array([0], np.int32)}
    msg = copy.deepcopy(model_msg)
    msg["payload"]["ensemble"] = serialize._encode(arrays)
    assert_refused(_reencode(msg), match="exactly one path")


_PWNED = "_treecrf_test_unpickled"


class _Evil:
    def __reduce__(self):
        return exec, (f"import builtins; builtins.{_PWNED} = True",)


def test_loader_never_unpickles_or_interprets_extensions(model_msg, monkeypatch):
    def no_pickle(*args, **kwargs):
        raise AssertionError("the model loader must never unpickle")

    monkeypatch.setattr(pickle, "loads", no_pickle)
    monkeypatch.setattr(pickle, "load", no_pickle)
    evil = pickle.dumps(_Evil())
    assert fresh_component().from_bytes(_reencode(model_msg)).labels  # the real thing loads without pickle
    n = len(_arr(model_msg["payload"]["ensemble"]["value"]))
    payloads = {
        "ext type in cfg": (["payload", "cfg", "labels"], srsly.msgpack.ExtType(1, evil), "ExtType"),
        "ext type as array": (["payload", "ensemble", "value"], srsly.msgpack.ExtType(42, evil), "ExtType"),
        "ext type in an unused key": (["payload", "cfg", "extra"], srsly.msgpack.ExtType(0, evil), "ExtType"),
        "timestamp ext type": (["payload", "params", "n_threads"], Timestamp(1, 0), "Timestamp"),
        "object dtype": (["payload", "ensemble", "value"],
                         {"__ndarray__": True, "dtype": "object", "shape": [1], "data": evil}, "malformed array"),
        "numpy '|O' dtype": (["payload", "ensemble", "value"],
                             {"__ndarray__": True, "dtype": "|O", "shape": [n], "data": b"\0" * 8 * n},
                             "malformed array"),
        "srsly numpy encoding, object dtype": (["payload", "ensemble", "value"],
                                               {b"nd": True, b"type": "|O", b"kind": b"", b"shape": [1],
                                                b"data": evil}, "ndarray"),
        "srsly numpy encoding, float dtype": (["payload", "ensemble", "value"],
                                              {b"nd": True, b"type": "<f8", b"kind": b"", b"shape": [n],
                                               b"data": np.zeros(n).tobytes()}, "ndarray"),
        "srsly complex encoding": (["payload", "cfg", "rounds"], {b"complex": True, b"data": "1j"}, "rounds"),
    }
    for name, (path, value, match) in payloads.items():
        data = _mutated(model_msg, path, lambda node, key: node.__setitem__(key, value))
        assert_refused(data, match=match)
    ext_envelope = srsly.msgpack_dumps(srsly.msgpack.ExtType(1, evil))
    assert_refused(ext_envelope)
    assert_refused(evil)
    assert_refused(pickle.dumps({"format": "spacy_treecrf"}))
    assert not hasattr(builtins, _PWNED)


def test_refused_model_leaves_a_trained_component_unchanged(ner_model, model_msg):
    nlp, data = ner_model
    nlp2, crf2 = make_nlp()
    crf2.from_bytes(data)
    before = [(e.start, e.end, e.label_) for e in nlp2("Bob lives in Rome .").ents]
    # the features of another model but a broken ensemble: nothing may be replaced
    other_nlp, other = make_nlp(target="ner")
    train(other_nlp, ner_examples(other_nlp, [("x y z", [(0, 1, "PER")])]), rounds=1)
    msg = srsly.msgpack_loads(other.to_bytes())
    msg["payload"]["ensemble"]["labels"] = {"__ndarray__": True, "dtype": "float64", "shape": [0], "data": b""}
    with pytest.raises(ValueError):
        crf2.from_bytes(_reencode(msg))
    assert crf2.to_bytes() == data
    assert [(e.start, e.end, e.label_) for e in nlp2("Bob lives in Rome .").ents] == before


# ------------------------------------------------------------------------------------------------ determinism

DETERMINISM_SCRIPT = textwrap.dedent("""
    import hashlib, sys
    import numpy as np, spacy
    from spacy.tokens import Doc
    from spacy.training import Example
    import spacy_treecrf.pipe

    def model_bytes(seed, threads):
        nlp = spacy.blank("xx")
        crf = nlp.add_pipe("treecrf", config={"target": "tag", "booster": {
            "max_leaves": 6, "shrinkage": 1.0, "subsample": 0.7, "random_state": seed, "n_threads": threads}})
        rng = np.random.default_rng(1)
        words = ["w%d" % i for i in range(40)] + ["Ünï", "東京", "😀"]
        examples = []
        for _ in range(1100):  # > 20,000 positions: the threaded kernels split the work
            ws = [words[i] for i in rng.integers(0, len(words), 20)]
            ref = Doc(nlp.vocab, words=ws, tags=["T%d" % (len(w) % 3) for w in ws])
            examples.append(Example(Doc(nlp.vocab, words=ws), ref))
        nlp.initialize(lambda: examples)
        for _ in range(2):
            nlp.update(examples)
        return crf.to_bytes()

    if __name__ == "__main__":
        print(hashlib.sha256(model_bytes(int(sys.argv[1]), int(sys.argv[2]))).hexdigest())
""")


@pytest.fixture(scope="module")
def determinism(tmp_path_factory):
    """(script path, model_bytes function, the bytes of seed 0 with two threads)."""
    path = tmp_path_factory.mktemp("det") / "det_model.py"
    path.write_text(DETERMINISM_SCRIPT, encoding="utf8")
    sys.path.insert(0, str(path.parent))
    try:
        import det_model
    finally:
        sys.path.remove(str(path.parent))
    return path, det_model.model_bytes, det_model.model_bytes(0, 2)


def _trees(data):
    return fresh_component("tag").from_bytes(data).ensemble.arrays()


def test_same_seed_same_bytes_in_process_with_two_threads(determinism):
    _, model_bytes, reference = determinism
    assert model_bytes(0, 2) == reference
    # the thread count is a setting stored in the model; the trees themselves do not depend on it
    one, two = _trees(model_bytes(0, 1)), _trees(reference)
    for name in one:
        np.testing.assert_array_equal(one[name], two[name])
    # subsample < 1: another seed draws other positions, so other trees (not just another stored seed)
    other = _trees(model_bytes(1, 2))
    assert any(other[name].shape != two[name].shape or not np.array_equal(other[name], two[name])
               for name in ("feature", "value"))


def test_same_seed_same_bytes_across_processes(determinism):
    import hashlib
    path, _, reference = determinism
    procs = [subprocess.Popen([sys.executable, str(path), "0", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2")]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert [out.strip() for out, _ in outs] == [hashlib.sha256(reference).hexdigest()] * 2


# ------------------------------------------------------------------------------------------------ concurrency

def test_predicting_from_two_threads_equals_sequential(sharp_model):
    nlp = sharp_model
    rng = np.random.default_rng(0)
    vocab = ["Alice", "lives", "in", "Paris", ".", "Bob", "Rome", "New", "York", "met", "東京", "😀"]
    texts = [[[vocab[i] for i in rng.integers(0, len(vocab), int(n))] for n in rng.integers(1, 3000, 6)]
             for _ in range(2)]
    texts[0].append(["Alice"] * 6000)  # large enough for the chunked, GIL-free kernels

    def run(words_list):
        docs = [nlp(Doc(nlp.vocab, words=w)) for w in words_list]
        return [([(e.start, e.end, e.label_) for e in d.ents], marginals(d)[1], d.spans["treecrf"].attrs["scores"])
                for d in docs]

    sequential = [run(t) for t in texts]
    for _ in range(3):
        results = [None, None]
        barrier = threading.Barrier(2)

        def work(i):
            barrier.wait()
            results[i] = run(texts[i])

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for got, want in zip(results, sequential):
            assert len(got) == len(want)
            for (ents_a, probs_a, scores_a), (ents_b, probs_b, scores_b) in zip(got, want):
                assert ents_a == ents_b and scores_a == scores_b
                np.testing.assert_array_equal(probs_a, probs_b)


# ------------------------------------------------------------------------------------------------ spacy train

TRAIN_CONFIG = """
[paths]
train = null
dev = null

[system]
seed = 0
gpu_allocator = null

[nlp]
lang = "xx"
pipeline = ["treecrf"]
batch_size = 100

[components]

[components.treecrf]
factory = "treecrf"

[components.treecrf.booster]
max_leaves = 4
shrinkage = 1.0
n_threads = 1

[corpora]

[corpora.train]
@readers = "spacy.Corpus.v1"
path = ${paths.train}

[corpora.dev]
@readers = "spacy.Corpus.v1"
path = ${paths.dev}

[training]
seed = ${system.seed}
gpu_allocator = ${system.gpu_allocator}
dropout = 0.0
accumulate_gradient = 1
frozen_components = []
annotating_components = []
before_to_disk = null
max_epochs = 0
max_steps = 6
eval_frequency = 2
patience = 0
dev_corpus = "corpora.dev"
train_corpus = "corpora.train"

[training.batcher]
@batchers = "spacy.batch_by_sequence.v1"
size = 1000

[training.logger]
@loggers = "spacy.ConsoleLogger.v1"
progress_bar = false

[training.before_update]
@callbacks = "treecrf_tests.interrupt_at.v1"
step = 0

[initialize]
"""


class SimulatedInterruption(RuntimeError):
    pass


@spacy.registry.callbacks("treecrf_tests.interrupt_at.v1")
def interrupt_at(step: int):
    def before_update(nlp, info):
        if step and info["step"] >= step:
            raise SimulatedInterruption(f"killed at step {info['step']}")
    return before_update


def test_interrupted_spacy_train_leaves_loadable_model_best_and_model_last(tmp_path):
    from spacy.cli.train import train as spacy_train

    nlp = spacy.blank(LANG)
    for name, data in (("train", NER_DATA), ("dev", NER_DATA[:3])):
        DocBin(docs=[eg.reference for eg in ner_examples(nlp, data)]).to_disk(tmp_path / f"{name}.spacy")
    (tmp_path / "config.cfg").write_text(TRAIN_CONFIG, encoding="utf8")
    overrides = {"paths.train": str(tmp_path / "train.spacy"), "paths.dev": str(tmp_path / "dev.spacy"),
                 "training.before_update.step": 5}
    with pytest.raises(SimulatedInterruption):
        spacy_train(tmp_path / "config.cfg", tmp_path / "out", overrides=overrides)
    # steps 0..4 ran (one boosting round each); dev evaluations after steps 0, 2 and 4
    rounds = {}
    for which in ("model-best", "model-last"):
        loaded = spacy.load(tmp_path / "out" / which)
        crf = loaded.get_pipe("treecrf")
        rounds[which] = crf.cfg["rounds"]
        doc = loaded("Alice lives in Paris .")
        assert_normalised(doc)
        assert_valid_bio(raw_labels(crf, [doc])[0][0])
        assert loaded.evaluate(ner_examples(loaded, NER_DATA[:3]))["ents_f"] > 0.5
    assert rounds["model-last"] == 5 and rounds["model-best"] in (1, 3, 5)


# ------------------------------------------------------------------------------------------------ properties

WORDS = ["the", "dog", "Paris", "runs", "A", "b", "😀", "東京", "42", "-", " ", "Über"]


@st.composite
def tasks(draw):
    target = draw(st.sampled_from(["tag", "ner"]))
    n_docs = draw(st.integers(1, 4))
    docs = []
    for _ in range(n_docs):
        n = draw(st.integers(1, 7))
        words = draw(st.lists(st.sampled_from(WORDS), min_size=n, max_size=n))
        if target == "tag":
            gold = draw(st.lists(st.sampled_from(["N", "V", "D"]), min_size=n, max_size=n))
        else:  # random non-overlapping spans as BIO
            gold, i = [], 0
            while i < n:
                if draw(st.booleans()):
                    length = draw(st.integers(1, n - i))
                    kind = draw(st.sampled_from(["X", "Y"]))
                    gold += ["B-" + kind] + ["I-" + kind] * (length - 1)
                    i += length
                else:
                    gold.append("O")
                    i += 1
        docs.append((words, gold))
    config = {"target": target, "max_leaves": draw(st.integers(2, 6)),
              "shrinkage": draw(st.sampled_from([0.0, 0.5, 1.0, 10.0])),
              "decode": draw(st.sampled_from(["viterbi", "marginal"])),
              "features": {**WINDOW, "window": draw(st.integers(0, 2))}}
    rounds = draw(st.integers(1, 3))
    probe = draw(st.lists(st.sampled_from(WORDS + ["unseen"]), min_size=1, max_size=6))
    return docs, config, rounds, probe


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tasks())
def test_property_train_save_load_predict(task):
    docs, config, rounds, probe = task
    nlp = spacy.blank(LANG)
    crf = nlp.add_pipe("treecrf", config=component_config(config))
    target = config["target"]
    examples = []
    for words, gold in docs:
        ref = Doc(nlp.vocab, words=words)
        if target == "tag":
            for token, tag in zip(ref, gold):
                token.tag_ = tag
        else:
            ref.set_ents([Span(ref, s, e, label=k) for s, e, k in bio_spans(gold)], default="outside")
        examples.append(Example(Doc(nlp.vocab, words=words), ref))
    nlp.initialize(lambda: examples)
    for _ in range(rounds):
        nlp.update(examples)
    data = crf.to_bytes()

    nlp2 = spacy.blank(LANG)
    crf2 = nlp2.add_pipe("treecrf", config=component_config(config))
    crf2.from_bytes(data)
    assert crf2.to_bytes() == data

    inputs = [words for words, _ in docs] + [probe]
    labels = set(crf.labels)
    for words in inputs:
        a = nlp(Doc(nlp.vocab, words=words))
        b = nlp2(Doc(nlp2.vocab, words=words))
        (tags_a,), gamma_a = raw_labels(crf, [Doc(nlp.vocab, words=words)])
        (tags_b,), gamma_b = raw_labels(crf2, [Doc(nlp2.vocab, words=words)])
        assert len(tags_a) == len(words)  # one label per token
        assert set(tags_a) <= labels
        assert tags_a == tags_b
        np.testing.assert_array_equal(gamma_a, gamma_b)
        assert np.all(np.isfinite(gamma_a)) and np.abs(gamma_a.sum(axis=1) - 1.0).max() < 1e-6
        assert_normalised(a)
        if target == "tag":
            assert [t.tag_ for t in a] == [t.tag_ for t in b] == tags_a
        else:
            if config["decode"] == "viterbi":
                assert_valid_bio(tags_a)
            assert [t.ent_iob_ in ("B", "I", "O") for t in a] == [True] * len(a)
            assert [(e.start, e.end, e.label_) for e in a.ents] == [(e.start, e.end, e.label_) for e in b.ents] \
                == [(s, e, k) for s, e, k in bio_spans(tags_a)]
