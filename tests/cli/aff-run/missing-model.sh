# A model path that does not exist: one line naming it, status 1.
aff-run -m does-not-exist --tokens 1
