# Every long option in aff-serve --help appears in its bash, zsh and fish completions.
aff-serve --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u > options
[ "$(wc -l < options)" -gt 15 ]
while read -r opt; do
  grep -q -- "$opt" "$SRC/completions/bash/aff-serve" || { echo "bash lacks $opt"; exit 1; }
  grep -q -- "$opt" "$SRC/completions/zsh/_aff-serve" || { echo "zsh lacks $opt"; exit 1; }
  grep -q -- "-l ${opt#--}\b" "$SRC/completions/fish/aff-serve.fish" || { echo "fish lacks $opt"; exit 1; }
done < options
