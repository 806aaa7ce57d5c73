#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The code's shape, checked by the ctest `lint.code`:
#  - every tracked C++/CUDA source is formatted by the checked-in .clang-format;
#  - no function in engine/, storage/, ui/ or app/ is longer than 80 lines (lizard), except the
#    declarative tables listed below (the schema's migration SQL);
#  - no source file in engine/, storage/, ui/ or app/ is longer than 600 lines (STYLE.md 8: a
#    class that grows is split by feature into <class>_<feature>.cpp);
#  - no two folders of engine/src, ui/src or storage/src include each other, nor more round a
#    cycle (tools/check-rooms.py).
# Usage: tools/check-code.sh [PYTHON]   (PYTHON: the venv's python with lizard; default .venv)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py=${1:-.venv/bin/python}
status=0

mapfile -t sources < <(git ls-files '*.cpp' '*.h' '*.hpp' '*.cu' '*.hip' 2>/dev/null || find app ui engine storage tests bench -name '*.cpp' -o -name '*.h' -o -name '*.cu')
if ! clang-format --dry-run -Werror "${sources[@]}" 2>/tmp/ampscope-format.$$; then
    echo "lint: these files are not formatted by .clang-format (fix: clang-format -i FILE):"
    grep -o '^[^:]*:[0-9]*' /tmp/ampscope-format.$$ | cut -d: -f1 | sort -u | sed 's/^/  /'
    status=1
fi
rm -f /tmp/ampscope-format.$$

allowed='storage/src/schema.cpp:.*schema::migrations'  # declarative table (SQL of every schema layout)
long=$("$py" -m lizard -L 80 -C 999 -a 99 -w engine storage ui app 2>&1 | grep ': warning:' | grep -Ev "$allowed" || true)
if [ -n "$long" ]; then
    echo "lint: functions over 80 lines (split them along their phases):"
    echo "$long" | sed 's/^/  /'
    status=1
fi
big=$(git ls-files 'engine/*' 'storage/*' 'ui/*' 'app/*' | grep -E '\.(cpp|h|hpp|cu|hip)$' | xargs wc -l |
    awk '$2 != "total" && $1 > 600 {print "  " $2 ": " $1 " lines"}')
if [ -n "$big" ]; then
    echo "lint: files over 600 lines (split them by feature, STYLE.md 8):"
    echo "$big"
    status=1
fi
"$py" tools/check-rooms.py || status=1  # no two folders of engine/src, ui/src, storage/src include each other
[ $status = 0 ] && echo "lint: ${#sources[@]} sources formatted; no function over 80 lines outside the declarative tables; no file over 600 lines"
exit $status
