#!/usr/bin/env bash
# external_plugin_test.sh - install qcore, build examples/int8_g32_plugin outside the tree, load and check it.
#
# usage: external_plugin_test.sh BUILD_DIR SOURCE_DIR [CHECK_EXE]
#   BUILD_DIR   a configured and built qcore tree (holds ./qcore and core/libqcore.a)
#   SOURCE_DIR  the qcore source tree (examples/ and tests/ are read from it)
#   CHECK_EXE   the built tests/external_plugin_check; when left out it is
#               compiled here against the installed headers and libqcore.a
# Environment: CMAKE (default cmake), CC (default cc), TMPDIR.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: $0 BUILD_DIR SOURCE_DIR [CHECK_EXE]" >&2
    exit 2
fi
build=$(cd "$1" && pwd -P)
src=$(cd "$2" && pwd -P)
check_exe=${3:-}
if [[ -n $check_exe ]]; then
    check_exe=$(cd "$(dirname "$check_exe")" && pwd -P)/$(basename "$check_exe")
fi
cmake_bin=${CMAKE:-cmake}
cc_bin=${CC:-cc}
warn_flags="-Wall -Wextra -Wshadow -Wstrict-prototypes -Werror"

# The loader refuses plugin folders writable by group or others.
umask 022
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qcore-extplugin.XXXXXX")
tmp=$(cd "$tmp" && pwd -P)
trap 'rm -rf "$tmp"' EXIT
# What the plugin sees must come from the install, so nothing of the
# caller's environment may point elsewhere.
unset QCORE_PLUGIN_PATH QCORE_CONFIG QCORE_VERBOSE CPATH C_INCLUDE_PATH

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   - $*"; }
bad() { failed=$((failed + 1)); echo "FAIL - $*"; }
finish() { echo "external_plugin: $passed passed, $failed failed"; }
bail() { bad "$*"; finish; exit 1; }
# Run a command with its output in a log; on failure show the log's end.
step() {
    local name=$1 log
    shift
    log=$tmp/step$((passed + failed)).log
    if "$@" >"$log" 2>&1; then
        ok "$name"
        return 0
    fi
    bad "$name"
    tail -n 25 "$log" | sed 's/^/     | /'
    return 1
}
# 0 when $1 is $2 or lies below it.
inside() { [[ $1 == "$2" || $1 == "$2"/* ]]; }

case "$tmp/" in "$src"/*) bail "temporary folder $tmp is inside the source tree; set TMPDIR elsewhere" ;; esac
[[ -x $build/qcore ]] || bail "$build/qcore is missing: build qcore first"

# ---- 1. install ----------------------------------------------------------
prefix=$tmp/prefix
step "cmake --install $build --prefix <tmp>/prefix" "$cmake_bin" --install "$build" --prefix "$prefix" ||
    bail "install failed"
if [[ ! -f $prefix/include/qcore/plugin.h ]]; then bail "no include/qcore/plugin.h under the install prefix"; fi
ok "installed header qcore/plugin.h"

pc_file=$(find "$prefix" -name qcore-plugin.pc -print -quit)
cm_file=$(find "$prefix" -name qcoreConfig.cmake -print -quit)
if [[ -n $pc_file ]]; then
    ok "installed pkg-config file ${pc_file#"$prefix"/}"
else
    bad "no qcore-plugin.pc under the prefix"
fi
if [[ -n $cm_file ]]; then
    ok "installed CMake package ${cm_file#"$prefix"/}"
else
    bad "no qcoreConfig.cmake under the prefix"
fi

# The installed files must describe where they were installed (the prefix
# given to cmake --install), not the prefix the build was configured with.
pc_dir=${pc_file:+$(dirname "$pc_file")}
if [[ -n $pc_file ]]; then
    pc_inc=$(PKG_CONFIG_PATH=$pc_dir pkg-config --variable=includedir qcore-plugin || true)
    pc_inc_real=$(realpath -m "${pc_inc:-/nonexistent}")
    if inside "$pc_inc_real" "$prefix" && [[ -f $pc_inc_real/qcore/plugin.h ]]; then
        ok "qcore-plugin.pc includedir is inside the install prefix"
    else
        bad "qcore-plugin.pc says includedir=$pc_inc, not the install prefix $prefix (the .pc is not relocatable)"
    fi
fi

# ---- 2. the example, copied outside the source tree ----------------------
ex=$tmp/int8_g32_plugin
cp -R "$src/examples/int8_g32_plugin" "$ex"
rm -rf "$ex"/build*
# Only <qcore/plugin.h> and standard C headers may be included.
std_headers='assert|ctype|errno|float|inttypes|limits|math|stdarg|stdbool|stddef|stdint|stdio|stdlib|string'
bad_includes=$(grep -hE '^[[:space:]]*#[[:space:]]*include' "$ex"/*.c "$ex"/*.h 2>/dev/null |
    grep -vE "^[[:space:]]*#[[:space:]]*include[[:space:]]*<(qcore/plugin|$std_headers)\.h>" || true)
if [[ -z $bad_includes ]]; then
    ok "example includes only <qcore/plugin.h> and the C library"
else
    bad "example includes something else: $bad_includes"
fi

# ---- 3. build with the CMake package -------------------------------------
bc=$tmp/build-cmake
if step "configure the example with find_package(qcore) (CMAKE_PREFIX_PATH=<tmp>/prefix)" \
    "$cmake_bin" -S "$ex" -B "$bc" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_C_FLAGS="$warn_flags"; then
    qcore_dir=$(sed -n 's/^qcore_DIR:[A-Z]*=//p' "$bc/CMakeCache.txt")
    if inside "$(realpath -m "$qcore_dir")" "$prefix"; then
        ok "find_package(qcore) used the install ($qcore_dir)"
    else
        bad "find_package(qcore) found $qcore_dir, not the install under $prefix"
    fi
    if grep -qF "$src/" "$bc/compile_commands.json"; then
        bad "the example's compile line names the source tree $src"
    elif grep -qF "$prefix/include" "$bc/compile_commands.json"; then
        ok "the example compiled against <tmp>/prefix/include only"
    else
        bad "the example's compile line does not name $prefix/include: $(grep '"command"' "$bc/compile_commands.json")"
    fi
    step "build the example with qcore_add_plugin()" "$cmake_bin" --build "$bc" || true
fi

# ---- 4. build with pkg-config and a plain compiler -----------------------
bp=$tmp/build-pc
mkdir "$bp"
if [[ -n $pc_file ]]; then
    cflags=$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags qcore-plugin || true)
    # shellcheck disable=SC2086  # cflags and warn_flags are word lists
    step "build the example with cc \$(pkg-config --cflags qcore-plugin) = '$cflags'" \
        "$cc_bin" -std=c11 -O2 $warn_flags -fPIC -shared -fvisibility=hidden $cflags \
        "$ex/int8_g32.c" -o "$bp/x_int8_g32.so" -Wl,-z,defs -lm || true
fi

# ---- 5. what the built plugins export and how the CLI sees them ----------
cli() { (cd "$tmp" && QCORE_PLUGIN_PATH=$1 "$build/qcore" "$2" 2>&1); }

for dir in "$bc" "$bp"; do
    so=$dir/x_int8_g32.so
    how=$([[ $dir == "$bc" ]] && echo cmake || echo pkg-config)
    if [[ ! -f $so ]]; then
        bad "[$how] no x_int8_g32.so was built: skipping its load checks"
        continue
    fi
    if command -v nm >/dev/null; then
        syms=$(nm -D --defined-only "$so" | awk '{print $NF}' | tr '\n' ' ')
        if [[ $syms == "qcore_plugin_entry " ]]; then
            ok "[$how] exports only qcore_plugin_entry"
        else
            bad "[$how] exports: $syms"
        fi
    fi
    out=$(cli "$dir" plugins) || true
    if grep -q '^plugin com\.example\.int8_g32 ' <<<"$out" && grep -qF "  file: $so" <<<"$out"; then
        ok "[$how] qcore plugins lists com.example.int8_g32 from <tmp>/${dir#"$tmp"/}"
    else
        bad "[$how] qcore plugins does not list com.example.int8_g32 from $so"
        printf '     | %s\n' "${out//$'\n'/$'\n'     | }"
    fi
    status=$(awk '/^  format x_int8_g32 /{f=1} f && /status:/{print; exit}' <<<"$out")
    if [[ $status == *"runs on the cpu reference"* ]]; then
        ok "[$how] format x_int8_g32${status#*status:}"
    else
        bad "[$how] format x_int8_g32 status: '${status:-(no format line)}'"
    fi
    refused=$(grep '^refused:' <<<"$out" || true)
    if [[ -z $refused ]]; then ok "[$how] nothing refused"; else bad "[$how] $refused"; fi
    row=$(cli "$dir" formats | awk '$1 == "x_int8_g32"') || true
    read -r -a f <<<"$row"
    # columns: format kind bits eff.bits weights acts scales groups supported native plugin
    if [[ ${#f[@]} -eq 11 && ${f[1]} == linear && ${f[4]} == i8 && ${f[5]} == bf16 && ${f[6]} == group/none &&
        ${f[7]} == 32 && ${f[10]} == com.example.int8_g32 ]]; then
        ok "[$how] qcore formats: $row"
    else
        bad "[$how] qcore formats row for x_int8_g32: '${row:-(missing)}'"
    fi
done

# ---- 6. refusals the guide promises ---------------------------------------
if [[ -f $bc/x_int8_g32.so && -f $bp/x_int8_g32.so ]]; then
    out=$(cli "$bc:$bp" plugins) || true
    n=$(grep -c '^plugin com\.example\.int8_g32 ' <<<"$out" || true)
    want="refused: $bp/x_int8_g32.so: plugin id 'com.example.int8_g32' is already loaded"
    if [[ $n == 1 ]] && grep -qF "$want" <<<"$out"; then
        ok "a second copy of the same plugin id is refused, naming the file"
    else
        bad "two copies on QCORE_PLUGIN_PATH: loaded $n times; $(grep '^refused:' <<<"$out" || echo 'no refusal')"
    fi
fi
if [[ -f $bc/x_int8_g32.so ]]; then
    gw=$tmp/group-writable
    mkdir "$gw"
    cp "$bc/x_int8_g32.so" "$gw/"
    chmod 775 "$gw"
    out=$(cli "$gw" plugins) || true
    if grep -qF "refused: $gw/x_int8_g32.so: its folder is writable by its group" <<<"$out" &&
        ! grep -q '^plugin com\.example\.int8_g32 ' <<<"$out"; then
        ok "a plugin in a group-writable folder is refused"
    else
        bad "group-writable folder: $(grep '^refused:' <<<"$out" || echo 'not refused')"
    fi
    chmod 755 "$gw"
    chmod 666 "$gw/x_int8_g32.so"
    out=$(cli "$gw" plugins) || true
    if grep -qF "refused: $gw/x_int8_g32.so: the file is writable by others" <<<"$out"; then
        ok "a plugin file writable by others is refused"
    else
        bad "world-writable file: $(grep '^refused:' <<<"$out" || echo 'not refused')"
    fi
fi

# ---- 7. numbers: quantize, dequantize, reference kernel vs float64 --------
if [[ -z $check_exe ]]; then
    # Link the check against the build's static core and the archives it
    # was configured with (as core/CMakeLists.txt links them).
    cache=$build/CMakeCache.txt
    libs=()
    for v in LUA_LIBRARY_LIB INIH_LIBRARY_LIB JANSSON_LIBRARY_LIB FFI_LIBRARY_LIB; do
        p=$(sed -n "s/^$v:[A-Z]*=//p" "$cache")
        [[ -n $p ]] && libs+=("$p")
    done
    san=()
    if grep -q '^QCORE_SANITIZE:BOOL=ON' "$cache"; then san=("-fsanitize=address,undefined"); fi
    check_exe=$tmp/external_plugin_check
    # shellcheck disable=SC2086
    step "compile tests/external_plugin_check.c against <tmp>/prefix/include and libqcore.a" \
        "$cc_bin" -std=c11 -O2 $warn_flags "${san[@]}" -I"$prefix/include" -I"$src/tests" \
        "$src/tests/external_plugin_check.c" "$build/core/libqcore.a" "${libs[@]}" -ldl -lpthread -lm \
        -o "$check_exe" || check_exe=
fi
if [[ -n $check_exe ]]; then
    for dir in "$bc" "$bp"; do
        [[ -f $dir/x_int8_g32.so ]] || continue
        how=$([[ $dir == "$bc" ]] && echo cmake || echo pkg-config)
        log=$tmp/check-$how.log
        if "$check_exe" "$dir" >"$log" 2>&1; then
            ok "[$how] $(grep 'worst error' "$log" | head -1); $(tail -n 1 "$log")"
        else
            bad "[$how] external_plugin_check failed"
            tail -n 25 "$log" | sed 's/^/     | /'
        fi
    done
fi

finish
[[ $failed -eq 0 ]]
