"""The methods chapter quotes definitions from their single source: the docstrings.

:data:`METHODS` names each quoted definition by the module that defines it;
:func:`methods_markdown` writes them verbatim (``python -m lamina.book methods``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["METHODS", "methods_markdown"]

METHODS: dict[str, list[str]] = {
    "Representation": ["lamina.states.extract.extract"],
    "Trajectory geometry (paper 1)": [
        "lamina.trajectory.metrics.trajectory_length",
        "lamina.trajectory.metrics.curvature",
        "lamina.trajectory.metrics.mean_curvature",
        "lamina.trajectory.metrics.layerwise_cosine",
        "lamina.trajectory.metrics.convergence_index",
        "lamina.trajectory.metrics.convergence_index_pooled",
        "lamina.trajectory.metrics.convergence_index_per_prompt",
        "lamina.trajectory.metrics.stability",
        "lamina.trajectory.metrics.bifurcation",
        "lamina.trajectory.phases.fixed_phase_bands",
        "lamina.trajectory.phases.detect_phases",
    ],
    "Verdicts": [
        "lamina.evidence.claims",
        "lamina.evidence.declare.ClaimSpec",
        "lamina.evidence.decide",
        "lamina.evidence.claims.Claim",
        "lamina.evidence.calibration",
    ],
    "Statistics (paper 1's claims)": [
        "lamina.evidence.resampling.max_permutation_test",
        "lamina.evidence.resampling.peak_bootstrap",
        "lamina.evidence.resampling.resample_indices",
        "lamina.evidence.stats.wilcoxon",
        "lamina.trajectory.convergence_stats.convergence_test",
        "lamina.trajectory.curvature_stats.curvature_test",
        "lamina.trajectory.curvature_stats.mixed_gap",
        "lamina.trajectory.bifurcation_stats.bifurcation_test",
        "lamina.trajectory.bifurcation_stats.ramp_onset",
        "lamina.trajectory.phase_stats.three_phase_test",
    ],
    "Known-answer sources": ["lamina.trajectory.synthetic", "lamina.trajectory.realistic",
                             "lamina.trajectory.background", "lamina.trajectory.fit",
                             "lamina.trajectory.hazards"],
    "Controls": [
        "lamina.states.controls.shuffle_layers",
        "lamina.trajectory.convergence_stats.shuffled_distance_stack",
        "lamina.trajectory.control_power.invariant_share",
        "lamina.states.controls.random_input_states",
        "lamina.states.controls.random_init_like",
        "lamina.states.controls.permute_labels",
        "lamina.sources.quantize.quantize_model",
        "lamina.states.quant_control",
    ],
    "Weight-update geometry (paper 2)": [
        "lamina.weights.maps.linear_maps",
        "lamina.weights.subspace_fraction.relative_subspace_fraction",
        "lamina.weights.subspace_fraction.enrichment",
        "lamina.weights.subspaces.principal_basis",
        "lamina.weights.subspaces.prediction_basis",
        "lamina.weights.gradients.gradient_geometry",
        "lamina.weights.gradients.sign_null_cancellation",
    ],
    "Layer anatomy (paper 3)": [
        "lamina.anatomy.perplexity.perplexity",
        "lamina.anatomy.predictability.weight_predictability",
        "lamina.anatomy.predictability.summary_predictability",
        "lamina.anatomy.predictability.delta_correlation",
        "lamina.anatomy.predictability.layer_structure",
        "lamina.anatomy.growth.train_with_schedule",
        "lamina.anatomy.growth_orders.depth_map",
        "lamina.anatomy.growth_timing",
        "lamina.anatomy.heldout",
        "lamina.anatomy.importance",
        "lamina.anatomy.importance.core_share_p",
        "lamina.anatomy.regularity",
        "lamina.anatomy.robustness",
        "lamina.anatomy.recovery.measure_recovery",
        "lamina.anatomy.coverage",
    ],
    "Model organisms' gates": [
        "lamina.sources.organisms.gates.sft_gate",
        "lamina.sources.organisms.gates.dpo_gate",
        "lamina.sources.organisms.recall",
    ],
}


def _resolve_dotted(dotted: str) -> Any:
    import importlib

    try:  # a module: its docstring
        return importlib.import_module(dotted)
    except ImportError:
        module, _, name = dotted.rpartition(".")
        return getattr(importlib.import_module(module), name)


def methods_markdown() -> str:
    """Markdown quoting the docstring of every definition in :data:`METHODS`, verbatim;
    LookupError naming a definition that no longer exists."""
    import inspect

    lines: list[str] = []
    for section, names in METHODS.items():
        found = []
        for dotted in names:
            try:
                obj = _resolve_dotted(dotted)
            except (ImportError, AttributeError) as exc:
                # a renamed or moved definition must not vanish from the methods page silently
                raise LookupError(
                    f"the methods page quotes {dotted!r}, which does not exist ({exc}); "
                    "update lamina.book.methods.METHODS"
                ) from exc
            found.append((dotted, obj))
        lines += [f"## {section}", ""]
        for dotted, obj in found:
            doc = inspect.getdoc(obj) or "(undocumented)"
            lines += [f"### `{dotted}`", "", "```text", doc, "```", ""]
    return "\n".join(lines)
