"""The kernel compile the package's build runs (spacy_treecrf/precompile.py, called by setup.py): every path it
takes still trains and predicts with the current code (a broken step would only show as a slow first use)."""
import warnings

from spacy_treecrf import precompile


def test_precompile_trains_and_tags_every_target_and_the_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its generated data and settings must not trip a warning either
        precompile.main()
