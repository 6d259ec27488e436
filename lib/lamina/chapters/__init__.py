"""The chapters: one module or package per notebook of ``notebooks/``, with the same name.

Each is glue: one config dataclass, a run that calls the science packages on every model of
the config, and the presentation specific to its notebook. The run returns a
:class:`~lamina.chapters.results.ExperimentResult` (tidy tables, a claims table, notes) that
``.write()`` saves with ``lamina.states.io.write_results``.

* paper 1 (trajectory geometry): :mod:`~.trajectory_tour`, :mod:`~.convergence`,
  :mod:`~.curvature`, :mod:`~.bifurcation`, :mod:`~.three_phase`, :mod:`~.reanalysis`
  (with :mod:`~.reanalysis_views`), sharing :mod:`~.trajectory` (the config and the run over
  every model); their science is ``lamina.trajectory``;
* paper 2: :mod:`~.weight_update_signature`;
* paper 3: :mod:`~.layer_anatomy`, :mod:`~.growth_training`; their science is
  ``lamina.anatomy``;
* the appendix: :mod:`~.organisms`; its science is ``lamina.sources.organisms``.

Verdicts are given by ``lamina.evidence.decide``. Import a chapter by name
(``from lamina.chapters.convergence import Config, run``); this package imports nothing
itself, so that importing one chapter stays cheap.
"""
