# --parts with a stray part of another set beside the parts: named, status 1.
cp "$DATA/tiny.aff" .
aff-split -q --max-size 8KiB tiny.aff >/dev/null
cp tiny.aff.part-00003-of-00003 tiny.aff.part-00004-of-00004
aff-verify -q --parts tiny.aff.part-00001-of-00003
