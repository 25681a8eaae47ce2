#!/usr/bin/env bash
# `make release`: target/release/hvio, built with profile-guided
# optimisation (PGO). Three steps:
#   1. an instrumented build (target/pgo-gen) that counts, as it runs, how
#      often each branch is taken and each function called;
#   2. that build runs the training workloads below, and llvm-profdata
#      merges their counts into target/pgo/hvio.profdata;
#   3. the optimised build (target/pgo-use) reads the counts: hot paths laid
#      out straight, inlining and register allocation where the time goes.
# The binary is copied to target/release/hvio. PGO changes no result: the
# compiler keeps IEEE arithmetic and every operation's order, so outputs
# are byte-identical to a plain build's (scripts/identical-outputs.sh).
#
# The training is what users run, and none of the speed benchmarks: `hvio
# compare` of paper 000's four VMs, of the README's three VMs and of
# iShare's and HTBS's experiments (every scheduler through the whole
# simulator on the default disk), paper 001's fio and fileserver configs on
# the SSD model, and, when the DiskSim validation disks are beside the
# repository (../shared/data/hdd-validation or
# $HVIO_SHARED_DATA/hdd-validation), `hvio validate-disk --all` over them,
# one replay of each trace. `hvio bench sim`, `hvio bench schedulers` and
# the timed `--bench` replays are held out, so that what they measure is
# the build users get on workloads it was not trained on.
#
# llvm-profdata comes with rustup's `llvm-tools` component, added here when
# missing. Without it, or with HVIO_PGO=0, this is a plain
# `cargo build --release -p hvio-cli`, and says so. Steps 1 and 2 run again
# only when the instrumented build or this script changed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cargo=${CARGO:-cargo}

plain() {
    echo "release-build: $1; building without profile-guided optimisation" >&2
    exec "$cargo" build --release -p hvio-cli
}

[ "${HVIO_PGO:-1}" = 0 ] && plain "HVIO_PGO=0"
host=$(rustc -vV | sed -n 's/^host: //p')
profdata=$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata
if [ ! -x "$profdata" ] && command -v rustup >/dev/null 2>&1; then
    rustup component add llvm-tools >&2 || true
fi
[ -x "$profdata" ] || plain "no llvm-profdata (rustup component llvm-tools)"

# CARGO_TARGET_DIR, when set, holds all three (`hvio bench --against` sets it).
out=$(realpath -m "${CARGO_TARGET_DIR:-target}")
pgo=$out/pgo
mkdir -p "$pgo"
RUSTFLAGS="-Cprofile-generate=$pgo/raw" "$cargo" build --release -p hvio-cli --target-dir "$out/pgo-gen"
gen=$out/pgo-gen/release/hvio
if [ ! -s "$pgo/hvio.profdata" ] || [ "$gen" -nt "$pgo/hvio.profdata" ] || [ "$0" -nt "$pgo/hvio.profdata" ]; then
    echo "release-build: training the instrumented build" >&2
    rm -rf "$pgo/raw" "$pgo/work"
    mkdir -p "$pgo/work"
    train() { (cd "$pgo/work" && "$gen" "$@" >/dev/null); }
    for config in experiments/paper000-four-vms.toml examples/three-vms/three-vms.toml \
        experiments/ishare-two-vms.toml experiments/htbs-rates.toml; do
        train compare "$root/$config"
    done
    train sim "$root/experiments/paper001-fio.toml"
    train sim "$root/experiments/paper001-fileserver.toml"
    shared=$(realpath -m "${HVIO_SHARED_DATA:-../shared/data}/hdd-validation")
    if [ -d "$shared" ]; then
        train validate-disk --all "$shared"
    fi
    "$profdata" merge -o "$pgo/hvio.profdata.new" "$pgo/raw"
    mv "$pgo/hvio.profdata.new" "$pgo/hvio.profdata"
    rm -rf "$pgo/raw" "$pgo/work"
fi
RUSTFLAGS="-Cprofile-use=$pgo/hvio.profdata" "$cargo" build --release -p hvio-cli --target-dir "$out/pgo-use"
mkdir -p "$out/release"
# Copy to a temporary name and rename, so a running hvio is never
# overwritten in place.
cp "$out/pgo-use/release/hvio" "$out/release/hvio.new"
mv "$out/release/hvio.new" "$out/release/hvio"
echo "release-build: $out/release/hvio (profile-guided)" >&2
