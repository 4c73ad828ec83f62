"""The policy model: loading it with its tokenizer (``models``), building the package-shipped and
project-built models (``builders``) and the tiny testbed model pretrained here (``testbed``). No
module here is re-exported: import them by their full name.
"""
