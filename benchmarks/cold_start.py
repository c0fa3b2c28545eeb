"""Cold start: a new process loads a trained pipeline, tags one sentence, then one batch of over 600 tokens (the
partition kernel's size); then twice more with the cache the earlier processes wrote.

    python benchmarks/cold_start.py PIPELINE_DIR [--text "..."] [--fresh-install [--read-only]]

Without --fresh-install, each run is a fresh `python` process of this environment with NUMBA_CACHE_DIR pointing at
a new temporary directory (cold: the kernels are compiled), then at the one the cold run filled (second, third).
With --fresh-install, as a user installs the package: `pip wheel` of this repository's committed code (which
compiles the kernels into the wheel, setup.py), a new venv, `pip install` of the wheel, then the runs with that venv's python, no
NUMBA_CACHE_DIR and an empty HOME (no numba cache but the one installed with the package). With --read-only too,
as a container image runs it: each process in a new mount namespace where the venv is mounted read-only (needs
`unshare`, as root or with user namespaces), with no HOME and a fresh TMPDIR, whose leftover files are counted
after the process ends. Printed per run:
seconds to import spaCy and load the pipeline, seconds of the first `nlp(text)` and the functions numba compiled
up to then; seconds of the large batch and the functions compiled for it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, sys, time
from numba.core import dispatcher
compiled = [0]
original = dispatcher.Dispatcher.compile
def counting(self, sig):
    compiled[0] += 1
    return original(self, sig)
dispatcher.Dispatcher.compile = counting
t0 = time.perf_counter()
import spacy
nlp = spacy.load(sys.argv[1])
t1 = time.perf_counter()
nlp(sys.argv[2])
t2 = time.perf_counter()
first = compiled[0]
list(nlp.pipe([sys.argv[2]] * (1 + 600 // len(nlp.make_doc(sys.argv[2])))))  # one batch of over 600 tokens
t3 = time.perf_counter()
print(json.dumps({"load_seconds": t1 - t0, "first_call_seconds": t2 - t1, "compiled": first,
                  "large_batch_seconds": t3 - t2, "compiled_large": compiled[0] - first}))
"""


REPO = Path(__file__).resolve().parent.parent


def run(python: str, pipeline: str, text: str, env: dict, read_only: str = "") -> dict:
    """One process; ``read_only``: a folder mounted read-only for it (see above)."""
    command = [python, "-c", CHILD, pipeline, text]
    if read_only:
        mount = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
        command = ["unshare", "--mount", "--map-root-user", "sh", "-c", mount, "sh", read_only] + command
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env,
                         cwd=tempfile.gettempdir())  # (not the repository: its sources would shadow the install)
    return json.loads(out.stdout.strip().splitlines()[-1])


def fresh_install(work: Path) -> str:
    """Build a wheel of the repository's committed code (a copy: no build folder of an earlier build), install it
    into a new venv under ``work``; that venv's python."""
    source = work / "source"
    source.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "wheel"), str(source)],
                   check=True)
    t1 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
    python = str(work / "venv" / "bin" / "python")
    wheel = next((work / "wheel").glob("*.whl"))
    subprocess.run([python, "-m", "pip", "install", "-q", str(wheel)], check=True)
    print(f"pip wheel {t1 - t0:.0f} s (the kernels compiled into it), venv + pip install "
          f"{time.perf_counter() - t1:.0f} s", flush=True)
    return python


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline")
    parser.add_argument("--text", default="Alice Smith lives in Paris and works for the United Nations .")
    parser.add_argument("--fresh-install", action="store_true", help="a wheel installed into a new venv (see above)")
    parser.add_argument("--read-only", action="store_true", help="with --fresh-install: the venv read-only, no HOME")
    args = parser.parse_args()
    if args.read_only and not args.fresh_install:
        parser.error("--read-only needs --fresh-install (the venv it mounts read-only)")
    pipeline = str(Path(args.pipeline).resolve())
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        if args.fresh_install:
            python = fresh_install(work)
            (work / "home").mkdir()
            env = {key: value for key, value in os.environ.items() if not key.startswith(("NUMBA_", "PYTHON"))}
            env.update(HOME=str(work / "home"), XDG_CACHE_HOME=str(work / "home" / ".cache"))
            if args.read_only:
                del env["HOME"], env["XDG_CACHE_HOME"]
        else:
            python, env = sys.executable, {**os.environ, "NUMBA_CACHE_DIR": str(work / "cache")}
        for name in ("cold", "second", "third"):
            tmp = work / f"tmp_{name}"
            tmp.mkdir()
            r = run(python, pipeline, args.text, {**env, "TMPDIR": str(tmp)}, str(work / "venv") * args.read_only)
            print(f"{name}: load {r['load_seconds']:.2f} s, first nlp(text) {r['first_call_seconds']:.2f} s, "
                  f"{r['compiled']} functions compiled; then a first batch of over 600 tokens "
                  f"{r['large_batch_seconds']:.2f} s, {r['compiled_large']} compiled; "
                  f"{sum(1 for _ in tmp.rglob('*'))} files left in its TMPDIR", flush=True)


if __name__ == "__main__":
    main()
