"""The TreeCRF engine: plain numpy arrays in, plain numpy arrays out; nothing here imports spaCy.

Data flows one way through its modules:
- trees.py: what a tree is (Tree, Forest) and the named tuples the kernels exchange;
- sparse.py: binary feature rows (CSR) and their inverted index;
- crf.py, losses.py: forward-backward, Viterbi and the functional gradients the trees are fitted to;
- the tree learner: histogram.py (a node's sums and feature histogram), split.py (split search),
  partition.py (a node's positions split by its test), grow.py (the one best-first grower, on one thread, or on
  two over two shards of the positions), leaves.py (leaf values and moving cached potentials by a tree's
  leaves); missing.py holds the missing-value routing rule they share and the row transformations of the other
  strategies;
- prediction: predict_walk.py (one position, one tree: training-time evaluation and rows with missing values),
  predict_partition.py (large batches), predict_bitmask.py (small batches); intrinsics.py (prefetch, bit scan,
  the atomics and CPU yield of the two-thread grower);
- booster.py: the boosting settings (BoostParams), rounds, the Ensemble and the dev-set cache;
- transitions.py (which label may follow which), rules.py (an ensemble's strongest paths, readable);
- serialize.py: the one place where model state becomes msgpack bytes and back;
- cluster.py: rounds on a Dask cluster (the optional extra), its shards growing each tree among themselves over
  peers.py's links, with wire.py's flat messages.
User-facing messages come from the package's Errors catalogue (errors.py, which imports nothing).
"""
import os
import tempfile
import warnings

import numba
from numba.misc.appdirs import AppDirs

from ..errors import Warnings


def _can_write(path: str) -> bool:
    """What numba checks before caching in a directory: it can be made, and a file can be written in it."""
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


KERNEL_CACHE_PERSISTS = True  # False when the compiled kernels live only as long as this process (see below)


def _choose_kernel_cache() -> None:
    """The kernels are compiled with cache=True; numba refuses to even define them when it can write neither next
    to this package (a read-only install) nor in the user's cache (no writable HOME). Then they are cached in a
    fresh temporary directory for this process, with one warning, instead of failing at import."""
    global KERNEL_CACHE_PERSISTS
    if numba.config.CACHE_DIR:
        return
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folders = (package, os.path.join(package, "engine"))
    in_tree = all(_can_write(os.path.join(folder, "__pycache__")) for folder in folders)
    if in_tree or _can_write(AppDirs(appname="numba", appauthor=False).user_cache_dir):
        return
    numba.config.CACHE_DIR = tempfile.mkdtemp(prefix="spacy_treecrf_kernels_")
    KERNEL_CACHE_PERSISTS = False
    warnings.warn(Warnings.W003.format(path=numba.config.CACHE_DIR), stacklevel=2)


_choose_kernel_cache()


def in_kernel_cache(kernel) -> bool:
    """Whether numba's cache holds compiled code of ``kernel`` (a cache=True dispatcher) from an earlier process,
    so that readying it costs a load, not a compile. numba has no public call for this: the cache's index file is
    looked up through the dispatcher's cache object, and the answer is False where numba does not have one."""
    try:
        return os.path.isfile(kernel._cache._cache_file._index_path)
    except AttributeError:
        return False
