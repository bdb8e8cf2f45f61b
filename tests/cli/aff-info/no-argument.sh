aff-info
