"""The seed sweep: one cell per seed (``cell``), cells run at most once by many processes (``cells``),
cells committed to git (``committed``) and the report over seeds (``report``). No module here is
re-exported: import them by their full name.
"""
