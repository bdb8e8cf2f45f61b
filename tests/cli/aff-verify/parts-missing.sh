# --parts with one part of the set deleted: the missing part named, status 1.
cp "$DATA/tiny.aff" .
aff-split -q --max-size 8KiB tiny.aff >/dev/null
rm tiny.aff.part-00002-of-00003
aff-verify -q --parts tiny.aff.part-00001-of-00003
