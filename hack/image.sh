#!/usr/bin/env bash
# Builds the podfence image without a Docker daemon and pushes it (deploy/Dockerfile builds the
# same image with docker): the static podfence, podfence-extender and podfence-dra binaries in
# /usr/local/bin on a busybox layer (Debian's busybox-static and a symlink per applet: the
# agent DaemonSet's initContainer uses its sh, cp, chmod and mv), entrypoint
# /usr/local/bin/podfence, no command. Two layers: busybox (the same bytes every time: a
# registry that has it is not sent it again) and the binaries. crane (go-containerregistry)
# appends them to an empty base and pushes.
#
#   hack/image.sh -t 127.0.0.1:5000/podfence:dev
#   make image IMAGE=registry.example/podfence:v1 [VERSION=v1]
#
# Prints the pushed image by digest (REF@sha256:...) on stdout, progress on stderr.
#
# Options:
#   -t, --tag REF      image reference to push (required); a registry on loopback is spoken
#                      to in plain HTTP (crane's rule for localhost and 127.0.0.1)
#   --version V        main.version of the binaries (default: git describe --always --dirty,
#                      else dev); main.commit is git rev-parse HEAD
#   --bin-dir DIR      also leave the binaries in DIR
# Environment:
#   GO        go command (default go); the build uses the ordinary Go build cache
#   CRANE     crane command (default: crane on PATH, else go run ...cmd/crane@v0.22.1)
#   BUSYBOX   a static busybox (default /bin/busybox of Debian's busybox-static)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
ref="" version="" bindir=""
crane_pkg=github.com/google/go-containerregistry/cmd/crane@v0.22.1

die() {
	echo "image.sh: $*" >&2
	exit 1
}
usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

while (($#)); do
	case $1 in
	-t | --tag) ref=${2:?$1 needs an image reference} && shift ;;
	--version) version=${2:?--version needs a value} && shift ;;
	--bin-dir) bindir=${2:?--bin-dir needs a directory} && shift ;;
	-h | --help) usage ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[[ -n $ref ]] || die "--tag is required, e.g. -t 127.0.0.1:5000/podfence:dev"
[[ $ref =~ ^[a-z0-9.:-]+(/[a-z0-9._-]+)+(:[A-Za-z0-9_.-]{1,128})?$ ]] ||
	die "--tag $ref: want <registry>/<repository>[:<tag>] (lower-case repository, tag of [A-Za-z0-9_.-])"
go=${GO:-go}
busybox=${BUSYBOX:-/bin/busybox}
[[ -x $busybox ]] || die "$busybox missing: apt-get install busybox-static (or set BUSYBOX to a static busybox)"
if [[ -z $version ]]; then
	version=$(git -C "$repo" describe --always --dirty 2>/dev/null) || version=dev
fi
commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null) || commit="" # podfence version shows it
if [[ -n ${CRANE:-} ]]; then
	read -ra crane <<<"$CRANE"
elif command -v crane >/dev/null; then
	crane=(crane)
else
	crane=("$go" run "$crane_pkg")
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s%3N)
arch=$("$go" env GOARCH)

# The binaries, as deploy/Dockerfile builds them.
mkdir -p "$tmp/bin/usr/local/bin"
for cmd in podfence podfence-extender podfence-dra; do
	(cd "$repo" && CGO_ENABLED=0 GOOS=linux "$go" build -tags grpcnotrace -trimpath -ldflags "-s -w -X main.version=$version -X main.commit=$commit" \
		-o "$tmp/bin/usr/local/bin/$cmd" "./cmd/$cmd") || die "go build ./cmd/$cmd failed"
done
t1=$(date +%s%3N)

# busybox: /bin/busybox, a symlink per applet at busybox's own path, /tmp, passwd and group.
root=$tmp/base
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,proc,sys,dev,run,var}
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
while read -r p; do
	[[ -z $p || $p == bin/busybox || -e $root/$p || -L $root/$p ]] && continue
	mkdir -p "$root/$(dirname "$p")"
	ln -s /bin/busybox "$root/$p"
done < <("$root/bin/busybox" --list-full)
for p in sh cp chmod mv; do
	[[ -L $root/bin/$p ]] || die "$busybox has no '$p' applet in /bin (the agent's initContainer needs it)"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

# Reproducible tars: sorted, owned by root, mtime 0.
tarx() { tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 "$@"; }
tarx -C "$root" -cf "$tmp/base.tar" bin dev etc proc root run sbin sys tmp usr var
tarx -C "$tmp/bin" -cf "$tmp/bin.tar" usr

path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
"${crane[@]}" append --oci-empty-base -f "$tmp/base.tar" -f "$tmp/bin.tar" -t "$ref" >"$tmp/crane.log" 2>&1 ||
	die "crane append to $ref failed: $(tail -n 5 "$tmp/crane.log")"
"${crane[@]}" mutate "$ref" --set-platform "linux/$arch" -e "PATH=$path" --entrypoint /usr/local/bin/podfence \
	-l "org.opencontainers.image.version=$version" -t "$ref" >>"$tmp/crane.log" 2>&1 ||
	die "crane mutate $ref failed: $(tail -n 5 "$tmp/crane.log")"
digest=$("${crane[@]}" digest "$ref" 2>>"$tmp/crane.log") || die "crane digest $ref failed: $(tail -n 5 "$tmp/crane.log")"

if [[ -n $bindir ]]; then
	mkdir -p "$bindir"
	cp "$tmp/bin/usr/local/bin/podfence" "$tmp/bin/usr/local/bin/podfence-extender" "$tmp/bin/usr/local/bin/podfence-dra" "$bindir/"
fi
name=$ref
[[ ${ref##*/} != *:* ]] || name=${ref%:*} # without the tag
t2=$(date +%s%3N)
printf 'image.sh: %s (version %s, linux/%s): go build %d ms, layers and push %d ms\n' \
	"$ref@$digest" "$version" "$arch" $((t1 - t0)) $((t2 - t1)) >&2
echo "$name@$digest"
