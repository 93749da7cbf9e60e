#!/usr/bin/env bash
# deps.sh TOOL... — make sure each named tool is installed.
#
# The workbook's two commands (`make run`, `make test`) must work on a fresh
# machine, so they call this first. A missing tool is installed with apt when
# we run as root on Debian/Ubuntu; otherwise we stop and say what to install.
set -euo pipefail

# tool name -> Debian package
declare -A pkg=(
	[kcat]=kcat
	[debootstrap]=debootstrap
	[docker]=docker.io
	[docker-compose]=docker-compose
)

missing=()
for tool in "$@"; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] && exit 0

packages=()
for tool in "${missing[@]}"; do
	packages+=("${pkg[$tool]:-$tool}")
done

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "deps: installing ${packages[*]} with apt-get" >&2
	# apt-get update is slow; run it only when the first install attempt fails
	# because the package lists are empty or stale.
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null 2>&1; then
		apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
	fi
	exit 0
fi

echo "deps: missing ${missing[*]}; install the Debian packages: ${packages[*]}" >&2
echo "      (for example: sudo apt-get install ${packages[*]})" >&2
exit 1
