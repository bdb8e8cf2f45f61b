# The bash completions in a real interactive bash (readline under tmux): a container
# name with a space completes whole and escaped, with a space after it; a checkpoint
# directory completes with "/" and no space; -m offers *.aff files and directories
# (not other files) in aff-run and aff-serve alike. The tools are shell functions here
# that print their arguments, so what the completed line parses to is what is checked.
if ! command -v tmux >/dev/null; then
  echo "SKIP: tmux is not installed (setup.sh installs it)" >&2
  exit 77
fi
mkdir "ckpt dir" && : >"ckpt dir/config.json"
: >"my model.aff" && : >"my notes.txt" && : >"vocab tok.json"
session="aff-completion-$$"
socket="$PWD/tmux.sock"
tmux_() { tmux -S "$socket" "$@"; }
trap 'tmux_ kill-server 2>/dev/null || true' EXIT
tmux_ new-session -d -s "$session" -x 220 -y 60 "env -i HOME=$PWD TERM=xterm PATH=/usr/bin:/bin bash --norc --noprofile -i"
type_line() { tmux_ send-keys -t "$session" -l "$1"; }
key() { tmux_ send-keys -t "$session" "$@"; }
type_line "PS1='\$ '; aff-run() { printf '<%s>' run \"\$@\"; echo; }; aff-serve() { printf '<%s>' serve \"\$@\"; echo; }"
key Enter
type_line ". '$SRC/completions/bash/aff-run'; . '$SRC/completions/bash/aff-serve'; echo loaded"
key Enter
# One case: type the line, press Tab, type what follows, run it.
complete_and_run() {
  type_line "$1"; sleep 0.3; key Tab; sleep 0.3; type_line "$2"; key Enter
}
complete_and_run "aff-run -m my" "X"
complete_and_run "aff-run -m ck" "config.json"
complete_and_run "aff-serve -m my" "X"
complete_and_run "aff-serve -m ck" "config.json"
complete_and_run "aff-run --tokenizer vo" ""
complete_and_run "aff-run -m my\\ n" ""
complete_and_run "aff-serve -m my\\ m" ""
complete_and_run "aff-serve --ig" ""
key Enter
type_line "echo done"; key Enter
for _ in $(seq 50); do
  tmux_ capture-pane -p -t "$session" -S -100 | grep -q '^done$' && break
  sleep 0.2
done
tmux_ capture-pane -p -t "$session" -S -100 | grep '^<' || true
