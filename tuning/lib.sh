# shellcheck shell=bash disable=SC2034  # variables used by the scripts that source this
# Shared helpers for the tickwire host-tuning scripts (sourced, not executed).
#
# Environment:
#   TICKWIRE_HOST_ROOT     prefix for every /proc, /sys and /etc path (default: empty = the real
#                          root). The tests point it at a fake tree; nothing outside it is touched.
#   TICKWIRE_TUNING_STATE  where --apply saves the values it replaces and --revert reads them
#                          (default: $TICKWIRE_HOST_ROOT/var/lib/tickwire/tuning).
#   TICKWIRE_BIN           the tickwire binary used to read pinned cores from --config FILE
#                          (default: `tickwire` on PATH, else target/release/tickwire in the repo).
#
# State layout: $TICKWIRE_TUNING_STATE/<script>/<host path> holds the value that was there before
# the first --apply (a second --apply never overwrites it, so --revert always restores the
# original). <host path>.file holds a whole file's previous content; <host path>.absent records that
# the file did not exist (revert deletes it).

TW_ROOT=${TICKWIRE_HOST_ROOT:-}
TW_ROOT=${TW_ROOT%/}
TW_STATE_DIR=${TICKWIRE_TUNING_STATE:-$TW_ROOT/var/lib/tickwire/tuning}
TW_STATE_DIR=${TW_STATE_DIR%/}
TW_TUNING_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TW_REPO_DIR=$(cd "$TW_TUNING_DIR/.." && pwd)
# How the user reached the scripts (for printing fix commands they can paste).
TW_SHOWN_DIR=$(dirname "$0")

TW_MODE=dry      # what happens now: dry | apply | revert (set by tw_require_writable)
TW_ACTION=""     # what was asked: "" (= apply), apply or revert; --dry-run with either just prints
TW_DRY=0
TW_CHANGES=0     # changes made (apply/revert) or that would be made (dry)
TW_ERRORS=0
TW_CORES=""      # pinned cores, space separated, sorted; empty = none given
TW_CORES_ARG=""  # the option that gave them, to repeat in printed commands

tw_prog() { basename "$0"; }
tw_say() { printf '%s\n' "$*"; }
tw_warn() { printf '%s: warning: %s\n' "$(tw_prog)" "$*" >&2; }
tw_err() { printf '%s: error: %s\n' "$(tw_prog)" "$*" >&2; TW_ERRORS=$((TW_ERRORS + 1)); }
tw_die() { printf '%s: error: %s\n' "$(tw_prog)" "$*" >&2; exit 2; }

# Host path -> path on disk (under the root prefix).
tw_path() { printf '%s%s' "$TW_ROOT" "$1"; }

# Read a host file into the named variable (first line only unless $3 = all). Fails if absent.
tw_read() {
    local f=$TW_ROOT$1
    [[ -r $f && -f $f ]] || return 1
    local __v=""
    if [[ ${3:-} == all ]]; then
        __v=$(<"$f") || return 1
    else
        IFS= read -r __v <"$f" 2>/dev/null || true
    fi
    printf -v "$2" '%s' "$__v"
}

tw_exists() { [[ -e $TW_ROOT$1 ]]; }

# Quote a word for display in a copy-pastable command.
tw_q() {
    if [[ $1 =~ ^[A-Za-z0-9_./,:+=@%-]+$ ]]; then
        printf '%s' "$1"
    else
        printf "'%s'" "${1//\'/\'\\\'\'}"
    fi
}

# ---------------------------------------------------------------------------------------------
# CPU lists
# ---------------------------------------------------------------------------------------------

