"""Layer 3, evidence: claims as data (:mod:`.claims`), statistics (:mod:`.stats`) and
resampling (:mod:`.resampling`), shared by the three papers' sciences. Imports only
:mod:`lamina.core`."""
