aff-run -m "$DATA/tiny.aff" --tokens 1
