#!/usr/bin/env bash
# Runs the full-disk tests (TestFullDisk*) on a real file system that fills
# up: a 64 MiB ext4 loop file, made with mkfs.ext4 (no blocks reserved for
# root, so root fills it as any user would) and mounted in a temp dir,
# named to the tests by RIVET_FULLDISK_DIR. Without it those tests skip.
# They check that a full disk fails only the commits that need room and
# that the same handle commits again once space is freed, and log which
# system call reported ENOSPC.
#
# It needs root (losetup, mount) and mkfs.ext4 (e2fsprogs). When it cannot
# run, it says why and exits 0, so CI on a machine without loop devices
# passes with the reason in its log. Everything it made is unmounted and
# removed on exit, whatever happens.
#
#   scripts/fulldisk-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { echo "full-disk tests skipped: $*"; exit 0; }

[ "$(uname -s)" = Linux ] || skip "not Linux"
[ "$(id -u)" = 0 ] || skip "not running as root (mount needs it)"
command -v mkfs.ext4 >/dev/null 2>&1 || skip "mkfs.ext4 is missing (install e2fsprogs)"

work=$(mktemp -d "${TMPDIR:-/tmp}/rivet-fulldisk.XXXXXX")
mnt="${work}/mnt"
cleanup() {
  if mountpoint -q "${mnt}" 2>/dev/null; then
    umount "${mnt}" || umount -l "${mnt}" || true
  fi
  rm -rf "${work}"
}
trap cleanup EXIT

truncate -s 64M "${work}/ext4.img"
mkfs.ext4 -q -F -m 0 "${work}/ext4.img" >/dev/null 2>&1 || skip "mkfs.ext4 failed on a loop file"
mkdir "${mnt}"
mount -o loop "${work}/ext4.img" "${mnt}" 2>/dev/null ||
  skip "cannot mount a loop file here (no loop devices, or a container without CAP_SYS_ADMIN)"
echo "ext4 mounted at ${mnt} ($(df -h --output=size,avail "${mnt}" | tail -1 | awk '{print $1" size, "$2" free"}'))"

export RIVET_FULLDISK_DIR="${mnt}"
log="${work}/test.log"
status=0
echo "=== go test -count=1 -v -run 'TestFullDisk' ."
go test -count=1 -v -run 'TestFullDisk' . >"${log}" 2>&1 || status=$?
grep -vE '^=== (RUN|PAUSE|CONT)' "${log}" || true
if [ "${status}" != 0 ]; then echo "FAILED: full-disk tests"; exit 1; fi
if grep -E -- '--- SKIP: TestFullDisk' "${log}"; then echo "FAILED: a full-disk test skipped"; exit 1; fi
n=$(grep -c -- '--- PASS: TestFullDisk' "${log}" || true)
[ "${n}" = 3 ] || { echo "FAILED: ${n} full-disk tests passed, want 3"; exit 1; }
echo "full-disk tests passed (3 scenarios)"
