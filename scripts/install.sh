#!/usr/bin/env bash
# tickwire install: binary, systemd unit, config and the `tickwire` system user.
#
# Usage: scripts/install.sh [options]
#   --prefix DIR      binary in DIR/bin, tuning scripts in DIR/share/tickwire/tuning
#                     (default /usr/local; the unit's ExecStart follows it)
#   --destdir DIR     stage everything under DIR (also the DESTDIR environment variable);
#                     no user is created and nothing is chowned or reloaded then
#   --bin FILE        binary to install (default target/appliance/release/tickwire: the
#                     appliance alone, without the simulators and benchmark harness)
#   --build           build that binary first (cargo build --release -p tickwire-cli
#                     --no-default-features --target-dir target/appliance)
#   --config-src DIR  config to install (default config/: tickwire.toml and venues/)
#   --unitdir DIR     where the unit goes (default /etc/systemd/system)
#   --no-user         do not create the tickwire user
#   --af-xdp          also install systemd/tickwire-af-xdp.conf as the unit's drop-in
#                     (tickwire.service.d/af-xdp.conf): the capabilities an AF_XDP venue needs
#   --dry-run         print the commands, change nothing
# Existing files in /etc/tickwire are never overwritten (the shipped version is reported and
# left out); the binary, the unit and the tuning scripts are replaced.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=/usr/local
DESTDIR=${DESTDIR:-}
BIN=""
BUILD=0
CONFIG_SRC=$REPO/config
UNITDIR=/etc/systemd/system
SYSCONFDIR=/etc
MAKE_USER=1
AF_XDP=0
DRY=0
USER_NAME=tickwire

die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 2; }
say() { printf '%s\n' "$*"; }
need_arg() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value"; }

while (($#)); do
    case $1 in
        --prefix) need_arg "$@"; PREFIX=$2; shift ;;
        --prefix=*) PREFIX=${1#*=} ;;
        --destdir) need_arg "$@"; DESTDIR=$2; shift ;;
        --destdir=*) DESTDIR=${1#*=} ;;
        --bin) need_arg "$@"; BIN=$2; shift ;;
        --bin=*) BIN=${1#*=} ;;
        --build) BUILD=1 ;;
        --config-src) need_arg "$@"; CONFIG_SRC=$2; shift ;;
        --config-src=*) CONFIG_SRC=${1#*=} ;;
        --unitdir) need_arg "$@"; UNITDIR=$2; shift ;;
        --unitdir=*) UNITDIR=${1#*=} ;;
        --no-user) MAKE_USER=0 ;;
        --af-xdp) AF_XDP=1 ;;
        --dry-run | -n) DRY=1 ;;
        -h | --help) sed -n '2,20s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
    shift
