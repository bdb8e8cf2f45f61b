# --codebook naming a file that is neither a container nor a codebook: one line naming
# it, and no draft written.
printf 'this is not a codebook, nor a container: 48 bytes' > junk.bin
status=0
aff-quantize --dspark --codebook junk.bin --src "$DATA/models/tiny-a-fp8" --out d.aff || status=$?
test ! -e d.aff
exit $status
