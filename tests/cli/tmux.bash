# Sourced by the live-view CLI cases: a real terminal under tmux, on a private server
# socket in the case's directory (no user configuration), killed when the case exits.
#   pane_start COLS ROWS COMMAND   runs COMMAND in a fresh pane of that size
#   pane_text / pane_styled        the pane as text / with its colour escapes (capture-pane -e)
#   pane_history                   the pane's text with its scrolled-off lines
#   pane_wait REGEX [SECONDS]      waits until the pane's text matches (extended regex)
#   pane_keys KEYS...              tmux send-keys
#   pane_resize COLS ROWS
TMUX_SOCKET=$PWD/tmux.sock
tmx() { tmux -S "$TMUX_SOCKET" -f /dev/null "$@"; }
pane_start() {
  local cols=$1 rows=$2
  shift 2
  trap 'tmx kill-server 2>/dev/null || true' EXIT
  tmx new-session -d -s view -x "$cols" -y "$rows" "$*"
  tmx set-option -t view remain-on-exit on >/dev/null
}
pane_text() { tmx capture-pane -p -t view; }
pane_styled() { tmx capture-pane -p -e -t view; }
pane_history() { tmx capture-pane -p -S - -t view; }  # with what scrolled off
pane_wait() {
  local regex=$1 tries=$(( ${2:-20} * 10 ))
  for _ in $(seq "$tries"); do
    pane_text | grep -Eq -- "$regex" && return 0
    sleep 0.1
  done
  echo "the pane never showed /$regex/:"; pane_text; return 1
}
pane_keys() { tmx send-keys -t view "$@"; }
pane_resize() { tmx resize-window -t view -x "$1" -y "$2"; }
# The widest line of the pane, in characters (UTF-8).
pane_width() { pane_text | LC_ALL=C.UTF-8 wc -L; }
