#!/usr/bin/env bash
# Screenshots of every page of the built book, as a reader at 1280 px sees it, with the network off
# (a proxy nobody listens on), into _build/screenshots/. Build the book first (`python3 dev.py book`).
# Needs Debian's chromium (`apt-get install -y chromium`).
#   tools/screenshots.sh              # every page, full height
#   tools/screenshots.sh 01 03        # only pages whose names start with these prefixes
set -euo pipefail
cd "$(dirname "$0")/.."
HTML=_build/html/book
OUT=_build/screenshots
WIDTH=1280
[ -d "$HTML" ] || { echo "no $HTML: build the book first (python3 dev.py book)" >&2; exit 1; }
mkdir -p "$OUT"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
PROBE='addEventListener("load", () => setTimeout(() => {
  const pres = [...document.querySelectorAll("div.highlight pre, div.output pre")]
    .filter(p => p.offsetParent);
  const wide = pres.filter(p => p.scrollWidth > p.clientWidth).length;
  let cols = "no";
  if (pres.length) {
    const p = pres[pres.length - 1], cs = getComputedStyle(p), s = document.createElement("span");
    s.textContent = "x".repeat(100); p.appendChild(s);
    cols = Math.floor((p.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight))
      / (s.getBoundingClientRect().width / 100));
    s.remove();
  }
  document.documentElement.setAttribute("data-fa2", document.documentElement.scrollHeight
    + " px high, code shows " + cols + " columns, " + wide + " of " + pres.length + " code blocks scroll");
}, 3000));'
PROBE=$(printf %s "$PROBE" | tr '\n' ' ' | sed 's/[#&]/\\&/g')
chrome() {
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --proxy-server=127.0.0.1:9 --user-data-dir="$profile" --hide-scrollbars \
    --virtual-time-budget=15000 "$@" 2>/dev/null
}
for page in "$HTML"/*.html; do
  name=$(basename "$page" .html)
  if [ $# -gt 0 ]; then
    match=no; for p in "$@"; do [[ $name == "$p"* ]] && match=yes; done
    [ $match = yes ] || continue
  fi
  url="file://$PWD/$page"
  # A copy of the page, beside it, reports (once MathJax has typeset) its height, how many columns a
  # code cell shows, and how many code blocks still scroll sideways.
  probe="$HTML/.probe-$name.html"
  sed "s#</body>#<script>$PROBE</script></body>#" "$page" > "$probe"
  report=$(chrome --window-size=$WIDTH,1000 --dump-dom "file://$PWD/$probe" \
    | sed -n 's/.*data-fa2="\([^"]*\)".*/\1/p' | head -1)
  rm -f "$probe"
  height=${report%% *}
  chrome --window-size=$WIDTH,"${height:-12000}" --screenshot="$OUT/$name.png" "$url" >/dev/null
  echo "$OUT/$name.png: ${report:-no report}"
done
