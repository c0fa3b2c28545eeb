"""The defaults themselves (chosen on dev data across tasks: benchmarks/results/defaults_candidates.md): one
source for the component and the estimator, and every input the engine takes trains with them."""
import dataclasses

import spacy
from spacy.tokens import Doc
from spacy.training import Example

import spacy_treecrf.pipe  # noqa: F401  (registers the factory)
from conftest import NER_DATA, ner_examples
from spacy_treecrf import TreeCRF
from spacy_treecrf.engine.missing import STRATEGIES
from spacy_treecrf.engine.booster import BoostParams
from spacy_treecrf.features import WindowFeaturizer, window_features


def test_the_component_and_the_estimator_share_one_set_of_boosting_defaults():
    defaults = BoostParams()
    assert (defaults.shared_trees, defaults.max_leaves, defaults.leaf_values, defaults.colsample,
            defaults.label_splits, defaults.l1) == (True, "auto", "position_mean", 0.5, "fallback", 0.1)
    assert spacy.blank("en").add_pipe("treecrf").params == defaults
    assert TreeCRF().params == defaults
    assert window_features().to_dict()["config"] == WindowFeaturizer().to_dict()["config"]


def test_the_default_component_trains_tags_and_round_trips():
    """Shared trees, the label dictionary and the word-frequency cut-off, as `nlp.add_pipe("treecrf")` gives them."""
    nlp = spacy.blank("en")
    crf = nlp.add_pipe("treecrf")
    examples = ner_examples(nlp, NER_DATA * 2)
    nlp.initialize(lambda: examples)
    for _ in range(3):
        nlp.update(examples)
    assert crf.ensemble.shared and crf.ensemble.n_trees == 3
    assert any(name.startswith("ld=") for name in crf.featurizer.feature_names())
    docs = list(nlp.pipe(text for text, _ in NER_DATA))
    loaded = spacy.blank("en").add_pipe("treecrf")
    loaded.from_bytes(crf.to_bytes())
    again = [loaded(Doc(nlp.vocab, words=[t.text for t in doc])) for doc in docs]
    assert [[(e.start, e.end, e.label_) for e in d.ents] for d in again] == [
        [(e.start, e.end, e.label_) for e in d.ents] for d in docs]


def test_the_default_estimator_takes_missing_inputs():
    """The defaults' leaves (position_mean, l1) work with every missing-value strategy, so data with None values
    trains without a setting changed."""
    X = [[{"w": "a"}, {"w": None}, {"w": "b"}], [{"w": "b"}, {"w": "a"}, {"w": None}]] * 6
    y = [["A", "B", "B"], ["B", "A", "A"]] * 6
    for strategy in STRATEGIES:
        model = TreeCRF(n_rounds=3, missing=strategy).fit(X, y)
        assert len(model.predict(X)) == len(X) and model.ensemble.shared


def test_a_default_tagger_with_target_pos_trains():
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config={"target": "pos"})
    words = ["the", "dog", "runs"]
    examples = [Example.from_dict(Doc(nlp.vocab, words=words), {"pos": ["DET", "NOUN", "VERB"]})] * 4
    nlp.initialize(lambda: examples)
    for _ in range(5):
        nlp.update(examples)
    assert [t.pos_ for t in nlp(Doc(nlp.vocab, words=words))] == ["DET", "NOUN", "VERB"]
    assert dataclasses.asdict(nlp.get_pipe("treecrf").params) == dataclasses.asdict(BoostParams())
