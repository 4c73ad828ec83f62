"""Lineage: what each stage reads (params keys, code files) and when finished work is reused.

The import scan (``code_closure``), the name-table entries a stage can select (``stage_code``), the
params keys each stage reads (``stage_params``), the side tables an environment needs (``side_tables``)
and the RL resume key (``resume``). No module here is re-exported: import them by their full name.
"""
