# Part 2's final name is taken by a directory: the split is refused before anything is
# read or written (an output name may hold only a regular file), and no part, temporary
# or sums file is left. (A rename that fails after others succeeded is taken back too:
# tests/unit/core/atomic_file_test.cpp, commit_together.)
cp "$DATA/tiny.aff" .
mkdir -p tiny.aff.part-00002-of-00003/blocker
status=0
aff-split -q --max-size 8KiB tiny.aff || status=$?
echo "exit $status"
ls -I stdout -I stderr  # the harness keeps its captures here
