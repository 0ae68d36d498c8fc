#!/bin/sh
# A stand-in for `xcrun -sdk macosx metal|metallib` (tests only): it checks the arguments the
# metal device passes and writes a "metallib" that the stand-in Metal.framework's
# newLibraryWithURL:error: reads back: one magic line, then the MSL.
set -eu
[ "$1" = -sdk ] && [ "$2" = macosx ] || { echo "fake xcrun: expected -sdk macosx" >&2; exit 2; }
shift 2
case "$1" in
  --find) echo "/fake/usr/bin/$2"; exit 0 ;;
  metal)
    [ "${2:-}" = --version ] && { echo "fake metal 1.0 (metile stand-in)"; exit 0; }
    std=
    if [ "${4:-}" = -std=metal4.0 ]; then
      std=4.0 a1=$1 a2=$2 a3=$3
      shift 4
      set -- "$a1" "$a2" "$a3" "$@"
    fi
    [ "$2 $3 $4" = "-O2 -fno-fast-math -c" ] && [ "$6" = -o ] || { echo "fake metal: bad arguments: $*" >&2; exit 2; }
    # Metal 4 headers exist only from -std=metal4.0 on (an older default cannot find them).
    if [ -z "$std" ] && grep -q '#include <metal_tensor>' "$5"; then
      echo "$5: error: 'metal_tensor' file not found" >&2; exit 1
    fi
    { echo "METILE-STANDIN-METALLIB"; cat "$5"; } > "$7" ;;
  metallib)
    [ "$3" = -o ] || { echo "fake metallib: bad arguments: $*" >&2; exit 2; }
    cp "$2" "$4" ;;
  *) echo "fake xcrun: unknown tool $1" >&2; exit 2 ;;
esac
