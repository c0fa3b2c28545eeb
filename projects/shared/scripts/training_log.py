"""A `spacy train` logger for the projects: spaCy's console output plus one JSON line per evaluation.

Load it with `spacy train ... --code ../shared/scripts/training_log.py` and select it by override:

    --training.logger.@loggers treecrf_projects.JSONLLogger.v1 --training.logger.path training/x/log.jsonl

Each line: step, epoch, score, the numeric dev scores (including spaCy's evaluation "speed" in words/s), the
losses, words seen and `wall_seconds`: float seconds since the logger was set up, evaluations included.
The benchmark subtracts the evaluation time (dev words / speed) to get training seconds per round.
"""
import json
import sys
import time
from pathlib import Path
from typing import Optional, Union

import spacy


@spacy.registry.loggers("treecrf_projects.JSONLLogger.v1")
def jsonl_logger(path: str, progress_bar: Optional[Union[bool, str]] = None):
    console = spacy.registry.loggers.get("spacy.ConsoleLogger.v3")(progress_bar=progress_bar or None)

    def setup(nlp, stdout=sys.stdout, stderr=sys.stderr):
        log_step, finalize = console(nlp, stdout, stderr)
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        stream = out.open("w", encoding="utf8")
        start = time.perf_counter()

        def step(info):
            log_step(info)
            if info is None:
                return
            scores = {k: v for k, v in (info.get("other_scores") or {}).items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool)}
            record = dict(step=info["step"], epoch=info["epoch"], score=info["score"], scores=scores,
                          losses={k: float(v) for k, v in info.get("losses", {}).items()},
                          words=info.get("words"), wall_seconds=time.perf_counter() - start)
            stream.write(json.dumps(record) + "\n")
            stream.flush()

        def finish():
            finalize()
            stream.close()

        return step, finish

    return setup
