#!/usr/bin/env bash
# shellcheck disable=SC2016  # the bash -c snippets get their values as "$1".., not by expansion
# Tests for tuning/, scripts/install.sh and systemd/tickwire.service.
#
# Every tuning script runs against fake /proc, /sys and /etc trees built here
# (TICKWIRE_HOST_ROOT) with a private state dir (TICKWIRE_TUNING_STATE): the real host is only
# ever read (one read-only check-host run). No tickwire binary is needed.
#
# Usage: bash tests/tuning/run.sh      (CI=1: a missing shellcheck is a failure, not a skip)
# Last line: "N passed, M failed" (+ ", K skipped"); exit status 1 if anything failed.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
T=$REPO/tuning
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tickwire-tuning-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
unset TICKWIRE_HOST_ROOT TICKWIRE_TUNING_STATE TICKWIRE_BIN DESTDIR

PASSED=0 FAILED=0 SKIPPED=0
ok() { PASSED=$((PASSED + 1)); printf 'ok   %s\n' "$1"; }
nok() {
    FAILED=$((FAILED + 1)); printf 'FAIL %s\n' "$1"
    [[ -n ${2:-} ]] && printf '%s\n' "$2" | head -n 40 | sed 's/^/       | /'
    return 0
}
skip() { SKIPPED=$((SKIPPED + 1)); printf 'skip %s: %s\n' "$1" "$2"; }
# check DESC CMD...: pass if CMD succeeds; on failure show the last command output ($OUT).
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d" "${OUT:-}"; fi; }
has() { [[ $OUT == *"$1"* ]]; }
# run CMD...: capture combined output in OUT and status in RC.
run() { OUT=$("$@" 2>&1); RC=$?; }
# tw ROOT STATE SCRIPT ARGS...: a tuning script against a fake root.
tw() { local r=$1 s=$2 c=$3; shift 3; run env TICKWIRE_HOST_ROOT="$r" TICKWIRE_TUNING_STATE="$s" "$T/$c" "$@"; }
put() { mkdir -p "$(dirname "$1")" && printf '%s\n' "$2" >"$1"; }
# Everything about a tree that a revert must restore: paths, types, modes, links, contents.
snap() {
    [[ -d $1 ]] || { echo "(absent)"; return; }
    (cd "$1" && find . -mindepth 1 -printf '%y %m %p %l\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
}
rd() { cat "$1" 2>/dev/null; }

HAVE_PY=0
command -v python3 >/dev/null 2>&1 && python3 -c 'import json' 2>/dev/null && HAVE_PY=1
# jcheck FILE [name:field=value | name:field=~substring]...: schema + assertions on check-host JSON.
jcheck() {
    if ((!HAVE_PY)); then
        command -v jq >/dev/null 2>&1 && jq -e 'type == "array"' "$1" >/dev/null
        return
    fi
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, list) and d, "not a non-empty array"
keys = {"name", "status", "required", "current", "recommended", "relevant_to_cores", "fix"}
for x in d:
    assert not keys - set(x), f"missing {keys - set(x)} in {x}"
    assert x["status"] in ("pass", "fail", "unavailable"), x
    assert isinstance(x["required"], bool) and isinstance(x["relevant_to_cores"], bool), x
    for k in ("name", "current", "recommended", "fix"):
        assert isinstance(x[k], str), (k, x)
    if x["status"] == "unavailable":
        assert x.get("note"), f"unavailable without a note: {x}"
    if x["status"] == "fail":
        assert x["fix"], f"fail without a fix: {x}"
by = {x["name"]: x for x in d}
for spec in sys.argv[2:]:
    name, rest = spec.split(":", 1)
    field, want = rest.split("=", 1)
    assert name in by, f"no item {name}"
    got = by[name][field]
    if isinstance(got, bool):
        got = str(got).lower()
    if want.startswith("~"):
        assert want[1:] in got, f"{name}.{field}: {got!r} does not contain {want[1:]!r}"
    else:
        assert got == want, f"{name}.{field}: {got!r} != {want!r}"
PY
}
# Exit status 0 exactly when no required item fails.
jexit_consistent() {
    ((HAVE_PY)) || return 0
    python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [x["name"] for x in d if x["required"] and x["status"] == "fail"]
assert (int(sys.argv[2]) == 0) == (not bad), (sys.argv[2], bad)
PY
}

