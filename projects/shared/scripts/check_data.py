"""Check that the project's data files are where `data_dir` says, before anything runs.

    python check_data.py DATA_DIR FILE [FILE ...]

DATA_DIR comes from the project variable `data_dir`, which defaults to the environment variable
TREECRF_DATA_DIR (set it, or pass `--vars.data_dir PATH` to `spacy project run`).
"""
import sys
from pathlib import Path


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    root = argv[0]
    if not root:
        sys.exit("data_dir is empty: set TREECRF_DATA_DIR or pass --vars.data_dir PATH (see the project README); "
                 "`spacy project assets` downloads the public files into the layout expected there")
    missing = [f for f in argv[1:] if not (Path(root) / f).exists()]
    if missing:
        sys.exit(f"data_dir {root!r} lacks: {', '.join(missing)}")
    print(f"data_dir {root}: {len(argv) - 1} files found")


if __name__ == "__main__":
    main(sys.argv[1:])
