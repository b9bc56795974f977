"""The chapters' code, generated from the book's notebooks by ``python -m fa2.export`` (never edit these).

Each module's header names its notebook and each block the cell it came from. The product modules in
``fa2/`` import the stages they run: ``forward`` and its loop ``kv_loop`` (chapters 5 and 4, the portable
kernel), ``fast`` and ``autotune`` (chapter 6, the Hopper kernel and its configs), ``flash_decoding`` and
``decode_reference`` (chapter 9, behind ``fa2.decode``), ``roofline`` and ``checklist`` (chapter 8, behind
``python -m fa2.profile``) and ``reference`` (chapter 1) for checks. ``scaffold`` and ``grid`` are the
teaching stages of chapters 2 and 3, and ``bugs`` is chapter 7's catalog of mutants of the kernels (used by
the tests and the chapter, never by the product).
"""
