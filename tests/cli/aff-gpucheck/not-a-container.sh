# A file that is not a container is one error naming the file, in every build (the file is
# read before the GPU is looked for).
printf 'not a container at all, just text\n' > bad.aff
aff-gpucheck -m bad.aff
