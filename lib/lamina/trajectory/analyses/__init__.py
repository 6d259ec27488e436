"""Paper 1's analyses of one source: each chapter's tables and claim rows from a
:class:`lamina.trajectory.model_states.ModelStates` (:mod:`.convergence`, :mod:`.curvature`,
:mod:`.bifurcation`, :mod:`.three_phase`; what they share: :mod:`.shared`). The chapters run
them over their models (``lamina.chapters``)."""
