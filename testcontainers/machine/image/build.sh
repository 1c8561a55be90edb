#!/usr/bin/env bash
# Builds a TimescaleDB image from Debian packages: debootstrap a minimal trixie rootfs,
# import it as a base image, then build the Dockerfile beside this script on top.
# Usage: build.sh IMAGE_TAG   (needs root, docker and debootstrap; about a minute)
set -euo pipefail
tag=${1:?usage: build.sh IMAGE_TAG}
here=$(cd "$(dirname "$0")" && pwd)
base=sensorapi/debian-trixie:base
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# "==> " lines name each step for the caller's progress report (testcontainers/machine/progress.go)
if ! docker image inspect "$base" >/dev/null 2>&1; then
  if ! command -v debootstrap >/dev/null 2>&1; then
    echo "==> installing debootstrap (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  echo "==> debootstrap: a minimal Debian trixie root file system"
  debootstrap --variant=minbase trixie "$rootfs" "$mirror" >/dev/null
  echo "==> docker import of the root file system"
  tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
fi
echo "==> docker build: apt-get install postgresql-17 postgresql-17-timescaledb, then initdb"
docker build -q --build-arg "BASE=$base" -t "$tag" "$here" >/dev/null
echo "built $tag"
