"""Summarizes valgrind memcheck XML files (tools/valgrind/run.sh) and fails on any
memcheck error, and on any definitely/indirectly lost block with an ortlite frame
(`_ortlite` in the object or function of a frame). Leaks without an ortlite frame are
the interpreter's (CPython frees not everything at exit): counted, not fatal.

Usage: check_xml.py FILE.xml... [--show N]"""

import sys
import xml.etree.ElementTree as ET

LEAKS = ("Leak_DefinitelyLost", "Leak_IndirectlyLost")


def frames(err):
    out = []
    for fr in err.iter("frame"):
        out.append(" ".join(filter(None, [(fr.findtext("fn") or "?"),
                                           "(" + (fr.findtext("obj") or "") + ")",
                                           fr.findtext("file") or "", fr.findtext("line") or ""])))
    return out


def is_ortlite(err):
    return any("_ortlite" in (fr.findtext("obj") or "") or "ortlite::" in (fr.findtext("fn") or "")
               for fr in err.iter("frame"))


def main(argv):
    show = 5
    if "--show" in argv:
        i = argv.index("--show")
        show = int(argv[i + 1])
        del argv[i:i + 2]
    errors, leaks, ort_leaks = [], [], []
    lost = {k: [0, 0] for k in LEAKS}  # blocks, bytes
    suppressed = 0
    for path in argv:
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:  # a process killed mid-write
            print(f"{path}: unreadable valgrind XML ({e})")
            return 1
        for pair in root.iter("pair"):
            suppressed += int(pair.findtext("count") or 0)
        for err in root.findall("error"):
            kind = err.findtext("kind")
            if kind in LEAKS:
                x = err.find("xwhat")
                lost[kind][0] += int(x.findtext("leakedblocks") or 0)
                lost[kind][1] += int(x.findtext("leakedbytes") or 0)
                leaks.append(err)
                if is_ortlite(err):
                    ort_leaks.append(err)
            elif kind.startswith("Leak_"):
                continue
            else:
                errors.append(err)
    print(f"valgrind: {len(argv)} process(es); memcheck errors: {len(errors)}; "
          f"definitely lost: {lost['Leak_DefinitelyLost'][1]} bytes in "
          f"{lost['Leak_DefinitelyLost'][0]} blocks; indirectly lost: "
          f"{lost['Leak_IndirectlyLost'][1]} bytes in {lost['Leak_IndirectlyLost'][0]} blocks; "
          f"leak records with an ortlite frame: {len(ort_leaks)} (of {len(leaks)}); "
          f"suppressed: {suppressed}")
    for err in (errors + ort_leaks)[:show]:
        what = err.findtext("what") or err.findtext("xwhat/text")
        print(f"--- {err.findtext('kind')}: {what}")
        for f in frames(err)[:25]:
            print("    " + f)
    return 1 if errors or ort_leaks else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