# ---------------------------------------------------------------------------------------------
# Fake hosts
# ---------------------------------------------------------------------------------------------
# A 4-CPU bare-metal host with everything at distribution defaults.
mk_untuned() {
    local r=$1 c s
    put "$r/sys/devices/system/cpu/online" "0-3"
    put "$r/sys/devices/system/cpu/possible" "0-3"
    put "$r/sys/devices/system/cpu/isolated" ""
    put "$r/sys/devices/system/cpu/cpuidle/current_driver" "intel_idle"
    for c in 0 1 2 3; do
        put "$r/sys/devices/system/cpu/cpu$c/cpufreq/scaling_governor" "powersave"
        put "$r/sys/devices/system/cpu/cpu$c/cpufreq/scaling_available_governors" "performance powersave"
        s=$r/sys/devices/system/cpu/cpu$c/cpuidle
        put "$s/state0/name" POLL; put "$s/state0/latency" 0; put "$s/state0/disable" 0
        put "$s/state1/name" C1; put "$s/state1/latency" 2; put "$s/state1/disable" 0
        put "$s/state2/name" C1E; put "$s/state2/latency" 10; put "$s/state2/disable" 0
        put "$s/state3/name" C6; put "$s/state3/latency" 133; put "$s/state3/disable" 0
    done
    mkdir -p "$r/sys/devices/system/node/node0" "$r/sys/devices/system/node/node1"
    put "$r/proc/cmdline" "BOOT_IMAGE=/boot/vmlinuz-6.1.0 root=UUID=1234 ro quiet"
    {
        printf '%s\n' "processor	: 0" "flags		: fpu vme tsc msr pae constant_tsc rep_good" ""
        printf '%s\n' "processor	: 1" "flags		: fpu vme tsc msr pae constant_tsc rep_good" ""
        printf '%s\n' "processor	: 2" "flags		: fpu vme tsc msr pae constant_tsc rep_good" ""
        printf '%s\n' "processor	: 3" "flags		: fpu vme tsc msr pae constant_tsc rep_good" ""
    } >"$r/proc/cpuinfo.tmp" && mv "$r/proc/cpuinfo.tmp" "$r/proc/cpuinfo"
    cat >"$r/proc/interrupts" <<'EOF'
            CPU0       CPU1       CPU2       CPU3
   0:         36          0          0          0   IO-APIC    2-edge      timer
  24:       1200          0          0          0   PCI-MSI 512000-edge      ahci[0000:00:17.0]
  30:        900        100        100        100   PCI-MSI 1048576-edge      eth0-TxRx-0
  31:        100        900        100        100   PCI-MSI 1048577-edge      eth0-TxRx-1
  32:          0          0        300          0   PCI-MSI 2097152-edge      mlx5_comp0@pci:0000:3b:00.0
  33:          0          0          0         12   PCI-MSI 2097153-edge      mlx5_async_eq
  40:          5          0          0          0   PCI-MSI 3145728-edge      eth01-not-a-nic
 NMI:          0          0          0          0   Non-maskable interrupts
 LOC:      12345      12345      12345      12345   Local timer interrupts
EOF
    for s in 0 24 30 31 32 33 40; do put "$r/proc/irq/$s/smp_affinity_list" "0-3"; done
    put "$r/proc/irq/default_smp_affinity" "f"
    mkdir -p "$r/sys/class/net/lo" "$r/sys/class/net/eth0" "$r/sys/class/net/ens1f0" "$r/sys/devices/pci0000:00/0000:3b:00.0/msi_irqs"
    : >"$r/sys/devices/pci0000:00/0000:3b:00.0/msi_irqs/33"
    ln -s ../../../devices/pci0000:00/0000:3b:00.0 "$r/sys/class/net/ens1f0/device"
    mkdir -p "$r/sys/class/net/ens1f0/queues/rx-0" "$r/sys/class/net/ens1f0/queues/rx-1" \
        "$r/sys/class/net/ens1f0/queues/tx-0" "$r/sys/bus/pci/drivers/ice"
    ln -s ../../../bus/pci/drivers/ice "$r/sys/devices/pci0000:00/0000:3b:00.0/driver"
    put "$r/sys/kernel/mm/transparent_hugepage/enabled" "[always] madvise never"
    put "$r/sys/kernel/mm/transparent_hugepage/defrag" "always defer defer+madvise [madvise] never"
    put "$r/sys/devices/system/clocksource/clocksource0/current_clocksource" "hpet"
    put "$r/sys/devices/system/clocksource/clocksource0/available_clocksource" "tsc hpet acpi_pm "
    put "$r/proc/sys/kernel/randomize_va_space" 2
    put "$r/proc/sys/kernel/io_uring_disabled" 2
    put "$r/proc/sys/kernel/perf_event_paranoid" 2
    put "$r/proc/sys/kernel/sched_rt_runtime_us" 950000
    put "$r/proc/sys/kernel/timer_migration" 1
    put "$r/proc/sys/kernel/numa_balancing" 1
    put "$r/proc/sys/kernel/nmi_watchdog" 1
    put "$r/proc/sys/vm/swappiness" 60
    put "$r/proc/sys/vm/dirty_ratio" 20
    put "$r/proc/sys/vm/dirty_background_ratio" 10
    put "$r/proc/sys/vm/stat_interval" 1
    put "$r/proc/sys/net/core/busy_read" 0
    put "$r/proc/sys/net/core/busy_poll" 0
    put "$r/proc/1/comm" systemd
    put "$r/proc/812/comm" irqbalance
    mkdir -p "$r/etc/default"
    cat >"$r/etc/default/grub" <<'EOF'
# If you change this file, run 'update-grub' afterwards to update
GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX="console=ttyS0,115200 isolcpus=1 mitigations=auto"
EOF
}

# The same host after tuning for pinned cores 2,3.
mk_tuned() {
    local r=$1 c s
    mk_untuned "$r"
    for c in 0 1 2 3; do
        put "$r/sys/devices/system/cpu/cpu$c/cpufreq/scaling_governor" performance
        for s in 2 3; do put "$r/sys/devices/system/cpu/cpu$c/cpuidle/state$s/disable" 1; done
    done
    put "$r/sys/devices/system/cpu/isolated" "2-3"
    put "$r/proc/cmdline" "BOOT_IMAGE=/boot/vmlinuz-6.1.0 root=UUID=1234 ro quiet isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3"
    sed -i 's/constant_tsc rep_good/constant_tsc rep_good nonstop_tsc/' "$r/proc/cpuinfo"
    for s in 0 24 30 31 32 33 40; do put "$r/proc/irq/$s/smp_affinity_list" "0-1"; done
    put "$r/proc/irq/default_smp_affinity" "3"
    put "$r/sys/kernel/mm/transparent_hugepage/enabled" "always [madvise] never"
    put "$r/sys/devices/system/clocksource/clocksource0/current_clocksource" tsc
    put "$r/proc/sys/kernel/randomize_va_space" 0
    put "$r/proc/sys/kernel/io_uring_disabled" 0
    put "$r/proc/sys/kernel/perf_event_paranoid" 1
    put "$r/proc/sys/kernel/sched_rt_runtime_us" -1
    put "$r/proc/sys/kernel/timer_migration" 0
    put "$r/proc/sys/kernel/numa_balancing" 0
    put "$r/proc/sys/vm/swappiness" 10
    put "$r/proc/sys/net/core/busy_read" 50
    put "$r/proc/sys/net/core/busy_poll" 50
    rm -rf "$r/proc/812"
}

# A container: most knobs are simply not there.
mk_container() {
    local r=$1
    put "$r/sys/devices/system/cpu/online" "0-1"
    mkdir -p "$r/proc"
    printf '%s\n' "processor	: 0" "flags		: fpu tsc constant_tsc nonstop_tsc" "" \
        "processor	: 1" "flags		: fpu tsc constant_tsc nonstop_tsc" "" >"$r/proc/cpuinfo"
    put "$r/proc/sys/kernel/randomize_va_space" 2
    put "$r/proc/sys/vm/swappiness" 60
    put "$r/proc/1/comm" sh
}

# Untuned, but isolcpus/nohz_full only for core 2 (not 3).
mk_isolated_some() {
    mk_untuned "$1"
    put "$1/proc/cmdline" "BOOT_IMAGE=/boot/vmlinuz-6.1.0 ro quiet isolcpus=domain,2 nohz_full=2"
    put "$1/sys/devices/system/cpu/isolated" "2"
}

UNTUNED=$WORK/untuned; mk_untuned "$UNTUNED"
TUNED=$WORK/tuned; mk_tuned "$TUNED"
CONTAINER=$WORK/container; mk_container "$CONTAINER"
ISOSOME=$WORK/isolated-some; mk_isolated_some "$ISOSOME"
S=$WORK/state   # never used by a test that expects state; each cycle uses its own

echo "# tuning tests (work dir $WORK)"

