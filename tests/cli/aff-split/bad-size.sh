# An unknown unit in --max-size: refused, listing the units it takes.
cp "$DATA/tiny.aff" .
aff-split --max-size 12XB tiny.aff
