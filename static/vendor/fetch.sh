#!/usr/bin/env bash
# Regenerates static/vendor/ from the npm registry at the pinned versions below: each package's
# tarball is fetched with `npm pack`, checked against the integrity pinned here (not only the
# registry's own), and only its browser build and licence files are copied. The app serves the
# copies as they are (no build step at `make run`); the files are committed, so this runs only
# to change a version. List a new library as one more `vendor` line and in VERSIONS.md.
#
#   static/vendor/fetch.sh          # needs node and npm
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# vendor DIR PACKAGE VERSION INTEGRITY FILE... (FILE is a path inside the package)
vendor() {
  local dir=$1 package=$2 version=$3 integrity=$4
  shift 4
  local tarball actual
  tarball=$(cd "$work" && npm pack --silent "$package@$version" | tail -n 1)
  actual="sha512-$(openssl dgst -sha512 -binary "$work/$tarball" | base64 -w 0)"
  if [ "$actual" != "$integrity" ]; then
    echo "fetch.sh: $package@$version: integrity $actual, expected $integrity" >&2
    exit 1
  fi
  mkdir -p "$work/$dir"
  tar -xzf "$work/$tarball" -C "$work/$dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  for file in "$@"; do
    cp "$work/$dir/package/$file" "$dir/"
  done
  echo "$dir: $package@$version"
}

vendor markdown-it markdown-it 15.0.3 \
  sha512-+Az7Ojz3iRGu8KYMvJ6xVhvrxP3eE+vEtJX75Ow88XBpcQNV/0lGX5ZynIIBftREo4DC2jsveAMDaeltmm8QvQ== \
  dist/browser/markdown-it.esm.min.mjs LICENSE
vendor dompurify dompurify 3.5.0 \
  sha512-LYC0ZkE8P1V42JsRYTwMdme/2ET8SpOc5AA2eOFjP/IadvRd2fwiT4TVz5vkfy0XUx12aS2UaRkTnfVPNOv9vw== \
  dist/purify.es.mjs LICENSE
# The "common" build: about 40 languages (Python, JavaScript, TypeScript, shell, JSON, YAML,
# HTML/XML, CSS, SQL, Go, Rust, Java, C, C++, C#, diff, Markdown, ...).
vendor highlight.js @highlightjs/cdn-assets 11.12.0 \
  sha512-KvOKXODaiFmId9xaq3xc5xCL66wVLUuOngDbO9B/kewbFTqdGbn2nJxNhN3H5R1cgDTVj6R8vH0zgiNDEGjpDw== \
  es/highlight.min.js LICENSE
# Accessibility checks in the browser tests only (tests/support/accessibility.py injects it into the page);
# no template loads it.
vendor axe-core axe-core 4.14.1 \
  sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ== \
  axe.min.js LICENSE LICENSE-3RD-PARTY.txt

# The file editor: CodeMirror 6 ships only ES modules in many packages, so they are
# installed at pinned versions and bundled into one module by a pinned esbuild (a build
# tool here, never shipped).
vendor_dir=$(pwd)
# --- CodeMirror 6 (the file editor and its merge view), one ES module bundled by esbuild ---
codemirror() {
  mkdir -p "$work/codemirror" && cd "$work/codemirror"
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
    --outfile="$vendor_dir/codemirror/codemirror.js"
  cp node_modules/codemirror/LICENSE "$vendor_dir/codemirror/LICENSE"
  cd "$vendor_dir"
}
codemirror
# --- end CodeMirror ---

# --- Diagrams and math in replies (static/rojo/diagrams.js, static/rojo/math.js) ---
# Mermaid's ES module build: its entry and the chunks it imports as diagrams need them (the
# page loads it only when a reply holds a diagram, and then only that diagram's chunks); the
# source maps are left out.
tarball=$(cd "$work" && npm pack --silent "mermaid@12.3.0" | tail -n 1)
actual="sha512-$(openssl dgst -sha512 -binary "$work/$tarball" | base64 -w 0)"
expected="sha512-4113TdXeLAsMruJ79OpFL5O8+LTFXhQqZ260rF3tgUmiNAtRm4Uume04I+65PRN6yZ69J4f8rVYWW8zRk65UYw=="
[ "$actual" = "$expected" ] || { echo "fetch.sh: mermaid: integrity $actual" >&2; exit 1; }
mkdir -p "$work/mermaid" && tar -xzf "$work/$tarball" -C "$work/mermaid"
rm -rf mermaid && mkdir -p mermaid/chunks/mermaid.esm.min
cp "$work/mermaid/package/dist/mermaid.esm.min.mjs" "$work/mermaid/package/LICENSE" mermaid/
cp "$work"/mermaid/package/dist/chunks/mermaid.esm.min/*.mjs mermaid/chunks/mermaid.esm.min/
echo "mermaid: mermaid@12.3.0"
# KaTeX: its ES module minified by the same pinned esbuild (the package ships it unminified
# only), its stylesheet, and its fonts in WOFF2 (the first format the stylesheet names).
katex() {
  mkdir -p "$work/katex" && cd "$work/katex"
  npm init -y >/dev/null
  npm install --no-audit --no-fund --ignore-scripts --save-exact katex@0.19.1 esbuild@0.28.2 >/dev/null
  rm -rf "$vendor_dir/katex" && mkdir -p "$vendor_dir/katex/fonts"
  ./node_modules/.bin/esbuild node_modules/katex/dist/katex.mjs --bundle --format=esm --minify \
    --legal-comments=eof --outfile="$vendor_dir/katex/katex.min.mjs"
  cp node_modules/katex/dist/katex.min.css node_modules/katex/LICENSE "$vendor_dir/katex/"
  cp node_modules/katex/dist/fonts/*.woff2 "$vendor_dir/katex/fonts/"
  cd "$vendor_dir"
  echo "katex: katex@0.19.1"
}
katex
