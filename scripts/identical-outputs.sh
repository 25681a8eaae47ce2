#!/usr/bin/env bash
# Compare two hvio binaries' outputs byte for byte: `hvio compare` on paper
# 000's four-VM scenario, every `hvio reproduce` experiment (`--quick`, and
# `--seed 1` unless QUICK=1), `hvio replay` of the test traces (open and
# closed loop), and `hvio sim --json` plus its per-request records under
# every scheduler for the four-VM scenario and three small configs (direct
# jobs with fio-style threads, a buffered VM, blktap).
#
#   OLD_PYTHON=… NEW_PYTHON=… scripts/identical-outputs.sh BASELINE_HVIO NEW_HVIO [OUT_DIR]
#
# `hvio reproduce` runs hvio's Python package, whose simulator is the
# extension module of the checkout it was built from, not the binary: each
# side's reproduce runs with that side's Python (`HVIO_PYTHON`), OLD_PYTHON
# and NEW_PYTHON, each a venv of its own checkout (`make venv python` there
# makes `.venv/bin/python`). Without them a binary finds its checkout's
# `.venv` when it sits in that checkout's `target/`, else `python3`.
# SKIP_REPRODUCE=1 leaves the reproduce experiments out; otherwise a side
# that cannot list them is an error. A command that fails on either side is
# reported as failed, never as the same.
#
# pregather-overhead's CPU-time columns (ns per request, the ratio to CFQ)
# are measured, not simulated: they are blanked before comparing. Prints one
# line per comparison and exits 1 if any differ.
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 BASELINE_HVIO NEW_HVIO [OUT_DIR]" >&2
    exit 2
fi
old=$(realpath "$1")
new=$(realpath "$2")
root=$(cd "$(dirname "$0")/.." && pwd)
out=${3:-$(mktemp -d)}
rm -rf "$out/old" "$out/new"
mkdir -p "$out/old" "$out/new" "$out/cfg"
differ=0

# Run `hvio ARGS` with both binaries, each in its own directory (`{}` in ARGS
# names it, so paths printed are the same). stdout goes to NAME.out.
both() {
    local name=$1
    shift
    for side in old new; do
        local bin=$old py=${OLD_PYTHON:-}
        [[ $side == new ]] && bin=$new py=${NEW_PYTHON:-}
        local args=("${@//\{\}/.}")
        rm -f "$out/$side/$name.failed"
        (cd "$out/$side" && with_python "$py" "$bin" "${args[@]}" >"$name.out" 2>"$name.err") ||
            echo "exit $?" >"$out/$side/$name.failed"
    done
}

# Run a command with HVIO_PYTHON set to $1 when $1 is not empty.
with_python() {
    local py=$1
    shift
    if [[ -n $py ]]; then HVIO_PYTHON=$py "$@"; else "$@"; fi
}

