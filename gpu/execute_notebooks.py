"""Execute every chapter in place on the GPU machine so the book stores real GPU outputs.

Run from the project root on the GPU machine (see gpu/README.md for the wheel set-up); exits non-zero if
any cell fails, which is the same check nbval makes."""
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

book = Path(__file__).resolve().parents[1] / "book"
failed = []
for path in sorted(book.glob("[0-9][0-9]_*.ipynb")):
    if len(sys.argv) > 1 and path.stem not in sys.argv[1:]:
        continue
    nb = nbformat.read(path, as_version=4)
    t0 = time.time()
    try:
        NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(book)}}).execute()
        print(f"{path.name}: ok in {time.time() - t0:.0f}s", flush=True)
    except Exception as exc:
        failed.append(path.name)
        print(f"{path.name}: FAILED {type(exc).__name__}: {str(exc)[-2000:]}", flush=True)
    nbformat.write(nb, path)
sys.exit(1 if failed else 0)
