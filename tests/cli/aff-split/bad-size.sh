cp "$DATA/tiny.aff" .
aff-split --max-size 12XB tiny.aff
