"""Each chapter's model="default" set is its registry record's ``default_models`` (issue 24:
one definition of each thing): with every offline model installed and every organism built,
the chapter runs exactly the record's models, in its order."""

from __future__ import annotations

import lamina.chapters.models as chapter_models
import lamina.chapters.organisms.run as organisms_run
import lamina.chapters.weight_update_signature.config as signature_config
from lamina.chapters.growth_training import GrowthConfig
from lamina.chapters.growth_training.run import resolve_real_models
from lamina.chapters.weight_update_signature import Config as SignatureConfig
from lamina.core.registry import by_name
from lamina.sources import organisms


def _everything_available(monkeypatch):
    keep_all = lambda names=None: (list(dict.fromkeys(names or [])), [])  # noqa: E731
    for module in (chapter_models,):
        monkeypatch.setattr(module, "installed_offline", keep_all)
    monkeypatch.setattr(organisms, "list_checkpoints", lambda name: ["final"])
    monkeypatch.setattr(organisms, "resolve", lambda name: name)
    monkeypatch.setattr(organisms_run, "_built", lambda name: True)


def test_every_chapter_runs_its_registry_records_default_models(monkeypatch):
    _everything_available(monkeypatch)
    real, orgs, _ = signature_config.expand_models(SignatureConfig())
    runs = {
        "weight_update_signature": [*real, *orgs],
        "layer_anatomy": chapter_models.chapter_models("layer_anatomy", "default")[0],
        "growth_training": resolve_real_models(GrowthConfig())[0],
        "organisms": organisms_run.organism_names("default")[0],
    }
    for chapter, models in runs.items():
        assert models == list(by_name(chapter).default_models), chapter
