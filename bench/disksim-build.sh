# bench/disksim-build.sh — sourced by bench/disksim-speed.sh and
# bench/disksim-keys.sh: `disksim_build SRC WORK` builds DiskSim 4.0 from
# the source tree SRC in a copy under WORK (SRC itself is not touched) and
# sets DISKSIM to the binary and DISKSIM_RMS to DiskSim's `rms` tool; the
# build log is WORK/build.log. `disksim_run_dir DATA SRC RUN` fills RUN with
# every description and trace of DATA and DiskSim's `valid/statdefs`.
#
# The fixes a current 64-bit gcc needs, applied to the copy:
#   - `-fcommon` (gcc ≥ 10 rejects DiskSim's tentative definitions shared
#     between files) and `-std=gnu90` as DiskSim's own Makefiles ask;
#   - prototypes for the two loaders that return pointers and are called
#     undeclared from the generated parameter modules (`dm_disk_loadparams`,
#     `disksim_ioqueue_loadparams`): implicitly `int`, their pointers are cut
#     to 32 bits and DiskSim crashes while loading a disk;
#   - where the tree does not have them yet, the fixes of the widely used
#     x86_64 patch that the disk path needs: the event size
#     (`DISKSIM_EVENT_SIZE` 200 instead of 128), tables of pointers grown by
#     the size of a pointer, not of an `int` (libparam's parameter table,
#     the device table of `disksim_device.c`), libparam's `dirname` declared
#     (`<libgen.h>`), and no test of an uninitialised pointer in
#     diskmodel's `layout_g1.c`;
#   - no flex/bison needed: the generated parser files shipped in the tree
#     are used as they are.

disksim_build() {
  local src=$1 work=$2
  [ -f "$src/src/disksim_diskctlr.c" ] || { echo "$src: no src/disksim_diskctlr.c: not a DiskSim 4.0 source tree" >&2; return 1; }
  [ -f "$src/valid/statdefs" ] || { echo "$src: no valid/statdefs (DiskSim's statistics definitions, which every .parv names)" >&2; return 1; }
  local d=$work/disksim
  rm -rf "$d"
  cp -r "$src" "$d"
  # Build from source: no object, library, binary or dependency file
  # (`gcc -MD`'s `.d`, which may name another gcc's headers) of an
  # earlier build.
  find "$d" \( -name '*.o' -o -name '*.a' -o -name '*.d' \) -delete
  rm -f "$d/src/disksim" "$d/src/rms"
  # make compares times: the grammar's inputs get an older one than the
  # parser files generated from them, so flex and bison are not called.
  touch -d 2000-01-01 "$d"/libparam/libparam.lex "$d"/libparam/libparam.y "$d"/libparam/libparam.h
  touch -d 2001-01-01 "$d"/libparam/lex.libparam.c "$d"/libparam/libparam.tab.c "$d"/libparam/libparam.tab.h
  sed -i 's/^#define[[:space:]]*DISKSIM_EVENT_SIZE[[:space:]]*128$/#define DISKSIM_EVENT_SIZE 200/' "$d/src/disksim_global.h"
  sed -i 's/bzero((int \*)(\*b) + \*plen, ((\*plen) + 1) \* sizeof(int\*));/bzero((*b) + *plen, ((*plen) + 1) * sizeof(*(*b)));/' "$d/libparam/util.c"
  sed -i 's|^//#include <libgen.h>|#include <libgen.h>|' "$d/libparam/util.c"
  perl -0pi -e 's/(deviceinfo->devices = realloc\(disksim->deviceinfo->devices,\s*newlen\s*\*\s*)sizeof\(int\)/$1sizeof(*(disksim->deviceinfo->devices))/; s/(bzero\(disksim->deviceinfo->devices \+ c, zerocnt \* )sizeof\(int\)/$1sizeof(*(disksim->deviceinfo->devices))/' "$d/src/disksim_device.c"
  perl -0pi -e 's/\n\s*if\(z == 0\) \{ return -1; \}\n/\n/' "$d/diskmodel/layout_g1.c"
  cat >"$work/prototypes.h" <<'EOF'
struct lp_block;
struct ioq;
struct dm_disk_if;
struct ioq *disksim_ioqueue_loadparams(struct lp_block *, int, int, int, int, int);
struct dm_disk_if *dm_disk_loadparams(struct lp_block *, int *);
EOF
  local cc="gcc -fcommon -w"
  (
    for sub in libddbg libparam diskmodel memsmodel ssdmodel; do
      if [ -d "$d/$sub" ]; then nice make -C "$d/$sub" CC="$cc" || exit 1; fi
    done
    nice make -C "$d/src/modules" CC="$cc -include $work/prototypes.h" || exit 1
    nice make -C "$d/src" CC="$cc" disksim rms || exit 1
  ) >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; echo "the DiskSim build failed (log above)" >&2; return 1; }
  DISKSIM=$d/src/disksim
  DISKSIM_RMS=$d/src/rms
}

disksim_run_dir() {
  local data=$1 src=$2 run=$3
  mkdir -p "$run"
  # Every description of the folder: a .parv may source files named after
  # another disk (hp_c3323a.parv sources hp_c3323a_validate.diskspecs).
  cp "$data"/* "$run/"
  cp "$src/valid/statdefs" "$run/"
  chmod u+w "$run"/*
}
