# cmake --install into a staging root (DESTDIR): every tool's binary, man page and bash,
# zsh and fish completions land where man and the shells look under the prefix; the
# installed man page formats and the installed bash completion loads (it finds its
# shared helper beside it) and completes.
build=$(cd "$(dirname "$(command -v aff-info)")/.." && pwd)
DESTDIR=$PWD/root cmake --install "$build" --prefix /usr/local >install.log
p=$PWD/root/usr/local
missing=""
for src in "$SRC"/tools/aff-*.cpp; do
  tool=$(basename "$src" .cpp)
  for f in "bin/$tool" "share/man/man1/$tool.1" "share/bash-completion/completions/$tool" \
           "share/zsh/site-functions/_$tool" "share/fish/vendor_completions.d/$tool.fish"; do
    [ -f "$p/$f" ] || missing+=" $f"
  done
done
[ -x "$p/bin/aff-info" ] || missing+=" bin/aff-info(executable)"
[ -z "$missing" ] || { echo "not installed:$missing"; exit 1; }
man -l "$p/share/man/man1/aff-run.1" >page.txt 2>man.err || { cat man.err; exit 1; }
grep -q "generate from a DeepSeek-V4 checkpoint" page.txt || { echo "installed man page: unexpected text"; head -5 page.txt; exit 1; }
bash --norc --noprofile -c '
  . "$1/share/bash-completion/completions/aff-serve"
  COMP_WORDS=(aff-serve --temper); COMP_CWORD=1; _aff_serve; printf "%s\n" "${COMPREPLY[@]}"' _ "$p"
