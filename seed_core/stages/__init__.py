"""The stage runners, one module per DVC stage, one shape: ``run_<stage>(cfg, <input paths>, out) -> metrics``
(records written under ``out``); each also runs alone: ``python -m seed_core.stages.<stage> --config X --set K=V``,
which is how ``launch`` runs sft and rl under ``accelerate launch``."""
