"""The stage runners, one module per DVC stage, one shape: ``run_<stage>(cfg, <input paths>, out) -> metrics``
(records written under ``out``); each also runs alone: ``python -m seed_core.stages.<stage> --config X --set K=V``,
which is how ``launch`` runs sft and rl under ``accelerate launch``.

Importing this package pins the CPU numerics first (``seed_core.repro.numerics.pin``; nothing once torch is loaded), so
an entry point run as ``python -m seed_core.stages.<stage>`` runs under the same numerics as a flow."""

from seed_core.repro.numerics import pin as _pin_numerics

_pin_numerics()
