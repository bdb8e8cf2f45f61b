# The default summary of the tiny fixture container: size, role, model geometry, tensor counts.
cp "$DATA/tiny.aff" .
aff-info tiny.aff
