"""`spacy train` with a treecrf: an interrupted run leaves loadable model-best and model-last."""
import dataclasses

import numpy as np
import pytest
import spacy
from spacy.tokens import DocBin

from conftest import LANG, NER_DATA, assert_normalised, assert_valid_bio, ner_examples, raw_labels
import spacy_treecrf.pipe  # noqa: F401  (registers the factory)
from spacy_treecrf.engine.booster import BoostParams


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
store_scores = true

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


def test_init_config_and_spacy_train_with_spacys_batches_fit_a_full_gradient_round_per_pass(tmp_path, capsys):
    """`spacy init config --pipeline treecrf` as it comes (spaCy's word-count batcher, a step per batch), batches
    of a few words: the model-last is a model of full-batch rounds, not a round per step: one at step 0 (on the
    corpus initialize() saw), one a pass, and one before an evaluation that would otherwise see no new round, so
    every row of the log reports a new round's loss."""
    from spacy.cli.init_config import init_config
    from spacy.cli.train import train as spacy_train
    from spacy.util import load_model_from_config

    nlp = spacy.blank("en")
    for name, data in (("train", NER_DATA), ("dev", NER_DATA[:3])):
        DocBin(docs=[eg.reference for eg in ner_examples(nlp, data)]).to_disk(tmp_path / f"{name}.spacy")
    config = init_config(lang="en", pipeline=["treecrf"], optimize="efficiency", gpu=False)
    config.to_disk(tmp_path / "config.cfg")
    component = config["components"]["treecrf"]  # only what the component reads: no key of the old place
    assert not set(component) & ({f.name for f in dataclasses.fields(BoostParams)} | {"scheduler"})
    assert "scheduler" not in component["booster"]
    booster = {"components.treecrf.booster.max_leaves": 4, "components.treecrf.booster.n_threads": 1}
    steps = 14
    overrides = {"paths.train": str(tmp_path / "train.spacy"), "paths.dev": str(tmp_path / "dev.spacy"),
                 "training.max_steps": steps, "training.eval_frequency": 5, "training.batcher.size.start": 8,
                 "training.batcher.size.stop": 8, **booster}
    spacy_train(tmp_path / "config.cfg", tmp_path / "out", overrides=overrides)
    crf = spacy.load(tmp_path / "out" / "model-last").get_pipe("treecrf")
    rounds = crf.cfg["rounds"]
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()[:1].isdigit()]
    assert [row[1] for row in rows] == ["0", "5", "10"] and all(float(row[2]) > 0 for row in rows)
    # 34 words in batches of about 8: at least 3 steps a pass; at most a round a pass and one an evaluation
    assert len(rows) <= rounds <= 1 + steps // 3 + len(rows)

    reference = load_model_from_config(spacy.util.load_config(tmp_path / "config.cfg", overrides=booster),
                                       auto_fill=True)
    examples = ner_examples(reference)
    reference.initialize(lambda: examples)
    for _ in range(rounds):
        reference.update(examples)
    ref_arrays = reference.get_pipe("treecrf").ensemble.arrays()
    for key, value in crf.ensemble.arrays().items():
        np.testing.assert_array_equal(value, ref_arrays[key], err_msg=key)


@pytest.mark.parametrize("limits,warned", [({"patience": 4}, "patience"), ({"max_steps": 5, "patience": 0}, "max_steps"),
                                           ({"patience": 6, "max_steps": 6}, None)])
def test_a_training_block_that_stops_before_a_pass_over_the_corpus_is_done_is_warned_about(limits, warned):
    """Five docs in batches of one are five steps a round: a patience or max_steps of at most five would stop
    spaCy's loop before the rounds go on. (Only where the docs of a pass are not initialize()'s: an annotating
    component changes them; otherwise a round comes with each of spaCy's evaluations.)"""
    import warnings

    from spacy.util import load_model_from_config

    overrides = {**{f"training.{key}": value for key, value in limits.items()}, "training.batcher.size": 1,
                 "training.before_update": None, "training.annotating_components": ["treecrf"]}
    config = spacy.util.load_config_from_str(TRAIN_CONFIG, overrides=overrides)
    nlp = load_model_from_config(config, auto_fill=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nlp.initialize(lambda: ner_examples(nlp))
    messages = [str(w.message) for w in caught if "W004" in str(w.message)]
    if warned is None:
        assert messages == []
    else:
        assert len(messages) == 1 and f"{warned} is {limits[warned]} steps" in messages[0] and "5 steps" in messages[0]
