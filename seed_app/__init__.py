"""The application around the pipeline, the top layer (seed_core < tasks < flows < seed_app): the ``seed`` command
(``cli``), DVC under an MLflow parent run as the ``seed-pipeline`` flow (``dvc_run``), ``seed ui``'s ``services``.

Importing it pins the CPU numerics first (``seed_core.repro.numerics.pin``), before the config check loads torch: what
``seed`` runs in its own process (``seed preflight``) and the pipeline run's MLflow params then say the same as
its stages, which pin them again (a no-op: they inherit the variables)."""

from seed_core.repro.numerics import pin as _pin_numerics

_pin_numerics()
