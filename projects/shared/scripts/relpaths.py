"""Rewrite absolute paths in text / JSON output files as paths relative to the current directory (and the
interpreter as `python`), so benchmark outputs can be shared without naming the machine's directories.

    python relpaths.py FILE [FILE ...]
"""
import os
import re
import sys
from pathlib import Path

ABSOLUTE = re.compile(r"(?<![\w.])(/[^\s\"',;:()\[\]{}]+)")


def relative(text: str) -> str:
    def repl(m):
        path = m.group(1)
        if os.path.realpath(path) == os.path.realpath(sys.executable):
            return "python"
        if not os.path.exists(path):
            return path
        return os.path.relpath(path)
    return ABSOLUTE.sub(repl, text)


def main(paths):
    for p in map(Path, paths):
        if p.exists():
            p.write_text(relative(p.read_text(encoding="utf8")), encoding="utf8")


if __name__ == "__main__":
    main(sys.argv[1:])
