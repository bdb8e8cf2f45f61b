# A dry run prints the plan and writes nothing.
cp "$DATA/tiny.aff" .
aff-split --dry-run --max-size 10000 tiny.aff
ls -I stdout -I stderr  # the harness keeps its captures here
