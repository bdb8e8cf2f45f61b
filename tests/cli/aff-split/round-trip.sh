# Parts are byte-exact: cat reassembles the input, and sha256sum -c accepts SHA256SUMS.
cp "$DATA/tiny.aff" .
aff-split -q --max-size 8KiB tiny.aff
mkdir joined && cat tiny.aff.part-* > joined/tiny.aff && cmp tiny.aff joined/tiny.aff
sha256sum -c SHA256SUMS
ls -I stdout -I stderr  # the harness keeps its captures here
