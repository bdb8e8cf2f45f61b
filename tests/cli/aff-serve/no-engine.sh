# Without --model or --test-engine there is nothing to serve: usage error.
aff-serve --port 0
