#!/usr/bin/env bash
# images.sh [--rebuild] [IMAGE...]: build the container images the tests run,
# each one only when the Docker engine does not have it yet.
#
# The project's machines reach no container registry: `docker pull` fails and
# the engine starts with no images. So every image is built here, from
# Debian's packages or from our own binaries, and kept by the engine until the
# machine goes. A second run finds the images and does nothing.
# docs/operations.md tells what each image holds and how to rebuild it.
#
#   ./scripts/images.sh                  build every missing image
#   ./scripts/images.sh zookeeper        only the ZooKeeper image
#   ./scripts/images.sh broker           only the final broker's image
#   ./scripts/images.sh prometheus       only the Prometheus image
#   ./scripts/images.sh --rebuild        build again even if present
#
# Environment:
#   DEBIAN_MIRROR  where debootstrap fetches packages
#                  (default: http://deb.debian.org/debian, as apt uses here)
#
# Adding an image: write NAME_image (prints the tag), NAME_recipe (prints a
# revision to bump whenever the build changes) and build_NAME (builds that
# tag), then add NAME to IMAGES below.
set -euo pipefail

SCRIPT=$(readlink -f "$0")
cd "$(dirname "$SCRIPT")/.."

# Images in build order; a later image may be based on an earlier one.
IMAGES=(zookeeper broker prometheus)

DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# Every image carries this label with its recipe revision, so that an image
# built by an older version of this script is noticed and rebuilt instead of
# silently reused.
RECIPE_LABEL=org.kafkaworkbook.recipe

