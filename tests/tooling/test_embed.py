"""The memory-safety harnesses (docs/safety.md) can fail: their report checkers flag an
ortlite frame and pass interpreter-only noise; the embedding host (make embed) runs."""

import os
import subprocess
import sys
import textwrap

import pytest

from helpers import ROOT



def _vg_xml(kind, obj, fn="f", leak=False):
    what = (f"<xwhat><text>x</text><leakedbytes>56</leakedbytes><leakedblocks>1</leakedblocks>"
            f"</xwhat>" if leak else "<what>x</what>")
    return textwrap.dedent(f"""\
        <?xml version="1.0"?>
        <valgrindoutput>
        <error><unique>0x1</unique><tid>1</tid><kind>{kind}</kind>{what}
        <stack><frame><ip>0x1</ip><obj>/usr/lib/libc.so.6</obj><fn>malloc</fn></frame>
        <frame><ip>0x2</ip><obj>{obj}</obj><fn>{fn}</fn></frame></stack></error>
        <suppcounts></suppcounts>
        </valgrindoutput>
        """)


def _check_xml(tmp_path, text):
    p = tmp_path / "r.xml"
    p.write_text(text)
    return subprocess.run([sys.executable, os.path.join(ROOT, "tools/valgrind/check_xml.py"),
                           str(p)], capture_output=True, text=True)


@pytest.mark.parametrize("kind,obj,leak,fails", [
    ("Leak_DefinitelyLost", "/x/ortlite/_ortlite.cpython-311-x86_64-linux-gnu.so", True, True),
    ("Leak_IndirectlyLost", "/x/ortlite/_ortlite.cpython-311-x86_64-linux-gnu.so", True, True),
    ("Leak_DefinitelyLost", "/p/lib/libpython3.11.so.1.0", True, False),
    ("Leak_PossiblyLost", "/x/ortlite/_ortlite.cpython-311-x86_64-linux-gnu.so", True, False),
    ("InvalidRead", "/p/lib/libpython3.11.so.1.0", False, True),
    ("UninitCondition", "/x/ortlite/_ortlite.cpython-311-x86_64-linux-gnu.so", False, True),
])
def test_valgrind_checker(tmp_path, kind, obj, leak, fails):
    r = _check_xml(tmp_path, _vg_xml(kind, obj, leak=leak))
    assert (r.returncode != 0) == fails, r.stdout + r.stderr
    assert "memcheck errors:" in r.stdout


@pytest.mark.parametrize("report,fails", [
    ("==1==ERROR: AddressSanitizer: heap-use-after-free on address 0x1\n", True),
    ("src/python/session.cc:10:5: runtime error: signed integer overflow\n", True),
    ("==1==ERROR: LeakSanitizer: detected memory leaks\n\nDirect leak of 8 byte(s) in 1 "
     "object(s) allocated from:\n    #0 0x1 in operator new(unsigned long)\n"
     "    #1 0x2 in ortlite::Buffer::allocate src/core/buffer.cc:12\n", True),
])
def test_asan_checker(tmp_path, report, fails):
    (tmp_path / "asan.123").write_text(report)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools/asan/check_logs.py"),
                        str(tmp_path)], capture_output=True, text=True)
    assert (r.returncode != 0) == fails, r.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools/asan/check_logs.py"),
                        str(empty)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


EMBED = os.path.join(ROOT, "build", "embed", "ortlite_embed")
MODEL = os.path.join(ROOT, "build", "embed", "model.onnx")


@pytest.mark.skipif(not (os.path.exists(EMBED) and os.path.exists(MODEL)),
                    reason="build/embed not built (make embed)")
def test_embedding_host_runs_and_finalizes_with_callbacks_pending():
    import numpy
    site = os.path.dirname(os.path.dirname(numpy.__file__))
    r = subprocess.run([EMBED, ROOT, site, MODEL], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONMALLOC="malloc"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "embed: OK" in r.stdout
