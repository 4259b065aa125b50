#!/usr/bin/env bash
# Installs the Debian packages the tests need when they are missing:
# redis-server and a static busybox (for the local Redis test image), make,
# and ca-certificates (for the Go module proxy). Needs root or sudo only
# when something is missing.
set -euo pipefail

packages=(redis-server busybox-static make ca-certificates)
missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
	sudo=(sudo)
fi
echo "setup: apt-get install ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
