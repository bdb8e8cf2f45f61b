# Names resolve beside the SHA256SUMS file, wherever aff-verify runs from.
mkdir d && cp "$DATA/tiny.aff" d/
aff-split -q --max-size 16KiB d/tiny.aff >/dev/null
aff-verify -q -c d/SHA256SUMS --threads 3
