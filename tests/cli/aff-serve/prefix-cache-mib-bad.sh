# --prefix-cache-mib takes a whole number of MiB (0 = off): a negative or non-numeric value
# is refused with one line and the usage status, before anything is loaded.
aff-serve --test-engine --port 0 --prefix-cache-mib -5 || echo "status $?" >&2
aff-serve --test-engine --port 0 --prefix-cache-mib lots
