#!/usr/bin/env bash
# Packs what the GPU host needs to run the TypeScript CLI into .carry/ (git-ignored): this machine's node
# binary (xz) and the CLI bundled into one ES module. Name .carry in the device tool's `carry`; there run
#   xz -dc .carry/node.xz > /tmp/node && chmod +x /tmp/node && /tmp/node .carry/kforge.mjs <args>
# With --head, the bundle is built from the last commit, and .carry/tree.tgz holds that commit's tree: the
# device then runs committed code only, whatever else is uncommitted in this checkout —
#   mkdir -p /tmp/kf && tar xzf .carry/tree.tgz -C /tmp/kf && cp -r .carry /tmp/kf/ && cd /tmp/kf
# (a copy, not a link: the CLI finds its repository from the real path of .carry/kforge.mjs)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry
src=.
if [ "${1:-}" = "--head" ]; then
  src=$(mktemp -d)
  git archive --format=tar HEAD | tar x -C "$src"
  ln -s "$PWD/node_modules" "$src/node_modules"
  git archive --format=tar.gz -o .carry/tree.tgz HEAD
fi
node_modules/.bin/esbuild "$src/src/cli/main.ts" --bundle --platform=node --format=esm --target=node20 \
  --outfile=.carry/kforge.mjs --log-level=warning \
  --banner:js="import { createRequire as __kforgeRequire } from 'node:module'; const require = __kforgeRequire(import.meta.url);"
[ -f .carry/node.xz ] || xz -T2 -6 -c "$(command -v node)" > .carry/node.xz
[ "$src" = . ] || rm -rf "$src"
du -sh .carry/*
