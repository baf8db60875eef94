"""Example models, as onnxruntime.datasets: get_example(name) -> the file's absolute path.

    mul_1.onnx        Y = X * [[1, 2], [3, 4], [5, 6]], X float [3, 2]
    sigmoid.onnx      y = Sigmoid(x), x float [3, 4, 5]
    logreg_iris.onnx  a logistic regression on two iris features: `label` (int64) and
                      `probabilities` (a list of {class: probability} dicts)

They are made by tools/make_datasets.py.
"""

import os


def get_example(name):
    """The absolute path of the example model `name` ("logreg_iris.onnx", ...);
    FileNotFoundError for a name that is not one of them."""
    if not isinstance(name, str):
        raise TypeError(f"get_example expects a file name (str), not {type(name).__name__}")
    here = os.path.abspath(os.path.dirname(__file__))
    if os.path.basename(name) != name or not name.endswith(".onnx"):
        raise FileNotFoundError(f"Unable to find example '{name}'")
    full = os.path.join(here, name)
    if not os.path.isfile(full):
        raise FileNotFoundError(f"Unable to find example '{name}'")
    return full
