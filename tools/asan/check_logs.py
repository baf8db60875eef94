"""Reads the sanitizer logs written by tools/asan/run.sh (one file per process) and
fails on any report: ASan errors, UBSan runtime errors, and leaks that lsan.supp did not
suppress. Prints the counts; leaks with an ortlite frame are listed first."""

import glob
import os
import re
import sys


def main(logdir):
    files = sorted(glob.glob(os.path.join(logdir, "*")))
    asan_errors, ubsan_errors, leaks, ortlite_leaks = [], [], [], []
    for path in files:
        text = open(path, errors="replace").read()
        for m in re.finditer(r"ERROR: AddressSanitizer: ([^\n]*)", text):
            asan_errors.append((path, m.group(1)))
        for m in re.finditer(r"([^\n]*runtime error: [^\n]*)", text):
            ubsan_errors.append((path, m.group(1)))
        # Leak records: "Direct leak of N byte(s) ..." followed by a stack.
        for m in re.finditer(r"((?:Direct|Indirect) leak of [^\n]*\n(?:\s+#\d+[^\n]*\n?)*)", text):
            rec = m.group(1)
            leaks.append((path, rec))
            if re.search(r"_ortlite|ortlite::|[ /]src/(core|ops|python)/", rec):
                ortlite_leaks.append((path, rec))
    print(f"sanitizer logs: {len(files)} file(s); ASan errors: {len(asan_errors)}, "
          f"UBSan errors: {len(ubsan_errors)}, unsuppressed leaks: {len(leaks)} "
          f"(with an ortlite frame: {len(ortlite_leaks)})")
    for path, msg in asan_errors + ubsan_errors:
        print(f"  {os.path.basename(path)}: {msg}")
    for path, rec in (ortlite_leaks or leaks)[:10]:
        print(f"  {os.path.basename(path)}:\n{rec}")
    if asan_errors or ubsan_errors or leaks:
        print(f"see {logdir}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
