# --prompt and --tokens are two ways to give the prompt: both at once is bad usage.
aff-run -m "$DATA/models/tiny-a" --tokens 1 -p hello
