aff-info missing.aff
