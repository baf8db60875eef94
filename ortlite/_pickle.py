"""Pickling of ortlite's objects, and the process-wide cache of unpickled sessions.

An InferenceSession pickles as its model (the bytes, or the path and a content hash with
the session config entry ``session.ortlite.pickle_model = "path"``), its SessionOptions
(added initializers included), its providers and their options: never process state
(threads, arenas, runs in flight). Unpickling looks the session up by model hash and
options in a weak, process-wide cache first, so a worker that receives the same session
with every task loads the model once. docs/distributed.md describes the patterns.
"""

import _thread
import copyreg
import os
import pickle
import weakref

from ortlite import _ortlite as _ext

# Session config entry choosing what a session's pickle carries: "bytes" (default: the
# model bytes, so a worker needs no file) or "path" (the absolute path and a SHA-256 of
# the file and of its external data files: small pickles for workers that share the file
# system; a worker whose file is missing or differs, or whose external data differs, raises
# NoSuchFile / InvalidArgument instead of running another model).
PICKLE_MODEL_ENTRY = "session.ortlite.pickle_model"

_SESSION_OPTIONS_ATTRS = (
    "intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level",
    "execution_mode", "log_severity_level", "log_verbosity_level", "enable_cpu_mem_arena",
    "enable_mem_pattern", "enable_mem_reuse", "enable_profiling",
    "use_deterministic_compute", "logid", "optimized_model_filepath", "profile_file_prefix",
)
_RUN_OPTIONS_ATTRS = (
    "log_severity_level", "log_verbosity_level", "logid", "terminate",
    "only_execute_path_to_fetches",
)


def _plain(v):
    # IntEnum members pickle as ints: the receiving side needs no enum class.
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else v


# --- SessionOptions, RunOptions, OrtValue -----------------------------------------------------

def _reduce_session_options(so):
    attrs = {a: _plain(getattr(so, a)) for a in _SESSION_OPTIONS_ATTRS}
    entries, overrides, initializers = so._pickle_extras()
    return _restore_session_options, (attrs, entries, overrides, initializers)


def _restore_session_options(attrs, entries, overrides, initializers):
    so = _ext.SessionOptions()
    for name, value in attrs.items():
        setattr(so, name, value)
    for key, value in entries.items():
        so.add_session_config_entry(key, value)
    for dim, by_denotation, value in overrides:  # replayed in order: the first one wins
        if by_denotation:
            so.add_free_dimension_override_by_denotation(dim, value)
        else:
            so.add_free_dimension_override_by_name(dim, value)
    for name, value in initializers.items():
        so.add_initializer(name, value)
    return so


def _public_run_options():
    import ortlite

    return ortlite.RunOptions


def _reduce_run_options(ro):
    attrs = {a: getattr(ro, a) for a in _RUN_OPTIONS_ATTRS}
    adapters = list(getattr(ro, "_active_adapters", ()))
    return _restore_run_options, (attrs, ro._config_entries(), adapters)


def _restore_run_options(attrs, entries, adapters=()):
    from ortlite import RunOptions  # the public class (it holds the active adapters)

    ro = RunOptions()
    for name, value in attrs.items():
        setattr(ro, name, value)
    for key, value in entries.items():
        ro.add_run_config_entry(key, value)
    for adapter in adapters:
        ro.add_active_adapter(adapter)
    return ro


def _reduce_ortvalue(v):
    device = v.device_name()
    if device.lower() != "cpu":
        raise _ext.InvalidArgument(
            f"cannot pickle an OrtValue on '{device}': only CPU OrtValues pickle; copy it to "
            "the host first (OrtValue.ortvalue_from_numpy(value.numpy()))")
    return _restore_ortvalue, (v.numpy(),)


def _restore_ortvalue(array):
    return _ext.OrtValue.ortvalue_from_numpy(array)


# --- InferenceSession -------------------------------------------------------------------------

