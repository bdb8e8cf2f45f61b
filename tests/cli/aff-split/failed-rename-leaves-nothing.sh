# Part 2's final name is taken by a directory, so its rename fails after part 1's has
# succeeded: the split must take part 1 back and leave no part, temporary or sums file.
cp "$DATA/tiny.aff" .
mkdir -p tiny.aff.part-00002-of-00003/blocker
status=0
aff-split -q --max-size 8KiB tiny.aff || status=$?
echo "exit $status"
ls -I stdout -I stderr  # the harness keeps its captures here
