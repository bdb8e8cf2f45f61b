# Every man page formats without a troff warning (undefined macros, such as a text line
# that starts with a dot; unknown special characters; bad escapes): man --warnings
# prints them on stderr, and any line there fails this case, naming the page.
command -v man >/dev/null || { echo "man is not installed (setup.sh installs man-db)"; exit 1; }
fail=0
for page in "$SRC"/man/*.1; do
  warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=w -E UTF-8 -l "$page" 2>&1 >/dev/null)
  if [ -n "$warnings" ]; then
    echo "$(basename "$page"): $warnings"
    fail=1
  else
    echo "$(basename "$page"): no warnings"
  fi
done
exit $fail