# ---------------------------------------------------------------------------------------------
# check-host
# ---------------------------------------------------------------------------------------------
J=$WORK/out.json
chk_json() { # root expected-rc args... -> writes $J
    local r=$1 want=$2; shift 2
    OUT=$(TICKWIRE_HOST_ROOT=$r "$T/check-host" --json "$@" 2>"$WORK/err"); RC=$?
    printf '%s\n' "$OUT" >"$J"
    [[ $RC == "$want" ]] || { OUT="exit $RC, wanted $want; stderr: $(cat "$WORK/err")"$'\n'"$OUT"; return 1; }
}

check "check-host: tuned host, cores 2,3 -> exit 0" chk_json "$TUNED" 0 --cores 2,3
check "check-host: tuned host JSON: every item passes" jcheck "$J" \
    cpu_governor:status=pass isolcpus:status=pass nohz_full:status=pass rcu_nocbs:status=pass \
    nic_irq_affinity:status=pass irqbalance:status=pass transparent_hugepages:status=pass \
    swappiness:status=pass numa_balancing:status=pass clocksource:status=pass invariant_tsc:status=pass \
    io_uring:status=pass perf_event_paranoid:status=pass rt_throttling:status=pass timer_migration:status=pass \
    aslr:status=pass net.core.busy_read:status=pass net.core.busy_poll:status=pass cpu_idle_states:status=pass
if ((HAVE_PY)); then
    check "check-host: tuned host JSON has no fail at all" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(any(x["status"]=="fail" for x in d))' "$J"
fi

check "check-host: untuned host, cores 2,3 -> exit 1" chk_json "$UNTUNED" 1 --cores 2,3
check "check-host: untuned host JSON: required items fail, classification right" jcheck "$J" \
    cpu_governor:status=fail cpu_governor:required=true cpu_governor:relevant_to_cores=true \
    cpu_governor:current=~cpu2=powersave cpu_governor:fix=~set-governor \
    isolcpus:status=fail isolcpus:required=true isolcpus:fix=~isolate-cores \
    nic_irq_affinity:status=fail nic_irq_affinity:required=true \
    "nic_irq_affinity:current=~30(eth0)=0-3" "nic_irq_affinity:current=~32(ens1f0)" "nic_irq_affinity:current=~33(ens1f0)" \
    "nic_irq_affinity:note=~IRQ(s) 30 31 32 33 " \
    irqbalance:status=fail irqbalance:required=false \
    transparent_hugepages:status=fail transparent_hugepages:current=always transparent_hugepages:required=true \
    clocksource:status=fail clocksource:current=hpet clocksource:required=true \
    numa_balancing:status=fail numa_balancing:required=true \
    invariant_tsc:status=fail invariant_tsc:required=false \
    io_uring:status=fail io_uring:required=false io_uring:note=~epoll \
    cpu_idle_states:status=fail cpu_idle_states:required=false "cpu_idle_states:current=~cpu2:C6(133us)" \
    aslr:required=false swappiness:status=fail swappiness:required=false rt_throttling:required=false
check "check-host: NIC IRQs are matched by whole interface name (eth01-... is not eth0)" \
    bash -c '! grep -q "40(eth" "$1"' _ "$J"
check "check-host: exit code agrees with the JSON" jexit_consistent "$J" "$RC"

check "check-host: --xdp-interface is advisory (tuned host still exits 0)" chk_json "$TUNED" 0 --cores 2,3 --xdp-interface ens1f0
check "check-host: --xdp-interface reports rx queues and driver, not probed in a test tree" jcheck "$J" \
    af_xdp:status=unavailable af_xdp:required=false "af_xdp:current=ens1f0: 2 rx queues, driver ice" \
    "af_xdp:note=~xdp-recv --probe"
check "check-host: --xdp-interface of a missing interface fails its item only" chk_json "$TUNED" 0 --cores 2,3 --xdp-interface nosuch0
check "check-host: the missing interface is named" jcheck "$J" af_xdp:status=fail "af_xdp:current=no interface nosuch0"

check "check-host: untuned host, no cores -> exit 1 (governor, THP, clocksource, NUMA)" chk_json "$UNTUNED" 1
check "check-host: no cores: per-core items checked on all cores, isolation n/a" jcheck "$J" \
    "cpu_governor:current=cpu0=powersave cpu1=powersave cpu2=powersave cpu3=powersave" \
    cpu_governor:note=~"every online core" isolcpus:status=pass isolcpus:note=~"no pinned cores" \
    nic_irq_affinity:status=pass
run env TICKWIRE_HOST_ROOT="$UNTUNED" "$T/check-host"
check "check-host: text output says no pinned cores apply to all cores" has "no pinned cores given"
check "check-host: text output shows current/recommended/fix" bash -c '[[ $1 == *"current:"*"recommended:"*"fix:"* ]]' _ "$OUT"

check "check-host: container host -> exit 0 (missing knobs are unavailable)" chk_json "$CONTAINER" 0
check "check-host: container JSON: unavailable items with notes" jcheck "$J" \
    cpu_governor:status=unavailable transparent_hugepages:status=unavailable clocksource:status=unavailable \
    isolcpus:status=unavailable nic_irq_affinity:status=unavailable io_uring:status=unavailable \
    net.core.busy_read:status=unavailable numa_balancing:status=unavailable invariant_tsc:status=pass
check "check-host: container with pinned cores -> still exit 0" chk_json "$CONTAINER" 0 --cores 1

check "check-host: isolcpus for core 2 only, cores 2,3 -> exit 1" chk_json "$ISOSOME" 1 --cores 2,3
check "check-host: isolcpus fails naming core 3, nohz_full too" jcheck "$J" \
    isolcpus:status=fail "isolcpus:note=~core(s) 3 " nohz_full:status=fail rcu_nocbs:status=fail \
    "isolcpus:current=~isolcpus=domain,2"
chk_json "$ISOSOME" 1 --cores 2
check "check-host: isolcpus=domain,2 covers core 2; nohz_full covers rcu_nocbs" jcheck "$J" \
    isolcpus:status=pass nohz_full:status=pass rcu_nocbs:status=pass

# irqbalance banned from the pinned cores counts as fine
cp -a "$UNTUNED" "$WORK/banned"
put "$WORK/banned/etc/default/irqbalance" 'IRQBALANCE_BANNED_CPULIST="2-3"'
chk_json "$WORK/banned" 1 --cores 2,3
check "check-host: irqbalance with IRQBALANCE_BANNED_CPULIST covering the cores passes" jcheck "$J" irqbalance:status=pass

