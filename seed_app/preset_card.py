"""The line ``seed run --preset P`` prints about where P's values come from: how many of its result-changing values
differ from the paper and from SEED's released launcher, and where to read them, from P's provenance card
(``presets/cards/<P>.md``, written by scripts/make_presets.py). Presets without a card (the CPU presets, a user's
own) print nothing."""

from __future__ import annotations

from pathlib import Path

SUMMARY = "Summary: "
"""The card line that holds the counts (scripts/preset_provenance.py ``card_text``)."""


def card_path(preset: Path) -> Path:
    return preset.parent / "cards" / f"{preset.stem}.md"


def provenance_line(preset: Path) -> str | None:
    """``seed: provenance of <P>: 0 of 28 values differ from the paper (...), 5 from SEED's released launcher;
    values, sources and reasons: presets/cards/<P>.md``; None when P has no card."""
    card = card_path(preset)
    if not card.is_file():
        return None
    counts = next((line[len(SUMMARY):].rstrip(".") for line in card.read_text().splitlines()
                   if line.startswith(SUMMARY)), None)
    if counts is None:
        return None
    return f"seed: provenance of {preset.stem}: {counts}; values, sources and reasons: {card}"
