# SIGTERM is handled like SIGINT: the temporary is removed and the process exits with
# status 143 (it used to die by the signal, which a parent such as Python's subprocess
# sees as -15, and in most runs left out.aff's temporary behind).
python3 "$SRC/tests/cli/aff-quantize/make_checkpoint.py" big "$DATA" big
python3 - <<'PY'
import os, signal, subprocess, time
p = subprocess.Popen(["aff-quantize", "--src", "big", "--out", "m.aff", "--threads", "1", "--progress", "always"],
                     stderr=subprocess.PIPE, text=True)
for line in p.stderr:
    if line.startswith("quantising experts: started"):
        break
p.send_signal(signal.SIGTERM)
p.stderr.read()
print("returncode", p.wait())
print(sorted(set(os.listdir(".")) - {"big", "stdout", "stderr"}) or "no other file")
PY
