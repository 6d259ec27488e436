"""Notebook parameters become a chapter's config through one path that keeps the typo check."""

from __future__ import annotations

import dataclasses
import types

import pytest

from lamina.chapters.config import ChapterConfig, UnknownParameterError


@dataclasses.dataclass
class _Config(ChapterConfig):
    model: str = "default"
    n_bootstrap: int = 100


def test_from_globals_takes_the_notebook_parameters() -> None:
    ns = {"model": "m", "n_bootstrap": 7, "quick": True, "results_root": "/tmp/r",
          "alt": types.ModuleType("altair"), "_hidden": 1, "In": [], "f": print}  # fmt: skip
    config = _Config.from_globals(ns)
    assert (config.model, config.n_bootstrap, config.quick) == ("m", 7, True)


def test_a_mistyped_papermill_parameter_is_an_error_not_ignored() -> None:
    # papermill injects -p n_bootstraps 5 as a new global beside the parameters cell's names
    with pytest.raises(UnknownParameterError, match="did you mean 'n_bootstrap'"):
        _Config.from_globals({"model": "m", "n_bootstraps": 5})
