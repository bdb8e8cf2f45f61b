aff-verify