# JSON escaping of odd values
cp -a "$TUNED" "$WORK/odd"
printf '%s\n' 'x"y\z	tab' >"$WORK/odd/sys/devices/system/clocksource/clocksource0/current_clocksource"
chk_json "$WORK/odd" 1 --cores 2,3
check "check-host: JSON stays valid with quotes, backslashes and tabs in values" jcheck "$J" \
    "clocksource:status=fail" 'clocksource:current=x"y\z	tab'

# --config through the binary (a fake one)
FAKEBIN=$WORK/fakebin; mkdir -p "$FAKEBIN"
cat >"$FAKEBIN/tickwire" <<'EOF'
#!/bin/sh
[ "$1" = check-config ] && [ "$2" = --pinned-cores ] || { echo "usage" >&2; exit 64; }
case "$3" in
    *bad*) echo "config invalid" >&2; exit 1 ;;
    *none*) echo "" ;;
    *) echo "2,3" ;;
esac
EOF
chmod +x "$FAKEBIN/tickwire"
: >"$WORK/good.toml"; : >"$WORK/bad.toml"; : >"$WORK/none.toml"
OUT=$(TICKWIRE_BIN=$FAKEBIN/tickwire TICKWIRE_HOST_ROOT=$TUNED "$T/check-host" --json --config "$WORK/good.toml" 2>&1); RC=$?
printf '%s\n' "$OUT" >"$J"
check "check-host --config: cores from 'tickwire check-config --pinned-cores'" jcheck "$J" \
    "isolcpus:recommended=isolcpus=managed_irq,domain,2-3" cpu_governor:current="cpu2=performance cpu3=performance"
run env TICKWIRE_BIN="$FAKEBIN/tickwire" TICKWIRE_HOST_ROOT="$TUNED" "$T/check-host" --config "$WORK/bad.toml"
check "check-host --config: invalid config -> exit 2 with a message" bash -c '[[ $1 == 2 && $2 == *invalid* ]]' _ "$RC" "$OUT"
OUT=$(TICKWIRE_BIN=$FAKEBIN/tickwire TICKWIRE_HOST_ROOT=$UNTUNED "$T/check-host" --json --config "$WORK/none.toml" 2>&1)
printf '%s\n' "$OUT" >"$J"
check "check-host --config: empty pinned list = no pinned cores" jcheck "$J" isolcpus:note=~"no pinned cores"
run env PATH="$FAKEBIN:$PATH" TICKWIRE_HOST_ROOT="$TUNED" "$T/check-host" --config "$WORK/good.toml"
check "check-host --config: finds tickwire on PATH" bash -c '[[ $1 == 0 ]]' _ "$RC"
run env TICKWIRE_HOST_ROOT="$TUNED" "$T/check-host" --cores 2,x
check "check-host: malformed --cores -> exit 2" bash -c '[[ $1 == 2 ]]' _ "$RC"

# The real host, read-only: only the output format is checked.
OUT=$("$T/check-host" --json 2>&1); RC=$?
printf '%s\n' "$OUT" >"$J"
check "check-host: real host (read-only) gives valid JSON, exit 0 or 1 (was $RC)" \
    bash -c '[[ $1 == 0 || $1 == 1 ]] && { (( ! $2 )) || python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$3"; }' _ "$RC" "$HAVE_PY" "$J"

# ---------------------------------------------------------------------------------------------
# dry-run / --apply / second --apply / --revert, for every tuning script
# ---------------------------------------------------------------------------------------------
# cycle NAME SCRIPT VERIFY-FN ARGS...: runs the four phases on a fresh copy of the untuned host.
cycle() {
    local name=$1 script=$2 verify=$3; shift 3
    local r=$WORK/cycle-$name st=$WORK/state-$name twin=$WORK/twin-$name
    rm -rf "$r" "$st" "$twin"
    cp -a "$UNTUNED" "$r"
    [[ -n ${PREP:-} ]] && "$PREP" "$r"
    cp -a "$r" "$twin"
    local before applied applied_state dry
    before=$(snap "$r")

    tw "$r" "$st" "$script" "$@"
    dry=$OUT
    if [[ $RC == 0 && $(snap "$r") == "$before" && ! -e $st ]]; then ok "$name: dry run (default) changes nothing"
    else nok "$name: dry run (default) changes nothing" "rc=$RC"$'\n'"$OUT"; fi

    # The dry run prints the exact commands: running them gives the same tree as --apply.
    OUT=$(env TICKWIRE_HOST_ROOT="$twin" TICKWIRE_TUNING_STATE="$st" "$T/$script" "$@" 2>/dev/null)
    (cd "$WORK" && bash -e -c "$OUT") >/dev/null 2>&1
    local twin_snap
    twin_snap=$(snap "$twin")

    tw "$r" "$st" "$script" --apply "$@"
    applied=$(snap "$r")
    if [[ $RC == 0 && $applied != "$before" ]]; then ok "$name: --apply changes the fake tree"
    else nok "$name: --apply changes the fake tree" "rc=$RC"$'\n'"$OUT"; fi
    if [[ $twin_snap == "$applied" ]]; then ok "$name: the dry-run commands are exactly what --apply does"
    else nok "$name: the dry-run commands are exactly what --apply does" "$(diff <(printf '%s\n' "$twin_snap") <(printf '%s\n' "$applied"))"$'\n'"$dry"; fi
    OUT="$OUT" "$verify" "$r"
    applied_state=$(snap "$st")

    tw "$r" "$st" "$script" --apply "$@"
    if [[ $RC == 0 && $(snap "$r") == "$applied" && $(snap "$st") == "$applied_state" && $OUT == *"nothing to change"* ]]; then
        ok "$name: second --apply is a no-op and says so"
    else nok "$name: second --apply is a no-op and says so" "rc=$RC"$'\n'"$OUT"; fi

    tw "$r" "$st" "$script" --dry-run "$@"
    check "$name: dry run after --apply has nothing to change" has "nothing to change"

    tw "$r" "$st" "$script" --revert --dry-run "$@"
    if [[ $RC == 0 && $(snap "$r") == "$applied" && $(snap "$st") == "$applied_state" && $OUT == *"would be restored"* ]]; then
        ok "$name: --revert --dry-run only prints"
    else nok "$name: --revert --dry-run only prints" "rc=$RC"$'\n'"$OUT"; fi

    tw "$r" "$st" "$script" --revert "$@"
    if [[ $RC == 0 && $(snap "$r") == "$before" ]]; then ok "$name: --revert restores exactly"
    else nok "$name: --revert restores exactly" "$(diff <(printf '%s\n' "$before") <(snap "$r"))"$'\n'"$OUT"; fi
    if [[ -z $(find "$st" -type f 2>/dev/null) ]]; then ok "$name: --revert consumes the saved state"
    else nok "$name: --revert consumes the saved state" "$(find "$st" -type f)"; fi

    tw "$r" "$st" "$script" --revert "$@"
    check "$name: a second --revert has nothing to do" has "nothing to revert"
}

