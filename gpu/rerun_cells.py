"""Re-execute chosen cells of a notebook (after its setup cells) and keep their new outputs in the notebook.
usage: rerun_cells.py NOTEBOOK SETUP_CELLS RERUN_CELLS   e.g. book/11_benchmarks.ipynb 1,2 4,6,8,13"""
import copy, sys
from pathlib import Path
import nbformat
from nbclient import NotebookClient

path, setup, rerun = sys.argv[1], [int(i) for i in sys.argv[2].split(",")], [int(i) for i in sys.argv[3].split(",")]
nb = nbformat.read(path, as_version=4)
tmp = copy.deepcopy(nb)
order = setup + rerun
tmp.cells = [copy.deepcopy(nb.cells[i]) for i in order]
NotebookClient(tmp, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(Path(path).parent)}}).execute()
for i, cell in zip(order, tmp.cells):
    if i in rerun:
        nb.cells[i].outputs = cell.outputs
        if nb.cells[i].execution_count is None:
            nb.cells[i].execution_count = cell.execution_count
nbformat.write(nb, path)
print("re-ran", rerun)
