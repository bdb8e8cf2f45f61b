# A checkpoint whose safetensors file was cut short: one line naming the file, no
# container and no temporary left.
mkdir ck
cp "$DATA/models/tiny-b/config.json" ck/
head -c 300000 "$DATA/models/tiny-b/model.safetensors" > ck/model.safetensors
status=0
aff-quantize --src ck --out m.aff || status=$?
ls -A | grep -v -x -e ck -e stdout -e stderr || echo "no other file"
exit $status
