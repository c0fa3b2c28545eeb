"""The package where numba cannot write next to it: a read-only install (site-packages mounted read-only, as in a
container image) loads the kernels it ships instead of compiling them, and leaves nothing behind; with no kernels
shipped and no writable cache it still imports, trains and predicts, compiling into a temporary folder it removes."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from numba.core.caching import _CacheLocator

import spacy_treecrf

PACKAGE = Path(spacy_treecrf.__file__).parent

SCRIPT = """
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    from spacy_treecrf import TreeCRF
    model = TreeCRF(n_rounds=2, max_leaves=2).fit([[{"w": "a"}, {"w": "b"}]] * 3, [["A", "B"]] * 3)
    print(model.predict([[{"w": "a"}, {"w": "b"}]]))
print(sum("W003" in str(w.message) for w in caught))
"""

TRAIN = """
import sys
import warnings
import spacy
from spacy_treecrf.precompile import _example_docs
warnings.simplefilter("ignore")  # W005: NER score weights, no spacy train here
nlp = spacy.blank("en")
nlp.add_pipe("treecrf")
examples = _example_docs(nlp.vocab, seed=0)
nlp.initialize(lambda: examples)
for _ in range(3):
    nlp.update(examples)
nlp.to_disk(sys.argv[1])
spacy.load(sys.argv[1])("Anna Smith said in Paris .")  # what a load compiles, into the package's cache
"""

LOAD = """
import json, sys, time
t0 = time.perf_counter()
import spacy
nlp = spacy.load(sys.argv[1])
doc = nlp("Anna Smith said in Paris .")
seconds = time.perf_counter() - t0
from numba.core.dispatcher import Dispatcher
from spacy_treecrf.engine import kernel_cache
kernels = {id(v): v for name, module in list(sys.modules.items()) if name.startswith("spacy_treecrf")
           for v in vars(module).values() if isinstance(v, Dispatcher)}
compiled = sorted(k.py_func.__qualname__ for k in kernels.values() if sum(k.stats.cache_misses.values()))
print(json.dumps({"seconds": seconds, "ents": [e.text for e in doc.ents], "compiled": compiled,
                  "overlay": kernel_cache.OVERLAYS.root, "persists": kernel_cache.OVERLAYS.persists}))
"""


def _copy_package(site: Path, with_kernels: bool) -> Path:
    """A copy of the package under ``site``, with the compiled kernels of the checkout's __pycache__ (numba's index
    and data files, which the copy's first run extends) or with none."""
    keep = shutil.ignore_patterns("*.pyc") if with_kernels else shutil.ignore_patterns("__pycache__")
    shutil.copytree(PACKAGE, site / "spacy_treecrf", ignore=keep)
    return site / "spacy_treecrf"


def _read_only(site: Path, command: list) -> list:
    """``command`` in a new mount namespace where ``site`` is a read-only bind mount (as root, whose writes file
    modes would not stop, or as a user mapped to root there)."""
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
    return ["unshare", "--mount", "--map-root-user", "sh", "-c", script, "sh", str(site)] + command


def _skip_without_read_only_mounts(folder: Path) -> None:
    """Skip, saying why, where no read-only bind mount can be made in a new mount namespace (no `unshare`, or
    no user namespaces for a user who is not root)."""
    probe = subprocess.run(_read_only(folder, ["touch", str(folder / "probe")]), capture_output=True, text=True) \
        if shutil.which("unshare") else None
    if probe is None or "Read-only file system" not in probe.stderr:
        reason = "no unshare" if probe is None else probe.stderr.strip()[-300:]
        pytest.skip(f"no read-only bind mount in a new mount namespace here: {reason}")


