# A model path that does not exist is a usage error naming it.
aff-gpucheck -m no-such.aff
