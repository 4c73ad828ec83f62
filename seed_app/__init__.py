"""The application around the pipeline, the top layer (seed_core < tasks < flows < seed_app): the ``seed``
command (``cli``), DVC run under an MLflow parent run (``dvc_run``, also as the ``seed-pipeline`` flow),
the served UI deployment (``serve``) and ``seed ui``'s servers (``services``). Nothing below imports it."""
