"""Execute every chapter in place on the GPU machine so the book stores real GPU outputs.

Run from the project root on the GPU machine (see gpu/README.md for the wheel set-up); exits non-zero if
any cell fails, which is the same check nbval makes."""
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

BOOK = Path(__file__).resolve().parents[1] / "book"


def main(chapters):
    """Execute the chapters named (stems; all when none) in place; 1 if any cell failed."""
    failed = []
    for path in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")):
        if chapters and path.stem not in chapters:
            continue
        nb = nbformat.read(path, as_version=4)
        t0 = time.time()
        try:
            NotebookClient(nb, timeout=900, kernel_name="python3",
                           resources={"metadata": {"path": str(BOOK)}}).execute()
            print(f"{path.name}: ok in {time.time() - t0:.0f}s", flush=True)
        except Exception as exc:
            failed.append(path.name)
            print(f"{path.name}: FAILED {type(exc).__name__}: {str(exc)[-2000:]}", flush=True)
        nbformat.write(nb, path)
    return 1 if failed else 0


if __name__ == "__main__":      # never on import: it overwrites every notebook's stored outputs
    sys.exit(main(sys.argv[1:]))
