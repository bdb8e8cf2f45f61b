# --out naming a FIFO: refused with one line and status 1, the FIFO left as it was (it
# used to be replaced by a regular file).
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" gguf m.imatrix.gguf
mkfifo p.afp
status=0
aff-profile --imatrix m.imatrix.gguf --out p.afp --top 0 --progress never >/dev/null 2>err || status=$?
echo "status $status"
cat err
[ -p p.afp ] && echo "still a FIFO"
