"""`spacy train` with a treecrf: an interrupted run leaves loadable model-best and model-last."""

import pytest
import spacy
from spacy.tokens import DocBin

from conftest import LANG, NER_DATA, assert_normalised, assert_valid_bio, ner_examples, raw_labels
import spacy_treecrf.pipe  # noqa: F401  (registers the factory)


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
