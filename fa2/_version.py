"""The package's version: the one place it is written (pyproject.toml reads it, ``fa2.__version__`` is it).

Release notes for each version are in CHANGELOG.md.
"""

__version__ = "0.3.24"
