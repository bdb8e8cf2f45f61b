# A container cut short: one line naming the file and both sizes, status 1, no crash.
aff-info "$DATA/bad/truncated.aff"
