aff-run -m "$DATA/models/tiny-a" --tokens 1 -p hello
