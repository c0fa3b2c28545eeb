"""Carve a dev split from a blank-line-separated column file: every N-th sentence goes to dev, deterministically.

    python benchmarks/carve_dev.py DATA/conll2000/train.txt OUT_DIR [--every 10]
writes OUT_DIR/train-split.txt and OUT_DIR/dev-split.txt (the data stays outside the repository).
"""
import argparse
from pathlib import Path


def sentences(path: Path):
    block = []
    for line in path.read_text(encoding="utf8").splitlines(keepends=True):
        if line.strip():
            block.append(line)
        elif block:
            yield block
            block = []
    if block:
        yield block


def main(path: Path, out_dir: Path, every: int):
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = {"train": [], "dev": []}
    for i, block in enumerate(sentences(path)):
        parts["dev" if i % every == every - 1 else "train"].append("".join(block))
    for name, blocks in parts.items():
        (out_dir / f"{name}-split.txt").write_text("\n".join(blocks) + "\n", encoding="utf8")
        print(f"{name}: {len(blocks)} sentences -> {out_dir / f'{name}-split.txt'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--every", type=int, default=10)
    args = parser.parse_args()
    main(args.path, args.out_dir, args.every)
