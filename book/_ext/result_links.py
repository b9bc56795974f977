"""Sphinx extension: a measured file the text names, such as `results/money.csv`, is a link that works.

Inline code that names an existing file under `book/results/` (written relative to the page, or from the
repository root as `book/results/…`) becomes a link to that file, and the folder is copied into the site
at the same place, so the link works in the built book, served or opened from disk.
"""

import os
import re
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform

RESULTS = "book/results"              # relative to the source root (the repository root)
NAMED = re.compile(r"(book/)?results/[\w.-]+\.\w+")


class LinkResults(SphinxTransform):
    default_priority = 500

    def apply(self, **kwargs):
        srcdir = Path(self.env.srcdir)
        page_dir = os.path.dirname(self.env.docname)
        for code in list(self.document.findall(nodes.literal)):
            text = code.astext()
            if isinstance(code.parent, nodes.reference) or not NAMED.fullmatch(text):
                continue
            rel = text if text.startswith("book/") else os.path.join(page_dir, text)
            rel = os.path.normpath(rel)
            if not rel.startswith(RESULTS + "/") or not (srcdir / rel).is_file():
                continue
            link = nodes.reference("", "", refuri=os.path.relpath(rel, page_dir or "."))
            code.replace_self(link)
            link += code


def copy_results(app, exc):
    if exc is None and app.builder.format == "html":
        shutil.copytree(Path(app.srcdir) / RESULTS, Path(app.outdir) / RESULTS, dirs_exist_ok=True)


def setup(app):
    app.add_transform(LinkResults)
    app.connect("build-finished", copy_results)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
