"""Layer 1, evidence: claims as data (:mod:`.claims`), statistics (:mod:`.stats`) and
resampling (:mod:`.resampling`), shared by every later layer (the organisms' behavioural gates, the three papers'
sciences, the book). Imports only
:mod:`lamina.core`."""