# "0-2,5" -> "0 1 2 5" (sorted, unique). Returns 1 on a malformed list.
# (Pure bash: a sparse indexed array iterates in index order, which sorts and dedups.)
tw_expand_cpulist() {
    local list=${1//[[:space:]]/} part a b i
    local -a set=() parts=()
    [[ -z $list ]] && return 0
    IFS=, read -r -a parts <<<"$list"
    for part in "${parts[@]}"; do
        if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
            a=$((10#${BASH_REMATCH[1]})); b=$((10#${BASH_REMATCH[2]}))
            ((a <= b)) || return 1
            for ((i = a; i <= b; i++)); do set[i]=1; done
        elif [[ $part =~ ^[0-9]+$ ]]; then
            set[10#$part]=1
        else
            return 1
        fi
    done
    printf '%s' "${!set[*]}"
}

# "0 1 2 5" -> "0-2,5"
tw_compress_cpulist() {
    local c start=-1 prev=-1 res=""
    local -a set=()
    for c in $1; do [[ $c =~ ^[0-9]+$ ]] && set[10#$c]=1; done
    for c in "${!set[@]}"; do
        if ((start < 0)); then
            start=$c
        elif ((c != prev + 1)); then
            if ((start == prev)); then res+="$start,"; else res+="$start-$prev,"; fi
            start=$c
        fi
        prev=$c
    done
    if ((start >= 0)); then
        if ((start == prev)); then res+="$start"; else res+="$start-$prev"; fi
    fi
    printf '%s' "$res"
}

# Kernel hex mask ("ff,ffffffff" or "3") -> "0 1 ..." (space separated).
tw_mask_to_list() {
    local m=${1//[[:space:]]/} word g=0 b out=() words
    IFS=, read -r -a words <<<"$m"
    local i
    for ((i = ${#words[@]} - 1; i >= 0; i--)); do
        word=${words[i]}
        [[ $word =~ ^[0-9a-fA-F]+$ ]] || return 1
        word=$((16#$word))
        for ((b = 0; b < 32; b++)); do
            ((word & (1 << b))) && out+=("$((g * 32 + b))")
        done
        g=$((g + 1))
    done
    printf '%s' "${out[*]}"
}

# Set operations on space-separated lists.
tw_list_has() { [[ " $1 " == *" $2 "* ]]; }
tw_list_minus() { # $1 minus $2
    local c out=()
    for c in $1; do tw_list_has "$2" "$c" || out+=("$c"); done
    printf '%s' "${out[*]}"
}
tw_list_and() {
    local c out=()
    for c in $1; do tw_list_has "$2" "$c" && out+=("$c"); done
    printf '%s' "${out[*]}"
}

# Online CPUs of the (possibly fake) host, space separated.
tw_online_cpus() {
    local v d out=()
    if tw_read /sys/devices/system/cpu/online v && [[ -n $v ]]; then
        tw_expand_cpulist "$v" && return 0
    fi
    for d in "$(tw_path /sys/devices/system/cpu)"/cpu[0-9]*; do
        [[ -d $d ]] && out+=("${d##*/cpu}")
    done
    if ((${#out[@]} == 0)) && [[ -r $(tw_path /proc/cpuinfo) ]]; then
        mapfile -t out < <(sed -n 's/^processor[[:space:]]*:[[:space:]]*\([0-9]*\).*/\1/p' "$(tw_path /proc/cpuinfo)")
    fi
    ((${#out[@]})) && printf '%s\n' "${out[@]}" | sort -n -u | tr '\n' ' ' | sed 's/ $//'
    return 0
}

# Kernel hex mask for a cpu list ("0 1 4" -> "13"; 32-bit groups joined by commas).
tw_cpumask() {
    local c max=0 g words=() res=""
    for c in $1; do ((c > max)) && max=$c; done
    local n=$((max / 32 + 1))
    for ((g = 0; g < n; g++)); do words[g]=0; done
    for c in $1; do words[c / 32]=$((words[c / 32] | (1 << (c % 32)))); done
    for ((g = n - 1; g >= 0; g--)); do
        if ((g == n - 1)); then res+=$(printf '%x' "${words[g]}"); else res+=$(printf ',%08x' "${words[g]}"); fi
    done
    printf '%s' "$res"
}

# ---------------------------------------------------------------------------------------------
# Pinned cores: --cores LIST, or --config FILE through `tickwire check-config --pinned-cores`
# ---------------------------------------------------------------------------------------------

tw_find_bin() {
    if [[ -n ${TICKWIRE_BIN:-} ]]; then
        printf '%s' "$TICKWIRE_BIN"
    elif command -v tickwire >/dev/null 2>&1; then
        command -v tickwire
    elif [[ -x $TW_REPO_DIR/target/release/tickwire ]]; then
        printf '%s' "$TW_REPO_DIR/target/release/tickwire"
    else
        return 1
    fi
}

# tw_set_cores_list LIST: validate and set TW_CORES.
tw_set_cores_list() {
    local expanded
    expanded=$(tw_expand_cpulist "$1") || tw_die "bad core list '$1' (want e.g. 1,2 or 2-3)"
    TW_CORES=$expanded
}

tw_cores_from_config() {
    local file=$1 bin out line=""
    [[ -r $file ]] || tw_die "config $file not readable"
    bin=$(tw_find_bin) || tw_die "no tickwire binary (set TICKWIRE_BIN, put tickwire on PATH or build target/release/tickwire) to read $file; or pass --cores LIST"
    out=$("$bin" check-config --pinned-cores "$file") || tw_die "'$bin check-config --pinned-cores $file' failed: the config is invalid"
    # The binary prints the list on its last line (empty line = no pinned cores).
    line=$(printf '%s\n' "$out" | tail -n 1 | tr -d '[:space:]')
    [[ -z $line || $line =~ ^[0-9]+(,[0-9]+)*$ ]] || tw_die "unexpected output from check-config: '$line'"
    tw_set_cores_list "$line"
}

# Handles the options every script shares. Usage in a getopt loop:
#   tw_common_opt "$@" && shift "$TW_SHIFT" && continue
TW_SHIFT=0
tw_common_opt() {
    TW_SHIFT=1
    case $1 in
        --apply) TW_ACTION=apply ;;
        --revert) TW_ACTION=revert ;;
        --dry-run) TW_DRY=1 ;;
        --cores)
            [[ $# -ge 2 ]] || tw_die "--cores needs a list"
            tw_set_cores_list "$2"; TW_CORES_ARG="--cores $2"; TW_SHIFT=2 ;;
        --cores=*) tw_set_cores_list "${1#*=}"; TW_CORES_ARG="--cores ${1#*=}" ;;
        --config)
            [[ $# -ge 2 ]] || tw_die "--config needs a file"
            tw_cores_from_config "$2"; TW_CORES_ARG="--config $2"; TW_SHIFT=2 ;;
        --config=*) tw_cores_from_config "${1#*=}"; TW_CORES_ARG="--config ${1#*=}" ;;
        *) return 1 ;;
    esac
    return 0
}

# Called once the options are parsed: settles TW_MODE, and refuses to write to the real host
# without root (a fake root is fine for anyone).
tw_require_writable() {
    if ((TW_DRY)) || [[ -z $TW_ACTION ]]; then TW_MODE=dry; else TW_MODE=$TW_ACTION; fi
    [[ -n $TW_ACTION ]] || TW_ACTION=apply
    [[ $TW_MODE == dry ]] && return 0
    if [[ -z $TW_ROOT && $EUID -ne 0 ]]; then
        tw_die "--$TW_MODE changes the host: run as root (or set TICKWIRE_HOST_ROOT to a test tree)"
    fi
}

tw_banner() {
    case $TW_MODE in
        dry) tw_say "# dry run: these are the commands --$TW_ACTION would run (nothing is changed)" ;;
        apply) tw_say "# applying (previous values are saved under $TW_STATE_DIR/$1)" ;;
        revert) tw_say "# reverting from $TW_STATE_DIR/$1" ;;
    esac
    [[ -n $TW_ROOT ]] && tw_say "# host root prefix: $TW_ROOT"
    return 0
}

# ---------------------------------------------------------------------------------------------
# Changing values, with saved state
# ---------------------------------------------------------------------------------------------

tw_state_file() { printf '%s/%s%s' "$TW_STATE_DIR" "$1" "$2"; }

# Remember the value before the first change (never overwritten by later --apply runs).
tw_state_save_value() { # ns hostpath value
    local f
    f=$(tw_state_file "$1" "$2")
    [[ -e $f || -e $f.file || -e $f.absent ]] && return 0
    mkdir -p -- "$(dirname -- "$f")" && printf '%s\n' "$3" >"$f"
}

tw_state_save_file() { # ns hostpath
    local f src d
    f=$(tw_state_file "$1" "$2")
    src=$TW_ROOT$2
    [[ -e $f || -e $f.file || -e $f.absent ]] && return 0
    mkdir -p -- "$(dirname -- "$f")" || return 1
    if [[ -e $src ]]; then cp -p -- "$src" "$f.file"; return; fi
    : >"$f.absent"
    # Directories that installing the file will create are removed again by --revert.
    d=$(dirname -- "$2")
    while [[ $d != / && ! -e $TW_ROOT$d ]]; do
        mkdir -p -- "$(dirname -- "$(tw_state_file "$1" "$d")")" && : >"$(tw_state_file "$1" "$d").absent"
        d=$(dirname -- "$d")
    done
}

# tw_set_value NS HOSTPATH VALUE [CURRENT] [LABEL]
# Writes VALUE unless the current value already equals it. CURRENT defaults to the file's first
# line (pass it for files like THP's "always [madvise] never"). Returns 0 if unchanged or changed,
# 1 on failure.
tw_set_value() {
    local ns=$1 hp=$2 val=$3 cur label=${5:-$2} f
    f=$(tw_path "$hp")
    if [[ $# -ge 4 ]]; then cur=$4; else tw_read "$hp" cur || cur=""; fi
    if [[ $cur == "$val" ]]; then
        tw_say "# $label: already $val, nothing to change"
        return 0
    fi
    TW_CHANGES=$((TW_CHANGES + 1))
    case $TW_MODE in
        dry)
            tw_say "# $label: $cur -> $val"
            tw_say "echo $(tw_q "$val") > $(tw_q "$f")"
            ;;
        apply)
            tw_state_save_value "$ns" "$hp" "$cur" || { tw_err "cannot save state for $hp under $TW_STATE_DIR"; return 1; }
            tw_say "+ echo $(tw_q "$val") > $(tw_q "$f")   # $label, was: $cur"
            if ! printf '%s\n' "$val" 2>/dev/null >"$f"; then
                TW_CHANGES=$((TW_CHANGES - 1))
                if [[ ${TW_SOFT_FAIL:-0} == 1 ]]; then
                    tw_warn "the kernel refused $val for $f; left as $cur"
                    TW_REFUSED=$((${TW_REFUSED:-0} + 1))
                else
                    tw_err "writing $val to $f failed"
                fi
                return 1
            fi
            ;;
    esac
    return 0
}

# tw_install_file NS SRC HOSTPATH MODE: install a whole file (saving what was there).
tw_install_file() {
    local ns=$1 src=$2 hp=$3 mode=$4 dst
    dst=$(tw_path "$hp")
    if [[ -f $dst ]] && cmp -s -- "$src" "$dst"; then
        tw_say "# $hp: already installed and identical, nothing to change"
        return 0
    fi
    TW_CHANGES=$((TW_CHANGES + 1))
    case $TW_MODE in
        dry) tw_say "install -D -m $mode $(tw_q "$src") $(tw_q "$dst")" ;;
        apply)
            tw_state_save_file "$ns" "$hp" || { tw_err "cannot save state for $hp"; return 1; }
            tw_say "+ install -D -m $mode $(tw_q "$src") $(tw_q "$dst")"
            install -D -m "$mode" -- "$src" "$dst" || { tw_err "installing $dst failed"; return 1; }
            ;;
    esac
}

# tw_write_file NS HOSTPATH CONTENT_FILE: replace a file's content (keeps its mode/owner).
tw_write_file() {
    local ns=$1 hp=$2 src=$3 dst
    dst=$(tw_path "$hp")
    if [[ -f $dst ]] && cmp -s -- "$src" "$dst"; then
        tw_say "# $hp: already up to date, nothing to change"
        return 0
    fi
    TW_CHANGES=$((TW_CHANGES + 1))
    case $TW_MODE in
        dry) tw_say "# (would rewrite $dst as shown above)" ;;
        apply)
            tw_state_save_file "$ns" "$hp" || { tw_err "cannot save state for $hp"; return 1; }
            tw_say "+ rewrite $dst"
            cat -- "$src" >"$dst" || { tw_err "writing $dst failed"; return 1; }
            ;;
    esac
}

# Restore everything saved under namespace NS (or print how, in dry mode). Removes the state.
tw_revert_ns() {
    local ns=$1 dir f rel target val n=0
    dir="$TW_STATE_DIR/$ns"
    if [[ ! -d $dir ]] || [[ -z $(find "$dir" -type f -print -quit) ]]; then
        tw_say "# nothing saved under $dir: nothing to revert"
        return 0
    fi
    while IFS= read -r -d '' f; do
        rel=${f#"$dir"}
        case $rel in
            *.absent)
                rel=${rel%.absent}; target=$(tw_path "$rel")
                local rm=(rm -f --)
                [[ -d $target && ! -L $target ]] && rm=(rmdir --)
                if [[ $TW_MODE == dry ]]; then
                    tw_say "${rm[0]} $(tw_q "$target")   # did not exist before"
                else
                    tw_say "+ ${rm[0]} $(tw_q "$target")   # did not exist before"
                    if "${rm[@]}" "$target"; then rm -f -- "$f"; else tw_err "removing $target failed"; fi
                fi
                ;;
            *.file)
                rel=${rel%.file}; target=$(tw_path "$rel")
                if [[ $TW_MODE == dry ]]; then
                    tw_say "cat $(tw_q "$f") > $(tw_q "$target")   # previous content"
                else
                    tw_say "+ cat $(tw_q "$f") > $(tw_q "$target")   # previous content"
                    { cat -- "$f" >"$target" && rm -f -- "$f"; } || tw_err "restoring $target failed"
                fi
                ;;
            *)
                target=$(tw_path "$rel")
                val=$(cat -- "$f")
                if [[ $TW_MODE == dry ]]; then
                    tw_say "echo $(tw_q "$val") > $(tw_q "$target")"
                else
                    tw_say "+ echo $(tw_q "$val") > $(tw_q "$target")"
                    { printf '%s\n' "$val" >"$target" && rm -f -- "$f"; } 2>/dev/null || tw_err "restoring $val to $target failed (state kept in $f)"
                fi
                ;;
        esac
        n=$((n + 1))
    done < <(find "$dir" -type f -print0 | sort -z -r)   # reverse: files before their new dirs
    TW_CHANGES=$((TW_CHANGES + n))
    [[ $TW_MODE == revert ]] && find "$dir" -depth -type d -empty -delete 2>/dev/null
    return 0
}

# Closing line for apply/dry/revert, and the exit status.
tw_finish() {
    case $TW_MODE in
        dry)
            if [[ $TW_ACTION == revert ]]; then
                ((TW_CHANGES == 0)) || tw_say "# $TW_CHANGES value(s) would be restored; run --revert without --dry-run"
            elif ((TW_CHANGES == 0)); then tw_say "# nothing to change: already tuned"
            else tw_say "# $TW_CHANGES change(s) would be made; run again with --apply (undo later with --revert)"; fi ;;
        apply)
            if ((TW_CHANGES == 0)); then tw_say "# nothing to change: already tuned (no-op)"
            else tw_say "# $TW_CHANGES change(s) applied; undo with --revert"; fi ;;
        revert)
            tw_say "# $TW_CHANGES value(s) restored" ;;
    esac
    ((TW_ERRORS == 0)) || { tw_say "# $TW_ERRORS error(s)"; return 1; }
    return 0
}

# ---------------------------------------------------------------------------------------------
# Kernel command line and irqbalance, shared by check-host, isolate-cores and irq-affinity
# ---------------------------------------------------------------------------------------------

# Value of a kernel parameter from /proc/cmdline into var $2 ("" if bare). Fails if absent.
tw_cmdline_param() {
    local cmdline tok found=1 __v=""
    tw_read /proc/cmdline cmdline || return 1
    for tok in $cmdline; do
        [[ $tok == -- ]] && break   # the rest belongs to init
        if [[ $tok == "$1" ]]; then __v=""; found=0
        elif [[ $tok == "$1="* ]]; then __v=${tok#*=}; found=0; fi
    done
    printf -v "$2" '%s' "$__v"
    return $found
}

# isolcpus=[flag,...,]list -> expanded cpus (flags nohz, domain, managed_irq are dropped).
tw_isolcpus_list() {
    local v=$1 tok out=()
    local IFS=,
    for tok in $v; do
        case $tok in nohz | domain | managed_irq) ;; *) out+=("$tok") ;; esac
    done
    IFS=' '
    local joined
    joined=$(IFS=,; printf '%s' "${out[*]}")
    tw_expand_cpulist "$joined"
}

