"""Property-based round trips (Hypothesis): random small tasks train, save, load and predict alike."""

import numpy as np
import spacy
from hypothesis import HealthCheck, given, settings, strategies as st
from spacy.tokens import Doc, Span
from spacy.training import Example

from conftest import LANG, WINDOW, assert_normalised, assert_valid_bio, component_config, raw_labels
import spacy_treecrf.pipe  # noqa: F401  (registers the factory)
from spacy_treecrf.pipe import bio_spans


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
