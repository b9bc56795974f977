"""Sphinx extension: the chapters' "Open in Colab" badge image is served from the book itself.

The notebooks point at Colab's badge image on the web, which Jupyter, Colab and GitHub show. The built
book uses a copy in `book/_static/`, so the badge also shows when the book is read offline.
"""

from docutils import nodes
from sphinx.transforms import SphinxTransform

REMOTE = "https://colab.research.google.com/assets/colab-badge.svg"
LOCAL = "/book/_static/colab-badge.svg"     # from the source root


class LocalBadge(SphinxTransform):
    default_priority = 400                  # before Sphinx collects the page's images

    def apply(self, **kwargs):
        for image in self.document.findall(nodes.image):
            if image.get("uri") == REMOTE:
                image["uri"] = LOCAL


def setup(app):
    app.add_transform(LocalBadge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
