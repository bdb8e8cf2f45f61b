# A checkpoint directory is refused with the reason (aff-gpucheck checks containers).
aff-gpucheck -m "$DATA/models/tiny-a"