# Compare the files NAME.* of both sides; a side that failed is a failure.
check() {
    local name=$1 ok=same
    for side in old new; do
        if [[ -e $out/$side/$name.failed ]]; then
            echo "$name: FAILED on the $side side ($(cat "$out/$side/$name.failed"); $out/$side/$name.err)"
            differ=1
            return
        fi
    done
    for f in "$out/old/$name".*; do
        local g=$out/new/${f#"$out/old/"}
        [[ $f == *.err || $f == *.cmp || $f == *.failed ]] && continue
        if [[ $name == reproduce-pregather-overhead* ]]; then
            python3 "$root/scripts/blank-timings.py" "$f" >"$f.cmp"
            python3 "$root/scripts/blank-timings.py" "$g" >"$g.cmp"
            f=$f.cmp g=$g.cmp
        fi
        if ! cmp -s "$f" "$g"; then
            ok="DIFFERENT ($(basename "$g"))"
            differ=1
        fi
    done
    echo "$name: $ok"
}

cat >"$out/cfg/direct.toml" <<'EOF'
seed = 7
max_time_s = 120
[[vm]]
name = "a"
image_size = "4GiB"
guest_scheduler = "cfq"
[[vm.job]]
rw = "randrw"
bssplit = "4k/50:64k/50"
size = "1GiB"
numjobs = 4
iodepth = 2
requests = 1500
fsync = 20
[[vm]]
name = "b"
image_size = "4GiB"
weight = 200
[[vm.job]]
rw = "read"
bs = "64k"
size = "1GiB"
numjobs = 2
requests = 1500
sharing = "same-file"
offset_increment = "64MiB"
EOF
cat >"$out/cfg/buffered.toml" <<'EOF'
seed = 5
max_time_s = 300
[[vm]]
name = "a"
image_size = "4GiB"
[[vm.job]]
preset = "RRW"
direct = false
fsync = 100
requests = 3000
[[vm]]
name = "b"
image_size = "4GiB"
[[vm.job]]
preset = "SW-M"
direct = false
requests = 3000
EOF
cat >"$out/cfg/blktap.toml" <<'EOF'
seed = 2
max_time_s = 300
[host.blktap]
[[vm]]
name = "a"
image_size = "4GiB"
[[vm.job]]
rw = "read"
bs = "128k"
size = "512MiB"
direct = false
requests = 800
[[vm]]
name = "b"
image_size = "4GiB"
[[vm.job]]
rw = "randwrite"
bs = "8k"
size = "512MiB"
numjobs = 4
requests = 800
EOF

both compare compare "$root/experiments/paper000-four-vms.toml" --json "{}/compare.json"
check compare

schedulers=$("$old" schedulers | sed -n 's/^\([a-z-]*\) — .*/\1/p')
for cfg in "$root/experiments/paper000-four-vms.toml" "$out/cfg/direct.toml" "$out/cfg/buffered.toml" "$out/cfg/blktap.toml"; do
    base=$(basename "$cfg" .toml)
    for s in $schedulers; do
        both "sim-$base-$s" sim "$cfg" --scheduler "$s" --json "{}/sim-$base-$s.json" --records "{}/sim-$base-$s.csv"
        check "sim-$base-$s"
    done
done

for trace in "$root"/crates/hvio-trace/tests/data/*.csv; do
    base=$(basename "$trace" .csv)
    both "replay-$base-open" replay "$trace"
    check "replay-$base-open"
    both "replay-$base-closed" replay "$trace" --closed 8 --scheduler cfq
    check "replay-$base-closed"
done

runs=(--quick)
[[ ${QUICK:-0} == 1 ]] || runs+=(--seed)
experiments=()
if [[ ${SKIP_REPRODUCE:-0} == 1 ]]; then
    echo "reproduce: left out (SKIP_REPRODUCE=1)"
else
    for side in old new; do
        bin=$old py=${OLD_PYTHON:-}
        [[ $side == new ]] && bin=$new py=${NEW_PYTHON:-}
        if ! list=$(cd "$out/$side" && with_python "$py" "$bin" reproduce --list 2>&1) || [[ -z $list ]]; then
            echo "reproduce: the $side side cannot list its experiments (set ${side^^}_PYTHON to its checkout's .venv/bin/python, or SKIP_REPRODUCE=1):" >&2
            echo "$list" >&2
            exit 1
        fi
        [[ $side == old ]] && mapfile -t experiments < <(awk '{print $1}' <<<"$list")
    done
fi
for e in "${experiments[@]}"; do
    for r in "${runs[@]}"; do
        if [[ $r == --quick ]]; then
            both "reproduce-$e-quick" reproduce "$e" --quick --json "{}/reproduce-$e-quick.json"
            check "reproduce-$e-quick"
        else
            both "reproduce-$e-seed1" reproduce "$e" --seed 1 --json "{}/reproduce-$e-seed1.json"
            check "reproduce-$e-seed1"
        fi
    done
done

echo "outputs in $out"
if [[ $differ == 1 ]]; then
    echo "some outputs differ"
    exit 1
fi
echo "all outputs identical"