log() { echo "images: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# --- ZooKeeper -------------------------------------------------------------
#
# Debian bookworm packages ZooKeeper 3.8.0 (libzookeeper-java). The tag names
# that version; build_zookeeper checks that the packages really installed it,
# so the tag can't lie after a Debian update.
ZOOKEEPER_VERSION=3.8.0

# The Go harness (stage05-controller/zktest) uses the same tag by default.
zookeeper_image() { echo "kafkaworkbook/zookeeper:${ZOOKEEPER_VERSION}"; }

# Bump when build_zookeeper changes what goes into the image.
zookeeper_recipe() { echo 1; }

build_zookeeper() {
	local tag=$1 recipe=$2 rootfs installed
	# minbase: dpkg, apt and coreutils, nothing else. The JRE and
	# libzookeeper-java bring their own dependencies (about 560 MB).
	debian_rootfs zookeeper default-jre-headless,libzookeeper-java libzookeeper-java "$ZOOKEEPER_VERSION" \
		"update ZOOKEEPER_VERSION here and the harness's default image"

	# Defaults for `docker run IMAGE`: a standalone server. The harness
	# writes its own /conf/zoo.cfg (ensembles, short ticks) over this one.
	mkdir -p "$rootfs/conf" "$rootfs/data"
	cat >"$rootfs/conf/zoo.cfg" <<-'EOF'
		# Standalone ZooKeeper, ZooKeeper's own sample settings.
		tickTime=2000
		initLimit=10
		syncLimit=5
		dataDir=/data
		clientPort=2181
		# Jetty is on the classpath; the admin server is not wanted.
		admin.enableServer=false
		4lw.commands.whitelist=srvr,stat,mntr,ruok,cons
	EOF

	# slf4j-simple is the logging binding: ZooKeeper logs to stderr, which
	# `docker logs` shows and the harness prints when a test fails. Without
	# it ZooKeeper 3.8 logs nothing at all.
	local classpath=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar
	log "importing the root file system as $tag"
	tar --numeric-owner -C "$rootfs" -c . | docker import \
		--change "ENTRYPOINT [\"java\", \"-Dorg.slf4j.simpleLogger.showDateTime=true\", \"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS\", \"-cp\", \"$classpath\"]" \
		--change 'CMD ["org.apache.zookeeper.server.quorum.QuorumPeerMain", "/conf/zoo.cfg"]' \
		--change 'EXPOSE 2181 2888 3888' \
		--change "LABEL $RECIPE_LABEL=$recipe" \
		--change "LABEL org.opencontainers.image.title=zookeeper" \
		--change "LABEL org.opencontainers.image.version=$installed" \
		--change "LABEL org.opencontainers.image.description=\"ZooKeeper $installed on Debian $DEBIAN_SUITE, built by scripts/images.sh\"" \
		--message "scripts/images.sh: debootstrap $DEBIAN_SUITE + libzookeeper-java $installed" \
		- "$tag" >/dev/null

	remove_rootfs "$rootfs"
	trap - EXIT INT TERM
}

# --- The final broker --------------------------------------------------------
#
# FROM scratch: the broker and admin commands built static (CGO_ENABLED=0),
# the CA bundle (for TLS clients the broker may one day dial), a passwd
# entry for the non-root user it runs as, the sample configuration, and a
# data directory that user owns. No shell, no package manager.
broker_image() { echo "kafkaworkbook/broker:dev"; }

# The recipe is the build's revision and a hash of the two binaries: an
# image whose binaries differ from what the checkout builds now is stale
# and rebuilt. Building them first is cheap with Go's build cache.
BROKER_RECIPE_REVISION=1
# The build context: a fixed place (under the images lock), because the
# recipe is computed in a subshell and the build reads what it built.
broker_build_dir=${TMPDIR:-/tmp}/kafkaworkbook-broker-image
broker_binaries() {
	command -v go >/dev/null 2>&1 || die "no go command: the broker image is built from this checkout's sources"
	rm -rf "$broker_build_dir"
	mkdir -p "$broker_build_dir"
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$broker_build_dir/broker" ./final/cmd/broker
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$broker_build_dir/admin" ./final/cmd/admin
}
broker_recipe() {
	broker_binaries
	local sum
	sum=$(cat "$broker_build_dir/broker" "$broker_build_dir/admin" final/config/server.properties | sha256sum)
	echo "$BROKER_RECIPE_REVISION-${sum:0:16}"
}

build_broker() {
	local tag=$1 recipe=$2 ctx=$broker_build_dir
	[ -r /etc/ssl/certs/ca-certificates.crt ] ||
		die "no CA bundle at /etc/ssl/certs/ca-certificates.crt (Debian package ca-certificates)"
	cp /etc/ssl/certs/ca-certificates.crt final/config/server.properties "$ctx/"
	printf 'root:x:0:0:root:/:/sbin/nologin\nkafka:x:1000:1000:kafka:/var/lib/kafka:/sbin/nologin\n' >"$ctx/passwd"
	printf 'root:x:0:\nkafka:x:1000:\n' >"$ctx/group"
	mkdir -p "$ctx/var-lib-kafka/data" "$ctx/tmp"
	chmod 1777 "$ctx/tmp"
	cat >"$ctx/Dockerfile" <<-EOF
		FROM scratch
		COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
		COPY passwd group /etc/
		COPY broker admin /usr/local/bin/
		COPY server.properties /etc/kafka/server.properties
		COPY tmp /tmp
		COPY --chown=1000:1000 var-lib-kafka /var/lib/kafka
		USER 1000:1000
		VOLUME /var/lib/kafka
		EXPOSE 9092 9404
		LABEL $RECIPE_LABEL=$recipe
		LABEL org.opencontainers.image.title=broker
		LABEL org.opencontainers.image.description="The workbook's final broker, built by scripts/images.sh"
		ENTRYPOINT ["/usr/local/bin/broker", "/etc/kafka/server.properties", "--override", "log.dirs=/var/lib/kafka/data", "--override", "listeners=PLAINTEXT://0.0.0.0:9092"]
	EOF
	log "docker build $tag from a static broker (FROM scratch)"
	local out
	# The engine's legacy builder (buildx is not installed here) warns that
	# it is deprecated: shown only when the build fails.
	if ! out=$(docker build -q -t "$tag" "$ctx" 2>&1); then
		echo "$out" >&2
		die "docker build of $tag failed"
	fi
	rm -rf "$broker_build_dir"
}

# --- Prometheus ----------------------------------------------------------------
#
# Debian bookworm's prometheus package (2.42), on a minimal Debian like
# ZooKeeper's: it scrapes the brokers' metrics.prometheus.listener. The
# launcher writes /etc/prometheus/prometheus.yml with the brokers to
# scrape; the image's own lists none.
PROMETHEUS_VERSION=2.42.0
prometheus_image() { echo "kafkaworkbook/prometheus:${PROMETHEUS_VERSION}"; }
prometheus_recipe() { echo 2; }

build_prometheus() {
	local tag=$1 recipe=$2 rootfs installed
	debian_rootfs prometheus prometheus prometheus "$PROMETHEUS_VERSION" \
		"update PROMETHEUS_VERSION here and final/clustertest's image"
	mkdir -p "$rootfs/etc/prometheus" "$rootfs/prometheus"
	chown 65534:65534 "$rootfs/prometheus" # it runs as nobody
	cat >"$rootfs/etc/prometheus/prometheus.yml" <<-'EOF'
		# Scrapes itself only; a launcher writes the brokers' job over this file.
		global:
		  scrape_interval: 5s
		scrape_configs:
		  - job_name: prometheus
		    static_configs:
		      - targets: ["localhost:9090"]
	EOF
	log "importing the root file system as $tag"
	tar --numeric-owner -C "$rootfs" -c . | docker import \
		--change 'ENTRYPOINT ["/usr/bin/prometheus", "--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", "--web.listen-address=0.0.0.0:9090"]' \
		--change 'EXPOSE 9090' \
		--change 'USER 65534:65534' \
		--change "LABEL $RECIPE_LABEL=$recipe" \
		--change "LABEL org.opencontainers.image.title=prometheus" \
		--change "LABEL org.opencontainers.image.version=$installed" \
		--message "scripts/images.sh: debootstrap $DEBIAN_SUITE + prometheus $installed" \
		- "$tag" >/dev/null
	remove_rootfs "$rootfs"
	trap - EXIT INT TERM
}

# debian_rootfs NAME PACKAGES PACKAGE VERSION HINT: debootstraps a minimal
# Debian with PACKAGES (comma-separated) into a new directory, checks that
# PACKAGE installed VERSION (so that an image's tag cannot lie after a
# Debian update; HINT says what to change when it did not), and drops the
# package cache and docs, a third of the tree and never used. It sets the
# caller's rootfs (removed however the script ends, unless the caller
# removes it first) and installed (PACKAGE's Debian version). The
# debootstrap log stays when debootstrap fails, for reading.
debian_rootfs() {
	local name=$1 packages=$2 package=$3 version=$4 hint=$5 debootstrap_log
	./scripts/deps.sh debootstrap
	rootfs=$(mktemp -d "${TMPDIR:-/var/tmp}/$name-rootfs.XXXXXX")
	debootstrap_log=$rootfs.log
	# shellcheck disable=SC2064 # expand the names now: they are local
	trap "remove_rootfs '$rootfs'" EXIT
	# shellcheck disable=SC2064
	trap "rm -f '$debootstrap_log'; exit 130" INT TERM
	log "debootstrap $DEBIAN_SUITE with $packages into $rootfs (about a minute or two)"
	if ! debootstrap --variant=minbase --include="$packages" \
		"$DEBIAN_SUITE" "$rootfs" "$DEBIAN_MIRROR" >"$debootstrap_log" 2>&1; then
		tail -n 20 "$debootstrap_log" >&2
		die "debootstrap failed; its log is $debootstrap_log"
	fi
	rm -f "$debootstrap_log"
	# shellcheck disable=SC2016 # ${Version} is dpkg-query's, not the shell's
	installed=$(chroot "$rootfs" dpkg-query -W -f '${Version}' "$package")
	case $installed in
	"$version"-* | "$version"+*) ;;
	*) die "Debian now ships $package $installed, not $version: $hint" ;;
	esac
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
		"$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
}

