"""One colour per model, across the whole book (Okabe-Ito for the models the book knows, a
stable hash-chosen colour for any other), as hex strings and as an Altair colour encoding.
Part of the chart theme of :mod:`lamina.book.charts`, which re-exports these names."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

__all__ = ["FALLBACK_COLORS", "MODEL_COLORS", "canonical_model", "model_color", "model_colors"]

# ---------------------------------------------------------------------------------------
# one colour per model, across the whole book
# ---------------------------------------------------------------------------------------
# Okabe-Ito (colour-blind safe) for the models the book knows; a model that appears later
# gets a colour from FALLBACK_COLORS chosen by a hash of its name, so it keeps it everywhere.
MODEL_COLORS: dict[str, str] = {
    "organism-gpt2": "#0072B2",
    "organism-llama": "#E69F00",
    "minilm": "#009E73",
    "peer-gpt2": "#CC79A7",
    "smollm2-135m-instruct": "#D55E00",
    "gemma-3-270m": "#56B4E9",
    "synthetic-null": "#7F7F7F",
    "synthetic-planted": "#332288",
    "synthetic-planted-half": "#6699CC",
}
FALLBACK_COLORS: tuple[str, ...] = (
    "#117733",
    "#882255",
    "#44AA99",
    "#999933",
    "#AA4499",
    "#661100",
    "#6699CC",
    "#DDAA33",
    "#BB5566",
    "#004488",
)
_ALIASES = {
    "all-minilm-l6-v2": "minilm",
    "sentence-transformers/all-minilm-l6-v2": "minilm",
    "huggingfacetb/smollm2-135m-instruct": "smollm2-135m-instruct",
    "google/gemma-3-270m": "gemma-3-270m",
}


def canonical_model(name: str) -> str:
    """The key a model's colour is looked up by: lower case, without a checkpoint suffix
    (``@sft``), a ``-micro`` suffix, or a folder / hub owner prefix (``org/name`` -> ``name``,
    unless ``org/name`` is itself a known alias)."""
    key = str(name).strip().lower().split("@", 1)[0].rstrip("/")
    if key in _ALIASES:
        return _ALIASES[key]
    key = key.rsplit("/", 1)[-1].removesuffix("-micro")
    return _ALIASES.get(key, key)


def _model_hex(name: str) -> str:
    key = canonical_model(name)
    if key in MODEL_COLORS:
        return MODEL_COLORS[key]
    digest = int(hashlib.sha256(key.encode()).hexdigest(), 16)
    return FALLBACK_COLORS[digest % len(FALLBACK_COLORS)]


def model_colors(models: Iterable[str]) -> dict[str, str]:
    """``{model: hex colour}`` for the distinct ``models`` (first-seen order): the colour of
    :data:`MODEL_COLORS` for a known model, else a stable hash-chosen one."""
    return {m: _model_hex(m) for m in dict.fromkeys(map(str, models))}


def model_color(
    models: Iterable[str] | pd.DataFrame,
    field: str = "model",
    *,
    title: str | None = None,
    legend: bool = True,
) -> alt.Color:
    """An Altair colour encoding of ``field`` with the book's model colours. ``models`` is
    the models shown, or the chart's data frame (its ``field`` column)."""
    import altair as alt
    import pandas as pd

    values = models[field].tolist() if isinstance(models, pd.DataFrame) else list(models)
    colors = model_colors(values)
    return alt.Color(
        f"{field}:N",
        title=title,
        scale=alt.Scale(domain=list(colors), range=list(colors.values())),
        legend=alt.Legend() if legend else None,
    )
