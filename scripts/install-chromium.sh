#!/bin/sh
# Installs Debian's chromium for the browser test of the HTML report (test/report-browser.test.ts),
# which drives it through playwright-core at /usr/bin/chromium. Idempotent: does nothing when present.
set -eu

if [ -x /usr/bin/chromium ]; then
  echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-chromium: apt-get not found; install the Debian package 'chromium' by hand" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-chromium: need root (or sudo) to apt-get install chromium" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
echo "installed: $(/usr/bin/chromium --version 2>/dev/null)"
