# With -o DIR the sums file names the whole file relative to DIR, so `sha256sum -c` run
# in DIR checks every line (it used to list the whole file by its bare name, which is
# not in DIR, and fail).
cp "$DATA/tiny.aff" .
mkdir out
aff-split -q --max-size 8KiB tiny.aff -o out >/dev/null
cd out
sed 's/^[0-9a-f]*  //' SHA256SUMS
sha256sum -c SHA256SUMS
