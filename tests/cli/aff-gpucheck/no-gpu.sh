# Without a GPU to check (a build without GPU support, as CI's; or no visible device) a valid
# container gets one line saying so and exit status 1, after the file itself was checked.
aff-quantize --src "$DATA/models/tiny-a" --out m.aff --progress never 2>/dev/null
status=0
aff-gpucheck -m m.aff 2>err || status=$?
cat err
[ "$status" = 1 ]
grep -q -x -E 'aff-gpucheck: (this build of aff has no GPU support \(configured with AFF_GPU=OFF\): nothing to check|no GPU is visible \(.*\))' err