class _ModelBytes:
    """The model bytes in a session's pickle: out of band with protocol 5 (dask and
    multiprocessing then send them without a copy into the pickle stream), as bytes
    before it."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data

    def __reduce_ex__(self, protocol):
        if protocol >= 5:
            return _model_bytes, (pickle.PickleBuffer(self.data),)
        return _model_bytes, (bytes(memoryview(self.data)),)


def _model_bytes(data):
    return data


_lock = _thread.allocate_lock()  # (not threading: ortlite's import stays light)
# (model SHA-256, options key) -> InferenceSession, while someone holds the session.
_cache = weakref.WeakValueDictionary()
# session -> SHA-256 of its model (path mode: of the model file and its external data
# files), computed once per session (on its first pickle).
_digests = weakref.WeakKeyDictionary()
# session -> SHA-256 of its model file alone (path mode).
_model_shas = weakref.WeakKeyDictionary()
_stats = {"loads": 0, "hits": 0}
# The sessions unpickled last, held strongly: a pool or dask worker unpickles the session
# once per task and drops it when the task ends, which would empty a purely weak cache
# between tasks. KEEP_RECENT of them (default 2) stay loaded until newer ones replace
# them or cache_clear() is called.
KEEP_RECENT = int(os.environ.get("ORTLITE_SESSION_CACHE_KEEP", "2"))
_recent = []


def _keep(sess):
    # Called with _lock held.
    if sess in _recent:
        _recent.remove(sess)
    _recent.append(sess)
    del _recent[:max(0, len(_recent) - KEEP_RECENT)]


def _after_fork_in_child():
    # A thread of the parent may have held the lock at fork time.
    global _lock
    _lock = _thread.allocate_lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def cache_info():
    """{'loads': sessions created by unpickling, 'hits': unpickles answered by the cache,
    'size': sessions in the cache now}, for this process."""
    with _lock:
        return dict(_stats, size=len(_cache))


def cache_clear():
    """Forgets the cached sessions (they stay valid for whoever holds them) and the counts."""
    with _lock:
        _cache.clear()
        _recent.clear()
        _stats.update(loads=0, hits=0)


def _sha256_file(path):
    import hashlib  # here, not at import: `import ortlite` stays light

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _file_state(path):
    s = os.stat(path)
    return (s.st_size, s.st_mtime_ns, s.st_ino)


def _external_digest(model_path, model_sha, external):
    """SHA-256 of the model file's hash and of each external data file it read, named
    relative to the model's resolved directory: the digest of what the session runs."""
    import hashlib

    base = os.path.dirname(os.path.realpath(model_path))
    h = hashlib.sha256(model_sha.encode())
    for path, _ in sorted(external, key=lambda e: os.path.relpath(e[0], base)):
        h.update(b"\0" + os.fsencode(os.path.relpath(path, base)) + b"\0")
        h.update(_sha256_file(path).encode())
    return h.hexdigest()


def _check_external(external, what):
    for path, state in external:
        try:
            now = _file_state(path)
        except OSError:
            now = None
        if now != tuple(state):
            raise _ext.InvalidArgument(
                f"cannot {what} the InferenceSession: its external data file {path!r} was "
                "changed, moved or removed since the session loaded it")


def _entry(options, key, default):
    try:
        return options.get_session_config_entry(key)
    except _ext.InvalidArgument:
        return default


def _reduce_session(sess):
    path, loaded_state, data, external = sess._model_source()
    options = sess.get_session_options()
    mode = _entry(options, PICKLE_MODEL_ENTRY, "bytes")
    if mode not in ("bytes", "path"):
        raise _ext.InvalidArgument(
            f"session config entry {PICKLE_MODEL_ENTRY} must be 'bytes' or 'path', not {mode!r}")
    if path is not None:
        # The pickle must describe the model the session runs, not a file changed since.
        try:
            now = _file_state(path)
        except OSError:
            now = None
        if loaded_state is None or now != tuple(loaded_state):
            raise _ext.InvalidArgument(
                f"cannot pickle the InferenceSession: its model file {path!r} was changed, "
                "moved or removed since the session loaded it")
    digest = _digests.get(sess)
    if path is not None and mode == "path":
        # The external data files too: a worker whose weights file differs must not run.
        _check_external(external or (), "pickle")
        model_sha = _model_shas.get(sess)
        if model_sha is None:
            model_sha = _model_shas[sess] = _sha256_file(path)
        if digest is None:
            digest = _digests[sess] = _external_digest(path, model_sha, external or ())
        model = ("path", os.path.abspath(path), loaded_state[0], model_sha)
    else:
        if path is not None:
            # Mapped, not read: protocol 5 then hands the pages to the pickler as they are.
            import mmap

            with open(path, "rb") as f:
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if loaded_state[0] \
                    else b""
        if digest is None:
            import hashlib

            digest = _digests[sess] = hashlib.sha256(memoryview(data)).hexdigest()
        model = ("bytes", _ModelBytes(data))
    names = sess.get_providers()
    provider_options = sess.get_provider_options()
    provider_options = [provider_options.get(n, {}) for n in names]
    # Unpickling in this process gives this session back.
    key = (digest, _options_key(options, names, provider_options))
    with _lock:
        _cache.setdefault(key, sess)
    return _restore_session, (model, digest, options, names, provider_options)


