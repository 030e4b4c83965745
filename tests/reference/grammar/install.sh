#!/bin/sh
# ctest fixture of test_grammar_corpus: installs the JSON Schema corpora and the
# validator (npm ci of this folder's package-lock.json) and the scripts into OUT_DIR.
#
#   install.sh OUT_DIR
#
# npm ci runs only when the lock file changed; the scripts are copied every time.
# Where node or npm is absent, or the registry cannot be reached, OUT_DIR/SKIP holds
# the reason and the test skips with it.
set -eu
out_dir=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out_dir"
rm -f "$out_dir/SKIP"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node and npm are absent (Debian: apt-get install nodejs npm)" >"$out_dir/SKIP"
    cat "$out_dir/SKIP"
    exit 0
fi
if ! cmp -s "$here/package-lock.json" "$out_dir/package-lock.json" || ! [ -d "$out_dir/node_modules/ajv" ]; then
    cp "$here/package.json" "$here/package-lock.json" "$out_dir/"
    if ! npm ci --prefix "$out_dir" --prefer-offline --no-audit --no-fund >"$out_dir/npm-ci.log" 2>&1; then
        tail -5 "$out_dir/npm-ci.log"
        rm -f "$out_dir/package-lock.json" # try again next time
        echo "npm ci --prefix $out_dir failed (no registry?); see $out_dir/npm-ci.log" >"$out_dir/SKIP"
        cat "$out_dir/SKIP"
        exit 0
    fi
fi
cp "$here"/*.mjs "$out_dir/"
echo "install.sh: ajv $(node -p "require('$out_dir/node_modules/ajv/package.json').version") and the corpora are in $out_dir"
