"""The chapters: one module or package per notebook of ``notebooks/``, with the same name.

Each computes everything its notebook shows, behind one config dataclass, and returns a
:class:`~lamina.chapters.results.ExperimentResult` (tidy tables, a claims table, notes) that
``.write()`` saves with ``lamina.states.io.write_results``.

* paper 1 (trajectory geometry): :mod:`~.convergence`, :mod:`~.curvature`,
  :mod:`~.bifurcation`, :mod:`~.three_phase`, :mod:`~.reanalysis`, sharing
  :mod:`~.trajectory` (config, conventions, prompts), :mod:`~.states` (pooled states) and
  :mod:`~.skeleton` (the run over every model, controls, vanish verdicts);
* paper 2: :mod:`~.weight_update_signature`;
* paper 3: :mod:`~.layer_anatomy`, :mod:`~.growth_training` (sharing :mod:`~.runtime`);
* the appendix: :mod:`~.organisms`.

Claim rows and verdict words are defined once, in :mod:`~.results`. Import a chapter by
name (``from lamina.chapters.convergence import run_convergence``); this package imports
nothing itself, so that importing one chapter stays cheap.
"""
