# --logits-out naming a FIFO (or a device node such as /dev/full): refused before the
# model loads, the FIFO left as it was (the writer used to replace it with a regular
# file; as root it did that to /dev/full). The logits file needs its header rewritten at
# the end, so it cannot be streamed into a pipe.
mkfifo logits
status=0
aff-run -m "$DATA/models/tiny-a" --tokens 0,5 -n 1 --logits-out logits 2>err >/dev/null || status=$?
echo "status $status"
cat err
[ -p logits ] && echo "still a FIFO"
