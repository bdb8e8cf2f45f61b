# -ngl (llama.cpp's GPU-layers flag) is refused before anything loads, saying what it
# would have meant and what aff uses instead; the model path is not even looked at.
aff-run -m does-not-exist -p hi -ngl 99
