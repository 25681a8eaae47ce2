#!/usr/bin/env bash
# Compare two hvio binaries' outputs byte for byte: `hvio compare` on paper
# 000's four-VM scenario, every `hvio reproduce` experiment (`--quick`, and
# `--seed 1` unless QUICK=1), `hvio replay` of the test traces (open and
# closed loop), and `hvio sim --json` plus its per-request records under
# every scheduler for the four-VM scenario and three small configs (direct
# jobs with fio-style threads, a buffered VM, blktap).
#
#   scripts/identical-outputs.sh BASELINE_HVIO NEW_HVIO [OUT_DIR]
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
        local bin=$old
        [[ $side == new ]] && bin=$new
        local args=("${@//\{\}/.}")
        (cd "$out/$side" && "$bin" "${args[@]}" >"$name.out" 2>"$name.err") || echo "exit $?" >>"$out/$side/$name.out"
    done
}

# Compare the files NAME.* of both sides.
check() {
    local name=$1 ok=same
    for f in "$out/old/$name".*; do
        local g=$out/new/${f#"$out/old/"}
        [[ $f == *.err || $f == *.cmp ]] && continue
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
for e in $("$old" reproduce --list | awk '{print $1}'); do
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
