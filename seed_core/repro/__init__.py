"""Reproducibility: the pinned numerics (``numerics``), the golden hashes ``seed doctor`` compares
(``golden``, ``golden_build``) and the committed reference run with its multi-seed range
(``reference``). No module here is re-exported: import them by their full name.
"""
