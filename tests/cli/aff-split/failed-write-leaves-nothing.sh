# A write that fails half-way (file size limit, as on a full disk) leaves nothing
# under a final name and no temporary. SIGXFSZ is ignored so write() returns EFBIG.
cp "$DATA/tiny.aff" .
status=0
(trap '' XFSZ; ulimit -f 12; aff-split -q --max-size 16KiB tiny.aff) || status=$?
echo "exit $status"
ls -I stdout -I stderr  # the harness keeps its captures here
