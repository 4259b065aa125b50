#!/usr/bin/env bash
# Builds the local Redis image used by the integration tests without any
# registry access: the host's redis-server binary, the shared libraries it
# links against (with the dynamic loader) and a static busybox that provides
# the shell and the few applets the testcontainers listening-port wait runs
# inside the container: `/bin/sh -c` with `cat /proc/net/tcp* | awk | grep`
# (its fallbacks, nc -z and bash's /dev/tcp, are not needed: that check
# answers first).
#
# Requirements (Debian): apt-get install redis-server busybox-static
#
# Usage: scripts/build-redis-image.sh [image]   (default ratekeeper/redis:local)
# Environment: REDIS_SERVER (default /usr/bin/redis-server),
#              BUSYBOX (default /bin/busybox or /usr/bin/busybox),
#              FORCE=1 rebuilds even when an up-to-date image exists.
#
# Idempotent: the image carries labels with the SHA-256 of the redis-server
# binary and of the recipe version; when an image with both labels matching
# exists, nothing is rebuilt.
set -euo pipefail

IMAGE="${1:-${RATEKEEPER_REDIS_IMAGE:-ratekeeper/redis:local}}"
REDIS_SERVER="${REDIS_SERVER:-/usr/bin/redis-server}"
# Bump when the image layout below changes, so existing images are rebuilt.
RECIPE=2
LABEL_HASH=org.ratekeeper.redis-server.sha256
LABEL_RECIPE=org.ratekeeper.image-recipe

die() { echo "build-redis-image: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker not found on PATH"
command -v ldd >/dev/null || die "ldd not found (install libc-bin)"
[ -e "$REDIS_SERVER" ] || die "$REDIS_SERVER not found (apt-get install redis-server)"

if [ -z "${BUSYBOX:-}" ]; then
	for b in /bin/busybox /usr/bin/busybox; do
		if [ -x "$b" ]; then BUSYBOX=$b; break; fi
	done
fi
[ -n "${BUSYBOX:-}" ] && [ -x "$BUSYBOX" ] || die "busybox not found (apt-get install busybox-static)"
# A dynamically linked busybox would need its own libraries; insist on the
# static build so /bin/sh works whatever libraries are copied.
if ldd "$BUSYBOX" >/dev/null 2>&1; then
	die "$BUSYBOX is dynamically linked; install busybox-static"
fi

# Debian installs redis-server as a symlink to redis-check-rdb; the binary
# picks its mode from argv[0], so it is copied under the name redis-server.
real_server="$(readlink -f "$REDIS_SERVER")"
hash="$(sha256sum "$real_server" | cut -d' ' -f1)"

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
	have_hash="$(docker image inspect -f "{{ index .Config.Labels \"$LABEL_HASH\" }}" "$IMAGE" 2>/dev/null || true)"
	have_recipe="$(docker image inspect -f "{{ index .Config.Labels \"$LABEL_RECIPE\" }}" "$IMAGE" 2>/dev/null || true)"
	if [ "$have_hash" = "$hash" ] && [ "$have_recipe" = "$RECIPE" ]; then
		echo "build-redis-image: $IMAGE is up to date (redis-server sha256 $hash)"
		exit 0
	fi
	echo "build-redis-image: $IMAGE is stale (have '$have_hash' recipe '$have_recipe'), rebuilding"
fi

old_id="$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

mkdir -p "$root/usr/bin" "$root/bin" "$root/tmp" "$root/data" "$root/etc"
chmod 1777 "$root/tmp"
cp "$real_server" "$root/usr/bin/redis-server"

# Every library ldd resolves, plus the loader (the line without "=>"),
# dereferenced and copied to the path ldd reports.
ldd "$real_server" | awk '
	$2 == "=>" && $3 ~ /^\// { print $3; next }
	$1 ~ /^\// { print $1 }
' | while read -r lib; do
	[ -e "$lib" ] || die "library $lib listed by ldd does not exist"
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done
[ -n "$(find "$root" -name 'ld-linux*')" ] || die "dynamic loader not found in ldd output"
# The copies keep the paths ldd printed: the interpreter path recorded in
# the binary and the loader's default search path both use them.

cp "$BUSYBOX" "$root/bin/busybox"
for applet in sh cat awk grep nc true sleep ls ps kill; do
	ln -s busybox "$root/bin/$applet"
done
# Minimal identity files so tools that look up users do not complain.
printf 'root:x:0:0:root:/data:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"

version="$("$REDIS_SERVER" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')"
echo "build-redis-image: importing $IMAGE (redis $version, sha256 $hash)"
tar -C "$root" --numeric-owner --owner=0 --group=0 -cf - . | docker import \
	--change 'ENTRYPOINT ["/usr/bin/redis-server"]' \
	--change 'CMD ["--protected-mode","no"]' \
	--change 'WORKDIR /data' \
	--change 'EXPOSE 6379' \
	--change "ENV PATH=/usr/local/bin:/usr/bin:/bin" \
	--change "LABEL $LABEL_HASH=$hash" \
	--change "LABEL $LABEL_RECIPE=$RECIPE" \
	--change "LABEL org.ratekeeper.redis-version=$version" \
	- "$IMAGE" >/dev/null

# Check the image: redis-server starts, and the wait strategy's port check
# finds its listening socket (6379 = 0x18EB).
docker run --rm --entrypoint /usr/bin/redis-server "$IMAGE" --version >/dev/null ||
	die "redis-server does not run inside $IMAGE"
docker run --rm --entrypoint /bin/sh "$IMAGE" -c \
	'/usr/bin/redis-server --save "" --appendonly no --daemonize yes >/dev/null &&
	 for i in 1 2 3 4 5 6 7 8 9 10; do
		cat /proc/net/tcp* | awk "{print \$2}" | grep -qi :18eb && exit 0
		sleep 0.2
	 done; exit 1' ||
	die "the listening-port check (sh, cat, awk, grep) fails inside $IMAGE"
# Drop the image this one replaced (kept if a container still uses it).
new_id="$(docker image inspect -f '{{.Id}}' "$IMAGE")"
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
	docker image rm "$old_id" >/dev/null 2>&1 || true
fi
echo "build-redis-image: built $IMAGE"
