# A --src that does not exist: one line naming it, no output file.
status=0
aff-quantize --src no-such-dir --out m.aff || status=$?
test ! -e m.aff
exit $status
