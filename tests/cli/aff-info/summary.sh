cp "$DATA/tiny.aff" .
aff-info tiny.aff
