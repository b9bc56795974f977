#!/usr/bin/env bash
# Vendors MathJax into book/_static/mathjax/ so the built book renders math with no network.
# Source: the npm package mathjax@3.2.2 (Apache-2.0). Kept: the tex-chtml-full bundle (all TeX
# extensions inside, so nothing is fetched on demand), the CHTML woff-v2 fonts and the licence.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=3.2.2
DEST=book/_static/mathjax
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "mathjax@$VERSION" >/dev/null && tar xzf "mathjax-$VERSION.tgz")
rm -rf "$DEST"
mkdir -p "$DEST/output/chtml/fonts"
cp "$tmp/package/es5/tex-chtml-full.js" "$tmp/package/LICENSE" "$DEST/"
cp -r "$tmp/package/es5/output/chtml/fonts/woff-v2" "$DEST/output/chtml/fonts/"
echo "mathjax@$VERSION from the npm registry, by tools/vendor_mathjax.sh" > "$DEST/VERSION"
du -sh "$DEST"