# Is irqbalance running? Looks for the process in (the possibly fake) /proc; on the real root
# also asks systemd when it is PID 1.
tw_irqbalance_running() {
    local c comm
    for c in "$(tw_path /proc)"/[0-9]*/comm; do
        [[ -r $c ]] || continue
        IFS= read -r comm <"$c" 2>/dev/null || continue
        [[ $comm == irqbalance ]] && return 0
    done
    if [[ -z $TW_ROOT && -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1; then
        systemctl is-active --quiet irqbalance.service 2>/dev/null && return 0
    fi
    return 1
}

# CPUs irqbalance is told to keep off (IRQBALANCE_BANNED_CPULIST in its defaults file).
tw_irqbalance_banned() {
    local f line v
    for f in /etc/default/irqbalance /etc/sysconfig/irqbalance; do
        tw_exists "$f" || continue
        line=$(grep -E '^[[:space:]]*IRQBALANCE_BANNED_CPULIST=' "$(tw_path "$f")" | tail -n 1) || continue
        v=${line#*=}; v=${v//\"/}; v=${v//\'/}
        tw_expand_cpulist "$v" 2>/dev/null && return 0
    done
    return 0
}

# IRQ numbers that belong to network devices: /proc/interrupts lines naming an interface from
# /sys/class/net (or its device, e.g. virtio2 / a PCI address), plus the device's msi_irqs.
# Prints "irq name" lines.
tw_nic_irqs() {
    local netdir ifdir ifname dev devname names=() owner=() line irq rest n i msi
    netdir=$TW_ROOT/sys/class/net
    [[ -d $netdir ]] || return 0
    declare -A seen=()
    for ifdir in "$netdir"/*; do
        ifname=${ifdir##*/}
        [[ $ifname == lo || ! -e $ifdir ]] && continue
        names+=("$ifname"); owner+=("$ifname")
        if [[ -L $ifdir/device ]]; then
            dev=$(readlink -- "$ifdir/device"); devname=${dev##*/}
            [[ -n $devname ]] && { names+=("$devname"); owner+=("$ifname"); }
            for msi in "$ifdir"/device/msi_irqs "$ifdir"/device/../msi_irqs; do
                [[ -d $msi ]] || continue
                for n in "$msi"/*; do
                    n=${n##*/}
                    [[ $n =~ ^[0-9]+$ && -z ${seen[$n]:-} ]] && { seen[$n]="$ifname"; printf '%s %s\n' "$n" "$ifname"; }
                done
                break
            done
        fi
    done
    [[ -r $TW_ROOT/proc/interrupts ]] || return 0
    while IFS= read -r line; do
        [[ $line =~ ^[[:space:]]*([0-9]+):(.*)$ ]] || continue
        irq=${BASH_REMATCH[1]}; rest=${BASH_REMATCH[2]}
        [[ -n ${seen[$irq]:-} ]] && continue
        for i in "${!names[@]}"; do
            n=${names[i]}
            # whole-word match: eth0 matches "eth0-TxRx-0" but not "eth01"
            if [[ $rest =~ (^|[^A-Za-z0-9_])${n//./\\.}([^A-Za-z0-9_]|$) ]]; then
                seen[$irq]=${owner[i]}; printf '%s %s\n' "$irq" "${owner[i]}"; break
            fi
        done
    done <"$TW_ROOT/proc/interrupts"
}
