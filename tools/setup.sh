#!/usr/bin/env bash
# One-time setup on a Debian 12 machine: npm packages, a WebGPU adapter, and chromium for the browser demo test.
# Where no adapter works (no GPU, or Debian's own Mesa 22.3 that Dawn rejects with
# "shaderUniform*ArrayDynamicIndexing required"), installs Mesa >= 24 lavapipe from bookworm-backports.
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ ! -d node_modules/webgpu ] || [ package.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

if node tools/probe-adapter.js >/dev/null 2>&1; then
  echo "setup: WebGPU adapter found: $(node tools/probe-adapter.js)"
else
  backports=/etc/apt/sources.list.d/bookworm-backports.sources
  if [ ! -f "$backports" ]; then
    as_root tee "$backports" >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  fi
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1 >/dev/null
  echo "setup: no WebGPU adapter was usable, so installed Mesa $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers) lavapipe (software Vulkan) from bookworm-backports: $(node tools/probe-adapter.js)"
fi

# The browser demo's test (test/browser/demo.test.ts) drives Debian's headless chromium; WebGPU runs on its
# built-in SwiftShader there, so no other package is needed.
if ! command -v chromium >/dev/null; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  echo "setup: installed Debian chromium $(dpkg-query -W -f='${Version}' chromium) for the browser demo test"
fi
