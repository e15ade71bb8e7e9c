#!/usr/bin/env bash
# Unpack Debian's Nsight Systems 2023.4 (non-free, trixie) into a local folder, without root.
#
#   scripts/get_nsys.sh [DEST]        # default DEST: .nsys (in the repository)
#
# Prints the path of the working `nsys` binary on its last line. Afterwards:
#   export PINPROF_NSYS=$DEST/opt/nvidia/nsight-systems/*/target-linux-x64/nsys   (or see the printed path)
#
# Why the fixes: Debian splits the host part (QdstrmImporter, which turns the raw
# .qdstrm capture into a report) into /usr/lib/nsight-systems/host-linux-x64, while the target's
# nsys looks for it at target-linux-x64/../host-linux-x64; and the importer needs libssh.so.4.
# Also kept: the target .deb alone (TARGET_DEB below), which is what a GPU machine needs to capture.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$here/.nsys}
mkdir -p "$dest/debs" "$dest/apt/lists/partial" "$dest/root"
dest=$(cd "$dest" && pwd)

if [ -x "$dest/nsys" ] && "$dest/nsys" --version >/dev/null 2>&1; then
  echo "$dest/nsys"; exit 0
fi

cat > "$dest/apt/sources.list" <<SRC
deb http://deb.debian.org/debian trixie non-free
deb http://deb.debian.org/debian bookworm main
SRC
apt_opts=(-o "Dir::Etc::sourcelist=$dest/apt/sources.list" -o "Dir::Etc::sourceparts=-"
          -o "Dir::State::Lists=$dest/apt/lists" -o "APT::Get::List-Cleanup=0"
          -o "Debug::NoLocking=1" -o "Dir::Cache=$dest/apt/cache")
mkdir -p "$dest/apt/cache/archives/partial"
echo "get_nsys: apt-get update (trixie non-free, bookworm main)" >&2
apt-get "${apt_opts[@]}" update >/dev/null
cd "$dest/debs"
# Version pinned so that every machine tests the same Nsight Systems (2023.4.x from trixie).
for pkg in nsight-systems nsight-systems-target libssh-4; do
  ls ${pkg}_*.deb >/dev/null 2>&1 || apt-get "${apt_opts[@]}" download "$pkg" >&2
done
for deb in nsight-systems_*.deb nsight-systems-target_*.deb libssh-4_*.deb; do
  dpkg -x "$deb" "$dest/root"
done

target=$(dirname "$(find "$dest/root" -path '*target-linux-x64/nsys' -type f | head -n 1)")
hostdir=$(find "$dest/root" -type d -name host-linux-x64 | head -n 1)
[ -n "$target" ] && [ -n "$hostdir" ] || { echo "get_nsys: unpacked layout not recognised under $dest/root" >&2; exit 1; }
# Fix 1: the importer where target's nsys looks for it.
if [ ! -e "$target/../host-linux-x64" ]; then ln -s "$hostdir" "$target/../host-linux-x64"; fi
# Fix 2: libssh for the importer.
# Debian's host folder already links libssh.so.4 relatively into usr/lib/x86_64-linux-gnu, which
# resolves once libssh-4 is unpacked into the same root; copy the library only where it does not.
if [ ! -e "$hostdir/libssh.so.4" ]; then
  rm -f "$hostdir/libssh.so.4"
  cp -f "$(find "$dest/root" -name 'libssh.so.4.*' -type f | head -n 1)" "$hostdir/libssh.so.4"
fi
[ -e "$hostdir/libssh.so" ] || ln -sf libssh.so.4 "$hostdir/libssh.so"
ln -sf "$target/nsys" "$dest/nsys"
cp -f "$dest"/debs/nsight-systems-target_*.deb "$dest/target.deb"
"$dest/nsys" --version >&2
echo "$dest/nsys"
