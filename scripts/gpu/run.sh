#!/usr/bin/env bash
# Runs the GPU check from the archive `npm run gpu:bundle` makes, on a machine without Node.js or
# network: unpacks it into a temporary folder, decompresses the Node binary, compiles the torch
# addon against the PyTorch of `python3` (or $COMLRL_TORCH_PYTHON), then runs
# dist/bench/gpu-check.js, which writes results.json and results.md under OUTDIR.
#
#   scripts/gpu/run.sh ARCHIVE OUTDIR [gpu-check options, e.g. --quick or --skip collm]
#
# Environment:
#   COMLRL_TORCH_PYTHON   the Python whose torch to use: a path or a command line
#                         (e.g. "env PYTHONPATH=/opt/torch python3"); default python3
#   COMLRL_TORCH_DEVICE   cpu, cuda or cuda:N (default cuda)
#   COMLRL_GPU_BUDGET_S   seconds for the whole run, compile included (default 470: under 8 minutes)
#   CXX                   the C++ compiler (default c++)
#   COMLRL_GPU_KEEP=1     keep the temporary folder (its path is printed)
#
# Exit code: 0 when the parity check passed, 1 when it failed or a step before it did, 2 on usage.
set -euo pipefail

START=$(date +%s)
BUDGET=${COMLRL_GPU_BUDGET_S:-470}
say() { echo "[gpu-run $(( $(date +%s) - START ))s] $*"; }
die() { echo "[gpu-run] error: $*" >&2; exit 1; }

if [ $# -lt 2 ]; then
  echo "usage: $0 ARCHIVE OUTDIR [gpu-check options]" >&2
  exit 2
fi
ARCHIVE=$1
OUTDIR=$2
shift 2
[ -f "$ARCHIVE" ] || die "archive '$ARCHIVE' not found (make it with: npm run gpu:bundle)"
case "$BUDGET" in ''|*[!0-9]*) die "COMLRL_GPU_BUDGET_S must be a whole number of seconds, got '$BUDGET'";; esac
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
ARCHIVE=$(cd "$(dirname "$ARCHIVE")" && pwd)/$(basename "$ARCHIVE")

command -v tar >/dev/null 2>&1 || die "tar is not installed"

# ---- python with torch -------------------------------------------------------------------------
read -r -a PYCMD <<< "${COMLRL_TORCH_PYTHON:-python3}"
[ ${#PYCMD[@]} -gt 0 ] || die "COMLRL_TORCH_PYTHON is empty"
if ! command -v "${PYCMD[0]}" >/dev/null 2>&1 && [ "${PYCMD[0]}" != env ]; then
  die "Python '${PYCMD[0]}' not found: install Python 3 with PyTorch, or set COMLRL_TORCH_PYTHON to one"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/comlrl-gpu.XXXXXX")
cleanup() { if [ "${COMLRL_GPU_KEEP:-0}" = 1 ]; then echo "[gpu-run] kept $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT

# A wrapper, so every later step (and gpu-check's children) can run "the torch Python" as one path.
mkdir -p "$WORK/bin"
{
  echo '#!/bin/sh'
  printf 'exec'
  printf ' %q' "${PYCMD[@]}"
  printf ' "$@"\n'
} > "$WORK/bin/torch-python"
chmod +x "$WORK/bin/torch-python"
PY="$WORK/bin/torch-python"

# ---- unpack ------------------------------------------------------------------------------------
say "unpacking $(basename "$ARCHIVE") ($(( $(stat -c %s "$ARCHIVE") / 1048576 )) MiB) into $WORK"
tar -xf "$ARCHIVE" -C "$WORK"
PACK="$WORK/comlrl-gpu"
[ -f "$PACK/node.xz" ] && [ -f "$PACK/payload.tar.xz" ] || die "the archive has no comlrl-gpu/node.xz and payload.tar.xz: is it from npm run gpu:bundle?"
if command -v xz >/dev/null 2>&1; then
  xz -d -c "$PACK/node.xz" > "$PACK/node"
  xz -d -c "$PACK/payload.tar.xz" | tar -xf - -C "$PACK"
else
  say "xz is not installed: decompressing with Python's lzma module"
  "$PY" - "$PACK" <<'EOF' || die "could not decompress the archive (no xz, and Python's lzma failed)"
import lzma, shutil, sys, tarfile, os
pack = sys.argv[1]
with lzma.open(os.path.join(pack, 'node.xz')) as src, open(os.path.join(pack, 'node'), 'wb') as dst:
    shutil.copyfileobj(src, dst)
with tarfile.open(os.path.join(pack, 'payload.tar.xz'), 'r:xz') as t:
    t.extractall(pack)
EOF
fi
rm -f "$PACK/node.xz" "$PACK/payload.tar.xz"
chmod +x "$PACK/node"
NODE_VERSION=$("$PACK/node" --version 2>&1) || die "the bundled Node binary does not run here ($NODE_VERSION): it needs x86-64 Linux with glibc >= 2.28"
say "node $NODE_VERSION"

# ---- torch -------------------------------------------------------------------------------------
DEVICE=${COMLRL_TORCH_DEVICE:-cuda}
case "$DEVICE" in cpu|cuda|cuda:[0-9]*) ;; *) die "COMLRL_TORCH_DEVICE must be cpu, cuda or cuda:N, got '$DEVICE'";; esac
PROBE=$("$PY" - <<'EOF' 2>&1
import json, os, sys
try:
    import torch
except Exception as e:
    print('NO_TORCH ' + repr(e)); sys.exit(0)
try:
    import numpy
    np = numpy.__version__
except Exception:
    np = None
cuda_ok = bool(torch.cuda.is_available())
print(json.dumps({'version': torch.__version__, 'dir': os.path.dirname(os.path.abspath(torch.__file__)),
  'cxx11': int(bool(torch.compiled_with_cxx11_abi())), 'cuda': torch.version.cuda, 'cudaAvailable': cuda_ok,
  'devices': torch.cuda.device_count() if cuda_ok else 0, 'numpy': np, 'python': sys.executable,
  'gpu': torch.cuda.get_device_name(0) if cuda_ok else None}))
EOF
) || die "'${PYCMD[*]}' failed to run: $PROBE"
PROBE=$(printf '%s\n' "$PROBE" | tail -n 1)
case "$PROBE" in
  NO_TORCH*) die "'${PYCMD[*]}' cannot import torch (${PROBE#NO_TORCH }): install PyTorch, or set COMLRL_TORCH_PYTHON to a Python that has it";;
  '{'*) ;;
  *) die "'${PYCMD[*]}' gave an unexpected answer when asked about torch: $PROBE";;
