aff-info "$DATA/bad/truncated.aff"
