# A client that starts a request and stalls gets 408 after --timeout-s, and the
# connection is closed: no hung connection.
. "$SRC/tests/cli/aff-serve/server.bash"
start_server --test-engine --timeout-s 1
port=${BASE##*:}
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"mess' >&3
start=$(date +%s%N)
timeout 5 cat <&3 > reply
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
head -n 1 reply | grep -q '^HTTP/1.1 408 '
[ "$elapsed" -lt 3000 ] || { echo "took $elapsed ms"; exit 1; }
