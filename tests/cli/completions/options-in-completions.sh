# Every long option a tool's --help shows must appear in its bash, zsh and fish
# completion files and in its man page (style.md §11). Runs over every
# tools/aff-*.cpp, so a tool added later is checked without editing this file.
# Prints one line per tool; any gap is listed and fails the test.
fail=0
for src in "$SRC"/tools/aff-*.cpp; do
  tool=$(basename "$src" .cpp)
  if ! command -v "$tool" >/dev/null; then echo "$tool: not built"; fail=1; continue; fi
  options=$("$tool" --help | grep -o -E -- '--[a-z0-9][a-z0-9-]*' | sort -u)
  [ -n "$options" ] || { echo "$tool: --help shows no long options"; fail=1; continue; }
  bash_file="$SRC/completions/bash/$tool" zsh_file="$SRC/completions/zsh/_$tool"
  fish_file="$SRC/completions/fish/$tool.fish" man_file="$SRC/man/$tool.1"
  missing=""
  for f in "$bash_file" "$zsh_file" "$fish_file" "$man_file"; do
    [ -f "$f" ] || { missing+=" $(basename "$f"):file-missing"; }
  done
  count=0
  for opt in $options; do
    count=$((count + 1))
    [ -f "$bash_file" ] && ! grep -q -w -e "$opt" "$bash_file" && missing+=" bash:$opt"
    [ -f "$zsh_file" ] && ! grep -q -e "$opt\b" "$zsh_file" && missing+=" zsh:$opt"
    [ -f "$fish_file" ] && ! grep -q -E -e "-l ${opt#--}( |$)" "$fish_file" && missing+=" fish:$opt"
    # roff writes a dash as \-; compare with the backslashes removed.
    [ -f "$man_file" ] && ! tr -d '\\' <"$man_file" | sed 's/fB//g; s/fR//g; s/fI//g' | grep -q -e "$opt\b" && missing+=" man:$opt"
  done
  if [ -n "$missing" ]; then
    echo "$tool: missing$missing"
    fail=1
  else
    echo "$tool: $count long options in bash, zsh, fish and man"
  fi
done
exit $fail
