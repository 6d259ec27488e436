"""The foundation layer: the version, provenance (hashes, data folders, atomic writes) and array
helpers. Imports nothing else of lamina."""
