"""The chapters' code, generated from the book's notebooks by ``python -m fa2.export`` (never edit these).

Each module's header names its notebook and each block the cell it came from. The product modules in
``fa2/`` import the stages they run -- ``forward`` (chapter 5, the portable kernel), ``fast`` and
``autotune`` (chapter 6, the Hopper kernel and its configs) -- and ``reference`` (chapter 1) for checks;
``scaffold``, ``grid`` and ``kv_loop`` are the teaching stages of chapters 2-4, and ``bugs`` is chapter 7's
catalog of mutants of the kernels (used by the tests, never by the product).
"""
