#!/usr/bin/env bash
# Packs what the GPU host needs to run the TypeScript CLI into .carry/ (git-ignored): this machine's node
# binary (xz) and the CLI bundled into one ES module. Name .carry in the device tool's `carry`; there run
#   xz -dc .carry/node.xz > /tmp/node && chmod +x /tmp/node && /tmp/node .carry/kforge.mjs <args>
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry
node_modules/.bin/esbuild src/cli/main.ts --bundle --platform=node --format=esm --target=node20 \
  --outfile=.carry/kforge.mjs --log-level=warning \
  --banner:js="import { createRequire as __kforgeRequire } from 'node:module'; const require = __kforgeRequire(import.meta.url);"
[ -f .carry/node.xz ] || xz -T2 -6 -c "$(command -v node)" > .carry/node.xz
du -sh .carry/*
