mkdir model.aff
aff-verify model.aff
