"""sklearn-crfsuite's interface on TreeCRF, for scripts written for it: ``CRF(...)`` takes its constructor's
arguments, and TreeCRF has its per-sequence methods and its inspection attributes. With ``import spacy_treecrf as
sklearn_crfsuite`` and ``from spacy_treecrf import metrics`` such a script runs as it is.

What has no counterpart in tree boosting is said, not silently dropped: CRFsuite's optimiser settings (c1, c2,
max_iterations, ...) are refused by name in a warning (W012), and the defaults, chosen on dev data across tasks,
train the model. ``state_features_`` and ``transition_features_`` hold a linear CRF's two weight tables read off
the trees (engine/rules.single_test_weights): what each test the trees split on adds alone to each label's
potential, and each transition's potential where no test holds; a tree's effect of a test depends on the tests
that hold with it, which ``rules()`` and ``explain()`` show.
"""
from typing import Dict, List, NamedTuple, Optional, Tuple

from .engine.rules import single_test_weights

# sklearn_crfsuite.CRF's constructor arguments, which set CRFsuite's training algorithm or its files
CRFSUITE_SETTINGS = ("algorithm", "min_freq", "all_possible_states", "all_possible_transitions", "c1", "c2",
                     "max_iterations", "num_memories", "epsilon", "period", "delta", "linesearch", "max_linesearch",
                     "calibration_eta", "calibration_rate", "calibration_samples", "calibration_candidates",
                     "calibration_max_trials", "pa_type", "c", "error_sensitive", "averaging", "variance", "gamma",
                     "model_filename", "keep_tempfiles", "trainer_cls")


class TrainingLog(NamedTuple):
    """sklearn-crfsuite's ``training_log_``: ``iterations``, one dict per boosting round (``num``, ``loss``: the
    training loss before the round, ``time``: the round's seconds, and with validation data ``dev_accuracy``,
    plus the round's own report), and ``last_iteration``, the last of them (None before any)."""
    iterations: List[dict]
    last_iteration: Optional[dict]


class CRFsuiteMethods:
    """The per-sequence methods and inspection attributes of sklearn_crfsuite.CRF, on the fitted TreeCRF."""

    def predict_single(self, xseq) -> list:
        """The labels of one sequence (``predict([xseq])[0]``)."""
        return self.predict([xseq])[0]

    def predict_marginals_single(self, xseq) -> List[Dict[object, float]]:
        """Each position's label probabilities for one sequence (``predict_marginals([xseq])[0]``)."""
        return self.predict_marginals([xseq])[0]

    @property
    def training_log_(self) -> Optional[TrainingLog]:
        """The fit's rounds as sklearn-crfsuite's training log (TrainingLog); None before a fit."""
        if self.crf_ is None:
            return None
        iterations, before = [], 0.0
        for entry in self.history_:
            iterations.append({"num": entry["round"], "loss": entry["train_loss_before"],
                               "time": entry["seconds"] - before, **entry})
            before = entry["seconds"]
        return TrainingLog(iterations, iterations[-1] if iterations else None)

    @property
    def state_features_(self) -> Optional[Dict[Tuple[str, object], float]]:
        """{(test, label): weight}: what each test the trees split on adds alone to the label's potential,
        averaged over the previous labels allowed before it (module docstring); None before a fit."""
        weights = self._single_tests()
        if weights is None:
            return None
        names = self._test_names()
        return {(names[f], self.classes_[k]): float(w) for f, row in zip(weights.tests.tolist(), weights.state)
                for k, w in enumerate(row.tolist()) if w != 0.0}

    @property
    def transition_features_(self) -> Optional[Dict[Tuple[object, object], float]]:
        """{(label_from, label_to): weight}: the potential of each allowed transition where no test holds (module
        docstring); None before a fit."""
        weights = self._single_tests()
        if weights is None:
            return None
        labels = self.classes_
        return {(labels[j], labels[k]): float(weights.transition[j, k]) for j in range(len(labels))
                for k in range(len(labels)) if self.crf_.allowed[j + 1, k]}

    def _single_tests(self):
        if self.crf_ is None:
            return None
        return single_test_weights(self.crf_.ensemble, self.crf_.allowed, self.crf_.n_features, self.crf_.numeric)
