"""The persistent compilation cache: compiled code on disk, found again by a key (JAX's
`jax_compilation_cache_dir`, per kernel).

    cache = persistent_cache()          # None when off (HLOCC_CACHE_DIR=) or refused
    entry = cache.get(key)              # CacheEntry(plan, payload) or None
    cache.put(key, plan, payload)

Where: `HLOCC_CACHE_DIR`, default `~/.cache/hlocc`; set to the empty string it is off. Its size is
bounded by `HLOCC_CACHE_MAX_BYTES` (default 1 GiB): past it, the least recently used entries are
removed (a hit refreshes an entry's modification time).

The key is text the backend composes (fingerprint of what is compiled, target, CPU features,
options, versions); an entry's file name is its SHA-256. The cache holds native code that hlocc
will run, so:

- the directory is created with mode 0700, and a directory or an entry that is not owned by the
  user, or that the group or others may write, is refused with one warning (no cache);
- an entry is plain data, never pickled: a magic with the format version, a header (lengths, the
  SHA-256 of the rest), the key's text, the plan as JSON and the payload bytes (object code or
  PTX). A truncated, corrupt, foreign or other-version entry is reported once as a `CacheWarning`,
  removed and compiled again;
- writes go to a temporary file in the directory, then `os.replace` it in: readers see a whole
  entry or none, and processes compiling the same kernel at once leave one valid entry.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import stat
import struct
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding as llvm
import xdsl

from hlocc.errors import env_int
from hlocc.runtime.jit import host_cpu_features

MAGIC = b"HLOCCKC1"
"""Entry format version 1; another magic is an entry of another format (or not an entry)."""
_HEADER = struct.Struct("<8s32sIIQ")  # magic, sha256(key + plan + payload), key, plan, payload lengths
SUFFIX = ".hlk"
DEFAULT_MAX_BYTES = 1 << 30
_RESCAN_EVERY = 64  # puts between rescans of the directory's size (other processes write too)


class CacheWarning(UserWarning):
    """The persistent cache refused a directory or an entry; compilation goes on without it."""


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(message: str) -> None:
    with _warned_lock:
        if message in _warned:
            return
        _warned.add(message)
    warnings.warn(message, CacheWarning, stacklevel=3)


@dataclass(frozen=True)
class CacheEntry:
    plan: dict[str, Any]
    payload: bytes


def cache_dir_setting() -> Path | None:
    """The directory `HLOCC_CACHE_DIR` names (default ~/.cache/hlocc), or None when it is empty."""
    value = os.environ.get("HLOCC_CACHE_DIR")
    if value is None:
        return Path.home() / ".cache" / "hlocc"
    return Path(value).expanduser() if value.strip() else None


def max_bytes_setting() -> int:
    return env_int("HLOCC_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES, 0)


def unsafe_reason(st: os.stat_result, what: str) -> str | None:
    """Why a file or directory with this status may not be trusted, or None."""
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{what} is owned by uid {st.st_uid}, not by this user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


class PersistentCache:
    """Entries in one directory (module doc). Safe for several threads and processes at once."""

    def __init__(self, directory: Path, max_bytes: int = DEFAULT_MAX_BYTES):
        self.directory = directory
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._puts = 0
        self._size = self._scan_size()

    # -- entries ---------------------------------------------------------------------------------
    def path(self, key: str) -> Path:
        return self.directory / (hashlib.sha256(key.encode()).hexdigest() + SUFFIX)

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under `key`, or None (a miss, or a bad entry: warned about and removed)."""
        path = self.path(key)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as f:
                why = unsafe_reason(os.fstat(f.fileno()), f"cache entry {path}")
                if why:
                    warn_once(f"hlocc cache: {why}; not used")
                    return None
                data = f.read()
        except OSError:
            return None
        entry, problem = decode_entry(data, key)
        if problem:
            warn_once(f"hlocc cache: entry {path} is {problem}; compiling again")
            self._remove(path)
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        return entry

    def put(self, key: str, plan: dict[str, Any], payload: bytes) -> None:
        """Store an entry atomically (a temporary file renamed into place), then keep the bound."""
        data = encode_entry(key, plan, payload)
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=SUFFIX)
        except OSError as e:
            warn_once(f"hlocc cache: cannot write in {self.directory} ({e}); not caching")
            return
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path(key))
        except OSError as e:
            warn_once(f"hlocc cache: cannot write in {self.directory} ({e}); not caching")
            self._remove(Path(tmp))
            return
        with self._lock:
            self._size += len(data)
            self._puts += 1
            rescan = self._puts % _RESCAN_EVERY == 0
        if rescan or self._size > self.max_bytes:
            self.evict()

    # -- size, eviction, info --------------------------------------------------------------------
    def entries(self) -> list[tuple[Path, os.stat_result]]:
        out = []
        try:
            with os.scandir(self.directory) as it:
                for e in it:
                    if e.name.endswith(SUFFIX) and not e.name.startswith(".tmp-"):
                        try:
                            out.append((Path(e.path), e.stat(follow_symlinks=False)))
                        except OSError:
                            pass  # removed by another process meanwhile
        except OSError:
            pass
        return out

    def _scan_size(self) -> int:
        return sum(st.st_size for _, st in self.entries())

    def evict(self) -> int:
        """Remove least recently used entries until the directory holds at most `max_bytes`;
        returns how many were removed."""
        entries = sorted(self.entries(), key=lambda e: e[1].st_mtime_ns)
        total = sum(st.st_size for _, st in entries)
        removed = 0
        for path, st in entries:
            if total <= self.max_bytes:
                break
            self._remove(path)
            total -= st.st_size
            removed += 1
        with self._lock:
            self._size = total
        return removed

    def info(self) -> dict[str, Any]:
        entries = self.entries()
        return {"directory": str(self.directory), "entries": len(entries),
                "bytes": sum(st.st_size for _, st in entries), "max_bytes": self.max_bytes}

    def clear(self) -> int:
        """Remove every entry (and stale temporary files); returns the number of entries removed."""
        removed = 0
        for path, _ in self.entries():
            removed += self._remove(path)
        for leftover in self.directory.glob(".tmp-*"):
            self._remove(leftover)
        with self._lock:
            self._size = 0
        return removed

    @staticmethod
    def _remove(path: Path) -> bool:
        try:
            path.unlink()
            return True
        except OSError:
            return False


