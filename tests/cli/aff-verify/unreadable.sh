# A directory where a container is expected: refused as not a regular file, status 1.
mkdir model.aff
aff-verify model.aff
