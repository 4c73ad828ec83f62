"""The stage runners, one module per DVC stage, all of one shape: ``run_<stage>(cfg, <input paths>, out) -> metrics``
(config + paths in, records written under ``out``, metrics returned); each also runs standalone as
``python -m seed_core.stages.<stage> --config params.yaml [--set KEY=VALUE]``."""
