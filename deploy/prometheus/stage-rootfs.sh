#!/bin/sh
# Stages the root file system of the edgebase-prometheus image into DIR:
# the host's Prometheus (Debian's package: /usr/bin/prometheus, dynamically
# linked against glibc), every shared library ldd lists for it, its web
# assets, and empty /etc/prometheus and /prometheus directories. No base
# image can be pulled where edgebase is built, so the image is assembled
# FROM scratch out of these files (deploy/prometheus/Dockerfile).
#
#   deploy/prometheus/stage-rootfs.sh bin/prometheus-image
#   docker build -f deploy/prometheus/Dockerfile -t edgebase-prometheus:dev bin/prometheus-image
#
# `make image-prometheus` does both; e2e/monitoring_test.go runs this script
# in a temporary context. PROMETHEUS overrides the binary's path.
set -eu

dest=${1:?usage: stage-rootfs.sh DIR}
prom=${PROMETHEUS:-/usr/bin/prometheus}

if [ ! -x "$prom" ]; then
	echo "stage-rootfs.sh: $prom is not an executable (install Debian's prometheus package or set PROMETHEUS)" >&2
	exit 1
fi

rm -rf "$dest"
mkdir -p "$dest/rootfs/usr/bin" "$dest/rootfs/etc/prometheus" "$dest/rootfs/tmp" "$dest/data"
cp "$prom" "$dest/rootfs/usr/bin/prometheus"

# Libraries: "name => /path (addr)" lines, and the loader's own "/path (addr)".
libs=$(ldd "$prom" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
if [ -z "$libs" ]; then
	echo "stage-rootfs.sh: ldd lists no library for $prom (a static binary needs none; is ldd working?)" >&2
fi
for lib in $libs; do
	mkdir -p "$dest/rootfs$(dirname "$lib")"
	cp -L "$lib" "$dest/rootfs$lib"
done

# The classic web UI's templates and static files, where Debian keeps them.
if [ -d /usr/share/prometheus/web ]; then
	mkdir -p "$dest/rootfs/usr/share/prometheus"
	cp -R /usr/share/prometheus/web "$dest/rootfs/usr/share/prometheus/web"
fi

# Modes independent of the umask: the image runs as nobody (65534).
chmod -R u=rwX,go=rX "$dest/rootfs"
chmod 0755 "$dest/rootfs/usr/bin/prometheus" "$dest/data"
chmod 1777 "$dest/rootfs/tmp"
