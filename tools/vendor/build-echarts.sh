#!/usr/bin/env bash
# Rebuild static/vendor/echarts-parallel.min.js (Apache ECharts' parallel coordinates only, ~1/3 of the full
# bundle) from the versions pinned in package-lock.json. Run it after changing them; the bundle is committed, so
# neither `make run` nor CI needs Node.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
npm ci --no-audit --no-fund --silent
out="$here/../../static/vendor"
npx esbuild echarts-parallel.js --bundle --minify --format=iife --target=es2019 \
  --legal-comments=none --outfile="$out/echarts-parallel.min.js"
version="$(node -p 'require("echarts/package.json").version')"
{ echo "Apache ECharts $version (npm: echarts), its parallel chart, parallel, tooltip and visualMap components and"
  echo "canvas renderer, bundled by tools/vendor/build-echarts.sh"
  echo
  cat node_modules/echarts/LICENSE; } > "$out/echarts.LICENSE"
rm -rf node_modules
ls -l "$out/echarts-parallel.min.js"
