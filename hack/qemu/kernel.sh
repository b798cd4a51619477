#!/usr/bin/env bash
# Builds (once) a small x86_64 kernel with SMT core scheduling, cgroup v2 controllers and misc,
# for real-kernel tests under QEMU. Idempotent: the image is cached by the sha256 of the config
# fragment's option lines (comments and blank lines left out), the kernel source version and this
# recipe; a cached image is reused as is.
#
# Usage: hack/qemu/kernel.sh          prints the bzImage path as the last line of stdout
# Env:   PODFENCE_KERNEL_CACHE        cache root (default /var/cache/podfence-kernel)
#        PODFENCE_KERNEL_FRAGMENT     a complete config fragment used instead of the default,
#                                     hack/qemu/podfence-kernel.config (in the repository)
#        PODFENCE_KERNEL_JOBS         make -j (default: nproc)
set -euo pipefail

recipe="tinyconfig+kvm_guest.config+fragment v1"
src_pkg=linux-source-6.1
deps=(flex bison libelf-dev libssl-dev bc cpio gzip xz-utils make gcc qemu-system-x86 "$src_pkg")

log() { printf 'kernel.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${PODFENCE_KERNEL_CACHE:-/var/cache/podfence-kernel}
jobs=${PODFENCE_KERNEL_JOBS:-$(nproc)}
fragment=${PODFENCE_KERNEL_FRAGMENT:-$here/podfence-kernel.config}
[ -r "$fragment" ] || die "config fragment $fragment not found"
fragment=$(realpath "$fragment")

# The fragment's option lines, in order: what the cache key covers. Comments and blank lines
# change nothing in the kernel and are left out; "# CONFIG_X is not set" is an option.
options() {
  awk '!/^[[:space:]]*$/ && !(/^[[:space:]]*#/ && !/^# CONFIG_[A-Za-z0-9_]+ is not set$/)' "$1"
}

start=$(date +%s)

# Install only what is missing, so a warm machine needs no apt at all.
missing=()
for p in "${deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
fi

deps_done=$(date +%s)

src_version=$(dpkg-query -W -f='${Version}' "$src_pkg")
key=$( { options "$fragment"; printf '%s\n%s\n' "$src_pkg=$src_version" "$recipe"; } |
  sha256sum | cut -d' ' -f1)
out_dir=$cache_root/$key
image=$out_dir/bzImage

mkdir -p "$cache_root"
# One build at a time per cache; a second caller waits and then finds the image.
exec 9>"$cache_root/.lock"
flock 9

if [ -s "$image" ]; then
  log "cached $image ($src_pkg $src_version) in $(($(date +%s) - start)) s"
  echo "$image"
  exit 0
fi

tarball=$(dpkg -L "$src_pkg" | grep -E '/linux-source-[0-9.]+\.tar\.(xz|bz2|gz)$' | head -n1)
[ -n "$tarball" ] || die "no source tarball in package $src_pkg"

work=$(mktemp -d "${TMPDIR:-/var/tmp}/podfence-kernel.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "unpacking $tarball"
tar -C "$work" -xf "$tarball"
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n1)

log "configuring (tinyconfig + kvm_guest.config + $(basename "$fragment"))"
{
  make -C "$src" tinyconfig
  make -C "$src" kvm_guest.config
  (cd "$src" && scripts/kconfig/merge_config.sh -m .config "$fragment")
  make -C "$src" olddefconfig
} >"$work/config.log" 2>&1 || { tail -n 40 "$work/config.log" >&2; die "kernel configuration failed"; }
for opt in CONFIG_SCHED_CORE CONFIG_CGROUP_MISC CONFIG_CPUSETS CONFIG_SCHED_SMT CONFIG_64BIT CONFIG_PROC_EVENTS; do
  grep -qx "$opt=y" "$src/.config" || die "$opt=y missing from the merged .config"
done
configured=$(date +%s)

log "building bzImage with -j$jobs (about 6 min on 2 cores)"
make -C "$src" -j"$jobs" bzImage >"$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log" >&2; die "kernel build failed (log above)"; }
built=$(date +%s)

# Publish atomically: a half-copied image is never seen as cached.
tmp_out=$(mktemp -d "$cache_root/.new.XXXXXX")
chmod 755 "$tmp_out"
cp "$src/arch/x86/boot/bzImage" "$tmp_out/bzImage"
cp "$src/.config" "$tmp_out/config"
printf '%s\n' "$src_pkg=$src_version" "fragment=$fragment" "recipe=$recipe" >"$tmp_out/SOURCE"
rm -rf "$out_dir"
mv "$tmp_out" "$out_dir"

log "built $image ($(du -h "$image" | cut -f1)): apt $((deps_done - start)) s," \
  "unpack+config $((configured - deps_done)) s, compile $((built - configured)) s," \
  "total $(($(date +%s) - start)) s"
echo "$image"
