#!/usr/bin/env bash
# Runs the copy-on-write clone tests (DB.Clone, CloneFile, rivet clone) on
# a real btrfs file system: a 512 MiB loop file, made with mkfs.btrfs and
# mounted in a temp dir, named to the tests by RIVET_BTRFS_DIR. Without it
# those tests skip (the OS temp dir here is ext4, which cannot clone).
#
# It needs root (losetup, mount) and mkfs.btrfs; it installs btrfs-progs
# with apt-get when that is missing and apt-get is there. When it cannot
# run, it says why and exits 0, so CI on a machine without loop devices
# passes with the reason in its log. Everything it made is unmounted and
# removed on exit, whatever happens.
#
#   scripts/btrfs-clone-test.sh            # the tests
#   RIVET_CLONE_MIB=512 scripts/btrfs-clone-test.sh   # a bigger database
#                                          # (needs a bigger loop file:
#                                          #  BTRFS_LOOP_SIZE=3G)
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { echo "btrfs clone tests skipped: $*"; exit 0; }

[ "$(uname -s)" = Linux ] || skip "not Linux"
[ "$(id -u)" = 0 ] || skip "not running as root (mount needs it)"
if ! command -v mkfs.btrfs >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "installing btrfs-progs"
    apt-get install -y --no-install-recommends btrfs-progs >/dev/null 2>&1 ||
      { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends btrfs-progs >/dev/null 2>&1; } ||
      skip "mkfs.btrfs is missing and apt-get could not install btrfs-progs"
  fi
  command -v mkfs.btrfs >/dev/null 2>&1 || skip "mkfs.btrfs is missing (install btrfs-progs)"
fi
command -v filefrag >/dev/null 2>&1 || skip "filefrag is missing (install e2fsprogs)"

work=$(mktemp -d "${TMPDIR:-/tmp}/rivet-btrfs.XXXXXX")
mnt="${work}/mnt"
cleanup() {
  if mountpoint -q "${mnt}" 2>/dev/null; then
    umount "${mnt}" || umount -l "${mnt}" || true
  fi
  rm -rf "${work}"
}
trap cleanup EXIT

truncate -s "${BTRFS_LOOP_SIZE:-512M}" "${work}/btrfs.img"
mkfs.btrfs -q "${work}/btrfs.img" >/dev/null 2>&1 || skip "mkfs.btrfs failed on a loop file"
mkdir "${mnt}"
mount -o loop "${work}/btrfs.img" "${mnt}" 2>/dev/null ||
  skip "cannot mount a loop file here (no loop devices, or a container without CAP_SYS_ADMIN)"
echo "btrfs mounted at ${mnt} ($(du -h --apparent-size "${work}/btrfs.img" | cut -f1) loop file)"

export RIVET_BTRFS_DIR="${mnt}"
# run DIR PATTERN: the tests, verbose, into a log; fail on a failure, and
# if a btrfs test skipped after all (it must not, with RIVET_BTRFS_DIR set).
run() {
  local dir=$1 pattern=$2 log="${work}/test.log" status=0
  echo "=== (cd ${dir} && go test -count=1 -v -run '${pattern}' .)"
  (cd "${dir}" && go test -count=1 -v -run "${pattern}" .) >"${log}" 2>&1 || status=$?
  grep -vE '^=== (RUN|PAUSE|CONT)' "${log}" || true
  if [ "${status}" != 0 ]; then echo "FAILED: tests in ${dir}"; exit 1; fi
  if grep -E -- '--- SKIP: .*Btrfs' "${log}"; then echo "FAILED: a btrfs test skipped"; exit 1; fi
}
run . 'TestClone'
run cmd/rivet 'TestCloneCommandBtrfs|TestBackupClone'
echo "btrfs clone tests passed"
