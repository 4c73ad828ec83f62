"""Skills in prompts: the static skill library (``static``), which contexts a row is scored under
(``contexts``) and where a skill goes into an agent prompt (``insert``). No module here is
re-exported: import them by their full name.
"""