def _options_key(options, providers, provider_options):
    blob = pickle.dumps((options, providers, provider_options), protocol=4)
    import hashlib

    return hashlib.sha256(blob).hexdigest()


def _load(model, digest, options, providers, provider_options):
    kind = model[0]
    if kind == "bytes":
        try:
            return _ext.InferenceSession(memoryview(model[1]), options, providers,
                                         provider_options)
        except _ext.Fail as e:
            if "uses external data" not in str(e):
                raise
            raise _ext.Fail(
                f"cannot unpickle the InferenceSession: {e}. A model with external data "
                f"pickles by path: session config entry {PICKLE_MODEL_ENTRY} = 'path'") from None
    if kind != "path":
        raise _ext.InvalidArgument(f"unknown model kind {kind!r} in an InferenceSession pickle")
    path = model[1]
    try:
        before = _file_state(path)
    except OSError as e:
        raise _ext.NoSuchFile(
            f"cannot unpickle the InferenceSession: its model file {path!r} is not readable "
            f"here ({e.strerror}); pickle it with the model bytes instead (session config "
            f"entry {PICKLE_MODEL_ENTRY} = 'bytes', the default)") from None
    if len(model) != 4:
        raise _ext.InvalidArgument("malformed InferenceSession pickle: bad model reference")
    model_sha = model[3]
    found = _sha256_file(path)
    if found != model_sha:
        raise _ext.InvalidArgument(
            f"cannot unpickle the InferenceSession: its model file {path!r} differs from the "
            f"one pickled (SHA-256 {found[:16]}... here, {model_sha[:16]}... there)")
    sess = _ext.InferenceSession(path, options, providers, provider_options)
    _, loaded, _, external = sess._model_source()
    if tuple(loaded or ()) != before:
        raise _ext.InvalidArgument(
            f"cannot unpickle the InferenceSession: its model file {path!r} changed while "
            "it was being loaded")
    here = _external_digest(path, found, external or ())
    _check_external(external or (), "unpickle")  # unchanged while it was hashed
    if here != digest:
        raise _ext.InvalidArgument(
            f"cannot unpickle the InferenceSession: the external data files of {path!r} "
            "differ from the ones pickled")
    _model_shas[sess] = found
    return sess


def _restore_session(model, digest, options, providers, provider_options):
    key = (digest, _options_key(options, providers, provider_options))
    with _lock:
        sess = _cache.get(key)
        if sess is not None:
            _stats["hits"] += 1
            _keep(sess)
            return sess
    sess = _load(model, digest, options, providers, provider_options)
    with _lock:
        other = _cache.get(key)  # another thread loaded it meanwhile: keep one
        if other is not None:
            _stats["hits"] += 1
            _keep(other)
            return other
        _keep(sess)
        _cache[key] = sess
        _digests[sess] = digest
        _stats["loads"] += 1
    return sess


copyreg.pickle(_ext.InferenceSession, _reduce_session)
copyreg.pickle(_ext.SessionOptions, _reduce_session_options)
copyreg.pickle(_ext.RunOptions, _reduce_run_options)
copyreg.pickle(_public_run_options(), _reduce_run_options)
copyreg.pickle(_ext.OrtValue, _reduce_ortvalue)
