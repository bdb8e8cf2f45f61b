aff-run -m does-not-exist --tokens 1
