#!/bin/sh
# Regenerates the vendored front-end libraries under static/vendor/ from the npm registry, at
# the pinned versions below (listed with their licences in VERSIONS.md). Run it by hand after
# changing a version: `sh static/vendor/fetch.sh`; `make run` never builds anything. Each
# library has a block of its own; add new ones as blocks, leaving the others alone.
set -eu
VENDOR=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# --- CodeMirror 6 (the file editor and its merge view), one ES module bundled by esbuild ---
codemirror() {
  mkdir -p "$WORK/codemirror" && cd "$WORK/codemirror"
  npm init -y >/dev/null
  npm install --no-audit --no-fund --ignore-scripts --save-exact \
    codemirror@6.0.2 @codemirror/merge@6.12.3 @codemirror/lang-markdown@6.5.2 \
    @codemirror/lang-python@6.2.1 @codemirror/lang-javascript@6.2.5 \
    @codemirror/lang-html@6.4.12 @codemirror/lang-css@6.3.1 @codemirror/lang-json@6.0.2 \
    esbuild@0.28.2 >/dev/null
  cat > entry.js <<'JS'
export { EditorView, basicSetup } from "codemirror";
export { EditorState } from "@codemirror/state";
export { MergeView } from "@codemirror/merge";
export { markdown } from "@codemirror/lang-markdown";
export { python } from "@codemirror/lang-python";
export { javascript } from "@codemirror/lang-javascript";
export { html } from "@codemirror/lang-html";
export { css } from "@codemirror/lang-css";
export { json } from "@codemirror/lang-json";
JS
  ./node_modules/.bin/esbuild entry.js --bundle --format=esm --minify --legal-comments=eof \
    --outfile="$VENDOR/codemirror/codemirror.js"
  cp node_modules/codemirror/LICENSE "$VENDOR/codemirror/LICENSE"
  cd "$VENDOR"
}
codemirror
# --- end CodeMirror ---
