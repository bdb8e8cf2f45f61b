# A part of an earlier split into another count would make the set ambiguous.
cp "$DATA/tiny.aff" .
touch tiny.aff.part-00001-of-00005
aff-split -q --max-size 8KiB tiny.aff
