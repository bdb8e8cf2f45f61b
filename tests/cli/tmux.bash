# Sourced by the live-view CLI cases: a real terminal under tmux, on a private server
# socket in the case's directory (no user configuration), killed when the case exits.
#   pane_start COLS ROWS COMMAND   runs COMMAND in a fresh pane of that size
#   pane_text / pane_styled        the pane as text / with its colour escapes (capture-pane -e)
#   pane_history                   the pane's text with its scrolled-off lines
#   pane_wait REGEX [SECONDS]      waits until the pane's text matches (extended regex)
#   pane_keys KEYS...              tmux send-keys
#   pane_resize COLS ROWS
#   pane_frames BASE TRIES REGEX...  frames of a running view (device scripts; see below)
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
# Copies the pane to BASE.txt and BASE.ansi every half second while it matches every REGEX,
# 6 frames at most, and stops once a frame was taken and the pane no longer matches (the run
# ended and the view closed) or after TRIES looks; sets FRAMES to how many it took.
pane_frames() {
  local base=$1 tries=$2 text regex ok
  shift 2
  FRAMES=0
  for _ in $(seq "$tries"); do
    text=$(pane_text)
    ok=1
    for regex in "$@"; do grep -Eq -- "$regex" <<<"$text" || ok=0; done
    if [ $ok = 1 ]; then
      printf '%s\n' "$text" >"$base.txt"
      pane_styled >"$base.ansi"
      FRAMES=$((FRAMES + 1))
      [ $FRAMES -ge 6 ] && break
    elif [ $FRAMES -gt 0 ]; then
      break
    fi
    sleep 0.5
  done
}
