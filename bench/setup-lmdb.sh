#!/bin/sh
# Installs LMDB's library and header so the benchmark's third engine can be
# built (go build -tags lmdb). Debian and Ubuntu only; elsewhere install
# liblmdb and its header with the system's package manager.
set -eu
if [ -f /usr/include/lmdb.h ]; then
	echo "liblmdb-dev already installed"
	exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi
if ! apt-cache show liblmdb-dev >/dev/null 2>&1; then
	$SUDO apt-get update
fi
$SUDO apt-get install -y liblmdb-dev
echo "installed; build or run with: go -C bench run -tags lmdb ./cmd/rivet-bench --engines lmdb,bbolt,rivet"
