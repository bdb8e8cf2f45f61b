# SIGINT in the middle of quantising: exit status 130 and no file left behind, neither
# the container nor its temporary.
. "$SRC/tests/cli/aff-quantize/signalled.bash" INT
