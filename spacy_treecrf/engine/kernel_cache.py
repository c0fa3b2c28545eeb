"""Where numba keeps the compiled code of this package's kernels (every kernel is defined with cache=True).

An install compiles the kernels into the package's own __pycache__ folders (setup.py, precompile.py), so that a
new process loads them in about a second instead of compiling them for ten. numba reads a cache only where it can
also write: beside the module, else in the user's cache folder. Where the package is read-only (a container image,
a system package, a site-packages mounted read-only), numba would ignore the kernels shipped with it and compile
them all again in the user's cache (10 s before a first `spacy.load`), or, where no cache folder can be written
(no HOME), refuse to define them at all.

PackageCacheLocator is tried before numba's own locators, for this package's modules only:
- a writable NUMBA_CACHE_DIR, or (without one) writable __pycache__ folders of the package: it steps aside and
  numba does as it always does (an editable install, a writable site-packages, a cache folder of the user's);
- otherwise it caches in an *overlay*: a writable folder that holds a link to each compiled file of the package's
  __pycache__ and of the package's folders in a NUMBA_CACHE_DIR that cannot be written (a read-only cache made
  ahead, which numba would refuse: "no locator available"). numba loads those kernels through the links, and what
  it compiles anew is written into the overlay: a new data file, and an index that replaces the index's link
  (numba writes a temporary file and renames it), never a linked file. The overlay is kept in the user's cache folder (a folder per install) when the
  environment names one (HOME or XDG_CACHE_HOME) that can be written, so kernels compiled there last; otherwise it
  is a temporary folder of this process, removed when the process exits.

The overlay is linked once per package folder, when the first kernel of that folder is defined (at import): a
link is made where the overlay has no file of that name, or has a link, or has a file older than the shipped one
(compiled here before the package was upgraded). Where links cannot be made (a file system without them), the
shipped files are copied.
"""
import atexit
import os
import shutil
import tempfile
import warnings
from typing import Dict, Optional

import numba
from numba.core import caching
from numba.misc.appdirs import AppDirs

from ..errors import Warnings

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = (PACKAGE, os.path.join(PACKAGE, "engine"))  # the folders whose modules define kernels
COMPILED_SUFFIXES = (".nbi", ".nbc")  # numba's index and data files

# numba's classes under their current names (0.62 on) or their earlier private ones.
_IN_TREE = getattr(caching, "InTreeCacheLocator", None) or caching._InTreeCacheLocator
_CACHE_IMPL = getattr(caching, "CacheImpl", None) or caching._CacheImpl


def can_write(path: str) -> bool:
    """What numba checks before caching in a folder: it can be made, and a file can be written in it."""
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


def _user_cache_root() -> Optional[str]:
    """The user's cache folder for overlays, where the environment names one (HOME or XDG_CACHE_HOME) and it can be
    written; None otherwise (a service without HOME keeps nothing in a home it did not name)."""
    if not (os.environ.get("HOME") or os.environ.get("XDG_CACHE_HOME")):
        return None
    root = os.path.join(AppDirs(appname="numba", appauthor=False).user_cache_dir, "spacy_treecrf")
    return root if can_write(root) else None


def _compiled_files(folder: str) -> Dict[str, str]:
    """The compiled files of ``folder``'s kernels, name → path: those in its __pycache__ (shipped), then those in
    NUMBA_CACHE_DIR's subfolder for it (numba's naming), which win; {} where there are none or they cannot be
    read."""
    places = [os.path.join(folder, "__pycache__")]
    if numba.config.CACHE_DIR:
        places.append(os.path.join(numba.config.CACHE_DIR,
                                   _IN_TREE.get_suitable_cache_subpath(os.path.join(folder, "__init__.py"))))
    found: Dict[str, str] = {}
    for place in places:
        try:
            names = os.listdir(place)
        except OSError:
            continue
        found.update({name: os.path.join(place, name) for name in names if name.endswith(COMPILED_SUFFIXES)})
    return found


def _link_shipped(folder: str, overlay: str) -> None:
    """Link (or copy) each of ``folder``'s compiled files into ``overlay`` (see the module docstring)."""
    for name, shipped in _compiled_files(folder).items():
        target = os.path.join(overlay, name)
        try:
            if os.path.lexists(target):
                if not os.path.islink(target) and os.stat(target).st_mtime >= os.stat(shipped).st_mtime:
                    continue  # compiled here after the shipped file was installed
                os.unlink(target)
            try:
                os.symlink(shipped, target)
            except OSError:
                shutil.copyfile(shipped, target)
        except OSError:  # another process made or replaced it meanwhile: either file serves
            continue


class _Overlays:
    """The overlay root of this process (None: numba's own locators serve) and the folders linked into it."""

    def __init__(self) -> None:
        self.root: Optional[str] = None
        self.persists = True  # False: a temporary root, removed at exit
        self.linked: Dict[str, str] = {}  # package folder → its overlay folder

    def choose(self) -> None:
        if numba.config.CACHE_DIR:
            if can_write(numba.config.CACHE_DIR):
                return
        elif all(can_write(os.path.join(folder, "__pycache__")) for folder in FOLDERS):
            return
        self.root = _user_cache_root()
        if self.root is None:
            self.root = tempfile.mkdtemp(prefix="spacy_treecrf_kernels_")
            self.persists = False
            atexit.register(shutil.rmtree, self.root, ignore_errors=True)
            if not any(_compiled_files(folder) for folder in FOLDERS):
                warnings.warn(Warnings.W003.format(path=self.root), stacklevel=3)

    def folder_for(self, py_file: str) -> str:
        folder = os.path.dirname(os.path.abspath(py_file))
        if folder not in self.linked:
            # numba's own naming of a cache subfolder: the folder's name and a hash of its path (one per install)
            overlay = os.path.join(self.root, _IN_TREE.get_suitable_cache_subpath(py_file))
            os.makedirs(overlay, exist_ok=True)
            _link_shipped(folder, overlay)
            self.linked[folder] = overlay
        return self.linked[folder]


OVERLAYS = _Overlays()


class PackageCacheLocator(_IN_TREE):
    """numba's in-tree locator (the same source stamp and file names) with the overlay folder as its cache path,
    for this package's modules when OVERLAYS has a root; None (the next locator) otherwise."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = OVERLAYS.folder_for(py_file)

    @classmethod
    def from_function(cls, py_func, py_file):
        if OVERLAYS.root is None:
            return None
        if os.path.dirname(os.path.abspath(py_file)) not in FOLDERS:
            return None
        return super().from_function(py_func, py_file)


def install() -> None:
    """Choose where the kernels are cached; put PackageCacheLocator first among numba's locators where an overlay
    is needed (once, before any kernel of the package is defined)."""
    OVERLAYS.choose()
    if OVERLAYS.root is not None and PackageCacheLocator not in _CACHE_IMPL._locator_classes:
        _CACHE_IMPL._locator_classes.insert(0, PackageCacheLocator)


def persists() -> bool:
    """Whether a kernel's compiled code outlasts this process: shipped with the package, or cached where the next
    process finds it. False only for a temporary overlay over a package that ships no compiled kernels."""
    return OVERLAYS.persists or any(_compiled_files(folder) for folder in FOLDERS)


def in_kernel_cache(kernel) -> bool:
    """Whether numba's cache holds compiled code of ``kernel`` (a cache=True dispatcher) from an earlier process,
    so that readying it costs a load, not a compile. numba has no public call for this: the cache's index file is
    looked up through the dispatcher's cache object, and the answer is False where numba does not have one."""
    try:
        return os.path.isfile(kernel._cache._cache_file._index_path)
    except AttributeError:
        return False
