aff-run -m "$DATA/models/tiny-a" --tokens 0,999
