# SIGTERM in the middle of quantising: death by SIGTERM (status 143) and no file left
# behind, neither the container nor its temporary.
. "$SRC/tests/cli/aff-quantize/signalled.bash" TERM
