"""Sphinx extension: the `chapter-plan` directive, the book's list of chapters written once.

    ```{chapter-plan}
    1 | Online softmax | derived on paper, checked in fp64
    7 | The bug catalog | every bug as an executable mutant
    ```

Each line is a chapter's number, title and what it does. A chapter whose notebook (`book/NN_*`) is part
of the build is listed as a link to it, under its own title; one that is not is marked "being written".
A page outside the numbered chapters is named instead of numbered (`dropin_apis | Drop-in APIs | ...`)
and listed, unnumbered, as a link to `book/<name>`.
"""

from docutils import nodes
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective


class ChapterPlan(SphinxDirective):
    has_content = True

    def run(self):
        self.env.metadata[self.env.docname]["chapter_plan"] = True
        items = nodes.bullet_list()
        for line in self.content:
            if not line.strip():
                continue
            number, title, what = (part.strip() for part in line.split("|", 2))
            if number.isdigit():
                docs = sorted(d for d in self.env.found_docs
                              if d.startswith(f"book/{int(number):02d}_"))
            else:  # a page beside the chapters, by name
                docs = [d for d in self.env.found_docs if d == f"book/{number}"]
            para = nodes.paragraph()
            described, messages = self.state.inline_text(what, self.lineno)  # `code` and all
            if docs:
                link = addnodes.pending_xref("", refdomain="std", reftype="doc",
                                             reftarget="/" + docs[0], refexplicit=False,
                                             refwarn=True, refdoc=self.env.docname)
                link += nodes.inline("", docs[0])
                para += [link, nodes.Text(" — "), *described, *messages]
            else:
                label = f"{number}. {title}" if number.isdigit() else title
                para += [nodes.Text(f"{label} "), nodes.emphasis("", "(being written)"),
                         nodes.Text(" — "), *described, *messages]
            items += nodes.list_item("", para)
        return [items]


def _reread_plans(app, env, added, changed, removed):
    """Chapters come and go between builds: pages with a plan are read again every build."""
    return [doc for doc, meta in env.metadata.items() if meta.get("chapter_plan")]


def setup(app):
    app.add_directive("chapter-plan", ChapterPlan)
    app.connect("env-get-outdated", _reread_plans)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
