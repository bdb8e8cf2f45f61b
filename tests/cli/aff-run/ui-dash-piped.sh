# --ui dash does not fall back to lines: without a terminal on stderr it stops with one line.
aff-run -m "$DATA/models/tiny-a" --tokens 0,5 -n 3 --ui dash