def _files(folder: Path) -> dict:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_read_only_install_loads_its_kernels_and_leaves_nothing(tmp_path):
    site, tmp, cwd = tmp_path / "site", tmp_path / "tmp", tmp_path / "cwd"
    for folder in (site, tmp, cwd):
        folder.mkdir()
    _skip_without_read_only_mounts(site)
    package = _copy_package(site, with_kernels=True)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site), "HOME": str(tmp_path / "home")}
    model = tmp_path / "model"
    trained = subprocess.run([sys.executable, "-c", TRAIN, str(model)], capture_output=True, text=True, env=env,
                             cwd=cwd, timeout=900)
    assert trained.returncode == 0, trained.stderr[-3000:]
    before = _files(package)

    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site), "TMPDIR": str(tmp)}  # no HOME
    out = subprocess.run(_read_only(site, [sys.executable, "-c", LOAD, str(model)]), capture_output=True, text=True,
                         env=env, cwd=cwd, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["compiled"] == []  # every kernel the load and the call need came from the package's cache
    assert result["overlay"].startswith(str(tmp)) and not result["persists"]
    assert list(tmp.iterdir()) == [] and list(cwd.iterdir()) == []  # the overlay was removed at exit
    assert _files(package) == before
    for folder in (package, package / "engine"):  # nothing in the user's cache folder numba would have chosen
        subpath = _CacheLocator.get_suitable_cache_subpath(str(folder / "__init__.py"))
        assert not list(Path("~").expanduser().glob(f".cache/numba/**/{subpath}"))
    assert "W003" not in out.stderr

    env["HOME"] = str(tmp_path / "home")  # a writable home: the overlay is kept there, for the next process
    out = subprocess.run(_read_only(site, [sys.executable, "-c", LOAD, str(model)]), capture_output=True, text=True,
                         env=env, cwd=cwd, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["compiled"] == [] and result["persists"]
    assert result["overlay"].startswith(str(tmp_path / "home" / ".cache")) and Path(result["overlay"]).is_dir()


def test_a_read_only_numba_cache_dir_holding_the_kernels_is_read(tmp_path):
    """NUMBA_CACHE_DIR set to a cache made ahead and mounted read-only (numba alone refuses it: "no locator
    available"), the package's own folders unwritable and no HOME: the kernels load from that cache, and nothing
    is left behind."""
    site, tmp, cwd, cache = tmp_path / "site", tmp_path / "tmp", tmp_path / "cwd", tmp_path / "cache"
    for folder in (site, tmp, cwd, cache):
        folder.mkdir()
    _skip_without_read_only_mounts(cache)
    package = _copy_package(site, with_kernels=False)
    for folder in (package, package / "engine"):
        (folder / "__pycache__").write_text("")  # a file where numba would make its cache directory
        compiled = PACKAGE / folder.relative_to(package) / "__pycache__"  # the checkout's, as a start
        place = cache / _CacheLocator.get_suitable_cache_subpath(str(folder / "__init__.py"))
        shutil.copytree(compiled, place, ignore=shutil.ignore_patterns("*.pyc"), dirs_exist_ok=True)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site), "NUMBA_CACHE_DIR": str(cache), "TMPDIR": str(tmp)}
    model = tmp_path / "model"
    trained = subprocess.run([sys.executable, "-c", TRAIN, str(model)], capture_output=True, text=True,
                             env={**env, "HOME": str(tmp_path / "home")}, cwd=cwd, timeout=900)
    assert trained.returncode == 0, trained.stderr[-3000:]
    out = subprocess.run(_read_only(cache, [sys.executable, "-c", LOAD, str(model)]), capture_output=True,
                         text=True, env=env, cwd=cwd, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["compiled"] == [] and result["overlay"].startswith(str(tmp))
    assert list(tmp.iterdir()) == [] and list(cwd.iterdir()) == []


def test_import_and_predict_where_numba_cannot_write_a_cache(tmp_path):
    package = _copy_package(tmp_path / "site", with_kernels=False)
    for folder in (package, package / "engine"):
        (folder / "__pycache__").write_text("")  # a file where numba would make its cache directory
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.write_text("")  # a file: no cache directory can be made under it either
    tmp.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
           "PYTHONPATH": str(tmp_path / "site"), "TMPDIR": str(tmp)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[['A',", "'B']]", "1"]  # the prediction, and one warning
    assert list(tmp.iterdir()) == []  # the process's own cache was removed when it exited