def encode_entry(key: str, plan: dict[str, Any], payload: bytes) -> bytes:
    key_bytes = key.encode()
    plan_bytes = json.dumps(plan, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(key_bytes + plan_bytes + payload).digest()
    return _HEADER.pack(MAGIC, digest, len(key_bytes), len(plan_bytes), len(payload)) + key_bytes + plan_bytes + payload


def decode_entry(data: bytes, key: str) -> tuple[CacheEntry | None, str | None]:
    """(entry, None), or (None, what is wrong with `data` as the entry of `key`)."""
    if len(data) < len(MAGIC) or data[:len(MAGIC)] != MAGIC:
        return None, "of another format version or not a cache entry"
    if len(data) < _HEADER.size:
        return None, "truncated"
    _, digest, key_len, plan_len, payload_len = _HEADER.unpack_from(data)
    body = data[_HEADER.size:]
    if len(body) != key_len + plan_len + payload_len:
        return None, "truncated" if len(body) < key_len + plan_len + payload_len else "corrupt (trailing bytes)"
    if hashlib.sha256(body).digest() != digest:
        return None, "corrupt (checksum mismatch)"
    if body[:key_len] != key.encode():
        return None, "the entry of another key (foreign)"
    try:
        plan = json.loads(body[key_len:key_len + plan_len])
    except ValueError:
        return None, "corrupt (plan is not JSON)"
    return CacheEntry(plan, bytes(body[key_len + plan_len:])), None


def open_cache(directory: Path, max_bytes: int = DEFAULT_MAX_BYTES, create: bool = True) -> PersistentCache | None:
    """The cache in `directory` (created with mode 0700), or None with one warning when it cannot
    be used safely."""
    try:
        if create and not directory.exists():
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(directory, follow_symlinks=False)
    except OSError as e:
        warn_once(f"hlocc cache: cannot use {directory} ({e}); compiling without a cache")
        return None
    if not stat.S_ISDIR(st.st_mode):
        warn_once(f"hlocc cache: {directory} is not a directory; compiling without a cache")
        return None
    why = unsafe_reason(st, f"cache directory {directory}")
    if why:
        warn_once(f"hlocc cache: {why}; compiling without a cache")
        return None
    return PersistentCache(directory, max_bytes)


_caches: dict[tuple[Path, int], PersistentCache | None] = {}
_caches_lock = threading.Lock()


def persistent_cache() -> PersistentCache | None:
    """The cache the environment names (module doc), opened once per directory and process; None
    when it is off or refused."""
    directory = cache_dir_setting()
    if directory is None:
        return None
    key = (directory, max_bytes_setting())
    with _caches_lock:
        if key not in _caches:
            _caches[key] = open_cache(directory, key[1])
        return _caches[key]


@functools.cache
def build_id() -> str:
    """hlocc's version and a hash of its sources' paths, sizes and modification times."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".py"):
                st = os.stat(os.path.join(dirpath, name))
                h.update(f"{os.path.relpath(os.path.join(dirpath, name), root)}:{st.st_size}:{st.st_mtime_ns}\n"
                         .encode())
    try:
        version = importlib.metadata.version("hlocc")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"{version}+{h.hexdigest()[:16]}"


@functools.cache
def versions_key() -> str:
    """The versions of everything that turns a fusion into code (also the cuda backend's PTX keys)."""
    return (f"hlocc {build_id()}, xdsl {xdsl.__version__}, llvmlite {llvmlite.__version__}, "
            f"llvm {'.'.join(map(str, llvm.llvm_version_info))}")


@functools.cache
def environment_key() -> str:
    """The part of every key that is the same for the whole process: host CPU and versions."""
    return f"cpu: {llvm.get_host_cpu_name()} {host_cpu_features()}\nversions: {versions_key()}"


def timed_get(key: str, times: dict[str, float], stage: str) -> tuple[PersistentCache, CacheEntry] | None:
    """The environment's cache and its entry for `key`, or None (cache off, refused, or a miss);
    the lookup's milliseconds are added to `times[stage]`."""
    cache = persistent_cache()
    if cache is None:
        return None
    t0 = time.perf_counter()
    entry = cache.get(key)
    times[stage] = times.get(stage, 0.0) + (time.perf_counter() - t0) * 1e3
    return None if entry is None else (cache, entry)


def timed_put(key: str, plan: dict[str, Any], payload: bytes, times: dict[str, float], stage: str) -> None:
    """Store an entry in the environment's cache when it is on, adding the milliseconds to `times[stage]`."""
    cache = persistent_cache()
    if cache is None:
        return
    t0 = time.perf_counter()
    cache.put(key, plan, payload)
    times[stage] = times.get(stage, 0.0) + (time.perf_counter() - t0) * 1e3


__all__ = ["CacheEntry", "CacheWarning", "PersistentCache", "cache_dir_setting", "decode_entry", "encode_entry",
           "open_cache", "persistent_cache", "timed_get", "timed_put"]
