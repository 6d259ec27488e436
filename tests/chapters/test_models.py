"""The one meaning of model="default" (lamina.chapters.models)."""

from __future__ import annotations

import pytest

from lamina.chapters.models import chapter_models, named_models
from lamina.core.registry import REGISTRY


def test_named_models_are_exactly_what_was_named() -> None:
    assert named_models("a, b,a") == ["a", "b"]
    assert named_models(["x", "y"]) == ["x", "y"]
    with pytest.raises(ValueError, match="empty"):
        named_models("a,,b")
    with pytest.raises(TypeError):
        named_models(3)  # type: ignore[arg-type]
    models, notes = chapter_models("curvature", "/some/folder")
    assert models == ["/some/folder"] and notes == []


def test_default_is_the_registry_record_minus_what_cannot_run_here(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path))  # no organism is built here
    for record in REGISTRY:
        models, notes = chapter_models(record.name, "default", peer_root=tmp_path)
        assert not [m for m in models if m.startswith("organism-")]
        wanted = [m for m in record.default_models if m.startswith("organism-")]
        assert all(any(w in n for n in notes) for w in wanted), (record.name, notes)
        assert set(models) <= set(record.default_models)
