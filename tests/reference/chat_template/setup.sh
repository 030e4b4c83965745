#!/bin/sh
# ctest fixture of test_chat_template: installs the official chat-template renderer
# (@huggingface/jinja, pinned by package-lock.json) and render.mjs into OUT_DIR.
#
#   setup.sh OUT_DIR
#
# Where node or npm is missing, or npm ci fails (no registry), OUT_DIR/SKIP holds the
# reason and the test skips its comparisons with it. Reinstalls only when the lock
# file changed.
set -eu
out_dir=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out_dir"
rm -f "$out_dir/SKIP"
cp "$here/render.mjs" "$out_dir/"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node and npm are absent (Debian: apt-get install nodejs npm), so no official renderer to compare with" >"$out_dir/SKIP"
    cat "$out_dir/SKIP"
    exit 0
fi
if cmp -s "$here/package-lock.json" "$out_dir/package-lock.json" && [ -f "$out_dir/node_modules/@huggingface/jinja/package.json" ]; then
    echo "chat-template reference: $out_dir is up to date"
    exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$out_dir/"
if ! npm ci --prefix "$out_dir" --prefer-offline --no-audit --no-fund >"$out_dir/npm-ci.log" 2>&1; then
    tail -5 "$out_dir/npm-ci.log"
    echo "npm ci --prefix $out_dir failed (no registry?); see $out_dir/npm-ci.log" >"$out_dir/SKIP"
    rm -f "$out_dir/package-lock.json"
fi
exit 0