v_governor() {
    local r=$1
    if [[ $(rd "$r/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor") == performance &&
        $(rd "$r/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor") == performance &&
        $(rd "$r/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") == powersave ]]; then
        ok "set-governor: performance on cores 2,3 only"
    else nok "set-governor: performance on cores 2,3 only" "$OUT"; fi
}
cycle set-governor set-governor v_governor --cores 2,3

v_governor_all() {
    local r=$1 c bad=0
    for c in 0 1 2 3; do [[ $(rd "$r/sys/devices/system/cpu/cpu$c/cpufreq/scaling_governor") == performance ]] || bad=1; done
    if ((!bad)); then ok "set-governor: no cores given -> all cores"; else nok "set-governor: no cores given -> all cores" "$OUT"; fi
}
cycle set-governor-all set-governor v_governor_all

v_aslr() {
    if [[ $(rd "$1/proc/sys/kernel/randomize_va_space") == 0 ]]; then ok "set-aslr: --apply sets randomize_va_space=0"
    else nok "set-aslr: --apply sets randomize_va_space=0" "$OUT"; fi
}
cycle set-aslr set-aslr v_aslr
tw "$UNTUNED" "$S" set-aslr
check "set-aslr: dry run explains setarch -R per process" has "setarch -R"

v_thp() {
    if [[ $(rd "$1/sys/kernel/mm/transparent_hugepage/enabled") == madvise ]]; then ok "set-thp: enabled=madvise"
    else nok "set-thp: enabled=madvise" "$OUT"; fi
}
# Real sysfs shows "always [madvise] never" but takes "madvise" on write; a plain file cannot
# imitate that, so the cycle starts from the plain form and the bracket form is tested below.
thp_plain() { put "$1/sys/kernel/mm/transparent_hugepage/enabled" always; put "$1/sys/kernel/mm/transparent_hugepage/defrag" madvise; }
PREP=thp_plain cycle set-thp set-thp v_thp
v_thp_never() {
    if [[ $(rd "$1/sys/kernel/mm/transparent_hugepage/enabled") == never && $(rd "$1/sys/kernel/mm/transparent_hugepage/defrag") == never ]]; then
        ok "set-thp --mode never: enabled and defrag never"
    else nok "set-thp --mode never: enabled and defrag never" "$OUT"; fi
}
PREP=thp_plain cycle set-thp-never set-thp v_thp_never --mode never
r=$WORK/thp-brackets; cp -a "$UNTUNED" "$r"
tw "$r" "$WORK/state-thp-brackets" set-thp --apply
check "set-thp: reads the [selected] value of the sysfs file" bash -c '[[ $1 == *"THP enabled, was: always"* && $(cat "$2") == madvise ]]' _ "$OUT" "$r/sys/kernel/mm/transparent_hugepage/enabled"
tw "$r" "$WORK/state-thp-brackets" set-thp --revert
check "set-thp: --revert writes back the selected value" test "$(rd "$r/sys/kernel/mm/transparent_hugepage/enabled")" == always

v_isolate() {
    local line
    line=$(grep '^GRUB_CMDLINE_LINUX=' "$1/etc/default/grub")
    if [[ $line == 'GRUB_CMDLINE_LINUX="console=ttyS0,115200 mitigations=auto isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3"' ]]; then
        ok "isolate-cores: GRUB_CMDLINE_LINUX gets the parameters, old isolcpus= replaced"
    else nok "isolate-cores: GRUB_CMDLINE_LINUX gets the parameters, old isolcpus= replaced" "$line"$'\n'"$OUT"; fi
    check "isolate-cores: says update-grub and reboot are needed" bash -c '[[ $1 == *update-grub* && $1 == *reboot* ]]' _ "$OUT"
    if grep -q '^GRUB_CMDLINE_LINUX_DEFAULT="quiet"$' "$1/etc/default/grub"; then ok "isolate-cores: other GRUB lines untouched"
    else nok "isolate-cores: other GRUB lines untouched" "$(cat "$1/etc/default/grub")"; fi
}
cycle isolate-cores isolate-cores v_isolate --cores 2,3

v_irq() {
    local r=$1 f bad=""
    for f in "$r"/proc/irq/[0-9]*/smp_affinity_list; do
        [[ $(rd "$f") == 0-1 ]] || bad+=" $f=$(rd "$f")"
    done
    if [[ -z $bad && $(rd "$r/proc/irq/default_smp_affinity") == 3 ]]; then
        ok "irq-affinity: every IRQ and the default mask moved to housekeeping cores 0-1"
    else nok "irq-affinity: every IRQ and the default mask moved to housekeeping cores 0-1" "$bad"$'\n'"$OUT"; fi
    check "irq-affinity: warns that irqbalance would undo it" has "irqbalance is running"
    check "irq-affinity: labels NIC IRQs" has "irq 30 (NIC eth0)"
}
cycle irq-affinity irq-affinity v_irq --cores 2,3

v_sysctl() {
    local r=$1
    if cmp -s "$T/sysctl/99-tickwire-latency.conf" "$r/etc/sysctl.d/99-tickwire-latency.conf" &&
        [[ $(rd "$r/proc/sys/net/core/busy_read") == 50 && $(rd "$r/proc/sys/net/core/busy_poll") == 50 &&
        $(rd "$r/proc/sys/vm/swappiness") == 10 && $(rd "$r/proc/sys/kernel/numa_balancing") == 0 &&
        $(rd "$r/proc/sys/kernel/timer_migration") == 0 && $(rd "$r/proc/sys/kernel/sched_rt_runtime_us") == -1 ]]; then
        ok "apply-sysctl: profile installed and live values set"
    else nok "apply-sysctl: profile installed and live values set" "$OUT"; fi
    check "apply-sysctl: warns loudly about sched_rt_runtime_us=-1" has "disables RT throttling"
}
cycle apply-sysctl apply-sysctl v_sysctl

# A pre-existing profile is restored with its old content, not deleted.
r=$WORK/sysctl-pre; st=$WORK/state-sysctl-pre
cp -a "$UNTUNED" "$r"; put "$r/etc/sysctl.d/99-tickwire-latency.conf" "vm.swappiness = 30"
before=$(snap "$r")
tw "$r" "$st" apply-sysctl --apply
tw "$r" "$st" apply-sysctl --revert
check "apply-sysctl: --revert puts a pre-existing profile back" test "$(snap "$r")" == "$before"

