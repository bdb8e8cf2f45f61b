# A prompt token outside the vocabulary: refused with the token and the valid range, status 2.
aff-run -m "$DATA/models/tiny-a" --tokens 0,999
