#!/usr/bin/env bash
# doctor.sh: what this machine has of what the workbook needs, and for each
# missing piece the command that gets it. `make doctor` runs it.
#
# One line a check: ok, missing, warn (works, but see the note) or info,
# then which stages can run with what is here. It installs nothing and
# reaches no network: Go runs with GOTOOLCHAIN=local and GOPROXY=off, and
# Docker is asked only what its engine already has.
#
# Exit status: 0 when stages 01-04 can run (Go, git, kcat), 1 otherwise.
# What stage 05 on needs (the Docker engine, the images, docker-compose)
# is reported but fails the run only with DOCTOR_STRICT=1.
set -u

cd "$(dirname "$0")/.." || exit 2

STRICT=${DOCTOR_STRICT:-0}
MIN_FREE_GB=5

report() { printf '%-8s %-13s %s\n' "$1" "$2" "$3"; }

# What each group of stages lacks. A group needs its own list and every
# earlier group's.
need_base=() # stage 01
need_kcat=() # stages 02-04
need_zk=()   # stages 05-06
need_final=()

# limit SECONDS CMD...: CMD, stopped after SECONDS where timeout(1) exists,
# so that an engine that does not answer cannot stall the doctor.
limit() {
	local secs=$1
	shift
	if command -v timeout >/dev/null 2>&1; then
		timeout "$secs" "$@"
	else
		"$@"
	fi
}