# Container: unavailable keys are reported and skipped.
r=$WORK/sysctl-ct; cp -a "$CONTAINER" "$r"
tw "$r" "$WORK/state-sysctl-ct" apply-sysctl --apply
check "apply-sysctl: container: missing keys reported as unavailable, rc 0" \
    bash -c '[[ $1 == 0 && $2 == *"unavailable on this host"*net.core.busy_read* ]]' _ "$RC" "$OUT"
tw "$r" "$WORK/state-sysctl-ct" set-governor --apply
check "set-governor: container without cpufreq: unavailable, rc 0" bash -c '[[ $1 == 0 && $2 == *unavailable* ]]' _ "$RC" "$OUT"
tw "$r" "$WORK/state-sysctl-ct" set-thp --apply
check "set-thp: container without THP: unavailable, rc 0" bash -c '[[ $1 == 0 && $2 == *unavailable* ]]' _ "$RC" "$OUT"

# multicast: a feed interface with strict rp_filter, automatic IGMP and a small rmem_max gets
# loose rp_filter (and `all` too, the kernel taking the larger), IGMPv3 and room for two lines.
mcast_prep() {
    local r=$1
    put "$r/proc/sys/net/ipv4/conf/all/rp_filter" 1
    put "$r/proc/sys/net/ipv4/conf/eth1/rp_filter" 1
    put "$r/proc/sys/net/ipv4/conf/eth1/force_igmp_version" 0
    put "$r/proc/sys/net/core/rmem_max" 212992
    put "$r/sys/class/net/eth1/flags" 0x1003
}
v_mcast() {
    local r=$1
    if [[ $(rd "$r/proc/sys/net/ipv4/conf/eth1/rp_filter") == 2 && $(rd "$r/proc/sys/net/ipv4/conf/all/rp_filter") == 2 &&
        $(rd "$r/proc/sys/net/ipv4/conf/eth1/force_igmp_version") == 3 && $(rd "$r/proc/sys/net/core/rmem_max") == 33554432 ]]; then
        ok "multicast: loose rp_filter on eth1 and all, IGMPv3, rmem_max 32 MiB"
    else nok "multicast: loose rp_filter on eth1 and all, IGMPv3, rmem_max 32 MiB" "$OUT"; fi
}
PREP=mcast_prep cycle multicast multicast v_mcast --interface eth1
v_mcast_v2() {
    if [[ $(rd "$1/proc/sys/net/ipv4/conf/eth1/force_igmp_version") == 2 && $(rd "$1/proc/sys/net/core/rmem_max") == 67108864 ]]; then
        ok "multicast --igmp 2 --rmem: IGMPv2 and the larger rmem_max"
    else nok "multicast --igmp 2 --rmem: IGMPv2 and the larger rmem_max" "$OUT"; fi
}
PREP=mcast_prep cycle multicast-v2 multicast v_mcast_v2 --interface eth1 --igmp 2 --rmem 67108864
# A larger rmem_max and a loose `all` are left alone; a missing interface or a link without
# the MULTICAST flag is said plainly.
r=$WORK/mcast-keep; cp -a "$UNTUNED" "$r"; mcast_prep "$r"
put "$r/proc/sys/net/core/rmem_max" 134217728
put "$r/proc/sys/net/ipv4/conf/all/rp_filter" 0
put "$r/sys/class/net/eth1/flags" 0x1003
tw "$r" "$WORK/state-mcast-keep" multicast --apply --interface eth1
check "multicast: a larger rmem_max and a loose 'all' rp_filter are left as they are" \
    bash -c '[[ $1 == 0 && $(cat "$2") == 134217728 && $(cat "$3") == 0 ]]' _ "$RC" "$r/proc/sys/net/core/rmem_max" "$r/proc/sys/net/ipv4/conf/all/rp_filter"
tw "$r" "$WORK/state-mcast-none" multicast --interface eth9
check "multicast: an interface the host lacks is an error naming it" bash -c '[[ $1 == 2 && $2 == *"no interface eth9"* ]]' _ "$RC" "$OUT"
put "$r/sys/class/net/eth1/flags" 0x1003
put "$r/sys/class/net/eth1/flags" 0x3
tw "$r" "$WORK/state-mcast-flag" multicast --interface eth1
check "multicast: warns about a link without the MULTICAST flag" has "multicast on"
tw "$r" "$WORK/state-mcast-usage" multicast
check "multicast: --interface is required" bash -c '[[ $1 == 2 && $2 == *"--interface is required"* ]]' _ "$RC" "$OUT"

# Default state dir lives under the root prefix.
r=$WORK/defstate; cp -a "$UNTUNED" "$r"
run env TICKWIRE_HOST_ROOT="$r" "$T/set-governor" --apply --cores 2
check "state: default dir is \$TICKWIRE_HOST_ROOT/var/lib/tickwire/tuning" \
    test "$(rd "$r/var/lib/tickwire/tuning/governor/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor")" == powersave

# A value changed again after --apply: revert still restores the original.
r=$WORK/reapply; st=$WORK/state-reapply; cp -a "$UNTUNED" "$r"
tw "$r" "$st" apply-sysctl --apply
put "$r/proc/sys/vm/swappiness" 33
tw "$r" "$st" apply-sysctl --apply
tw "$r" "$st" apply-sysctl --revert
check "state: revert restores the value from before the first --apply" test "$(rd "$r/proc/sys/vm/swappiness")" == 60

# ---------------------------------------------------------------------------------------------
# isolate-cores / irq-affinity refusals and edge cases
# ---------------------------------------------------------------------------------------------
r=$WORK/iso; cp -a "$UNTUNED" "$r"; before=$(snap "$r")
tw "$r" "$WORK/state-iso" isolate-cores --apply --cores 0-3
check "isolate-cores: refuses to isolate every core (nonzero exit)" bash -c '[[ $1 != 0 && $2 == *refusing* ]]' _ "$RC" "$OUT"
check "isolate-cores: refusal leaves the tree alone" test "$(snap "$r")" == "$before"
tw "$r" "$WORK/state-iso" isolate-cores --cores 3,7
check "isolate-cores: rejects a core that is not online" bash -c '[[ $1 != 0 && $2 == *"not an online CPU"* ]]' _ "$RC" "$OUT"
tw "$r" "$WORK/state-iso" isolate-cores
check "isolate-cores: needs cores" bash -c '[[ $1 != 0 ]]' _ "$RC"
tw "$r" "$WORK/state-iso" isolate-cores --cores 0,1
check "isolate-cores: warns when cpu0 is isolated" has "isolating cpu0"
sed -i '/^GRUB_CMDLINE_LINUX=/d' "$r/etc/default/grub"
tw "$r" "$WORK/state-iso" isolate-cores --apply --cores 3
check "isolate-cores: adds GRUB_CMDLINE_LINUX when the file has none" \
    grep -qx 'GRUB_CMDLINE_LINUX="isolcpus=managed_irq,domain,3 nohz_full=3 rcu_nocbs=3"' "$r/etc/default/grub"
