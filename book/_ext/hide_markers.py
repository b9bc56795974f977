"""Sphinx extension: the book shows a code cell without its export and nbval marker lines.

`#| export`, `#| default_exp …` and `# NBVAL_…` lines steer `python -m fa2.export` and nbval; they
stay in the notebook (where Jupyter and Colab show them) and are dropped from the rendered page.
"""

import re

from docutils import nodes
from sphinx.transforms import SphinxTransform

MARKER = re.compile(r"^(#\| ?(export|default_exp)\b.*|# NBVAL_[A-Z_]+)\s*$")


def strip_markers(code: str) -> str:
    """The code without marker lines (and without blank lines they leave at the top)."""
    lines = [line for line in code.split("\n") if not MARKER.match(line)]
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


class HideMarkers(SphinxTransform):
    default_priority = 500

    def apply(self, **kwargs):
        for box in self.document.findall(nodes.container):
            if box.get("nb_element") != "cell_code_source":
                continue
            for block in box.findall(nodes.literal_block):
                code = block.astext()
                shown = strip_markers(code)
                if shown == code:
                    continue
                block.rawsource = shown           # Sphinx highlights only when rawsource == text
                block.clear()
                block += nodes.Text(shown)


def setup(app):
    app.add_transform(HideMarkers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