# version_ge A B: whether version A (dotted numbers) is at least B.
version_ge() {
	local -a a b
	local i x y
	IFS=. read -r -a a <<<"$1"
	IFS=. read -r -a b <<<"$2"
	for ((i = 0; i < ${#a[@]} || i < ${#b[@]}; i++)); do
		x=${a[i]:-0} y=${b[i]:-0}
		((10#$x > 10#$y)) && return 0
		((10#$x < 10#$y)) && return 1
	done
	return 0
}

# install_hint TARGET PACKAGE: how to get PACKAGE. On Debian or Ubuntu as
# root, `make TARGET` does it (scripts/deps.sh runs apt-get); anyone else
# installs the package themselves. TARGET may be empty.
install_hint() {
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
		if [ -n "$1" ]; then
			echo "make $1 (installs the Debian package $2)"
		else
			echo "apt-get install $2"
		fi
	elif command -v apt-get >/dev/null 2>&1; then
		echo "sudo apt-get install $2"
	elif command -v brew >/dev/null 2>&1; then
		echo "brew install $2"
	else
		echo "install the package $2 with your system's package manager"
	fi
}

# --- Go ----------------------------------------------------------------------

want_go=$(sed -n 's/^go[[:space:]][[:space:]]*\([0-9][0-9.]*\).*/\1/p' go.work 2>/dev/null)
go_ok=no
if ! command -v go >/dev/null 2>&1; then
	report missing go "install Go ${want_go:-(see go.work)} or newer (https://go.dev/dl/) and put its bin directory on PATH"
	need_base+=(Go)
else
	# Outside the workspace and with the local toolchain only: inside it, a
	# Go older than go.work's line would download a newer one.
	have_go=$(cd / && GOWORK=off GOTOOLCHAIN=local go version 2>/dev/null | grep -o 'go[0-9][0-9.]*' | head -n 1)
	have_go=${have_go#go}
	if [ -z "$have_go" ]; then
		report warn go "$(command -v go): cannot read its version (go version); go.work asks for ${want_go:-?}"
		go_ok=yes
	elif [ -n "$want_go" ] && ! version_ge "$have_go" "$want_go"; then
		report missing go "go$have_go is older than go.work's go $want_go: install Go $want_go or newer (https://go.dev/dl/)"
		need_base+=("Go $want_go")
	else
		report ok go "go$have_go ($(command -v go); go.work asks for ${want_go:-?} or newer)"
		go_ok=yes
	fi
fi

# The modules the workspace imports: in the module cache, or downloaded by
# the first build, which then needs the network.
if [ "$go_ok" = yes ]; then
	errs=$(mktemp "${TMPDIR:-/tmp}/doctor.XXXXXX")
	if mods=$(GOTOOLCHAIN=local GOPROXY=off GOFLAGS= go mod download -json 2>"$errs"); then
		report ok modules "every module the workspace needs is in the module cache ($(GOTOOLCHAIN=local go env GOMODCACHE 2>/dev/null))"
	elif n=$(grep -c '"Error"' <<<"$mods"); then
		report warn modules "$n modules are not in the module cache: go mod download (needs the network, once); otherwise the first build fetches them"
	else
		err=$(grep -v '^[[:space:]]*$' "$errs" | head -n 1)
		report warn modules "go mod download cannot list the workspace's modules: ${err:-it failed and said nothing}"
	fi
	rm -f "$errs"
fi

# --- git ---------------------------------------------------------------------

if ! command -v git >/dev/null 2>&1; then
	report missing git "$(install_hint '' git)"
	need_base+=(git)
else
	have_git=$(git --version | sed 's/^git version //')
	if top=$(git rev-parse --show-toplevel 2>&1); then
		report ok git "$have_git; this copy is a git repository ($top)"
	elif [[ $top == *"dubious ownership"* ]]; then
		report warn git "$have_git; git refuses this repository, which another user owns: git config --global --add safe.directory $PWD"
	else
		report warn git "$have_git; this copy is not a git repository: git init && git add -A && git commit -qm start keeps a record of your work"
	fi
fi

# --- kcat (stage 02 on) ----------------------------------------------------------

if command -v kcat >/dev/null 2>&1; then
	v=$(kcat -V 2>&1 | sed -n 's/^Version \([^ ]*\).*/\1/p' | head -n 1)
	report ok kcat "${v:-?} ($(command -v kcat))"
else
	report missing kcat "needed from stage 02: $(install_hint deps-kcat kcat)"
	need_kcat+=(kcat)
fi

# --- a C compiler, for -race ------------------------------------------------------
# make check runs stages 02, 04 and 05 under the race detector, which needs
# cgo and a C compiler; without one it runs them without -race, and says so.

cc=$(GOTOOLCHAIN=local go env CC 2>/dev/null || true)
cgo=$(GOTOOLCHAIN=local go env CGO_ENABLED 2>/dev/null || true)
if [ "$cgo" = 1 ] && [ -n "$cc" ] && command -v "$cc" >/dev/null 2>&1; then
	report ok race "the race detector can build (cgo with $cc)"
else
	report warn race "no C compiler for cgo (CC=${cc:-unset}, CGO_ENABLED=${cgo:-?}): make check runs stages 02, 04, 05 without -race; $(install_hint '' gcc)"
fi

# --- Docker (stage 05 on) ----------------------------------------------------------

engine=no
if ! command -v docker >/dev/null 2>&1; then
	report missing docker "needed from stage 05: install Docker Engine (https://docs.docker.com/engine/install/; on Debian or Ubuntu, the package docker.io) and start it"
	need_zk+=("the Docker engine")
else
	cli=$(docker --version 2>/dev/null | sed -n 's/^Docker version \([^,]*\).*/\1/p')
	if out=$(limit 4 docker info --format '{{.ServerVersion}}' 2>&1) && [ -n "$out" ]; then
		report ok docker "CLI ${cli:-?}, engine $out"
		engine=yes
	else
		case $out in
		*"permission denied"*)
			what="your user may not use the engine: sudo usermod -aG docker $(id -un), then log out and in again"
			;;
		"")
			what="docker info did not answer within 4 s: is the engine at ${DOCKER_HOST:-unix:///var/run/docker.sock} running?"
			;;
		*)
			what="the engine does not answer (docker info: ${out##*$'\n'}): start it (sudo systemctl start docker)"
			;;
		esac
		report missing docker "needed from stage 05; CLI ${cli:-?} is here, but $what"
		need_zk+=("the Docker engine")
	fi
fi

# --- the images (stage 05 on) --------------------------------------------------------

# The tags and recipe revisions are scripts/images.sh's: its one-line
# definitions are read from it, so the two scripts cannot disagree.
eval "$(grep -E '^(ZOOKEEPER_VERSION|PROMETHEUS_VERSION|BROKER_RECIPE_REVISION|RECIPE_LABEL)=[A-Za-z0-9_.-]+$|^[a-z]+_(image|recipe)\(\) \{ echo [^;]*; \}$' scripts/images.sh 2>/dev/null)"

# The images debootstrap builds (the others, docker build); it runs as root.
debootstrapped=(zookeeper prometheus)
images_hint() {
	local hint="make images builds it from Debian's packages (debootstrap; no container registry needed), a few minutes"
	if [ "$(id -u)" -ne 0 ] && [[ " ${debootstrapped[*]} " == *" $1 "* ]]; then
		hint="$hint; debootstrap runs as root: sudo env \"PATH=\$PATH\" make images"
	fi
	echo "$hint"
}

# check_image NAME WHO: reports the image scripts/images.sh builds as NAME,
# which WHO needs; fails when it is missing or cannot be checked.
check_image() {
	local name=$1 who=$2 tag recipe have created
	if ! tag=$("${name}_image" 2>/dev/null); then
		report warn image "cannot read the $name image's tag from scripts/images.sh"
		return
	fi
	if [ "$engine" = no ]; then
		report missing image "$tag, needed $who: cannot be checked without the Docker engine; once it runs, make images"
		return 1
	fi
	if ! have=$(docker image inspect --format "{{index .Config.Labels \"${RECIPE_LABEL:-org.kafkaworkbook.recipe}\"}} {{.Created}}" "$tag" 2>/dev/null); then
		report missing image "$tag, needed $who: $(images_hint "$name")"
		return 1
	fi
	created=${have#* }
	created=${created%%T*}
	have=${have%% *}
	if [ "$name" = broker ]; then
		recipe=${BROKER_RECIPE_REVISION:-}
		have=${have%%-*}
	else
		recipe=$("${name}_recipe" 2>/dev/null)
	fi
	if [ -n "$recipe" ] && [ "$have" != "$recipe" ]; then
		report warn image "$tag (built $created) is from an older scripts/images.sh (recipe $have, now $recipe): make images rebuilds it"
	elif [ "$name" = broker ]; then
		report ok image "$tag (built $created; make images rebuilds it when the final broker's sources change)"
	else
		report ok image "$tag (built $created)"
	fi
}

# Where debootstrap is first needed: the first group missing an image it builds.
debootstrap_for=""
if ! check_image zookeeper "from stage 05"; then
	need_zk+=("image $(zookeeper_image 2>/dev/null)")
	debootstrap_for=zk
fi
check_image broker "for the final chapter" || need_final+=("image $(broker_image 2>/dev/null)")
if ! check_image prometheus "for the final chapter"; then
	need_final+=("image $(prometheus_image 2>/dev/null)")
	debootstrap_for=${debootstrap_for:-final}
fi

# debootstrap matters only while an image it builds is missing.
if command -v debootstrap >/dev/null 2>&1; then
	v=$(debootstrap --version 2>/dev/null | sed -n 's/^debootstrap \([0-9].*\)/\1/p')
	report ok debootstrap "${v:-$(command -v debootstrap)} (make images builds the ZooKeeper and Prometheus images with it)"
elif [ -z "$debootstrap_for" ]; then
	report ok debootstrap "not installed, not needed: the images it builds are present"
else
	report missing debootstrap "make images needs it for the ZooKeeper and Prometheus images: $(install_hint images debootstrap)"
	if [ "$debootstrap_for" = zk ]; then need_zk+=(debootstrap); else need_final+=(debootstrap); fi
fi

# --- docker-compose (the final chapter) ------------------------------------------------

# As in the Makefile's deps-compose: only where the Compose file is.
if [ -d final/deploy ]; then
	if command -v docker-compose >/dev/null 2>&1; then
		report ok compose "docker-compose $(limit 4 docker-compose version --short 2>/dev/null) (final/deploy's Compose file)"
	else
		plugin=""
		if command -v docker >/dev/null 2>&1 && limit 4 docker compose version >/dev/null 2>&1; then
			plugin=" (docker compose, the plugin, is here, but the tests run docker-compose)"
		fi
		report missing compose "docker-compose, for the final chapter's Compose file (final/deploy)$plugin: $(install_hint deps-compose docker-compose)"
		need_final+=(docker-compose)
	fi
fi

# --- disk, cores, memory --------------------------------------------------------------

# free_kb PATH: "KB MOUNTPOINT" for the file system PATH is (or would be) on.
free_kb() {
	local p=$1
	while [ ! -e "$p" ] && [ "$p" != / ] && [ -n "$p" ]; do p=$(dirname "$p"); done
	df -Pk "$p" 2>/dev/null | awk 'NR == 2 { print $4, $6 }'
}

places=()
if [ "$go_ok" = yes ]; then
	gocache=$(GOTOOLCHAIN=local go env GOCACHE 2>/dev/null)
	[ -n "$gocache" ] && [ "$gocache" != off ] && places+=("Go build cache=$gocache")
fi
places+=("TMPDIR=${TMPDIR:-/tmp}")
if [ "$engine" = yes ]; then
	dockerroot=$(limit 4 docker info --format '{{.DockerRootDir}}' 2>/dev/null)
	# Only when the engine's directory is on this machine.
	[ -n "$dockerroot" ] && [ -d "$dockerroot" ] && places+=("Docker=$dockerroot")
fi
# One line per file system (bash 3 on macOS has no associative arrays).
fs_mnt=() fs_kb=() fs_what=()
for place in "${places[@]}"; do
	read -r kb mnt <<<"$(free_kb "${place#*=}")"
	[ -n "${kb:-}" ] || continue
	for ((i = 0; i < ${#fs_mnt[@]}; i++)); do
		[ "${fs_mnt[i]}" = "$mnt" ] && break
	done
	if [ "$i" -eq "${#fs_mnt[@]}" ]; then
		fs_mnt[i]=$mnt fs_kb[i]=$kb fs_what[i]="${place%%=*} ${place#*=}"
	else
		fs_what[i]="${fs_what[i]}, ${place%%=*} ${place#*=}"
	fi
done
for ((i = 0; i < ${#fs_mnt[@]}; i++)); do
	kb=${fs_kb[i]}
	gb=$(awk -v k="$kb" 'BEGIN { printf "%.1f", k / 1048576 }')
	if [ "$kb" -lt $((MIN_FREE_GB * 1048576)) ]; then
		hint=""
		[[ ${fs_what[i]} == *"Go build cache"* ]] && hint=" (go clean -cache empties the build cache)"
		report warn disk "$gb GB free on ${fs_mnt[i]} (${fs_what[i]}): under $MIN_FREE_GB GB; race-detector builds, the tests' files and the images need room$hint"
	else
		report ok disk "$gb GB free on ${fs_mnt[i]} (${fs_what[i]})"
	fi
done

cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo "?")
if [ -r /proc/meminfo ]; then
	mem=$(awk '/^MemTotal:/ { t = $2 } /^MemAvailable:/ { a = $2 }
		END { printf "%.1f GB memory (%.1f GB available)", t / 1048576, a / 1048576 }' /proc/meminfo)
elif bytes=$(sysctl -n hw.memsize 2>/dev/null); then
	mem=$(awk -v b="$bytes" 'BEGIN { printf "%.1f GB memory", b / 1073741824 }')
else
	mem="memory unknown"
fi
report info machine "$cores cores, $mem"

# --- which stages can run --------------------------------------------------------------

join() { # SEP ITEM...
	local sep=$1 out=""
	shift
	for item in "$@"; do out=${out:+$out$sep}$item; done
	echo "$out"
}

names=("stage 01" "stages 02-04" "stages 05-06" "the final chapter")
# Each group's own needs, as one string (empty: nothing missing).
own=("$(join ', ' ${need_base[@]+"${need_base[@]}"})"
	"$(join ', ' ${need_kcat[@]+"${need_kcat[@]}"})"
	"$(join ', ' ${need_zk[@]+"${need_zk[@]}"})"
	"$(join ', ' ${need_final[@]+"${need_final[@]}"})")
ready=-1
for i in 0 1 2 3; do
	[ -z "${own[i]}" ] || break
	ready=$i
done
case $ready in
-1) summary="no stage can run yet:" ;;
0) summary="stage 01 ready" ;;
1) summary="stages 01-04 ready" ;;
2) summary="stages 01-06 ready" ;;
3) summary="every stage ready (01-06 and final)" ;;
esac
also="" sep=";"
[ "$ready" -eq -1 ] && sep=""
for ((i = ready + 1; i < 4; i++)); do
	[ -n "${own[i]}" ] || continue
	verb=need
	[ "$i" -eq 0 ] || [ "$i" -eq 3 ] && verb=needs
	summary="$summary$sep ${names[i]}$also $verb ${own[i]}"
	also=" also" sep=";"
done
printf '\n%s\n' "$summary"

status=0
[ -n "${own[0]}${own[1]}" ] && status=1
if [ "$STRICT" = 1 ] && [ -n "${own[2]}${own[3]}" ]; then
	status=1
fi
exit $status
