# A container cut short: one line naming the file and both sizes, status 1, no crash.
cp "$DATA/bad/truncated.aff" .
aff-verify -q truncated.aff
