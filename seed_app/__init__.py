"""The application around the pipeline, the top layer (seed_core < tasks < flows < seed_app): the ``seed`` command
(``cli``), DVC under an MLflow parent run as the ``seed-pipeline`` flow (``dvc_run``), ``seed ui``'s ``services``."""