# remove_rootfs DIR: debootstrap mounts /proc and /sys inside the tree while
# it runs and may leave them mounted when it fails. Unmount whatever is still
# mounted below DIR, then delete without crossing into any file system.
remove_rootfs() {
	local dir=$1 mnt
	[ -d "$dir" ] || return 0
	# Deepest first, so nested mounts come off before their parents.
	while read -r mnt; do
		umount -l "$mnt" 2>/dev/null || true
	done < <(awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
	rm -rf --one-file-system "$dir"
}

# --- driver ----------------------------------------------------------------

require_engine() {
	command -v docker >/dev/null 2>&1 ||
		die "no Docker CLI on this machine (Debian package docker.io): the images need a Docker engine"
	local out
	if ! out=$(docker version --format '{{.Server.Version}}' 2>&1); then
		die "the Docker engine is not reachable at ${DOCKER_HOST:-unix:///var/run/docker.sock}: ${out##*$'\n'}
        start it (for example: systemctl start docker) and run make images again"
	fi
}

ensure() {
	local name=$1 rebuild=$2 tag recipe have
	tag=$("${name}_image")
	recipe=$("${name}_recipe")
	if ! docker image inspect "$tag" >/dev/null 2>&1; then
		log "$tag is missing: building it"
	elif [ "$rebuild" = yes ]; then
		log "rebuilding $tag (--rebuild)"
	else
		have=$(docker image inspect --format "{{index .Config.Labels \"$RECIPE_LABEL\"}}" "$tag")
		if [ "$have" = "$recipe" ]; then
			log "$tag is present (recipe $recipe): nothing to do"
			return
		fi
		log "$tag has recipe '$have', this script builds recipe $recipe: rebuilding it"
	fi
	local start=$SECONDS
	"build_${name}" "$tag" "$recipe"
	log "built $tag in $((SECONDS - start)) s"
}

main() {
	local rebuild=no names=()
	for arg in "$@"; do
		case $arg in
		--rebuild) rebuild=yes ;;
		-h | --help)
			sed -n '2,/^set -euo/p' "$SCRIPT" | sed '$d; s/^# \{0,1\}//'
			return
			;;
		*)
			[[ " ${IMAGES[*]} " == *" $arg "* ]] || die "unknown image '$arg' (known: ${IMAGES[*]})"
			names+=("$arg")
			;;
		esac
	done
	[ ${#names[@]} -gt 0 ] || names=("${IMAGES[@]}")

	require_engine
	# Two runs at once (two terminals, parallel make) would both build; the
	# second waits here and then finds the image.
	exec 9>"${TMPDIR:-/tmp}/kafkaworkbook-images.lock"
	flock 9

	for name in "${names[@]}"; do
		ensure "$name" "$rebuild"
	done
}

main "$@"
