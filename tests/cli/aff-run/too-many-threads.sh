# -t 100000 would start 100000 threads and exhaust the machine's process table: refused
# as bad usage, naming the cap (4 x the hardware threads).
aff-run -m "$DATA/models/tiny-a" --tokens 0 -t 100000
