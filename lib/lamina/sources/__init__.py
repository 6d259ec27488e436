"""Layer 2, sources: where models and texts come from. Model loading (:mod:`.models`), the
offline GGUF models and their fp32 cache (:mod:`.gguf_models`, :mod:`.gguf_cache`), GGUF
quantisation (:mod:`.quantize`), paper 1's released states (:mod:`.peer`), the prompt sets
(:mod:`.prompts`) and lamina's model organisms (:mod:`.organisms`). Imports only
:mod:`lamina.core` and :mod:`lamina.evidence`."""
