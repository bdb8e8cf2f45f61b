# A checkpoint without tokenizer.json, served without --tokenizer: the server has
# already bound its socket, then stops with a usage error naming the model.
aff-serve --port 0 -m "$DATA/models/tiny-a"
