#!/usr/bin/env bash
# Builds the harness's two local OCI images without any internet registry, caches them as
# tarballs under ${PODFENCE_E2E_CACHE}/images, and imports them into the running private
# containerd (k8s.io namespace):
#   localhost/podfence-e2e/busybox:latest  Debian's busybox-static + a symlink per applet
#                                          (sh, sleep, cat, grep, taskset, nproc, ...); cmd sh
#   localhost/podfence-e2e/pause:latest    same layer, entrypoint /bin/sleep infinity
# How: a layer tar -> `crane append` to a throwaway `crane registry serve` on 127.0.0.1 ->
# `crane mutate --set-platform/--entrypoint ... -o <tarball>` -> `ctr images import`.
#
# Usage: test/e2e/images.sh [build|import|all]   (default all: build if stale, import if
#                                            containerd.sh has containerd running)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pf_require_root

mode=${1:-all}

# Stamp: the busybox package version, the architecture and this script's content.
arch=$(dpkg --print-architecture) # amd64, arm64: the same names OCI uses

# Cleanup for images_build: the throwaway registry and the temp dir.
tmp="" regpid=""
cleanup() {
	if [[ -n $regpid ]]; then
		kill "$regpid" 2>/dev/null || true
		wait "$regpid" 2>/dev/null || true
	fi
	if [[ -n $tmp ]]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT
stamp="busybox-static $(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || echo none) linux/$arch $(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)"

images_build() {
	local t0 sfile=$PF_IMAGES/stamp
	t0=$(pf_now_ms)
	if [[ -f $sfile && $(cat "$sfile") == "$stamp" && -f $PF_IMAGES/busybox.tar && -f $PF_IMAGES/pause.tar ]]; then
		printf '%-28s %-7s %6ss  %s\n' images cached "$(pf_elapsed "$t0")" "$stamp"
		return 0
	fi
	[[ -x /bin/busybox ]] || pf_die "/bin/busybox missing: run test/e2e/tools.sh (installs busybox-static)"
	command -v crane >/dev/null || pf_die "crane missing: run test/e2e/tools.sh"
	mkdir -p "$PF_IMAGES"

	tmp=$(mktemp -d)

	# Root filesystem: /bin/busybox plus one symlink per applet at busybox's own path.
	local root=$tmp/rootfs p
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,proc,sys,dev,run,var}
	chmod 1777 "$root/tmp"
	cp /bin/busybox "$root/bin/busybox"
	while read -r p; do
		[[ -z $p || $p == bin/busybox || -e $root/$p || -L $root/$p ]] && continue
		mkdir -p "$root/$(dirname "$p")"
		ln -s /bin/busybox "$root/$p"
	done < <(/bin/busybox --list-full)
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	for p in sh sleep cat grep taskset nproc; do
		[[ -L $root/bin/$p || -L $root/usr/bin/$p || -L $root/sbin/$p || -L $root/usr/sbin/$p ]] ||
			pf_log "warning: busybox has no '$p' applet"
	done
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$root" -cf "$tmp/layer.tar" \
		bin dev etc proc root run sbin sys tmp usr var

	# Throwaway in-memory registry on a free loopback port.
	crane registry serve --address 127.0.0.1:0 >"$tmp/registry.log" 2>&1 &
	regpid=$!
	local port=""
	for _ in $(seq 1 100); do
		port=$(sed -n 's/.*serving on port \([0-9][0-9]*\).*/\1/p' "$tmp/registry.log")
		[[ -n $port ]] && break
		kill -0 "$regpid" 2>/dev/null || break
		sleep 0.05
	done
	[[ -n $port ]] || {
		cat "$tmp/registry.log" >&2
		pf_die "crane registry did not start"
	}
	local reg=127.0.0.1:$port path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

	crane append --oci-empty-base -f "$tmp/layer.tar" -t "$reg/podfence-e2e/base:latest" >"$tmp/crane.log" 2>&1 ||
		{ cat "$tmp/crane.log" >&2; pf_die "crane append failed"; }
	crane mutate "$reg/podfence-e2e/base:latest" --set-platform "linux/$arch" -e "PATH=$path" \
		--cmd sh -t "$PF_BUSYBOX_IMAGE" -o "$tmp/busybox.tar" >>"$tmp/crane.log" 2>&1 ||
		{ cat "$tmp/crane.log" >&2; pf_die "crane mutate (busybox) failed"; }
	crane mutate "$reg/podfence-e2e/base:latest" --set-platform "linux/$arch" -e "PATH=$path" \
		--entrypoint /bin/sleep --cmd infinity -t "$PF_PAUSE_IMAGE" -o "$tmp/pause.tar" >>"$tmp/crane.log" 2>&1 ||
		{ cat "$tmp/crane.log" >&2; pf_die "crane mutate (pause) failed"; }

	mv -f "$tmp/busybox.tar" "$PF_IMAGES/busybox.tar"
	mv -f "$tmp/pause.tar" "$PF_IMAGES/pause.tar"
	printf '%s\n' "$stamp" >"$sfile"
	printf '%-28s %-7s %6ss  %s\n' images built "$(pf_elapsed "$t0")" "$stamp"
}

images_import() {
	local t0 img out
	t0=$(pf_now_ms)
	pf_containerd_running || pf_die "containerd is not running (test/e2e/containerd.sh start)"
	for img in busybox pause; do
		[[ -f $PF_IMAGES/$img.tar ]] || pf_die "$PF_IMAGES/$img.tar missing: run test/e2e/images.sh build"
		out=$(pf_ctr images import --local "$PF_IMAGES/$img.tar" 2>&1) ||
			{ echo "$out" >&2; pf_die "ctr images import $img failed"; }
	done
	printf '%-28s %-7s %6ss  %s %s\n' images imported "$(pf_elapsed "$t0")" "$PF_BUSYBOX_IMAGE" "$PF_PAUSE_IMAGE"
}

case $mode in
build) images_build ;;
import) images_import ;;
all)
	images_build
	if pf_containerd_running; then images_import; fi
	;;
*) pf_die "usage: $0 [build|import|all]" ;;
esac
