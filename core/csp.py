"""Content-Security-Policy values the pages share (the policy itself is in portal/settings.py)."""

# Pages that run WebAssembly (the hash-wasm checksums of uploads) add this to script-src, nothing more.
WASM = "'wasm-unsafe-eval'"
