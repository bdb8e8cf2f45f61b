# A legacy .dat imatrix has no per-expert counts: one clear line, status 1.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" dat m.dat
aff-profile --imatrix m.dat
