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
# apt_get runs apt-get, waiting (bounded) while another apt or dpkg holds
# its locks: DPkg::Lock::Timeout covers the dpkg lock; a lock held on the
# package lists makes `apt-get update` fail at once, so that case is
# retried, every 5 s for at most 5 minutes. Any other failure fails now.
apt_get() {
	local err deadline=$((SECONDS + 300))
	err="$(mktemp)"
	while ! "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 "$@" 2>"$err"; do
		if ! grep -qi 'lock' "$err" || [ "$SECONDS" -ge "$deadline" ]; then
			cat "$err" >&2
			rm -f "$err"
			return 1
		fi
		echo "setup: another package manager holds the apt lock; waiting" >&2
		sleep 5
	done
	cat "$err" >&2
	rm -f "$err"
}

echo "setup: apt-get install ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt_get update -qq
apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
