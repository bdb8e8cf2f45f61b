# The embedded default model (tests/data/models/tiny-trained.aff, trained by
# tests/oracle/train_tiny_model.sh): greedy generation from the main job's prompt, pinned byte for
# byte on the CPU (tests/oracle/ship_tiny_model.sh wrote the expected text).
aff-run -m "$DATA/models/tiny-trained.aff" -p 'def fibonacci(n):' -n 40 --temp 0 -q