esac
field() { "$PY" -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("" if v is None else v)' "$PROBE" "$1"; }
TORCH_DIR=$(field dir)
TORCH_VERSION=$(field version)
TORCH_CUDA=$(field cuda)
CXX11=$(field cxx11)
say "torch $TORCH_VERSION (${TORCH_CUDA:+CUDA $TORCH_CUDA}${TORCH_CUDA:-CPU build}) in $TORCH_DIR; GPUs visible: $(field devices) $(field gpu)"
[ -n "$(field numpy)" ] || say "warning: numpy is missing from this Python: the PyTorch reference benchmark (torch_bench.py) will fail; the rest runs"
if [ "$DEVICE" != cpu ]; then
  [ -n "$TORCH_CUDA" ] || die "COMLRL_TORCH_DEVICE=$DEVICE but torch $TORCH_VERSION is a CPU build (torch.version.cuda is None): use a CUDA build of PyTorch, or COMLRL_TORCH_DEVICE=cpu"
  [ "$(field cudaAvailable)" = True ] || die "torch $TORCH_VERSION is built for CUDA $TORCH_CUDA but sees no GPU (torch.cuda.is_available() is False): check the NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES"
  INDEX=${DEVICE#cuda}; INDEX=${INDEX#:}; INDEX=${INDEX:-0}
  [ "$INDEX" -lt "$(field devices)" ] || die "COMLRL_TORCH_DEVICE=$DEVICE but only $(field devices) GPU(s) are visible"
fi
for need in "$TORCH_DIR/include/torch/csrc/api/include" "$TORCH_DIR/lib/libtorch_cpu.so"; do
  [ -e "$need" ] || die "this torch has no C++ development files ($need is missing): use a PyTorch wheel or libtorch that ships include/ and lib/"
done

# ---- compile the addon ---------------------------------------------------------------------------
CXX=${CXX:-c++}
command -v "$CXX" >/dev/null 2>&1 || die "no C++ compiler ('$CXX'): install g++ (or clang++), or set CXX"
CUDA_LIBS=()
[ -e "$TORCH_DIR/lib/libtorch_cuda.so" ] && CUDA_LIBS=(-Wl,--no-as-needed -ltorch_cuda -Wl,--as-needed)
ADDON="$PACK/addon/comlrl_torch.node"
say "compiling the addon with $CXX against torch $TORCH_VERSION (C++11 ABI $CXX11${CUDA_LIBS:+, with libtorch_cuda}); log in $OUTDIR/addon-build.log"
if ! "$CXX" -O2 -std=c++17 -shared -fPIC -w -DNODE_GYP_MODULE_NAME=comlrl_torch "-D_GLIBCXX_USE_CXX11_ABI=$CXX11" \
    "-I$PACK/addon/include/node" "-I$TORCH_DIR/include" "-I$TORCH_DIR/include/torch/csrc/api/include" \
    "$PACK/addon/comlrl_torch.cc" "-L$TORCH_DIR/lib" -ltorch -ltorch_cpu -lc10 "${CUDA_LIBS[@]}" \
    "-Wl,-rpath,$TORCH_DIR/lib" -o "$ADDON" > "$OUTDIR/addon-build.log" 2>&1; then
  tail -n 30 "$OUTDIR/addon-build.log" >&2
  die "compiling the addon failed (full log: $OUTDIR/addon-build.log)"
fi
load_addon() {
  COMLRL_TORCH_ADDON="$ADDON" "$PACK/node" -e '
    const t = require(process.env.COMLRL_TORCH_ADDON);
    console.log(`addon loads: torch ${t.runtime("version", 0)}, ${t.runtime("cuda_devices", 0)} CUDA device(s)`);' 2>&1
}
if ! LOAD=$(load_addon); then
  # Python's torch may find some libraries (CUDA, cuDNN, NCCL from the nvidia-* wheels, a conda
  # lib/) through preloading rather than the libraries' RPATH; the addon loads without Python.
  # Retry with the folders of the shared libraries a torch Python process has mapped.
  WHY=$(printf '%s\n' "$LOAD" | grep -m 1 -E 'Error|cannot open|undefined symbol' || printf '%s\n' "$LOAD" | tail -n 1)
  say "the addon does not load as built ($WHY); retrying with the library folders Python's torch uses"
  LIBDIRS=$("$PY" - <<'EOF' 2>/dev/null || true
import os, torch
if torch.cuda.is_available():
    torch.zeros(1, device='cuda')
system = ('/lib/', '/lib64/', '/usr/lib/', '/usr/lib64/')
dirs = []
for line in open('/proc/self/maps'):
    f = line.split()[-1]
    if f.startswith('/') and '.so' in os.path.basename(f) and not f.startswith(system):
        d = os.path.dirname(f)
        if d not in dirs:
            dirs.append(d)
print(':'.join(dirs))
EOF
)
  [ -n "$LIBDIRS" ] || die "the compiled addon does not load: $LOAD"
  export LD_LIBRARY_PATH="$LIBDIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  LOAD=$(load_addon) || die "the compiled addon does not load, also with LD_LIBRARY_PATH=$LIBDIRS: $LOAD"
  say "with LD_LIBRARY_PATH=$LIBDIRS"
fi
say "$LOAD"

# ---- run -----------------------------------------------------------------------------------------
LEFT=$(( BUDGET - ( $(date +%s) - START ) - 5 ))
[ "$LEFT" -ge 30 ] || die "only ${LEFT}s of the ${BUDGET}s budget left after compiling (raise COMLRL_GPU_BUDGET_S)"
say "running the GPU check on $DEVICE (budget ${LEFT}s), results in $OUTDIR"
export COMLRL_TORCH_ADDON="$ADDON" COMLRL_TORCH_DEVICE="$DEVICE" COMLRL_GPU_PYTHON="$PY" COMLRL_GPU_WORK="$WORK" COMLRL_GPU_ENV_JSON="$PROBE"
export PATH="$PACK:$PATH"
set +e
if command -v timeout >/dev/null 2>&1; then
  timeout --kill-after=10 $(( LEFT + 30 )) "$PACK/node" "$PACK/pkg/dist/bench/gpu-check.js" "$OUTDIR" --budget "$LEFT" "$@"
else
  "$PACK/node" "$PACK/pkg/dist/bench/gpu-check.js" "$OUTDIR" --budget "$LEFT" "$@"
fi
RC=$?
set -e
[ "$RC" -eq 124 ] && say "the check ran past its budget and was stopped"
say "exit $RC ($( [ "$RC" -eq 0 ] && echo 'parity passed' || echo 'parity failed or did not finish' ))"
exit "$RC"
