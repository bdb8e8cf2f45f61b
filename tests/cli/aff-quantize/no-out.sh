aff-quantize --src "$DATA/models/tiny-b"
