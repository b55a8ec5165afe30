#!/usr/bin/env bash
# One-time setup: npm packages, a WebGPU adapter, and chromium for the browser demo test.
#   bash tools/setup.sh                 everything `npm test` needs
#   SETUP_BROWSER=0 bash tools/setup.sh  without chromium (then skip test/browser: npm run test:cpu, test:webgpu)
# Where no adapter works (no GPU, or a Mesa older than 24, e.g. Debian 12's 22.3, which Dawn rejects with
# "shaderUniform*ArrayDynamicIndexing required"), it installs Mesa's lavapipe (software Vulkan): the distribution's
# own mesa-vulkan-drivers when it is 24 or newer (Debian 13, Ubuntu 24.04), on Debian 12 the one of
# bookworm-backports from the mirror this machine's apt sources already use; on anything else it says what to do.
# The functions below are read by test/cpu/setup-script.test.ts (the script runs only when executed, not sourced).
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# The value of KEY in an os-release FILE (ID, VERSION_CODENAME, PRETTY_NAME), quotes removed.
os_release_value() {
  local file=$1 key=$2
  sed -n "s/^${key}=//p" "$file" | tr -d '"' | head -n 1
}

# The Debian mirror the apt sources under APT_DIR already use for the distribution's main suite (not security, not
# backports), from one-line sources.list entries or deb822 .sources files; nothing if there is none.
debian_mirror() {
  local dir=$1 file
  for file in "$dir/sources.list" "$dir"/sources.list.d/*.list; do
    [ -f "$file" ] || continue
    # One-line entries, "deb [options] URI SUITE COMPONENTS...": a plain suite has no "-".
    sed -e 's/\[[^]]*\]//' "$file" | awk '$1 == "deb" && $3 !~ /-/ && $2 ~ /\/debian\/?$/ { print $2; exit }' |
      grep . && return 0
  done
  for file in "$dir"/sources.list.d/*.sources; do
    [ -f "$file" ] || continue
    # deb822: stanzas separated by blank lines; take URIs of a stanza whose Suites has a plain suite name.
    awk 'BEGIN { RS = ""; FS = "\n" }
         { uri = ""; plain = 0
           for (i = 1; i <= NF; i++) {
             if ($i ~ /^URIs:/) { split($i, u, /[ \t]+/); uri = u[2] }
             if ($i ~ /^Suites:/) { n = split($i, s, /[ \t]+/); for (j = 2; j <= n; j++) if (s[j] !~ /-/) plain = 1 }
           }
           if (plain && uri ~ /\/debian\/?$/) { print uri; exit } }' "$file" | head -n 1 | grep . && return 0
  done
  return 1
}

# How to get a lavapipe Dawn accepts, from an os-release FILE and the version apt would install of
# mesa-vulkan-drivers (empty if none): "distro", "bookworm-backports", or "unsupported: <what to do>".
lavapipe_plan() {
  local file=$1 candidate=$2 id codename major
  id=$(os_release_value "$file" ID)
  codename=$(os_release_value "$file" VERSION_CODENAME)
  major=${candidate%%.*}
  major=${major##*:}
  if [ -n "$candidate" ] && [ "$major" -ge 24 ] 2>/dev/null; then
    echo distro
  elif [ "$id" = debian ] && [ "$codename" = bookworm ]; then
    echo bookworm-backports
  else
    echo "unsupported: $(os_release_value "$file" PRETTY_NAME) offers mesa-vulkan-drivers ${candidate:-(none)}; Dawn" \
      "needs Mesa 24 or newer. Install a Mesa >= 24 lavapipe (mesa-vulkan-drivers and libvulkan1) from your" \
      "distribution's newer release or backports, or run on Debian 12/13 or Ubuntu 24.04+, then rerun tools/setup.sh"
  fi
}

apt_install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

install_lavapipe() {
  local candidate plan mirror backports=/etc/apt/sources.list.d/bookworm-backports.sources
  as_root apt-get update -qq
  candidate=$(apt-cache policy mesa-vulkan-drivers | sed -n 's/^ *Candidate: //p' | grep -v '(none)' || true)
  plan=$(lavapipe_plan /etc/os-release "$candidate")
  case $plan in
    distro)
      apt_install mesa-vulkan-drivers libvulkan1
      ;;
    bookworm-backports)
      if [ ! -f "$backports" ]; then
        if ! mirror=$(debian_mirror /etc/apt); then
          echo "setup: no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d to add" \
            "bookworm-backports from; add it to your apt sources, then rerun tools/setup.sh" >&2
          exit 1
        fi
        printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: %s\n' \
          "$mirror" /usr/share/keyrings/debian-archive-keyring.gpg | as_root tee "$backports" >/dev/null
        as_root apt-get update -qq
      fi
      apt_install -t bookworm-backports mesa-vulkan-drivers libvulkan1
      ;;
    *)
      echo "setup: no WebGPU adapter works here, and ${plan#unsupported: }" >&2
      exit 1
      ;;
  esac
  echo "setup: no WebGPU adapter was usable, so installed Mesa $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)" \
    "lavapipe (software Vulkan, ${plan}): $(node tools/probe-adapter.js)"
}

main() {
  cd "$(dirname "$0")/.."
  export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
  mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

  if [ ! -d node_modules/webgpu ] || [ package.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund
  fi

  if node tools/probe-adapter.js >/dev/null 2>&1; then
    echo "setup: WebGPU adapter found: $(node tools/probe-adapter.js)"
  else
    install_lavapipe
  fi

  # test/cpu/verl-goldens.test.ts reruns tools/verl/goldens.py, numpy ports of verl's functions.
  if ! python3 -c 'import numpy' >/dev/null 2>&1; then
    as_root apt-get update -qq
    apt_install python3 python3-numpy
    echo "setup: installed python3-numpy for the verl goldens' check (tools/verl/goldens.py)"
  fi

  # The browser demo's test (test/browser/demo.test.ts) drives headless chromium at /usr/bin/chromium; WebGPU runs
  # on its built-in SwiftShader there, so no other package is needed. Present already, or not wanted: nothing to do.
  if [ -x /usr/bin/chromium ]; then return; fi
  if [ "${SETUP_BROWSER:-1}" = 0 ]; then
    echo "setup: SETUP_BROWSER=0: chromium not installed; test/browser will fail, run the other tiers" \
      "(npm run test:cpu, npm run test:webgpu)"
  else
    if [ "$(os_release_value /etc/os-release ID)" != debian ]; then
      echo "setup: the browser test needs /usr/bin/chromium, Debian's package; install a chromium there, or set" \
        "SETUP_BROWSER=0 and run the other tiers" >&2
      exit 1
    fi
    as_root apt-get update -qq
    apt_install chromium
    echo "setup: installed Debian chromium $(dpkg-query -W -f='${Version}' chromium) for the browser demo test"
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then main; fi
