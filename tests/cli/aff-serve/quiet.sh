# -q prints nothing on stderr but errors: not even the listening line (it used to). A
# SIGTERM then stops the server with status 0, quietly too.
aff-serve -q --test-engine --port 0 2>err &
pid=$!
sleep 0.5
kill -0 $pid
kill -TERM $pid
status=0
wait $pid || status=$?
echo "status $status"
wc -c < err
