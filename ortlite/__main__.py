"""python -m ortlite model.onnx: prints a model's inputs, outputs and metadata."""

import argparse
import sys

import ortlite


def _describe(label, args, out):
    print(f"{label}:", file=out)
    if not args:
        print("  (none)", file=out)
    for a in args:
        print(f"  {a.name}: {a.type} {a.shape}", file=out)


def main(argv=None, out=None):
    out = out or sys.stdout
    parser = argparse.ArgumentParser(prog="python -m ortlite",
                                     description="Print an ONNX model's inputs and outputs.")
    parser.add_argument("model", help="path to an .onnx file")
    args = parser.parse_args(argv)
    try:
        sess = ortlite.InferenceSession(args.model)
    except (ortlite.OrtliteError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    meta = sess.get_modelmeta()
    print(f"model: {args.model}", file=out)
    if meta.producer_name:
        print(f"producer: {meta.producer_name}", file=out)
    if meta.graph_name:
        print(f"graph: {meta.graph_name}", file=out)
    _describe("inputs", sess.get_inputs(), out)
    _describe("outputs", sess.get_outputs(), out)
    overridable = sess.get_overridable_initializers()
    if overridable:
        _describe("overridable initializers", overridable, out)
    for k, v in meta.custom_metadata_map.items():
        print(f"metadata {k}: {v}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