rm -f "$r/etc/default/grub"
tw "$r" "$WORK/state-iso2" isolate-cores --cores 3
check "isolate-cores: without /etc/default/grub prints the parameters for another boot loader" \
    bash -c '[[ $1 == 0 && $2 == *"nohz_full=3"*"boot loader"* ]]' _ "$RC" "$OUT"

tw "$UNTUNED" "$S" irq-affinity --cores 0-3
check "irq-affinity: refuses when no housekeeping core is left" bash -c '[[ $1 != 0 && $2 == *housekeeping* ]]' _ "$RC" "$OUT"
tw "$ISOSOME" "$S" irq-affinity
check "irq-affinity: without cores uses the kernel's isolated cores" has "echo 0-1,3 > $ISOSOME/proc/irq/30/smp_affinity_list"
tw "$TUNED" "$S" irq-affinity --cores 2,3
check "irq-affinity: tuned host has nothing to change" has "nothing to change"

# ---------------------------------------------------------------------------------------------
# bench
# ---------------------------------------------------------------------------------------------
r=$WORK/bench; cp -a "$UNTUNED" "$r"; before=$(snap "$r")
run env TICKWIRE_HOST_ROOT="$r" "$T/bench" --dry-run --cores 0 -- --bench rings
check "bench --dry-run prints setarch -R taskset -c CORES cargo bench --profile bench ARGS" \
    has "setarch -R taskset -c 0 cargo bench --profile bench --bench rings"
check "bench --dry-run changes nothing" test "$(snap "$r")" == "$before"
run env TICKWIRE_HOST_ROOT="$r" "$T/bench" --dry-run
check "bench: default cores are the last two CPUs" has "taskset -c 2-3 cargo bench"

CARGOBIN=$WORK/cargobin; mkdir -p "$CARGOBIN"
cat >"$CARGOBIN/cargo" <<'EOF'
#!/bin/sh
{
    echo "args: $*"
    echo "governor: $(cat "$TICKWIRE_HOST_ROOT/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")"
    echo "personality: $(cat /proc/self/personality 2>/dev/null)"
    grep Cpus_allowed_list /proc/self/status
} >"$BENCH_LOG"
[ -n "${BENCH_SLEEP:-}" ] && exec sleep "$BENCH_SLEEP"
exit 0
EOF
chmod +x "$CARGOBIN/cargo"
if ! setarch -R true 2>/dev/null || ! taskset -c 0 true 2>/dev/null; then
    skip "bench: live runs" "setarch -R or taskset -c 0 does not work here"
else
    LOG=$WORK/bench.log
    run env PATH="$CARGOBIN:$PATH" BENCH_LOG="$LOG" TICKWIRE_HOST_ROOT="$r" "$T/bench" --cores 0 -- --bench rings
    check "bench: runs cargo bench --profile bench with the extra args (rc 0)" \
        bash -c '[[ $1 == 0 ]] && grep -qx "args: bench --profile bench --bench rings" "$2"' _ "$RC" "$LOG"
    check "bench: governor is performance while benchmarking" grep -qx "governor: performance" "$LOG"
    check "bench: pinned to the benchmark cores" grep -qE "Cpus_allowed_list:[[:space:]]+0$" "$LOG"
    check "bench: ASLR off for the benchmark (ADDR_NO_RANDOMIZE)" grep -qE "personality: 0*40000$" "$LOG"
    check "bench: governor restored afterwards" test "$(snap "$r")" == "$before"
    check "bench: ran check-host first" has "check-host summary"

    rm -f "$LOG"
    run env PATH="$CARGOBIN:$PATH" BENCH_LOG="$LOG" TICKWIRE_HOST_ROOT="$r" "$T/bench" --strict --cores 0
    check "bench --strict: a failing required check aborts before cargo" bash -c '[[ $1 != 0 && ! -e $2 ]]' _ "$RC" "$LOG"

    # A shell started in the background ignores SIGINT and its children cannot trap it: give
    # the bench its default SIGINT back (python3) so the test does not depend on how it was run.
    dflint=()
    ((HAVE_PY)) && dflint=(python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])')
    rm -f "$LOG"
    run env PATH="$CARGOBIN:$PATH" BENCH_LOG="$LOG" BENCH_SLEEP=30 TICKWIRE_HOST_ROOT="$r" "${dflint[@]}" timeout -k 10 -s INT 2 "$T/bench" --cores 0
    check "bench: Ctrl-C (SIGINT) mid-run stops it" bash -c '[[ $1 != 0 ]] && grep -q "governor: performance" "$2"' _ "$RC" "$LOG"
    check "bench: governor restored after Ctrl-C" test "$(snap "$r")" == "$before"
    run env PATH="$CARGOBIN:$PATH" BENCH_LOG="$LOG" BENCH_SLEEP=30 TICKWIRE_HOST_ROOT="$r" timeout -k 10 -s TERM 2 "$T/bench" --cores 0
    check "bench: governor restored after SIGTERM" test "$(snap "$r")" == "$before"
fi

# ---------------------------------------------------------------------------------------------
# install.sh
# ---------------------------------------------------------------------------------------------
SRC=$WORK/src-config; mkdir -p "$SRC/venues"
put "$SRC/tickwire.toml" "[threads.net]"$'\n'"core = 2"
put "$SRC/venues/binance.toml" "name = \"binance\""
D=$WORK/destdir
run "$REPO/scripts/install.sh" --dry-run --destdir "$D" --bin "$FAKEBIN/tickwire" --config-src "$SRC"
check "install.sh --dry-run prints commands and creates nothing" bash -c '[[ $1 == 0 && ! -e $2 && $3 == *"install -D -m 0755"* ]]' _ "$RC" "$D" "$OUT"
run env DESTDIR="$D" "$REPO/scripts/install.sh" --bin "$FAKEBIN/tickwire" --config-src "$SRC"
check "install.sh: DESTDIR install succeeds" test "$RC" == 0
check "install.sh: binary in DESTDIR/usr/local/bin" test -x "$D/usr/local/bin/tickwire"
check "install.sh: unit in DESTDIR/etc/systemd/system with ExecStart=/usr/local/bin/tickwire" \
    grep -qx "ExecStart=/usr/local/bin/tickwire run --config /etc/tickwire/tickwire.toml" "$D/etc/systemd/system/tickwire.service"