done
PREFIX=${PREFIX%/}
DESTDIR=${DESTDIR%/}
[[ -n $BIN ]] || BIN=$REPO/target/appliance/release/tickwire
[[ -n $DESTDIR && $DESTDIR != /* ]] && DESTDIR=$(pwd)/$DESTDIR

BINDIR=$PREFIX/bin
SHAREDIR=$PREFIX/share/tickwire
CONFDIR=$SYSCONFDIR/tickwire

q() { printf '%q' "$1"; }
# run CMD...: print it (as `+ cmd` when running), execute unless --dry-run.
run() {
    local out="" a
    for a in "$@"; do out+="${out:+ }$(q "$a")"; done
    if ((DRY)); then say "$out"; else say "+ $out"; "$@"; fi
}

((DRY)) && say "# dry run: these commands would be run (nothing is changed)"
[[ -n $DESTDIR ]] && say "# staging into DESTDIR=$DESTDIR"

# --- user --------------------------------------------------------------------------------------
have_user=0
getent passwd "$USER_NAME" >/dev/null 2>&1 && have_user=1
if ((MAKE_USER)); then
    if [[ -n $DESTDIR ]]; then
        say "# DESTDIR set: not creating the $USER_NAME user here; on the target run:"
        say "#   useradd --system --user-group --home-dir /var/lib/tickwire --no-create-home --shell /usr/sbin/nologin $USER_NAME"
    elif ((have_user)); then
        say "# user $USER_NAME exists"
    else
        nologin=/usr/sbin/nologin
        [[ -x $nologin ]] || nologin=/sbin/nologin
        run useradd --system --user-group --home-dir /var/lib/tickwire --no-create-home \
            --shell "$nologin" --comment "tickwire feed appliance" "$USER_NAME"
        have_user=1
    fi
fi

# --- binary ------------------------------------------------------------------------------------
# The installed binary is the appliance alone: built without the `dev-tools` feature (no
# simulator, no benchmark harness, no test key), in a target directory of its own so that a
# development build (`cargo build --release`, which has them) never takes its place.
APPLIANCE_BUILD=(cargo build --release -p tickwire-cli --no-default-features --target-dir target/appliance)
if ((BUILD)); then
    (cd "$REPO" && run "${APPLIANCE_BUILD[@]}")
fi
if [[ ! -x $BIN ]]; then
    if ((DRY)); then
        say "# WARNING: $BIN is missing: the install would fail (build it, or pass --build)"
    else
        die "$BIN is missing: run '${APPLIANCE_BUILD[*]}' first, pass --build, or --bin FILE"
    fi
fi
run install -D -m 0755 "$BIN" "$DESTDIR$BINDIR/tickwire"

# --- unit --------------------------------------------------------------------------------------
UNIT_SRC=$REPO/systemd/tickwire.service
unit_tmp=$(mktemp)
trap 'rm -f "$unit_tmp"' EXIT
sed -e "s|/usr/local/bin/tickwire|$BINDIR/tickwire|g" \
    -e "s|/usr/local/share/tickwire|$SHAREDIR|g" "$UNIT_SRC" >"$unit_tmp"
if [[ $BINDIR != /usr/local/bin ]]; then
    say "# unit ExecStart follows --prefix: $BINDIR/tickwire"
fi
if ((DRY)); then
    say "install -D -m 0644 $(q "$UNIT_SRC") $(q "$DESTDIR$UNITDIR/tickwire.service")${PREFIX:+   # ExecStart=$BINDIR/tickwire}"
else
    say "+ install -D -m 0644 $(q "$UNIT_SRC") $(q "$DESTDIR$UNITDIR/tickwire.service")"
    install -D -m 0644 "$unit_tmp" "$DESTDIR$UNITDIR/tickwire.service"
fi

if ((AF_XDP)); then
    DROPIN=$DESTDIR$UNITDIR/tickwire.service.d/af-xdp.conf
    run install -D -m 0644 "$REPO/systemd/tickwire-af-xdp.conf" "$DROPIN"
fi

# --- tuning scripts (check-host & co. next to the installed binary) ---------------------------
for f in "$REPO"/tuning/*; do
    [[ -f $f ]] || continue
    mode=0755
    [[ $f == *.sh || $f == *.md ]] && mode=0644
    run install -D -m "$mode" "$f" "$DESTDIR$SHAREDIR/tuning/${f##*/}"
done
run install -D -m 0644 "$REPO/tuning/sysctl/99-tickwire-latency.conf" "$DESTDIR$SHAREDIR/tuning/sysctl/99-tickwire-latency.conf"

# --- config (never overwritten) ----------------------------------------------------------------
install_conf() { # src dst-relative-to-CONFDIR
    local src=$1 dst=$DESTDIR$CONFDIR/$2
    if [[ -e $dst ]]; then
        if cmp -s "$src" "$dst"; then say "# $CONFDIR/$2 exists (identical)"
        else say "# $CONFDIR/$2 exists and differs from $src: kept (compare by hand)"; fi
        return 0
    fi
    run install -D -m 0640 "$src" "$dst"
}
run install -d -m 0750 "$DESTDIR$CONFDIR"
run install -d -m 0700 "$DESTDIR$CONFDIR/credentials"
if [[ -f $CONFIG_SRC/tickwire.toml ]]; then
    install_conf "$CONFIG_SRC/tickwire.toml" tickwire.toml
else
    say "# WARNING: no $CONFIG_SRC/tickwire.toml to install"
fi
if [[ -d $CONFIG_SRC/venues ]]; then
    run install -d -m 0750 "$DESTDIR$CONFDIR/venues"
    while IFS= read -r -d '' f; do
        rel=${f#"$CONFIG_SRC"/}
        install_conf "$f" "$rel"
    done < <(find "$CONFIG_SRC/venues" -type f -print0 | sort -z)
fi

# The service user reads the config; only root reads the credentials (systemd hands them over).
if [[ -z $DESTDIR ]] && ((have_user || DRY)); then
    run chown "root:$USER_NAME" "$CONFDIR"
    if ((DRY)) || [[ -e $CONFDIR/tickwire.toml ]]; then run chown "root:$USER_NAME" "$CONFDIR/tickwire.toml"; fi
    if ((DRY)) || [[ -d $CONFDIR/venues ]]; then run chown -R "root:$USER_NAME" "$CONFDIR/venues"; fi
    run chown -R root:root "$CONFDIR/credentials"
fi

# --- systemd -----------------------------------------------------------------------------------
if [[ -z $DESTDIR && -d /run/systemd/system ]]; then
    run systemctl daemon-reload
fi
say "# next: tune the host:    $SHAREDIR/tuning/check-host --config $CONFDIR/tickwire.toml"
say "#       start the service: systemctl enable --now tickwire"
