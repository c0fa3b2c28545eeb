"""The package imports, trains and predicts where numba can write no cache: a read-only install (no
__pycache__ can be made next to the modules) and no writable home directory."""
import shutil
import subprocess
import sys
from pathlib import Path

import spacy_treecrf

SCRIPT = """
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    from spacy_treecrf import TreeCRF
    model = TreeCRF(n_rounds=2, max_leaves=2).fit([[{"w": "a"}, {"w": "b"}]] * 3, [["A", "B"]] * 3)
    print(model.predict([[{"w": "a"}, {"w": "b"}]]))
print(sum("W003" in str(w.message) for w in caught))
"""


def test_import_and_predict_where_numba_cannot_write_a_cache(tmp_path):
    package = tmp_path / "site" / "spacy_treecrf"
    shutil.copytree(Path(spacy_treecrf.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    for folder in (package, package / "engine"):
        (folder / "__pycache__").write_text("")  # a file where numba would make its cache directory
    home = tmp_path / "home"
    home.write_text("")  # a file: no cache directory can be made under it either
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
           "PYTHONPATH": str(tmp_path / "site")}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[['A',", "'B']]", "1"]  # the prediction, and one warning
