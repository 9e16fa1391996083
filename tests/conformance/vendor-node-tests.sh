#!/usr/bin/env bash
# Refreshes onnx-node-tests/: copies from the full ONNX node-test folder every case that
# strider supports (the runner does not call it unsupported), so CI, which may not have
# the full folder, runs all of them. Run after adding an op:
#   tests/conformance/vendor-node-tests.sh build/tests/conformance/strider_conformance [SRC]
set -euo pipefail
runner=$1
src=${2:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/onnx-node-tests}
dst=$(cd "$(dirname "$0")" && pwd)/onnx-node-tests
cases=$("$runner" "$src" --verbose | awk '$1 == "pass" || $1 == "FAIL" { sub(":", "", $2); print $2 }')
rm -rf "$dst"
mkdir -p "$dst"
for c in $cases; do cp -r "$src/$c" "$dst/"; done
cp "$src/LICENSE" "$dst/LICENSE"
{
  echo "# ONNX backend node tests that strider supports"
  echo
  echo "Copied unchanged by vendor-node-tests.sh from the ONNX repository's"
  echo "onnx/backend/test/data/node/ at commit 6be0677fc22e74563e6eb472f931513aefe5648d."
  echo "Apache License 2.0: see LICENSE. $(echo "$cases" | wc -w) cases."
} > "$dst/README.md"
echo "vendored $(echo "$cases" | wc -w) cases into $dst ($(du -sh "$dst" | cut -f1))"