check "install.sh: config and venues installed" bash -c 'cmp -s "$1/tickwire.toml" "$2/etc/tickwire/tickwire.toml" && cmp -s "$1/venues/binance.toml" "$2/etc/tickwire/venues/binance.toml"' _ "$SRC" "$D"
check "install.sh: config modes 0750/0640, credentials 0700" \
    test "$(stat -c %a "$D/etc/tickwire") $(stat -c %a "$D/etc/tickwire/tickwire.toml") $(stat -c %a "$D/etc/tickwire/credentials")" == "750 640 700"
check "install.sh: tuning scripts installed and runnable" test -x "$D/usr/local/share/tickwire/tuning/check-host"
check "install.sh: does not create a user when staging into DESTDIR" has "not creating the tickwire user"
put "$D/etc/tickwire/tickwire.toml" "# edited by the admin"
run env DESTDIR="$D" "$REPO/scripts/install.sh" --bin "$FAKEBIN/tickwire" --config-src "$SRC"
check "install.sh: never overwrites an existing config" bash -c '[[ $1 == 0 && $(cat "$2") == "# edited by the admin" ]]' _ "$RC" "$D/etc/tickwire/tickwire.toml"
run "$REPO/scripts/install.sh" --destdir "$WORK/dest2" --prefix /opt/tickwire --bin "$FAKEBIN/tickwire" --config-src "$SRC"
check "install.sh --prefix: binary and unit ExecStart follow the prefix" \
    bash -c '[[ -x $1/opt/tickwire/bin/tickwire ]] && grep -q "^ExecStart=/opt/tickwire/bin/tickwire run" "$1/etc/systemd/system/tickwire.service"' _ "$WORK/dest2"
run "$REPO/scripts/install.sh" --destdir "$WORK/dest3" --bin "$WORK/missing" --config-src "$SRC"
check "install.sh: missing binary without --build is an error" bash -c '[[ $1 != 0 && $2 == *missing* ]]' _ "$RC" "$OUT"
run "$REPO/scripts/install.sh" --dry-run --destdir "$WORK/dest3" --build --bin "$WORK/missing" --config-src "$SRC"
check "install.sh --build --dry-run shows cargo build --release" has "cargo build --release"

# ---------------------------------------------------------------------------------------------
# systemd unit
# ---------------------------------------------------------------------------------------------
UNIT=$REPO/systemd/tickwire.service
for d in Type=notify WatchdogSec=10s NotifyAccess=main Restart=on-failure StartLimitIntervalSec= StartLimitBurst= \
    "ExecStart=/usr/local/bin/tickwire run --config /etc/tickwire/tickwire.toml" User=tickwire Group=tickwire CPUAffinity=0 \
    LimitMEMLOCK=infinity LimitRTPRIO=99 "AmbientCapabilities=CAP_SYS_NICE CAP_IPC_LOCK" \
    "CapabilityBoundingSet=CAP_SYS_NICE CAP_IPC_LOCK" RestrictRealtime=no UMask=0077 ProtectSystem=strict \
    ProtectProc=invisible MemoryDenyWriteExecute=yes SystemCallArchitectures=native \
    "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX" "#LoadCredential=binance-api-key:/etc/tickwire/credentials/binance-api-key"; do
    if [[ $d == *= ]]; then grep -q "^$d" "$UNIT"; else grep -qxF -- "$d" "$UNIT"; fi || { nok "unit: has $d"; continue; }
    ok "unit: has $d"
done
check "unit: no DynamicUser" bash -c '! grep -q "^DynamicUser=yes" "$1"' _ "$UNIT"
check "unit: io_uring syscalls allowed, @resources denied, FIFO/affinity calls re-allowed" bash -c '
    grep -q "^SystemCallFilter=@system-service io_uring_setup io_uring_enter io_uring_register$" "$1" &&
    grep -q "^SystemCallFilter=~@privileged @resources$" "$1" &&
    grep -Eq "^SystemCallFilter=.*sched_setscheduler.*sched_setaffinity.*setrlimit" "$1"' _ "$UNIT"
if command -v systemd-analyze >/dev/null 2>&1; then
    UD=$WORK/unit; mkdir -p "$UD"
    printf '#!/bin/sh\nexit 0\n' >"$UD/tickwire"; chmod +x "$UD/tickwire"
    sed "s|/usr/local/bin/tickwire|$UD/tickwire|" "$UNIT" >"$UD/tickwire.service"
    run systemd-analyze verify "$UD/tickwire.service"
    check "unit: systemd-analyze verify is clean (dummy ExecStart binary)" bash -c '[[ $1 == 0 && -z $2 ]]' _ "$RC" "$OUT"
    run systemd-analyze security --offline=true "$UNIT"
    score=$(sed -n 's/.*Overall exposure level for tickwire.service: \([0-9.]*\).*/\1/p' <<<"$OUT")
    if [[ -z $score ]]; then
        skip "unit: exposure score" "this systemd-analyze has no offline security analysis"
    else
        check "unit: systemd-analyze security exposure $score <= 2.0" awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }'
    fi
else
    skip "unit: systemd-analyze verify/security" "systemd-analyze not installed"
fi

# ---------------------------------------------------------------------------------------------
# shell lint
# ---------------------------------------------------------------------------------------------
SCRIPTS=("$T"/check-host "$T"/set-governor "$T"/set-aslr "$T"/set-thp "$T"/isolate-cores "$T"/irq-affinity
    "$T"/apply-sysctl "$T"/multicast "$T"/bench "$T"/lib.sh "$REPO"/scripts/install.sh "$REPO"/scripts/callgrind-e2e
    "$REPO"/scripts/build-lean "$REPO"/scripts/bench-tail-sets "$REPO"/tests/tuning/run.sh)
if command -v shellcheck >/dev/null 2>&1; then
    for f in "${SCRIPTS[@]}"; do
        run shellcheck -x "$f"
        check "shellcheck ${f#"$REPO"/}" test "$RC" == 0
    done
elif [[ -n ${CI:-} ]]; then
    nok "shellcheck" "shellcheck is not installed and CI is set (apt-get install -y shellcheck)"
else
    skip "shellcheck" "not installed (apt-get install -y shellcheck); CI=1 makes this a failure"
fi

# ---------------------------------------------------------------------------------------------
if ((SKIPPED)); then
    printf '%d passed, %d failed, %d skipped\n' "$PASSED" "$FAILED" "$SKIPPED"
else
    printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
fi
((FAILED == 0))
