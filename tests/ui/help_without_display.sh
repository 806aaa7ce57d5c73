#!/bin/sh
# SPDX-License-Identifier: MIT
# `ampscope --help` and `--version` answer on a machine without a display (a server, CI, ssh):
# exit 0 with the usage text / the version, no Qt platform plugin needed.
# Usage: help_without_display.sh PATH_TO_AMPSCOPE
gui="$1"
fail=0
out=$(env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM= "$gui" --help 2>&1); rc=$?
if [ $rc -ne 0 ]; then echo "--help: exit $rc"; echo "$out"; fail=1; fi
case "$out" in *"Usage:"*"DB_FILE"*"--demo"*) ;; *) echo "--help: no usage text"; echo "$out"; fail=1 ;; esac
out=$(env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM= "$gui" --version 2>&1); rc=$?
if [ $rc -ne 0 ]; then echo "--version: exit $rc"; echo "$out"; fail=1; fi
case "$out" in "ampscope "[0-9]*) ;; *) echo "--version: no version line"; echo "$out"; fail=1 ;; esac
exit $fail
