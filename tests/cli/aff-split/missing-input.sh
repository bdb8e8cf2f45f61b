aff-split missing.aff
