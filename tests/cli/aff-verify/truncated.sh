cp "$DATA/bad/truncated.aff" .
aff-verify -q truncated.aff
