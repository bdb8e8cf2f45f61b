# A model path that does not exist: failure naming the path.
aff-serve --port 0 -m no-such-model
