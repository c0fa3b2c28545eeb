"""Build hook: after setuptools has copied the package into the build folder, compile its numba kernels there
(python -m spacy_treecrf.precompile), so that the wheel carries numba's cache of them and an installed copy does
not compile on its first use. Skipped for editable installs (they cache beside the sources on first use) and
when SPACY_TREECRF_PRECOMPILE=0; a failed compile only leaves the kernels to first use, with a message.

The build's own folders (setuptools' build/ and *.egg-info) go to a temporary folder removed when the build ends,
so `pip install .` leaves the checkout as it was."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        if self.editable_mode or os.environ.get("SPACY_TREECRF_PRECOMPILE", "1") == "0":
            return
        env = {key: value for key, value in os.environ.items() if key not in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.abspath(self.build_lib), env.get("PYTHONPATH")]))
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        done = subprocess.run([sys.executable, "-m", "spacy_treecrf.precompile"], env=env, cwd=self.build_lib)
        if done.returncode != 0:
            print("spacy_treecrf: the kernels were not compiled ahead (see above); they compile on first use",
                  file=sys.stderr)


BUILD_FOLDER = tempfile.mkdtemp(prefix="spacy_treecrf_build_")
atexit.register(shutil.rmtree, BUILD_FOLDER, ignore_errors=True)
setup(cmdclass={"build_py": BuildPyWithKernels},
      options={"build": {"build_base": BUILD_FOLDER}, "egg_info": {"egg_base": BUILD_FOLDER}})
