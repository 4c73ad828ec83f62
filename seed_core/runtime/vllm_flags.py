"""The ``vllm serve`` flags seed sets itself, and how vLLM's parser reads a token as a flag: the check behind
``generation.vllm.extra_args`` (``seed_core.config.VLLMConfig``) and the engines seed launches."""

from __future__ import annotations


VLLM_RESERVED_FLAGS = ("--host", "--port", "--api-key", "--uds", "--config")
"""``vllm serve`` flags seed sets itself on the engines it launches, and ``--config`` (a YAML file of flags that
could set them); ``extra_args`` may not name them in any spelling vLLM accepts (``reserved_vllm_flags``)."""


def vllm_flag_name(arg: str) -> str | None:
    """The long option an ``extra_args`` token names as vLLM's parser reads it, None for a value or a short
    option. vLLM's ``FlexibleArgumentParser`` turns ``_`` into ``-`` up to the first ``.`` (``--api_key`` is
    ``--api-key``), reads ``--flag=value`` and ``--flag.key value`` (a JSON field) as ``--flag``."""
    if not arg.startswith("--") or arg == "--":
        return None
    return arg.split("=", 1)[0].split(".", 1)[0].replace("_", "-")


def reserved_vllm_flags(args: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """(token, reserved flag) for each token of ``args`` that vLLM would read as a ``VLLM_RESERVED_FLAGS`` flag:
    the flag itself or any prefix of it, since argparse (``allow_abbrev``, vLLM's default) expands an unambiguous
    prefix (``--hos`` is ``--host``) and refuses an ambiguous one, so refusing every prefix loses nothing."""
    found = []
    for arg in args:
        name = vllm_flag_name(arg)
        flag = next((f for f in VLLM_RESERVED_FLAGS if name and len(name) > 2 and f.startswith(name)), None)
        if flag:
            found.append((arg, flag))
    return found


def reserved_vllm_flags_message(found: list[tuple[str, str]]) -> str:
    """One line naming each reserved-flag token of ``reserved_vllm_flags`` and the flag vLLM reads it as."""
    named = ", ".join(arg if arg.split("=", 1)[0] == flag else f"{arg} (vLLM reads it as {flag})"
                      for arg, flag in found)
    return (f"may not set {named}: seed sets the host (generation.vllm.host), the port and a random API key of "
            "the engines it launches, and --config could set them from a file")
