"""Layer 3, states: hidden states out of a model. Extraction (:mod:`.extract`) and its cache
(:mod:`.extract_cache`), the trajectory container (:mod:`.trajectories`), results files (:mod:`.io`),
paper 1's released states (:mod:`.peer_states`), the null controls (:mod:`.controls`) and the quantisation control
(:mod:`.quant_control`). Imports :mod:`lamina.core` and :mod:`lamina.sources`."""
