#!/bin/sh
# ctest fixture of test_model_reference: writes the random-weight models and the numpy
# reference's expected logits into OUT_DIR. Without /usr/bin/python3 and numpy it
# leaves OUT_DIR/SKIP with the reason, and the C test skips.
# usage: make_expected.sh OUT_DIR
set -eu
out_dir=$1
here=$(dirname "$0")
mkdir -p "$out_dir"
rm -f "$out_dir/SKIP" "$out_dir/manifest.tsv"
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    echo "/usr/bin/python3 with numpy is absent (Debian: apt-get install python3-numpy)" >"$out_dir/SKIP"
    cat "$out_dir/SKIP"
    exit 0
fi
/usr/bin/python3 "$here/make_random_models.py" "$out_dir"
/usr/bin/python3 "$here/model_reference.py" expect "$out_dir/manifest.tsv"
