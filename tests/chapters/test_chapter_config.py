"""Chapter configs (issue 13): one entry point that rejects unknown parameters by name, and the
quick-mode caps written once."""

from __future__ import annotations

import pytest

from lamina.chapters.config import RESAMPLING_QUICK, UnknownParameterError
from lamina.chapters.growth_training import GrowthConfig
from lamina.chapters.layer_anatomy import AnatomyConfig
from lamina.chapters.organisms import OrganismsConfig
from lamina.chapters.trajectory import TrajectoryConfig
from lamina.chapters.weight_update_signature import Config as SignatureConfig

CONFIGS = [TrajectoryConfig, AnatomyConfig, GrowthConfig, SignatureConfig, OrganismsConfig]


@pytest.mark.parametrize("cls", CONFIGS)
def test_from_params_builds_the_config_and_names_the_closest_valid_parameter(cls):
    assert cls.from_params({"seed": 3} if "seed" in cls.parameter_names() else {}).to_dict()
    with pytest.raises(UnknownParameterError, match="'quik'.*did you mean 'quick'"):
        cls.from_params({"quik": True})
    with pytest.raises(UnknownParameterError, match="valid parameters: .*quick"):
        cls.from_params({"zzzz_nothing_like_it": 1})


def _as_run(config):
    """The configs a chapter really runs with: layer anatomy fills its budget fields per model
    (``for_model``, one per budget row), every other chapter runs its config as it is."""
    if hasattr(config, "for_model"):
        return [config.for_model(m) for m in ("smollm2-135m-instruct", "gemma-3-270m", "organism-llama")]
    return [config]


@pytest.mark.parametrize("cls", CONFIGS)
def test_quick_caps_apply_only_in_quick_mode_and_never_raise_a_value(cls):
    assert cls().quick_caps(), "a chapter config has quick caps (its own or the shared ones)"
    for full, quick in zip(_as_run(cls()), _as_run(cls(quick=True)), strict=True):
        for name, cap in cls().quick_caps().items():
            before, after = getattr(full, name), getattr(quick, name)
            if isinstance(cap, int | float) and not isinstance(cap, bool) and before is not None:
                assert after == min(before, cap), (name, before, after)
            else:
                assert after == cap, (name, after)


@pytest.mark.parametrize("cls", CONFIGS)
def test_the_shared_resampling_caps_apply_to_every_config_with_those_fields(cls):
    names = set(cls.parameter_names())
    quick = cls(quick=True)
    for name, cap in RESAMPLING_QUICK.items():
        if name in names:
            assert getattr(quick, name) == min(getattr(cls(), name), cap), name
            assert name in quick.quick_caps()
        else:
            assert name not in quick.quick_caps()
